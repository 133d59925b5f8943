/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The client half of test_shared_pd: a separately exec'd process (as a
 * real rvt client is) that attaches to the agent through its socket with
 * rvt::client::attach, registers its own buffer into the agent's PD with
 * rvt::client::register_memory (which also tells the agent the MR's
 * handle), reports the keys on its control socket, and then
 * answers "does your buffer hold this?" until told to exit. With
 * "unannounced", it also registers a second buffer as a process killed
 * between its REG_MR and its notice leaves one: the intent sent, the MR
 * made, the notice never sent.
 *
 *   shared_pd_client AGENT_SOCKET CONTROL_FD [unannounced]
 */
#include "uct/ib/rvt/client/attach.h"
#include "uct/ib/rvt/client/registration.h"
#include "uct/ib/rvt/common/attach_wire.h"
#include "uct/ib/rvt/common/fd_passing.h"
#include "uct/ib/rvt/common/uverbs_cmd.h"

#include "shared_pd_protocol.h"

#include <infiniband/verbs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace rvt::test;

int main(int argc, char **argv)
{
    const bool unannounced = argc == 4 &&
                             std::strcmp(argv[3], "unannounced") == 0;
    if (argc != 3 && !unannounced) {
        std::fprintf(stderr,
                     "usage: %s AGENT_SOCKET CONTROL_FD "
                     "[unannounced]\n",
                     argv[0]);
        return 2;
    }
    int ctl = std::atoi(argv[2]);
    client_report report{};
    report.pid = getpid();

    auto at = rvt::client::attach(argv[1], job_key);
    if (!at) {
        std::snprintf(report.error, sizeof(report.error), "%s",
                      at.error().c_str());
        return write(ctl, &report, sizeof(report)) == sizeof(report) ? 1 : 2;
    }
    auto &a             = at.value();
    report.client_index = a.client_index;

    std::vector<unsigned char> buf(buffer_size);
    fill_pattern(buf.data(), buf.size(), getpid());
    report.addr = (uintptr_t)buf.data();

    /* a wrong PD handle must be refused, with the handle in the reason */
    const uint32_t wrong = a.pd_handle + 1000;
    auto bad             = rvt::uverbs::reg_mr(
                        {a.cmd_fd.get(), a.driver_id, wrong, buf.data(), buf.size(),
                         (uintptr_t)buf.data(), IBV_ACCESS_LOCAL_WRITE});
    report.bad_pd_refused = !bad.ok() &&
                            bad.error().find(std::to_string(wrong)) !=
                                    std::string::npos;

    auto mr = rvt::client::register_memory(a, buf.data(), buf.size(),
                                           IBV_ACCESS_LOCAL_WRITE |
                                                   IBV_ACCESS_REMOTE_WRITE |
                                                   IBV_ACCESS_REMOTE_READ,
                                           std::chrono::milliseconds(10000));
    if (mr.ok()) {
        report.registered = 1;
        report.handle     = mr.value().handle;
        report.lkey       = mr.value().lkey;
        report.rkey       = mr.value().rkey;
    } else {
        std::snprintf(report.error, sizeof(report.error), "%s",
                      mr.error().c_str());
    }
    std::vector<unsigned char> second(buffer_size);
    if (unannounced && report.registered) {
        auto n    = rvt::wire::make_mr_intent((uintptr_t)second.data(),
                                              second.size());
        auto sent = rvt::send_with_fds(a.sock.get(),
                                       std::as_bytes(std::span(&n, 1)), {});
        auto keys = rvt::uverbs::reg_mr(
                {a.cmd_fd.get(), a.driver_id, a.pd_handle, second.data(),
                 second.size(), (uintptr_t)second.data(),
                 IBV_ACCESS_LOCAL_WRITE});
        if (sent.ok() && keys.ok()) {
            report.unannounced_handle = keys.value().handle;
            report.unannounced_addr   = (uintptr_t)second.data();
        } else {
            report.registered = 0;
            std::snprintf(report.error, sizeof(report.error), "%s",
                          (sent.ok() ? keys.error() : sent.error()).c_str());
        }
    }
    if (write(ctl, &report, sizeof(report)) != sizeof(report)) {
        return 2;
    }

    check_request req;
    while (read(ctl, &req, sizeof(req)) == sizeof(req) && req.length != 0) {
        std::vector<unsigned char> want(req.length);
        fill_pattern(want.data(), want.size(), req.seed);
        uint32_t same = std::memcmp(buf.data(), want.data(), req.length) == 0;
        if (write(ctl, &same, sizeof(same)) != sizeof(same)) {
            return 2;
        }
    }
    return 0;
}
