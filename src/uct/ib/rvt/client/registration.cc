/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/client/registration.h"

#include "uct/ib/rvt/client/agent_reply.h"
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

namespace {

std::mutex g_registrar_lock;
std::shared_ptr<const in_process_registrar> g_registrar;

} // namespace

void set_in_process_registrar(std::shared_ptr<const in_process_registrar> r)
{
    std::lock_guard g(g_registrar_lock);
    g_registrar = std::move(r);
}

std::shared_ptr<const in_process_registrar> in_process_registrar_installed()
{
    std::lock_guard g(g_registrar_lock);
    return g_registrar;
}

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

result<size_t> notify(const attachment &at, wire::msg_type type,
                      const memory_region &mr, uint32_t flags = 0)
{
    auto n = wire::make_mr_notice(type, mr.handle, mr.lkey, mr.rkey,
                                  reinterpret_cast<uintptr_t>(mr.addr),
                                  mr.length, flags);
    return send_with_fds(at.sock.get(), std::as_bytes(std::span(&n, 1)), {});
}

/* mr_intent: what this process is about to register, or (withdrawn) what
 * it failed to (attach_wire.h, mr_intent). */
result<size_t>
tell_intent(const attachment &at, void *addr, size_t length, uint32_t flags)
{
    auto n = wire::make_mr_intent(reinterpret_cast<uintptr_t>(addr), length,
                                  flags);
    return send_with_fds(at.sock.get(), std::as_bytes(std::span(&n, 1)), {});
}

/* The agent's answer of `type` (an mr_release_reply or
 * mr_registered_reply) about `handle`, whatever its status. */
result<wire::mr_reply>
await_reply(attachment &at, wire::msg_type type, uint32_t handle,
            std::chrono::milliseconds wait, const std::string &what)
{
    wire::mr_reply rep{};
    auto got = at.replies.receive(at.sock.get(),
                                  std::as_writable_bytes(std::span(&rep, 1)),
                                  wait, what);
    if (!got) {
        return failure{got.error()};
    }
    const auto bytes = std::as_bytes(std::span(&rep, 1));
    auto parsed      = type == wire::msg_type::mr_release_reply ?
                               wire::parse_mr_release_reply(bytes) :
                               wire::parse_mr_registered_reply(bytes);
    if (!parsed) {
        return failure{what + ": bad reply from the agent: " + parsed.error()};
    }
    if (rep.handle != handle) {
        return failure{what + ": the agent answered for handle " +
                       std::to_string(rep.handle)};
    }
    return rep;
}

/* The agent's answer to a release with mr_release_reply_wanted. */
result<uint32_t>
await_release(attachment &at, uint32_t handle, std::chrono::milliseconds wait)
{
    const std::string what = "deregistering MR handle " +
                             std::to_string(handle);
    auto rep = await_reply(at, wire::msg_type::mr_release_reply, handle, wait,
                           what);
    if (!rep) {
        return failure{rep.error()};
    }
    if (rep.value().status !=
        static_cast<uint32_t>(wire::release_status::released)) {
        return failure{what + ": the agent refused: " + rep.value().reason};
    }
    return handle;
}

/* Deregisters an MR of this process's that the agent does not hold. */
void drop(const attachment &at, const memory_region &mr)
{
    if (at.registrar) {
        at.registrar->drop(mr.handle);
    } else if (at.imported) {
        std::lock_guard g(at.imported->lock);
        auto it = at.imported->mrs.find(mr.handle);
        if (it != at.imported->mrs.end()) {
            (void)ibv_dereg_mr(it->second);
            at.imported->mrs.erase(it);
        }
    } else {
        (void)uverbs::dereg_mr(at.cmd_fd.get(), at.driver_id, mr.handle);
    }
}

} // namespace

result<wire::mr_registered_reply>
announce_memory(attachment &at, const memory_region &mr,
                std::chrono::milliseconds wait)
{
    const std::string what = "announcing MR handle " +
                             std::to_string(mr.handle);
    auto sent = notify(at, wire::msg_type::mr_registered, mr,
                       wire::mr_registered_reply_wanted);
    if (!sent) {
        return failure{what + ": " + sent.error()};
    }
    return await_reply(at, wire::msg_type::mr_registered_reply, mr.handle, wait,
                       what);
}

result<memory_region> register_memory(attachment &at, void *addr, size_t length,
                                      int access,
                                      std::chrono::milliseconds wait)
{
    if (length == 0) {
        return failure{"cannot register 0 bytes at " +
                       std::to_string(reinterpret_cast<uintptr_t>(addr))};
    }
    if (!at.imported && !at.cmd_fd) {
        return failure{"the agent is gone (its verbs context was released)"};
    }
    /* said first: killed between the REG_MR and the notice, this process
     * would leave an MR the agent was never told of (mr_registry.h,
     * "Intents") */
    auto told = tell_intent(at, addr, length, 0);
    if (!told) {
        return failure{"telling the agent about the registration of " +
                       std::to_string(length) +
                       " bytes failed: " + told.error()};
    }
    const auto withdraw = [&] {
        (void)tell_intent(at, addr, length, wire::mr_intent_withdrawn);
    };
    memory_region mr{};
    if (at.registrar) {
        auto got = at.registrar->reg(addr, length, access);
        if (!got) {
            withdraw();
            return failure{
                    "registering " + std::to_string(length) +
                    " bytes in the in-process agent failed: " + got.error()};
        }
        mr = got.value();
    } else if (at.imported) {
        ibv_mr *m = ibv_reg_mr(at.imported->pd, addr, length, access);
        if (m == nullptr) {
            const int err = errno;
            withdraw();
            return failure{
                    "ibv_reg_mr of " + std::to_string(length) +
                    " bytes in the imported PD failed: " + std::strerror(err)};
        }
        std::lock_guard g(at.imported->lock);
        at.imported->mrs[m->handle] = m;
        mr = {m->handle, m->lkey, m->rkey, addr, length};
    } else {
        auto keys = uverbs::reg_mr({at.cmd_fd.get(), at.driver_id, at.pd_handle,
                                    addr, length,
                                    reinterpret_cast<uintptr_t>(addr), access});
        if (!keys) {
            withdraw();
            return failure{keys.error()};
        }
        mr = {keys.value().handle, keys.value().lkey, keys.value().rkey, addr,
              length};
    }
    auto answer = announce_memory(at, mr, wait);
    if (!answer) {
        /* no verdict: the agent may hold the MR, and if it never took it,
         * it finds it through the intent once this process is gone */
        return failure{answer.error()};
    }
    if (answer.value().status !=
        static_cast<uint32_t>(wire::announce_status::accepted)) {
        /* the agent will not clean it up after us: do not keep it */
        drop(at, mr);
        withdraw();
        return failure{"the agent refused MR handle " +
                       std::to_string(mr.handle) + " (" +
                       std::to_string(length) +
                       " bytes): " + answer.value().reason};
    }
    return mr;
}

result<uint32_t>
deregister_memory(attachment &at, const memory_region &mr,
                  std::optional<std::chrono::milliseconds> wait)
{
    if (!at.imported && !at.cmd_fd) {
        /* released after the agent died: the MR went with its context */
        return mr.handle;
    }
    if (at.imported) {
        /* the agent deregisters the MR; only this process's record of it
         * goes here */
        std::lock_guard g(at.imported->lock);
        auto it = at.imported->mrs.find(mr.handle);
        if (it == at.imported->mrs.end()) {
            return failure{"MR handle " + std::to_string(mr.handle) +
                           " was not registered through this attachment"};
        }
        ibv_unimport_mr(it->second);
        at.imported->mrs.erase(it);
    }
    auto sent = notify(at, wire::msg_type::mr_release, mr,
                       wait ? wire::mr_release_reply_wanted : 0);
    if (!sent) {
        return failure{"asking the agent to deregister MR handle " +
                       std::to_string(mr.handle) + " failed: " + sent.error()};
    }
    if (wait) {
        return await_release(at, mr.handle, *wait);
    }
    return mr.handle;
}

} // namespace rvt::client
