#include "uct/ib/rvt/client/registration.h"

#include "uct/ib/rvt/common/fd_passing.h"
#include "uct/ib/rvt/common/uverbs_cmd.h"

#include <string>

namespace rvt::client {

namespace {

result<size_t>
notify(const attachment &at, wire::msg_type type, const memory_region &mr)
{
    auto n = wire::make_mr_notice(type, mr.handle, mr.lkey, mr.rkey,
                                  reinterpret_cast<uintptr_t>(mr.addr),
                                  mr.length);
    return send_with_fds(at.sock.get(), std::as_bytes(std::span(&n, 1)), {});
}

} // namespace

result<memory_region>
register_memory(const attachment &at, void *addr, size_t length, int access)
{
    if (at.mode != wire::reg_mode::uverbs_ioctl) {
        return failure{"registration mode " +
                       std::to_string(static_cast<uint32_t>(at.mode)) +
                       " (provider import) is not supported by this client "
                       "yet: only the uverbs ioctl mode (2)"};
    }
    if (length == 0) {
        return failure{"cannot register 0 bytes at " +
                       std::to_string(reinterpret_cast<uintptr_t>(addr))};
    }
    auto keys = uverbs::reg_mr({at.cmd_fd.get(), at.driver_id, at.pd_handle,
                                addr, length, reinterpret_cast<uintptr_t>(addr),
                                access});
    if (!keys) {
        return failure{keys.error()};
    }
    memory_region mr{keys.value().handle, keys.value().lkey, keys.value().rkey,
                     addr, length};
    auto sent = notify(at, wire::msg_type::mr_registered, mr);
    if (!sent) {
        /* the agent could not clean it up after us: do not keep it */
        (void)uverbs::dereg_mr(at.cmd_fd.get(), at.driver_id, mr.handle);
        return failure{"telling the agent about MR handle " +
                       std::to_string(mr.handle) + " failed: " + sent.error()};
    }
    return mr;
}

result<uint32_t>
deregister_memory(const attachment &at, const memory_region &mr)
{
    auto gone = uverbs::dereg_mr(at.cmd_fd.get(), at.driver_id, mr.handle);
    if (!gone) {
        return gone;
    }
    auto sent = notify(at, wire::msg_type::mr_deregistered, mr);
    if (!sent) {
        return failure{"telling the agent that MR handle " +
                       std::to_string(mr.handle) +
                       " is gone failed: " + sent.error()};
    }
    return mr.handle;
}

} // namespace rvt::client
