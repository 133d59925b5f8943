#include "uct/ib/rvt/agent/device.h"

#include "uct/ib/rvt/agent/rdma_netlink.h"

#include <cerrno>
#include <cstring>

namespace rvt::agent {

result<std::unique_ptr<device>>
device::open(const std::string &name, uint8_t port)
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
    auto id = uverbs_driver_id(name);
    if (!id) {
        return failure{who + ": " + id.error()};
    }
    dev->m_pd.reset(ibv_alloc_pd(dev->m_ctx.get()));
    if (!dev->m_pd) {
        return failure{who + ": ibv_alloc_pd failed: " + std::strerror(errno)};
    }
    dev->m_name      = name;
    dev->m_port      = port;
    dev->m_driver_id = id.value();
    return dev;
}

device_grant device::grant(uint64_t agent_id) const
{
    /* The provider import path (ibv_import_pd) is not used yet: the uverbs
     * ioctl path works on every provider, including those with import. */
    return {m_ctx->cmd_fd, m_pd->handle, m_driver_id,
            wire::reg_mode::uverbs_ioctl, agent_id};
}

} // namespace rvt::agent
