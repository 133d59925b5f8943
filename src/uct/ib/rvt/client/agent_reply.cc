#include "uct/ib/rvt/client/agent_reply.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <string>

namespace rvt::client {

result<done> receive_reply(int sock, std::span<std::byte> out,
                           std::chrono::milliseconds timeout,
                           std::string_view what)
{
    using clock   = std::chrono::steady_clock;
    auto deadline = clock::now() + timeout;
    size_t got    = 0;
    while (got < out.size()) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - clock::now());
        pollfd p{sock, POLLIN, 0};
        int ready = left.count() > 0 ?
                            poll(&p, 1, static_cast<int>(left.count())) :
                            0;
        if (ready < 0 && errno == EINTR) {
            continue;
        }
        if (ready <= 0) {
            return failure{std::string(what) +
                           ": no reply from the agent within " +
                           std::to_string(timeout.count()) + " ms"};
        }
        ssize_t n = recv(sock, out.data() + got, out.size() - got, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return failure{std::string(what) + ": the agent closed its socket"};
        }
        got += static_cast<size_t>(n);
    }
    return done{};
}

} // namespace rvt::client
