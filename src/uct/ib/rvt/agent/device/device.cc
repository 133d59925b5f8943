/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/agent/device/device.h"

#include "uct/ib/rvt/agent/device/rdma_netlink.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rvt::agent {

namespace {

bool is_zero(const ibv_gid &g)
{
    static constexpr uint8_t zero[16] = {};
    return std::memcmp(g.raw, zero, sizeof(zero)) == 0;
}

bool is_ipv4_mapped(const ibv_gid &g)
{
    static constexpr uint8_t prefix[12] = {0, 0, 0, 0, 0,    0,
                                           0, 0, 0, 0, 0xff, 0xff};
    return std::memcmp(g.raw, prefix, sizeof(prefix)) == 0;
}

result<int> pick_gid(ibv_context *ctx, uint8_t port, int table_len, int wanted)
{
    if (wanted >= 0) {
        ibv_gid_entry e{};
        if (wanted >= table_len ||
            ibv_query_gid_ex(ctx, port, static_cast<uint32_t>(wanted), &e, 0) !=
                    0 ||
            is_zero(*reinterpret_cast<ibv_gid *>(e.gid.raw))) {
            return failure{"GID index " + std::to_string(wanted) +
                           ": not a valid entry (the table has " +
                           std::to_string(table_len) + ")"};
        }
        return wanted;
    }
    int first_v2 = -1;
    for (int i = 0; i < table_len; ++i) {
        ibv_gid_entry e{};
        if (ibv_query_gid_ex(ctx, port, static_cast<uint32_t>(i), &e, 0) != 0) {
            continue;
        }
        ibv_gid g;
        std::memcpy(g.raw, e.gid.raw, sizeof(g.raw));
        if (is_zero(g) || e.gid_type != IBV_GID_TYPE_ROCE_V2) {
            continue;
        }
        if (is_ipv4_mapped(g)) {
            return i;
        }
        if (first_v2 < 0) {
            first_v2 = i;
        }
    }
    if (first_v2 >= 0) {
        return first_v2;
    }
    return failure{"no RoCE v2 GID on this port (is an IP address set on "
                   "its network interface?)"};
}

} // namespace

std::string named_or_first_device(const std::string &named)
{
    if (!named.empty()) {
        return named;
    }
    int n             = 0;
    ibv_device **list = ibv_get_device_list(&n);
    std::string name  = (list != nullptr && n > 0) ?
                                ibv_get_device_name(list[0]) :
                                "";
    if (list != nullptr) {
        ibv_free_device_list(list);
    }
    return name;
}

result<done> check_transport(ibv_transport_type transport)
{
    switch (transport) {
    case IBV_TRANSPORT_IB:
        return done{};
    case IBV_TRANSPORT_IWARP:
        return failure{"an iWARP device: it has no UD QPs (the agents' "
                       "handshake) and no immediate data (RDMA WRITE and "
                       "SEND WITH IMMEDIATE), which rvt needs; expected the "
                       "InfiniBand transport (InfiniBand or RoCE)"};
    default:
        return failure{"transport type " +
                       std::to_string(static_cast<int>(transport)) +
                       " (neither InfiniBand nor iWARP): rvt needs the "
                       "InfiniBand transport (InfiniBand or RoCE)"};
    }
}

/* Tries, on our own context, what a client will do with the passed fd. */
void device::probe_import(device &dev)
{
    const int fd = fcntl(dev.m_ctx->cmd_fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
        dev.m_mode_reason = std::string("cannot duplicate the command fd (") +
                            std::strerror(errno) + "): uverbs ioctl";
        return;
    }
    ibv_context *imported = ibv_import_device(fd);
    if (imported == nullptr) {
        const int err = errno;
        ::close(fd); /* not taken over on failure */
        dev.m_mode_reason = std::string("the provider cannot import a "
                                        "context (") +
                            std::strerror(err) + "): uverbs ioctl";
        return;
    }
    ibv_pd *pd = ibv_import_pd(imported, dev.m_pd->handle);
    if (pd == nullptr) {
        dev.m_mode_reason = std::string("the provider cannot import a PD (") +
                            std::strerror(errno) + "): uverbs ioctl";
    } else {
        ibv_unimport_pd(pd);
        dev.m_mode        = wire::reg_mode::import_pd;
        dev.m_mode_reason = "the provider imports context and PD";
    }
    ibv_close_device(imported); /* closes its fd, a duplicate of ours */
}

result<std::unique_ptr<device>>
device::open(const std::string &name, uint8_t port, int gid_index)
{
    const std::string who = "device " + name + " port " + std::to_string(port);
    int n                 = 0;
    ibv_device **list     = ibv_get_device_list(&n);
    if (list == nullptr) {
        return failure{who + ": no RDMA devices: " + std::strerror(errno)};
    }
    std::unique_ptr<device> dev(new device);
    std::string names;
    for (int i = 0; i < n; ++i) {
        names += std::string(names.empty() ? "" : ", ") +
                 ibv_get_device_name(list[i]);
        if (name == ibv_get_device_name(list[i])) {
            dev->m_ctx.reset(ibv_open_device(list[i]));
        }
    }
    ibv_free_device_list(list);
    if (!dev->m_ctx) {
        return failure{who + ": cannot open it (devices here: " +
                       (names.empty() ? "none" : names) + ")"};
    }
    if (auto t = check_transport(dev->m_ctx->device->transport_type); !t) {
        return failure{who + ": " + t.error()};
    }
    ibv_device_attr dattr{};
    if (ibv_query_device(dev->m_ctx.get(), &dattr) != 0) {
        return failure{who +
                       ": ibv_query_device failed: " + std::strerror(errno)};
    }
    if (port == 0 || port > dattr.phys_port_cnt) {
        return failure{who + ": no such port (the device has " +
                       std::to_string(dattr.phys_port_cnt) + ")"};
    }
    ibv_port_attr pattr{};
    if (ibv_query_port(dev->m_ctx.get(), port, &pattr) != 0) {
        return failure{who +
                       ": ibv_query_port failed: " + std::strerror(errno)};
    }
    if (pattr.state != IBV_PORT_ACTIVE) {
        return failure{who + ": port is " + ibv_port_state_str(pattr.state) +
                       ", expected active"};
    }
    if (pattr.link_layer != IBV_LINK_LAYER_ETHERNET) {
        return failure{who + ": link layer is not Ethernet: rvt's handshake "
                             "addresses agents by GID alone (RoCE); "
                             "InfiniBand ports (LID routing) are not "
                             "supported yet"};
    }
    auto gid = pick_gid(dev->m_ctx.get(), port, pattr.gid_tbl_len, gid_index);
    if (!gid) {
        return failure{who + ": " + gid.error()};
    }
    dev->m_gid_index = static_cast<uint8_t>(gid.value());
    if (ibv_query_gid(dev->m_ctx.get(), port, gid.value(), &dev->m_gid) != 0) {
        return failure{who + ": ibv_query_gid failed: " + std::strerror(errno)};
    }
    dev->m_mtu  = pattr.active_mtu;
    dev->m_attr = dattr;
    auto id     = uverbs_driver_id(name);
    if (!id) {
        return failure{who + ": " + id.error()};
    }
    dev->m_pd.reset(ibv_alloc_pd(dev->m_ctx.get()));
    if (!dev->m_pd) {
        return failure{who + ": ibv_alloc_pd failed: " + std::strerror(errno)};
    }
    probe_import(*dev);
    dev->m_name      = name;
    dev->m_port      = port;
    dev->m_driver_id = id.value();
    return dev;
}

device_grant device::grant(uint64_t agent_id) const
{
    device_grant g{m_ctx->cmd_fd, m_pd->handle, m_driver_id, m_mode, agent_id};
    g.features = can_atomic() ? wire::agent_feature_atomic64 : 0;
    /* IBV_MTU_256 is 1, ... IBV_MTU_4096 is 5 */
    g.path_mtu = 128u << static_cast<unsigned>(m_mtu);
    return g;
}

} // namespace rvt::agent
