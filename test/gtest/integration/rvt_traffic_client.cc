/* SPDX-License-Identifier: BSD-3-Clause */
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
 *
 * The chaos run's client, where peers die and links go down at random, is
 * rvt_chaos_client.cc.
 */
#include "traffic_common.h"

#include "uct/ib/rvt/client/session.h"
#include "uct/ib/rvt/common/imm.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
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
using namespace rvt::test::traffic;

namespace {

struct options : job_options {
    uint32_t rounds  = 4;
    bool sender_only = false;
    bool retry       = false;
    bool forever     = false;
    uint32_t pace_ms = 0;
    std::set<uint32_t> skip;
};

options parse(int argc, char **argv)
{
    options o;
    parse_options(argc, argv, o,
                  [&](std::string_view name, std::string_view val) {
                      if (name == "--rounds") {
                          o.rounds = parse_u32(val, "rounds");
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
                          return false;
                      }
                      return true;
                  });
    return o;
}

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

/* Receive area: one slot per (sender, round); send area: the same size per
 * round, filled per destination, then an AM body per (destination,
 * round). */
struct areas {
    std::vector<uint8_t> recv, send;
    size_t bodies = 0; /* where the AM bodies start in `send` */
    client::memory_region recv_mr{}, send_mr{};
};

void register_areas(const options &o, client::session &s, areas &a)
{
    const size_t slots = size_t{o.clients} * o.rounds * o.size;
    a.recv.assign(slots, 0);
    a.bodies = slots;
    a.send.resize(slots + size_t{o.clients} * o.rounds * sizeof(am_body));
    a.recv_mr = register_area(s, a.recv);
    a.send_mr = register_area(s, a.send);
}

void publish_card(const options &o, client::session &s, const areas &a)
{
    card mine{s.agent_address(), s.client_index(),
              s.attached().client_generation,
              reinterpret_cast<uint64_t>(a.recv.data()), a.recv_mr.rkey};
    if (!publish(o.dir, "client." + std::to_string(o.id), &mine,
                 sizeof(mine))) {
        die("cannot publish in " + o.dir);
    }
}

std::vector<card>
wait_for_cards(const options &o, clock_type::time_point deadline)
{
    std::vector<card> cards(o.clients);
    for (uint32_t i = 0; i < o.clients; ++i) {
        while (!read_card(o.dir + "/client." + std::to_string(i), cards[i])) {
            if (clock_type::now() > deadline) {
                die("client " + std::to_string(i) + " never published");
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    return cards;
}

/* The peer index of every client's agent, as our agent numbers it. */
std::vector<uint32_t>
connect_peers(client::session &s, const std::vector<card> &cards)
{
    std::vector<uint32_t> peer_of(cards.size());
    for (uint32_t i = 0; i < cards.size(); ++i) {
        auto p = s.connect_peer(cards[i].agent);
        if (!p) {
            die("client " + std::to_string(i) + ": " + p.error());
        }
        peer_of[i] = p.value();
    }
    return peer_of;
}

/* A write with immediate and an AM per destination and round, their
 * sources filled in the send area. */
std::vector<work_request> requests(const options &o, areas &a,
                                   const std::vector<card> &cards,
                                   const std::vector<uint32_t> &peer_of)
{
    std::vector<work_request> todo;
    for (uint32_t r = 0; r < o.rounds; ++r) {
        for (uint32_t d = 0; d < o.clients; ++d) {
            if (d == o.id || o.skip.count(d)) {
                continue;
            }
            uint8_t *src = a.send.data() + (size_t{d} * o.rounds + r) * o.size;
            for (size_t k = 0; k < o.size; ++k) {
                src[k] = pattern(o.id, d, r, k);
            }
            todo.push_back(write_to(cards[d], peer_of[d], o.size, src,
                                    a.send_mr.lkey,
                                    (size_t{o.id} * o.rounds + r) * o.size));

            /* each (destination, round) has its own AM body */
            uint8_t *body = a.send.data() + a.bodies +
                            (size_t{d} * o.rounds + r) * sizeof(am_body);
            am_body b{am_magic, o.id, d, r, {}};
            for (size_t k = 0; k < sizeof(b.fill); ++k) {
                b.fill[k] = pattern(o.id, d, r, k);
            }
            std::memcpy(body, &b, sizeof(b));
            work_request am = am_to(cards[d], peer_of[d], am_id);
            am.length       = sizeof(am_body);
            am.local_addr   = reinterpret_cast<uint64_t>(body);
            am.lkey         = a.send_mr.lkey;
            todo.push_back(am);
        }
    }
    return todo;
}

/*
 * The traffic: posts every request (again when it fails, with --retry;
 * over and over, with --forever), takes every completion, and checks what
 * arrives until, from each sender, `rounds` writes and `rounds` AMs have.
 */
class exchange {
public:
    exchange(const options &o, client::session &s,
             const std::vector<card> &cards,
             const std::vector<uint32_t> &peer_of,
             const std::vector<work_request> &todo);
    void run(clock_type::time_point deadline);
    /* the clients we receive from */
    const std::set<uint32_t> &senders() const
    {
        return m_senders;
    }
    void report() const;

private:
    bool complete_enough();
    void post();
    size_t completions();
    bool inbound();
    void reconnect(uint32_t peer);

    const options &m_o;
    client::session &m_s;
    const std::vector<card> &m_cards;
    const std::vector<uint32_t> &m_peer_of;
    const std::vector<work_request> &m_todo;
    std::deque<size_t> m_queue; /* todo indices */
    std::map<uint64_t, size_t> m_in_flight; /* wr_id -> todo index */
    uint64_t m_next_wr = 1, m_failures = 0, m_done_ok = 0;
    clock_type::time_point m_last_pace = clock_type::now();

    /* what we expect to receive: from each active sender, `rounds`
     * writes and `rounds` AMs */
    std::set<uint32_t> m_senders;
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> m_sender_by_route;
    std::map<uint32_t, uint32_t> m_writes_from, m_ams_from;
    std::set<std::pair<uint32_t, uint32_t>> m_ams_seen; /* (src, round) */
    uint64_t m_bad = 0;
};

exchange::exchange(const options &o, client::session &s,
                   const std::vector<card> &cards,
                   const std::vector<uint32_t> &peer_of,
                   const std::vector<work_request> &todo) :
    m_o(o), m_s(s), m_cards(cards), m_peer_of(peer_of), m_todo(todo)
{
    for (size_t i = 0; i < todo.size(); ++i) {
        m_queue.push_back(i);
    }
    if (!o.sender_only) {
        for (uint32_t i = 0; i < o.clients; ++i) {
            if (i != o.id && !o.skip.count(i)) {
                m_senders.insert(i);
            }
        }
    }
    for (uint32_t i : m_senders) {
        m_sender_by_route[{peer_of[i], cards[i].client_index}] = i;
    }
}

bool exchange::complete_enough()
{
    for (uint32_t i : m_senders) {
        if (m_writes_from[i] < m_o.rounds || m_ams_from[i] < m_o.rounds) {
            return false;
        }
    }
    return true;
}

void exchange::run(clock_type::time_point deadline)
{
    while (!m_queue.empty() || !m_in_flight.empty() || !complete_enough()) {
        if (m_o.forever && m_queue.empty()) {
            for (size_t i = 0; i < m_todo.size(); ++i) {
                m_queue.push_back(i);
            }
        }
        if (clock_type::now() > deadline) {
            die("timed out: " + std::to_string(m_queue.size()) + " to post, " +
                std::to_string(m_in_flight.size()) + " in flight, " +
                std::to_string(m_done_ok) + " done");
        }
        post();
        const size_t n = completions();
        const bool got = inbound();
        check_rings(m_s);
        if (n == 0 && !got) {
            m_s.wait(std::chrono::milliseconds(5));
        }
    }
}

void exchange::post()
{
    while (!m_queue.empty()) {
        if (m_o.pace_ms && clock_type::now() - m_last_pace <
                                   std::chrono::milliseconds(m_o.pace_ms)) {
            break;
        }
        work_request w = m_todo[m_queue.front()];
        w.wr_id        = m_next_wr;
        if (m_s.post(w) == client::post_status::busy) {
            break;
        }
        m_in_flight[m_next_wr++] = m_queue.front();
        m_queue.pop_front();
        m_last_pace = clock_type::now();
        if (m_o.pace_ms) {
            break;
        }
    }
}

/* The agent gave a peer up: ask for it again, as a UCX user recreates a
 * failed endpoint. */
void exchange::reconnect(uint32_t peer)
{
    for (uint32_t i = 0; i < m_o.clients; ++i) {
        if (m_peer_of[i] == peer) {
            auto p = m_s.connect_peer(m_cards[i].agent);
            if (!p || p.value() != peer) {
                die("reconnect to client " + std::to_string(i) + ": " +
                    (p ? "peer index changed" : p.error()));
            }
            return;
        }
    }
}

size_t exchange::completions()
{
    completion c[64];
    const size_t n = m_s.poll_completions(c);
    for (size_t i = 0; i < n; ++i) {
        auto it = m_in_flight.find(c[i].wr_id);
        if (it == m_in_flight.end()) {
            die("completion for unknown wr_id " + std::to_string(c[i].wr_id));
        }
        if (c[i].status == static_cast<uint32_t>(completion_status::success)) {
            ++m_done_ok;
        } else if (c[i].status ==
                   static_cast<uint32_t>(completion_status::invalid)) {
            die("request refused as invalid (wr_id " +
                std::to_string(c[i].wr_id) + ")");
        } else {
            ++m_failures;
            if (!m_o.retry) {
                die("request failed: status " + std::to_string(c[i].status) +
                    " detail " + std::to_string(c[i].detail));
            }
            if (c[i].status ==
                static_cast<uint32_t>(completion_status::peer_failed)) {
                reconnect(c[i].peer);
            }
            m_queue.push_back(it->second); /* post it again */
        }
        m_in_flight.erase(it);
    }
    return n;
}

bool exchange::inbound()
{
    client::inbound_view v;
    bool got = false;
    while (m_s.peek_inbound(v)) {
        got             = true;
        const auto kind = static_cast<inbound_kind>(v.msg.kind);
        auto d          = imm::decode(v.msg.imm);
        if (kind == inbound_kind::write) {
            auto from = m_sender_by_route.find({v.msg.peer, v.msg.src_client});
            if (!d || d->what != imm::kind::write ||
                d->dst_client != m_s.client_index() ||
                d->src_client != v.msg.src_client) {
                ++m_bad;
                std::fprintf(stderr, "client: bad write immediate 0x%x\n",
                             v.msg.imm);
            } else if (from != m_sender_by_route.end()) {
                ++m_writes_from[from->second];
                if (v.msg.length != m_o.size) {
                    ++m_bad;
                }
            }
        } else if (kind == inbound_kind::am) {
            am_body b{};
            if (v.data.size() == sizeof(b)) {
                std::memcpy(&b, v.data.data(), sizeof(b));
            }
            bool ok = d && d->what == imm::kind::am && d->am_id == am_id &&
                      v.msg.am_id == am_id && b.magic == am_magic &&
                      b.dst == m_o.id && m_senders.count(b.src) &&
                      b.round < m_o.rounds;
            for (size_t k = 0; ok && k < sizeof(b.fill); ++k) {
                ok = b.fill[k] == pattern(b.src, m_o.id, b.round, k);
            }
            if (!ok) {
                if (!(b.magic == am_magic && !m_senders.count(b.src))) {
                    ++m_bad;
                    std::fprintf(stderr, "client: bad AM from %u\n", b.src);
                }
            } else if (m_ams_seen.insert({b.src, b.round}).second) {
                ++m_ams_from[b.src];
            }
        } else if (kind == inbound_kind::peer_failed) {
            std::fprintf(stderr, "client: peer %u failed\n", v.msg.peer);
            if (!m_o.retry) {
                ++m_bad;
            }
        }
        m_s.release_inbound();
    }
    return got;
}

void exchange::report() const
{
    if (m_bad) {
        die(std::to_string(m_bad) + " bad inbound entries");
    }
    std::printf("OK client %u (index %u): %llu ops completed, %llu failed "
                "and retried, %zu senders verified, %u rounds of %u bytes\n",
                m_o.id, m_s.client_index(),
                static_cast<unsigned long long>(m_done_ok),
                static_cast<unsigned long long>(m_failures), m_senders.size(),
                m_o.rounds, m_o.size);
    std::fflush(stdout);
}

/* Every byte of every slot from every sender. */
void verify_area(const options &o, const areas &a,
                 const std::set<uint32_t> &senders)
{
    for (uint32_t src : senders) {
        for (uint32_t r = 0; r < o.rounds; ++r) {
            const uint8_t *p = a.recv.data() +
                               (size_t{src} * o.rounds + r) * o.size;
            for (size_t k = 0; k < o.size; ++k) {
                if (p[k] != pattern(src, o.id, r, k)) {
                    die("byte " + std::to_string(k) + " from client " +
                        std::to_string(src) + " round " + std::to_string(r) +
                        " is wrong");
                }
            }
        }
    }
}

/* Stay until everyone is done, so nobody's memory goes away while others
 * still write into it. */
void wait_for_everyone(const options &o, clock_type::time_point deadline)
{
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
}

} // namespace

int main(int argc, char **argv)
{
    const options o = parse(argc, argv);
    auto session    = open_session();
    session->set_write_notices(true); /* the writes' routing is checked */
    areas a;
    register_areas(o, *session, a);
    publish_card(o, *session, a);
    const auto deadline = clock_type::now() + std::chrono::seconds(120);
    const auto cards    = wait_for_cards(o, deadline);
    const auto peer_of  = connect_peers(*session, cards);
    const auto todo     = requests(o, a, cards, peer_of);
    exchange traffic(o, *session, cards, peer_of, todo);
    traffic.run(deadline);
    verify_area(o, a, traffic.senders());
    traffic.report();
    wait_for_everyone(o, deadline);
    return 0;
}
