/*
 * The client half of test_shared_pd: a separately exec'd process (as a
 * real rvt client is) that attaches to the agent through its socket with
 * rvt::client::attach, registers its own buffer into the agent's PD with
 * rvt::client::register_memory (which also tells the agent the MR's
 * handle), reports the keys on its control socket, and then
 * answers "does your buffer hold this?" until told to exit.
 *
 *   shared_pd_client AGENT_SOCKET CONTROL_FD
 */
#include "uct/ib/rvt/client/attach.h"
#include "uct/ib/rvt/client/registration.h"
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
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s AGENT_SOCKET CONTROL_FD\n", argv[0]);
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
    const auto &a       = at.value();
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
                                                   IBV_ACCESS_REMOTE_READ);
    if (mr.ok()) {
        report.registered = 1;
        report.handle     = mr.value().handle;
        report.lkey       = mr.value().lkey;
        report.rkey       = mr.value().rkey;
    } else {
        std::snprintf(report.error, sizeof(report.error), "%s",
                      mr.error().c_str());
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
