/*
 * The client half of test_shared_pd: a separately exec'd process (as a
 * real rvt client is) that receives the agent's verbs command fd and PD
 * handle over a Unix socket, registers its own buffer into that PD with
 * rvt::uverbs::reg_mr, reports the keys, and then answers "does your
 * buffer hold this?" until told to exit.
 *
 *   shared_pd_client SOCKET_FD
 */
#include "uct/ib/rvt/common/uverbs_cmd.h"

#include "shared_pd_protocol.h"

#include <infiniband/verbs.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace rvt::test;

int main(int argc, char **argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s SOCKET_FD\n", argv[0]);
        return 2;
    }
    int sock = std::atoi(argv[1]);
    setup_message setup{};
    int cmd_fd = recv_with_fd(sock, &setup, sizeof(setup));
    if (cmd_fd < 0) {
        std::perror("shared_pd_client: receiving the command fd");
        return 2;
    }

    std::vector<unsigned char> buf(buffer_size);
    fill_pattern(buf.data(), buf.size(), getpid());

    client_report report{};
    /* a wrong PD handle must be refused, with the handle in the reason */
    auto bad = rvt::uverbs::reg_mr(
            {cmd_fd, setup.driver_id, setup.pd_handle + 1000, buf.data(),
             buf.size(), (uintptr_t)buf.data(), IBV_ACCESS_LOCAL_WRITE});
    report.bad_pd_refused = !bad.ok() && bad.error().find(std::to_string(
                                                 setup.pd_handle + 1000)) !=
                                                 std::string::npos;

    auto mr = rvt::uverbs::reg_mr(
            {cmd_fd, setup.driver_id, setup.pd_handle, buf.data(), buf.size(),
             (uintptr_t)buf.data(),
             IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                     IBV_ACCESS_REMOTE_READ});
    report.pid  = getpid();
    report.addr = (uintptr_t)buf.data();
    if (mr.ok()) {
        report.registered = 1;
        report.handle     = mr.value().handle;
        report.lkey       = mr.value().lkey;
        report.rkey       = mr.value().rkey;
    } else {
        std::snprintf(report.error, sizeof(report.error), "%s",
                      mr.error().c_str());
    }
    if (write(sock, &report, sizeof(report)) != sizeof(report)) {
        return 2;
    }

    check_request req;
    while (read(sock, &req, sizeof(req)) == sizeof(req) && req.length != 0) {
        std::vector<unsigned char> want(req.length);
        fill_pattern(want.data(), want.size(), req.seed);
        uint32_t same = std::memcmp(buf.data(), want.data(), req.length) == 0;
        if (write(sock, &same, sizeof(same)) != sizeof(same)) {
            return 2;
        }
    }
    return 0;
}
