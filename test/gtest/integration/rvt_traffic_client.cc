/*
 * One client process of the multi-node traffic tests (test/testbed/
 * traffic-guest.sh): it attaches to its node's rvtd through the client
 * library, publishes where its receive buffer is, and then, to every other
 * client of the job (other nodes, and its own node through loopback),
 * RDMA-WRITEs-WITH-IMM a pattern unique to the (sender, receiver, round)
 * and sends an active message. It checks every byte and every immediate
 * that arrives for it, and every completion of its own requests.
 *
 *   rvt_traffic_client --dir=DIR --id=ID --clients=N [--rounds=R]
 *       [--size=BYTES] [--sender-only] [--skip=ID,...] [--retry]
 *       [--pace-ms=MS] [--forever]
 *
 * Clients are numbered 0..N-1 across the job (ID); each writes
 * DIR/client.ID with its address, then waits for all (those in --skip
 * do not take part as receivers: a client the test kills, say).
 * --forever (with --sender-only): keep sending the same rounds until
 * killed (the SIGKILL test).
 * --retry: an op that completes as failed is posted again (the link-down
 * test); failures are counted and printed. Exit 0 and "OK" when all is
 * verified, else 1 with what was wrong.
 */
#include "uct/ib/rvt/client/session.h"
#include "uct/ib/rvt/common/imm.h"

#include "node_session.h"

#include <infiniband/verbs.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace rvt;
using clock_type = std::chrono::steady_clock;

namespace {

struct options {
    std::string dir;
    uint32_t id      = 0;
    uint32_t clients = 0;
    uint32_t rounds  = 4;
    uint32_t size    = 65536;
    bool sender_only = false;
    bool retry       = false;
    bool forever     = false;
    uint32_t pace_ms = 0;
    std::set<uint32_t> skip;
};

/* What each client publishes. */
struct card {
    wire::agent_address agent;
    uint32_t client_index;
    uint32_t client_generation; /* imm.h */
    uint64_t addr;
    uint32_t rkey;
};

uint8_t pattern(uint32_t src, uint32_t dst, uint32_t round, size_t k)
{
    return static_cast<uint8_t>(src * 31 + dst * 7 + round * 101 + k * 13 +
                                (k >> 8));
}

struct am_body {
    uint32_t magic;
    uint32_t src;
    uint32_t dst;
    uint32_t round;
    uint8_t fill[48];
};
constexpr uint32_t am_magic = 0x414d5654;
constexpr uint8_t am_id     = 9;

[[noreturn]] void die(const std::string &why)
{
    std::fprintf(stderr, "client: FAILED: %s\n", why.c_str());
    std::exit(1);
}

bool publish(const options &o, const card &c)
{
    std::string tmp = o.dir + "/.client." + std::to_string(o.id);
    std::ofstream out(tmp, std::ios::binary);
    out.write(reinterpret_cast<const char *>(&c), sizeof(c));
    out.close();
    return rename(tmp.c_str(),
                  (o.dir + "/client." + std::to_string(o.id)).c_str()) == 0;
}

bool read_card(const options &o, uint32_t id, card &c)
{
    std::ifstream in(o.dir + "/client." + std::to_string(id), std::ios::binary);
    return in && in.read(reinterpret_cast<char *>(&c), sizeof(c));
}

uint32_t parse_u32(std::string_view v, const char *name)
{
    char *end = nullptr;
    std::string s(v);
    unsigned long x = std::strtoul(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || x > 0xffffffffu) {
        die(std::string("--") + name + "=" + s + ": expected a number");
    }
    return static_cast<uint32_t>(x);
}

options parse(int argc, char **argv)
{
    options o;
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        auto eq            = a.find('=');
        auto name          = a.substr(0, eq);
        auto val = eq == std::string_view::npos ? "" : a.substr(eq + 1);
        if (name == "--dir") {
            o.dir = val;
        } else if (name == "--id") {
            o.id = parse_u32(val, "id");
        } else if (name == "--clients") {
            o.clients = parse_u32(val, "clients");
        } else if (name == "--rounds") {
            o.rounds = parse_u32(val, "rounds");
        } else if (name == "--size") {
            o.size = parse_u32(val, "size");
        } else if (name == "--pace-ms") {
            o.pace_ms = parse_u32(val, "pace-ms");
        } else if (name == "--sender-only") {
            o.sender_only = true;
        } else if (name == "--forever") {
            o.forever = true;
        } else if (name == "--retry") {
            o.retry = true;
        } else if (name == "--skip") {
            std::stringstream ss{std::string(val)};
            std::string item;
            while (std::getline(ss, item, ',')) {
                o.skip.insert(parse_u32(item, "skip"));
            }
        } else {
            die("unknown argument " + std::string(a));
        }
    }
    if (o.dir.empty() || o.clients < 2 || o.id >= o.clients) {
        die("usage: --dir=DIR --id=ID --clients=N (N >= 2, ID < N)");
    }
    return o;
}

} // namespace

int main(int argc, char **argv)
{
    const options o = parse(argc, argv);
    auto opened     = test::open_node_session();
    if (!opened) {
        die(opened.error());
    }
    client::session &s = *opened.value();
    /* the writes' routing is checked from their notices */
    s.set_write_notices(true);

    /* receive area: one slot per (sender, round); send area: the same
     * size per round, filled per destination */
    const size_t slot = o.size;
    std::vector<uint8_t> recv(size_t{o.clients} * o.rounds * slot, 0);
    const size_t bodies = size_t{o.clients} * o.rounds * slot;
    std::vector<uint8_t> send(bodies +
                              size_t{o.clients} * o.rounds * sizeof(am_body));
    const int access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                             IBV_ACCESS_REMOTE_READ;
    auto recv_mr = s.register_memory(recv.data(), recv.size(), access_flags);
    auto send_mr = s.register_memory(send.data(), send.size(), access_flags);
    if (!recv_mr || !send_mr) {
        die(!recv_mr ? recv_mr.error() : send_mr.error());
    }
    card mine{s.agent_address(), s.client_index(),
              s.attached().client_generation,
              reinterpret_cast<uint64_t>(recv.data()), recv_mr.value().rkey};
    if (!publish(o, mine)) {
        die("cannot publish in " + o.dir);
    }

    std::vector<card> cards(o.clients);
    const auto deadline = clock_type::now() + std::chrono::seconds(120);
    for (uint32_t i = 0; i < o.clients; ++i) {
        while (!read_card(o, i, cards[i])) {
            if (clock_type::now() > deadline) {
                die("client " + std::to_string(i) + " never published");
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    /* peer index of every client's agent, as our agent numbers it */
    std::vector<uint32_t> peer_of(o.clients);
    for (uint32_t i = 0; i < o.clients; ++i) {
        auto p = s.connect_peer(cards[i].agent);
        if (!p) {
            die("client " + std::to_string(i) + ": " + p.error());
        }
        peer_of[i] = p.value();
    }

    /* the requests: a write with immediate and an AM per destination and
     * round */
    std::vector<work_request> todo;
    for (uint32_t r = 0; r < o.rounds; ++r) {
        for (uint32_t d = 0; d < o.clients; ++d) {
            if (d == o.id || o.skip.count(d)) {
                continue;
            }
            uint8_t *src = send.data() + (size_t{d} * o.rounds + r) * slot;
            for (size_t k = 0; k < slot; ++k) {
                src[k] = pattern(o.id, d, r, k);
            }
            work_request w{};
            w.op             = static_cast<uint8_t>(work_op::rdma_write_imm);
            w.flags          = work_signaled;
            w.peer           = peer_of[d];
            w.dst_client     = cards[d].client_index;
            w.dst_generation = static_cast<uint8_t>(cards[d].client_generation);
            w.length         = o.size;
            w.local_addr     = reinterpret_cast<uint64_t>(src);
            w.lkey           = send_mr.value().lkey;
            w.rkey           = cards[d].rkey;
            w.remote_addr    = cards[d].addr +
                            (size_t{o.id} * o.rounds + r) * slot;
            todo.push_back(w);

            work_request a{};
            a.op             = static_cast<uint8_t>(work_op::send_am);
            a.flags          = work_signaled;
            a.am_id          = am_id;
            a.peer           = peer_of[d];
            a.dst_client     = cards[d].client_index;
            a.dst_generation = static_cast<uint8_t>(cards[d].client_generation);
            a.length         = sizeof(am_body);
            /* each (destination, round) has its own AM body */
            uint8_t *body = send.data() + bodies +
                            (size_t{d} * o.rounds + r) * sizeof(am_body);
            am_body b{am_magic, o.id, d, r, {}};
            for (size_t k = 0; k < sizeof(b.fill); ++k) {
                b.fill[k] = pattern(o.id, d, r, k);
            }
            std::memcpy(body, &b, sizeof(b));
            a.local_addr = reinterpret_cast<uint64_t>(body);
            a.lkey       = send_mr.value().lkey;
            todo.push_back(a);
        }
    }
    auto reconnect = [&](uint32_t peer) {
        for (uint32_t i = 0; i < o.clients; ++i) {
            if (peer_of[i] == peer) {
                auto p = s.connect_peer(cards[i].agent);
                if (!p || p.value() != peer) {
                    die("reconnect to client " + std::to_string(i) + ": " +
                        (p ? "peer index changed" : p.error()));
                }
                return;
            }
        }
    };
    std::deque<size_t> queue;
    for (size_t i = 0; i < todo.size(); ++i) {
        queue.push_back(i);
    }
    std::map<uint64_t, size_t> in_flight; /* wr_id -> todo index */
    uint64_t next_wr = 1, failures = 0, invalid = 0, done_ok = 0;

    /* what we expect to receive: from each active sender, `rounds`
     * writes and `rounds` AMs */
    std::set<uint32_t> senders;
    if (!o.sender_only) {
        for (uint32_t i = 0; i < o.clients; ++i) {
            if (i != o.id && !o.skip.count(i)) {
                senders.insert(i);
            }
        }
    }
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> sender_by_route;
    for (uint32_t i : senders) {
        sender_by_route[{peer_of[i], cards[i].client_index}] = i;
    }
    std::map<uint32_t, uint32_t> writes_from, ams_from;
    std::set<std::pair<uint32_t, uint32_t>> ams_seen; /* (src, round) */
    uint64_t bad         = 0;
    auto complete_enough = [&] {
        for (uint32_t i : senders) {
            if (writes_from[i] < o.rounds || ams_from[i] < o.rounds) {
                return false;
            }
        }
        return true;
    };

    auto last_pace = clock_type::now();
    while (!queue.empty() || !in_flight.empty() || !complete_enough()) {
        if (o.forever && queue.empty()) {
            for (size_t i = 0; i < todo.size(); ++i) {
                queue.push_back(i);
            }
        }
        if (clock_type::now() > deadline) {
            die("timed out: " + std::to_string(queue.size()) + " to post, " +
                std::to_string(in_flight.size()) + " in flight, " +
                std::to_string(done_ok) + " done");
        }
        /* post */
        while (!queue.empty()) {
            if (o.pace_ms && clock_type::now() - last_pace <
                                     std::chrono::milliseconds(o.pace_ms)) {
                break;
            }
            work_request w = todo[queue.front()];
            w.wr_id        = next_wr;
            if (s.post(w) == client::post_status::busy) {
                break;
            }
            in_flight[next_wr++] = queue.front();
            queue.pop_front();
            last_pace = clock_type::now();
            if (o.pace_ms) {
                break;
            }
        }
        /* completions */
        completion c[64];
        size_t n = s.poll_completions(c);
        for (size_t i = 0; i < n; ++i) {
            auto it = in_flight.find(c[i].wr_id);
            if (it == in_flight.end()) {
                die("completion for unknown wr_id " +
                    std::to_string(c[i].wr_id));
            }
            if (c[i].status ==
                static_cast<uint32_t>(completion_status::success)) {
                ++done_ok;
            } else if (c[i].status ==
                       static_cast<uint32_t>(completion_status::invalid)) {
                ++invalid;
                die("request refused as invalid (wr_id " +
                    std::to_string(c[i].wr_id) + ")");
            } else {
                ++failures;
                if (!o.retry) {
                    die("request failed: status " +
                        std::to_string(c[i].status) + " detail " +
                        std::to_string(c[i].detail));
                }
                if (c[i].status ==
                    static_cast<uint32_t>(completion_status::peer_failed)) {
                    /* the agent gave the peer up: ask for it again, as a
                     * UCX user recreates a failed endpoint */
                    reconnect(c[i].peer);
                }
                queue.push_back(it->second); /* post it again */
            }
            in_flight.erase(it);
        }
        /* inbound */
        client::inbound_view v;
        bool got = false;
        while (s.peek_inbound(v)) {
            got             = true;
            const auto kind = static_cast<inbound_kind>(v.msg.kind);
            auto d          = imm::decode(v.msg.imm);
            if (kind == inbound_kind::write) {
                auto from = sender_by_route.find(
                        {v.msg.peer, v.msg.src_client});
                if (!d || d->what != imm::kind::write ||
                    d->dst_client != s.client_index() ||
                    d->src_client != v.msg.src_client) {
                    ++bad;
                    std::fprintf(stderr, "client: bad write immediate 0x%x\n",
                                 v.msg.imm);
                } else if (from != sender_by_route.end()) {
                    ++writes_from[from->second];
                    if (v.msg.length != o.size) {
                        ++bad;
                    }
                }
            } else if (kind == inbound_kind::am) {
                am_body b{};
                if (v.data.size() == sizeof(b)) {
                    std::memcpy(&b, v.data.data(), sizeof(b));
                }
                bool ok = d && d->what == imm::kind::am && d->am_id == am_id &&
                          v.msg.am_id == am_id && b.magic == am_magic &&
                          b.dst == o.id && senders.count(b.src) &&
                          b.round < o.rounds;
                for (size_t k = 0; ok && k < sizeof(b.fill); ++k) {
                    ok = b.fill[k] == pattern(b.src, o.id, b.round, k);
                }
                if (!ok) {
                    if (!(b.magic == am_magic && !senders.count(b.src))) {
                        ++bad;
                        std::fprintf(stderr, "client: bad AM from %u\n", b.src);
                    }
                } else if (ams_seen.insert({b.src, b.round}).second) {
                    ++ams_from[b.src];
                }
            } else if (kind == inbound_kind::peer_failed) {
                std::fprintf(stderr, "client: peer %u failed\n", v.msg.peer);
                if (!o.retry) {
                    ++bad;
                }
            }
            s.release_inbound();
        }
        if (!s.healthy()) {
            die("the agent's rings are corrupt");
        }
        if (n == 0 && !got) {
            s.wait(std::chrono::milliseconds(5));
        }
    }
    /* every byte of every slot from every sender */
    for (uint32_t src : senders) {
        for (uint32_t r = 0; r < o.rounds; ++r) {
            const uint8_t *p = recv.data() +
                               (size_t{src} * o.rounds + r) * slot;
            for (size_t k = 0; k < slot; ++k) {
                if (p[k] != pattern(src, o.id, r, k)) {
                    die("byte " + std::to_string(k) + " from client " +
                        std::to_string(src) + " round " + std::to_string(r) +
                        " is wrong");
                }
            }
        }
    }
    if (bad) {
        die(std::to_string(bad) + " bad inbound entries");
    }
    std::printf("OK client %u (index %u): %llu ops completed, %llu failed "
                "and retried, %zu senders verified, %u rounds of %u bytes\n",
                o.id, s.client_index(),
                static_cast<unsigned long long>(done_ok),
                static_cast<unsigned long long>(failures), senders.size(),
                o.rounds, o.size);
    std::fflush(stdout);
    /* stay until everyone is done, so nobody's memory goes away while
     * others still write into it */
    std::ofstream(o.dir + "/done." + std::to_string(o.id)) << "done\n";
    for (uint32_t i = 0; i < o.clients; ++i) {
        if (o.skip.count(i)) {
            continue;
        }
        while (access((o.dir + "/done." + std::to_string(i)).c_str(), F_OK) !=
               0) {
            if (clock_type::now() > deadline + std::chrono::seconds(60)) {
                die("client " + std::to_string(i) + " never finished");
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    return 0;
}
