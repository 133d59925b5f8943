/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the testbed's traffic programs share: the traffic client
 * (rvt_traffic_client.cc: traffic-guest.sh, soak-guest.sh) and the chaos
 * client (rvt_chaos_client.cc: chaos_guest.py). Each is one client process
 * attached to its node's rvtd through the client library; the clients of a
 * job find each other by the cards they publish in a shared directory.
 *
 * Here: failing ("client: FAILED: ..." on stderr, exit 1, what the scripts
 * grep for), the options every such client takes, the session and its
 * registered areas, publishing and reading a card, and the work requests
 * that write into another client's area and send it an active message.
 */
#ifndef RVT_TEST_TRAFFIC_COMMON_H
#define RVT_TEST_TRAFFIC_COMMON_H

#include "uct/ib/rvt/client/session.h"
#include "uct/ib/rvt/common/attach_wire.h"
#include "uct/ib/rvt/common/work.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rvt::test::traffic {

using clock_type = std::chrono::steady_clock;

/* Prints "client: FAILED: `why`" and exits 1. */
[[noreturn]] void die(const std::string &why);

/* `v` as a number, or die naming the option --`name`. */
uint32_t parse_u32(std::string_view v, const char *name);

/* The options every client takes: --dir=DIR --id=ID --clients=N
 * [--size=BYTES]. Clients are numbered 0..N-1 across the job (ID). */
struct job_options {
    std::string dir;
    uint32_t id      = 0;
    uint32_t clients = 0;
    uint32_t size    = 65536;
};

/* Parses argv ("--name=value" or "--name") into `job`; every other option
 * goes to `other(name, value)`, which says whether it knows it. Dies on an
 * unknown option, and unless DIR is given, N >= 2 and ID < N. */
void parse_options(
        int argc, char **argv, job_options &job,
        const std::function<bool(std::string_view, std::string_view)> &other);

/* A session with this node's agent (node_session.h), or die. */
std::unique_ptr<client::session> open_session();

/* `area` registered with the agent for local and remote access, or die. */
client::memory_region
register_area(client::session &s, std::vector<uint8_t> &area);

/* Dies if the agent's rings are corrupt. */
void check_rings(client::session &s);

/* Where a client receives: its agent, its index and generation there, and
 * its receive area. Each client publishes one (a program's card may say
 * more), in the job's directory. */
struct card {
    wire::agent_address agent;
    uint32_t client_index;
    uint32_t client_generation; /* imm.h */
    uint64_t addr;
    uint32_t rkey;
};

/* Writes DIR/`name` whole or not at all (through DIR/.`name`). */
bool publish(const std::string &dir, const std::string &name, const void *data,
             size_t size);

/* Reads `path` into `c` if it is there, complete. */
template<typename Card> bool read_card(const std::string &path, Card &c)
{
    std::ifstream in(path, std::ios::binary);
    return in && in.read(reinterpret_cast<char *>(&c), sizeof(c));
}

/* A signaled RDMA WRITE WITH IMM of `length` bytes at `local` to `to`'s
 * receive area at `offset`, through our agent's `peer`. */
work_request write_to(const card &to, uint32_t peer, uint32_t length,
                      const void *local, uint32_t lkey, uint64_t offset);

/* A signaled active message `am_id` to `to`, through our agent's `peer`
 * (no payload: the caller says where it is, or posts it inline). */
work_request am_to(const card &to, uint32_t peer, uint8_t am_id);

} // namespace rvt::test::traffic

#endif
