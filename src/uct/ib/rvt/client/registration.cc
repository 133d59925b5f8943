#include "uct/ib/rvt/client/registration.h"

#include "uct/ib/rvt/common/fd_passing.h"
#include "uct/ib/rvt/common/uverbs_cmd.h"

#include <infiniband/verbs.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

namespace rvt::client {

struct imported_pd {
    ibv_context *ctx = nullptr;
    ibv_pd *pd       = nullptr;
    std::mutex lock; /* mrs: the UCX MD may register from any thread */
    std::unordered_map<uint32_t, ibv_mr *> mrs; /* by handle */

    ~imported_pd()
    {
        /* MRs still registered belong to the agent's PD: the agent
         * deregisters them when this process detaches */
        if (pd != nullptr) {
            ibv_unimport_pd(pd);
        }
        if (ctx != nullptr) {
            ibv_close_device(ctx);
        }
    }
};

result<std::shared_ptr<imported_pd>>
import_agent_pd(int cmd_fd, uint32_t pd_handle)
{
    const int fd = fcntl(cmd_fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
        return failure{std::string("import: cannot duplicate the command "
                                   "fd: ") +
                       std::strerror(errno)};
    }
    auto imp = std::make_shared<imported_pd>();
    imp->ctx = ibv_import_device(fd);
    if (imp->ctx == nullptr) {
        const int err = errno;
        ::close(fd);
        return failure{std::string("ibv_import_device: ") + std::strerror(err)};
    }
    imp->pd = ibv_import_pd(imp->ctx, pd_handle);
    if (imp->pd == nullptr) {
        return failure{"ibv_import_pd(" + std::to_string(pd_handle) +
                       "): " + std::strerror(errno)};
    }
    return imp;
}

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
    if (length == 0) {
        return failure{"cannot register 0 bytes at " +
                       std::to_string(reinterpret_cast<uintptr_t>(addr))};
    }
    if (!at.imported && !at.cmd_fd) {
        return failure{"the agent is gone (its verbs context was released)"};
    }
    memory_region mr{};
    if (at.imported) {
        ibv_mr *m = ibv_reg_mr(at.imported->pd, addr, length, access);
        if (m == nullptr) {
            return failure{"ibv_reg_mr of " + std::to_string(length) +
                           " bytes in the imported PD failed: " +
                           std::strerror(errno)};
        }
        std::lock_guard g(at.imported->lock);
        at.imported->mrs[m->handle] = m;
        mr = {m->handle, m->lkey, m->rkey, addr, length};
    } else {
        auto keys = uverbs::reg_mr({at.cmd_fd.get(), at.driver_id, at.pd_handle,
                                    addr, length,
                                    reinterpret_cast<uintptr_t>(addr), access});
        if (!keys) {
            return failure{keys.error()};
        }
        mr = {keys.value().handle, keys.value().lkey, keys.value().rkey, addr,
              length};
    }
    auto sent = notify(at, wire::msg_type::mr_registered, mr);
    if (!sent) {
        /* the agent could not clean it up after us: do not keep it */
        if (at.imported) {
            std::lock_guard g(at.imported->lock);
            auto it = at.imported->mrs.find(mr.handle);
            if (it != at.imported->mrs.end()) {
                (void)ibv_dereg_mr(it->second);
                at.imported->mrs.erase(it);
            }
        } else {
            (void)uverbs::dereg_mr(at.cmd_fd.get(), at.driver_id, mr.handle);
        }
        return failure{"telling the agent about MR handle " +
                       std::to_string(mr.handle) + " failed: " + sent.error()};
    }
    return mr;
}

result<uint32_t>
deregister_memory(const attachment &at, const memory_region &mr)
{
    if (!at.imported && !at.cmd_fd) {
        /* released after the agent died: the MR goes with its context */
        return mr.handle;
    }
    if (at.imported) {
        ibv_mr *m = nullptr;
        {
            std::lock_guard g(at.imported->lock);
            auto it = at.imported->mrs.find(mr.handle);
            if (it == at.imported->mrs.end()) {
                return failure{"MR handle " + std::to_string(mr.handle) +
                               " was not registered through this "
                               "attachment"};
            }
            m = it->second;
            at.imported->mrs.erase(it);
        }
        if (int err = ibv_dereg_mr(m); err != 0) {
            return failure{"ibv_dereg_mr of MR handle " +
                           std::to_string(mr.handle) +
                           " failed: " + std::strerror(err)};
        }
    } else {
        auto gone = uverbs::dereg_mr(at.cmd_fd.get(), at.driver_id, mr.handle);
        if (!gone) {
            return gone;
        }
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
