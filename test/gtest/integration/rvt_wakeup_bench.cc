/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the agent's idle sleep costs (a benchmark: prints numbers, never
 * fails on them). One client sends itself an active message through its
 * node's agent (the loopback QPs) and waits for it, N times:
 *
 *   hot    back to back: the agent is still spinning from the last one
 *   cold   after an idle pause longer than the agent's --spin-us: the
 *          agent sleeps in poll(), so the client's doorbell (eventfd
 *          write) wakes it, and it must re-arm its CQ before sleeping again
 *
 * The difference of the medians is the wake-up cost.
 *
 *   rvt_wakeup_bench [--iterations=N] [--pause-ms=MS]
 * Environment: RXE_DEV (the node's device), as in the testbed.
 */
#include "uct/ib/rvt/client/session.h"

#include "node_session.h"

#include <infiniband/verbs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

using namespace rvt;
using clock_type = std::chrono::steady_clock;

namespace {

[[noreturn]] void die(const std::string &why)
{
    std::fprintf(stderr, "wakeup bench: %s\n", why.c_str());
    std::exit(1);
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

} // namespace

int main(int argc, char **argv)
{
    int iterations = 200;
    int pause_ms   = 20;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a.rfind("--iterations=", 0) == 0) {
            iterations = std::atoi(a.c_str() + 13);
        } else if (a.rfind("--pause-ms=", 0) == 0) {
            pause_ms = std::atoi(a.c_str() + 11);
        } else {
            die("unknown argument " + a);
        }
    }
    auto opened = test::open_node_session();
    if (!opened) {
        die(opened.error());
    }
    client::session &s = *opened.value();
    std::vector<uint64_t> buf(8, 0x5a5a);
    auto mr   = s.register_memory(buf.data(), sizeof(uint64_t) * buf.size(),
                                  IBV_ACCESS_LOCAL_WRITE);
    auto self = s.connect_peer(s.agent_address());
    if (!mr || !self) {
        die(!mr ? mr.error() : self.error());
    }

    auto one_trip = [&](uint64_t id) {
        work_request w{};
        w.wr_id          = id;
        w.op             = static_cast<uint8_t>(work_op::send_am);
        w.am_id          = 1;
        w.peer           = self.value();
        w.dst_client     = s.client_index();
        w.dst_generation = s.attached().client_generation;
        w.length         = 8;
        w.local_addr     = reinterpret_cast<uint64_t>(buf.data());
        w.lkey           = mr.value().lkey;
        const auto t0    = clock_type::now();
        while (s.post(w) == client::post_status::busy) {
        }
        bool got_msg = false, got_done = false;
        while (!got_msg || !got_done) {
            client::inbound_view v;
            if (s.peek_inbound(v)) {
                got_msg = true;
                s.release_inbound();
            }
            completion c[4];
            for (size_t n = s.poll_completions(c), i = 0; i < n; ++i) {
                if (c[i].status != 0) {
                    die("the AM failed: status " + std::to_string(c[i].status));
                }
                got_done = true;
            }
            if (clock_type::now() - t0 > std::chrono::seconds(10)) {
                die("no answer within 10 s");
            }
        }
        return std::chrono::duration<double, std::micro>(clock_type::now() - t0)
                .count();
    };

    for (int i = 0; i < 20; ++i) {
        one_trip(i); /* warm up: connect, fault in pages */
    }
    std::vector<double> hot, cold;
    for (int i = 0; i < iterations; ++i) {
        hot.push_back(one_trip(1000 + i));
    }
    for (int i = 0; i < iterations / 4; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
        cold.push_back(one_trip(5000 + i));
    }
    std::printf("wake-up: AM to self through the agent, median of %zu hot = "
                "%.1f us, median of %zu after %d ms idle (agent asleep) = "
                "%.1f us: waking costs %.1f us\n",
                hot.size(), median(hot), cold.size(), pause_ms, median(cold),
                median(cold) - median(hot));
    return 0;
}
