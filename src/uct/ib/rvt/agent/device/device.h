/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's verbs device: the context and protection domain every client
 * of the agent registers its memory into, plus what a client needs to do
 * so (the command fd, the PD handle, the uverbs driver id and how to
 * register). Opening checks what rvt relies on and says which check failed.
 */
#ifndef RVT_AGENT_DEVICE_H
#define RVT_AGENT_DEVICE_H

#include "uct/ib/rvt/agent/device/device_grant.h"
#include "uct/ib/rvt/agent/device/verbs_ptr.h"
#include "uct/ib/rvt/common/result.h"

#include <cstdint>
#include <memory>
#include <string>

namespace rvt::agent {

/* Whether rvt can work on a device of this transport: the InfiniBand
 * transport (InfiniBand or RoCE) has what it needs; iWARP has no UD QPs
 * (the agents' handshake) and no immediate data (the rendezvous' RDMA
 * WRITE WITH IMMEDIATE, the active messages' SEND WITH IMMEDIATE). */
result<done> check_transport(ibv_transport_type transport);

/* The device a tool serves or checks: `named` (its --device), else the
 * first RDMA device's name; empty when none is named and there is none. */
std::string named_or_first_device(const std::string &named);

class device {
public:
    /* Opens `name` and checks its transport (check_transport) and that
     * `port` (1-based) exists and is active
     * and has a usable GID: `gid_index`, or with -1 the first RoCE v2 GID
     * holding an IPv4 address (else the first RoCE v2 one, else index 0). */
    static result<std::unique_ptr<device>>
    open(const std::string &name, uint8_t port, int gid_index = -1);

    /* What attach_server hands every client (device_grant.h). */
    device_grant grant(uint64_t agent_id) const;

    /* How clients register into our PD (docs/design.md part 3), chosen when
     * the device is opened: the provider's import path if it has one
     * (ibv_import_device + ibv_import_pd work on our own command fd),
     * else the generic uverbs ioctl path; and why. */
    wire::reg_mode reg_mode() const
    {
        return m_mode;
    }
    const std::string &reg_mode_reason() const
    {
        return m_mode_reason;
    }

    const std::string &name() const
    {
        return m_name;
    }
    uint8_t port() const
    {
        return m_port;
    }
    ibv_context *context() const
    {
        return m_ctx.get();
    }
    ibv_pd *pd() const
    {
        return m_pd.get();
    }
    uint32_t driver_id() const
    {
        return m_driver_id;
    }
    const ibv_gid &gid() const
    {
        return m_gid;
    }
    uint8_t gid_index() const
    {
        return m_gid_index;
    }
    ibv_mtu mtu() const
    {
        return m_mtu;
    }
    const ibv_device_attr &attr() const
    {
        return m_attr;
    }
    /* Whether QPs here may do RDMA READ (responder resources exist). */
    bool can_read() const
    {
        return m_attr.max_qp_rd_atom > 0 && m_attr.max_qp_init_rd_atom > 0;
    }
    /* Whether QPs here may do 64-bit RDMA atomics (fetch-and-add,
     * compare-and-swap): they take the same responder resources. */
    bool can_atomic() const
    {
        return can_read() && m_attr.atomic_cap != IBV_ATOMIC_NONE;
    }

private:
    device() = default;
    static void probe_import(device &dev);

    std::string m_name;
    uint8_t m_port       = 0;
    uint32_t m_driver_id = 0;
    ibv_gid m_gid{};
    uint8_t m_gid_index = 0;
    ibv_mtu m_mtu       = IBV_MTU_1024;
    ibv_device_attr m_attr{};
    wire::reg_mode m_mode = wire::reg_mode::uverbs_ioctl;
    std::string m_mode_reason;
    verbs::context_ptr m_ctx; /* declared before the PD: destroyed after */
    verbs::pd_ptr m_pd;
};

} // namespace rvt::agent

#endif
