/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The chaos client's run (chaos_runner.h): its steps, and the sending
 * side: cards, peers, posting, completions, timers. The checks of what
 * arrives are in chaos_checks.cc.
 */
#include "chaos_runner.h"

#include <infiniband/verbs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <span>
#include <thread>

namespace rvt::test::chaos {

int runner::run()
{
    start();
    const auto until = deadline();
    wait_for_cards();
    send_until(until);
    m_running = false;
    ending e;
    e.never_completed            = drain();
    const uint64_t failed_before = m_failed;
    e.fins_sent                  = send_fins();
    e.never_completed += drain();
    e.fins_failed = m_failed - failed_before;
    wait_for_fins();
    check_fins(e);
    e.fins_missing = fins_missing();
    return summary(e);
}

/* Our areas registered, our card out. */
void runner::start()
{
    m_start         = clock_type::now();
    m_last_progress = m_start;
    m_generation    = m_s.attached().client_generation;
    m_s.set_write_notices(true); /* writes are checked from their notices */
    const size_t slots = size_t{m_o.clients} * m_o.window * m_o.size;
    m_recv.assign(slots * 2, 0);
    m_send.assign(slots, 0);
    m_recv_mr = traffic::register_area(m_s, m_recv);
    m_send_mr = traffic::register_area(m_s, m_send);
    m_dests.resize(m_o.clients);
    for (auto &d : m_dests) {
        d.slot_busy.assign(m_o.window, false);
    }
    publish_card();
}

/* The deadline, a wall-clock time (replacements start late), on the steady
 * clock. */
clock_type::time_point runner::deadline() const
{
    return m_start +
           milliseconds(
                   m_o.until * 1000 -
                   std::chrono::duration_cast<milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count());
}

/* Everyone's first card. */
void runner::wait_for_cards()
{
    for (;;) {
        scan_cards();
        if (m_latest.size() == m_o.clients) {
            break;
        }
        if (clock_type::now() - m_start > seconds(120)) {
            die("only " + std::to_string(m_latest.size()) + " of " +
                std::to_string(m_o.clients) + " clients published a card");
        }
        std::this_thread::sleep_for(milliseconds(100));
    }
}

/* Until the deadline, or the driver's stop. */
void runner::send_until(clock_type::time_point until)
{
    const std::string stop = m_o.dir + "/stop";
    auto looked            = clock_type::now();
    while (clock_type::now() < until) {
        pump();
        if (clock_type::now() - looked > seconds(1)) {
            looked = clock_type::now();
            if (access(stop.c_str(), F_OK) == 0) {
                break;
            }
        }
    }
}

/* Every op gets its completion, 60 s at most: how many did not. */
uint64_t runner::drain()
{
    const auto bound = clock_type::now() + seconds(60);
    while (!m_in_flight.empty() && clock_type::now() < bound) {
        pump();
    }
    return m_in_flight.size();
}

/* Fins to every destination we still send to: how many. */
uint64_t runner::send_fins()
{
    uint64_t fins_sent = 0;
    for (uint32_t id = 0; id < m_o.clients; ++id) {
        dest &d = m_dests[id];
        if (id == m_o.id || !d.known || !d.alive) {
            continue;
        }
        while (!post_message(id, kind::fin, 0)) {
            pump();
        }
        ++fins_sent;
    }
    return fins_sent;
}

/* How many other clients' fins (their latest incarnation's) we lack. */
uint64_t runner::fins_missing()
{
    uint64_t missing = 0;
    for (const auto &[id, inc] : m_latest) {
        if (id != m_o.id && !m_sources[{id, inc}].fin) {
            ++missing;
        }
    }
    return missing;
}

void runner::wait_for_fins()
{
    const auto bound = clock_type::now() + seconds(60);
    while (fins_missing() != 0 && clock_type::now() < bound) {
        pump();
    }
}

namespace {

/* "client: WHAT: client ID.INC: W writes and A AMs SAID, W' and A' arrived",
 * WHO being "client ID.INC: " */
void print_mismatch(const char *what, const std::string &who, uint64_t writes,
                    uint64_t ams, const char *said, const source &s)
{
    std::fprintf(stderr,
                 "client: %s: %s%llu writes and %llu AMs %s, %llu and %llu "
                 "arrived\n",
                 what, who.c_str(), static_cast<unsigned long long>(writes),
                 static_cast<unsigned long long>(ams), said,
                 static_cast<unsigned long long>(s.writes),
                 static_cast<unsigned long long>(s.ams));
}

} // namespace

/* What each fin says against what was verified here. */
void runner::check_fins(ending &e)
{
    for (const auto &[key, s] : m_sources) {
        if (!s.fin) {
            continue;
        }
        ++e.pairs;
        const message &f      = s.fin_msg;
        const std::string who = "client " + std::to_string(key.first) + "." +
                                std::to_string(key.second) + ": ";
        if (s.writes < f.ok_writes || s.ams < f.ok_ams) {
            ++e.lost;
            print_mismatch("LOST", who, f.ok_writes, f.ok_ams,
                           "completed ok at their sender", s);
        }
        if (s.writes > f.posted_writes || s.ams > f.posted_ams) {
            ++e.duplicate;
            print_mismatch("DUPLICATE", who, f.posted_writes, f.posted_ams,
                           "posted", s);
        }
    }
}

/* The summary line ("CHAOS ...", for chaos_guest.py), and what failed. */
int runner::summary(const ending &e) const
{
    std::printf("CHAOS id=%u inc=%u index=%u pid=%d %s gone_notices=%llu "
                "peer_failures=%llu restarts_seen=%llu never_completed=%llu "
                "fins_sent=%llu fins_failed=%llu fins_missing=%llu "
                "pairs_checked=%llu lost=%llu duplicate=%llu\n",
                m_o.id, m_o.incarnation, m_s.client_index(),
                static_cast<int>(getpid()), counts().c_str(),
                static_cast<unsigned long long>(m_gone_notices),
                static_cast<unsigned long long>(m_peer_failures),
                static_cast<unsigned long long>(m_restarts),
                static_cast<unsigned long long>(e.never_completed),
                static_cast<unsigned long long>(e.fins_sent),
                static_cast<unsigned long long>(e.fins_failed),
                static_cast<unsigned long long>(e.fins_missing),
                static_cast<unsigned long long>(e.pairs),
                static_cast<unsigned long long>(e.lost),
                static_cast<unsigned long long>(e.duplicate));
    std::fflush(stdout);
    if (m_bad || e.lost || e.duplicate || e.never_completed || e.fins_missing ||
        e.fins_failed) {
        std::fprintf(stderr,
                     "client: FAILED: %llu bad arrivals, %llu pairs lost, "
                     "%llu duplicated, %llu ops never completed, %llu fins "
                     "missing, %llu failed\n",
                     static_cast<unsigned long long>(m_bad),
                     static_cast<unsigned long long>(e.lost),
                     static_cast<unsigned long long>(e.duplicate),
                     static_cast<unsigned long long>(e.never_completed),
                     static_cast<unsigned long long>(e.fins_missing),
                     static_cast<unsigned long long>(e.fins_failed));
        return 1;
    }
    return 0;
}

void runner::publish_card()
{
    card mine{{m_s.agent_address(), m_s.client_index(),
               m_s.attached().client_generation,
               reinterpret_cast<uint64_t>(m_recv.data()), m_recv_mr.rkey},
              m_o.id,
              m_o.incarnation,
              static_cast<uint32_t>(getpid())};
    const std::string name = "card." + std::to_string(m_o.id) + "." +
                             std::to_string(m_o.incarnation);
    if (!traffic::publish(m_o.dir, name, &mine, sizeof(mine))) {
        die("cannot publish in " + m_o.dir);
    }
}

uint32_t runner::peer_of(const wire::agent_address &a, bool fresh)
{
    auto it = m_peers.find(a.agent_id);
    if (it != m_peers.end() && !fresh) {
        return it->second;
    }
    auto p = m_s.connect_peer(a, milliseconds(20000));
    if (!p) {
        die("connect_peer: " + p.error());
    }
    if (it != m_peers.end() && it->second != p.value()) {
        /* the agent's peer indices are stable for its life */
        die("the agent renumbered a peer: " + std::to_string(it->second) +
            " -> " + std::to_string(p.value()));
    }
    m_peers[a.agent_id] = p.value();
    return p.value();
}

/* Reads the cards not read yet; a destination whose card has a higher
 * incarnation than the one we send to is its replacement. */
void runner::scan_cards()
{
    std::error_code ec;
    std::vector<std::pair<id_inc, std::string>> found;
    for (const auto &e : std::filesystem::directory_iterator(m_o.dir, ec)) {
        const std::string name = e.path().filename().string();
        unsigned id = 0, inc = 0;
        char tail = 0;
        if (name.rfind("card.", 0) != 0 || m_card_files.count(name) ||
            std::sscanf(name.c_str(), "card.%u.%u%c", &id, &inc, &tail) != 2 ||
            id >= m_o.clients) {
            continue;
        }
        found.push_back({{id, inc}, name});
    }
    std::sort(found.begin(), found.end());
    for (const auto &[key, name] : found) {
        card c{};
        if (!traffic::read_card(m_o.dir + "/" + name, c) || c.id != key.first ||
            c.incarnation != key.second) {
            continue; /* not complete yet: next time */
        }
        m_card_files.insert(name);
        m_cards[key] = c;
        m_routes[{peer_of(c.agent), c.client_index}].push_back(key);
        auto &latest = m_latest[key.first];
        latest       = std::max(latest, key.second);
    }
    for (const auto &[id, inc] : m_latest) {
        if (id == m_o.id) {
            continue;
        }
        dest &d = m_dests[id];
        if (!d.known || d.c.incarnation < inc) {
            switch_dest(id, m_cards[{id, inc}]);
        }
    }
    m_last_scan = clock_type::now();
}

void runner::switch_dest(uint32_t id, const card &c)
{
    dest &d = m_dests[id];
    if (d.known) {
        ++m_restarts;
    }
    std::vector<bool> busy = std::move(d.slot_busy);
    d                      = dest{};
    d.slot_busy            = std::move(busy);
    d.known                = true;
    d.c                    = c;
    d.peer                 = peer_of(c.agent);
    d.alive                = true;
    d.last_heard           = clock_type::now();
}

bool runner::post_write(uint32_t id)
{
    dest &d             = m_dests[id];
    const uint64_t r    = d.next_round;
    const uint32_t slot = static_cast<uint32_t>(r % m_o.window);
    const uint32_t len  = length_of(r, m_o.incarnation);
    uint8_t *src        = send_slot(id, slot);
    slot_header h{slot_magic,      m_o.id, id, m_o.incarnation,
                  d.c.incarnation, 0,      r};
    std::memcpy(src, &h, sizeof(h));
    const uint64_t seed = seed_of(m_o.id, id, m_o.incarnation, d.c.incarnation,
                                  r, kind::write);
    for (size_t k = sizeof(h); k < len; ++k) {
        src[k] = byte_of(seed, k);
    }
    work_request w = traffic::write_to(
            d.c, d.peer, len, src, m_send_mr.lkey,
            ((size_t{m_o.id} * 2 + m_o.incarnation % 2) * m_o.window + slot) *
                    m_o.size);
    w.wr_id = m_next_wr;
    if (m_s.post(w) == client::post_status::busy) {
        return false;
    }
    m_in_flight[m_next_wr++] = {id, d.c.incarnation, kind::write, slot};
    d.slot_busy[slot]        = true;
    ++d.posted_writes;
    return true;
}

bool runner::post_message(uint32_t id, kind what, uint64_t round)
{
    dest &d = m_dests[id];
    message m{};
    m.magic   = message_magic;
    m.type    = static_cast<uint32_t>(what);
    m.src     = m_o.id;
    m.dst     = id;
    m.src_inc = m_o.incarnation;
    m.dst_inc = d.c.incarnation;
    m.round   = round;
    if (what == kind::fin) {
        m.posted_writes = d.posted_writes;
        m.ok_writes     = d.ok_writes;
        m.posted_ams    = d.posted_ams;
        m.ok_ams        = d.ok_ams;
    }
    fill_message(m);
    work_request a = traffic::am_to(d.c, d.peer, message_am_id);
    a.wr_id        = m_next_wr;
    if (m_s.post_inline(a, std::as_bytes(std::span(&m, 1))) ==
        client::post_status::busy) {
        return false;
    }
    m_in_flight[m_next_wr++] = {id, d.c.incarnation, what, 0};
    if (what == kind::data) {
        ++d.posted_ams;
    }
    return true;
}

/* At most one round per destination per pass, the destinations taken in
 * turn from a rotating start. */
void runner::post_work()
{
    const auto now = clock_type::now();
    for (uint32_t k = 0; k < m_o.clients; ++k) {
        const uint32_t id = static_cast<uint32_t>((m_rotate + k) % m_o.clients);
        dest &d           = m_dests[id];
        if (id == m_o.id || !d.known || !d.alive) {
            continue;
        }
        if (d.ack_due && !d.ack_in_flight) {
            if (!post_message(id, kind::ack, d.ack_round)) {
                return;
            }
            d.ack_due       = false;
            d.ack_in_flight = true;
        }
        if (d.am_pending) {
            if (!post_message(id, kind::data, d.next_round - 1)) {
                return;
            }
            d.am_pending = false;
        }
        const bool window_open = static_cast<int64_t>(d.next_round) <=
                                 d.acked + static_cast<int64_t>(m_o.window);
        if (window_open && !d.slot_busy[d.next_round % m_o.window]) {
            if (!post_write(id)) {
                return;
            }
            ++d.next_round;
            if (!post_message(id, kind::data, d.next_round - 1)) {
                d.am_pending = true;
                return;
            }
        } else if (!window_open && !d.ping_in_flight &&
                   now - std::max(d.last_heard, d.last_ping) > seconds(1)) {
            if (!post_message(id, kind::ping, d.next_round - 1)) {
                return;
            }
            d.ping_in_flight = true;
            d.last_ping      = now;
        }
    }
    ++m_rotate;
}

size_t runner::poll()
{
    completion c[64];
    const size_t n = m_s.poll_completions(c);
    const auto now = clock_type::now();
    for (size_t i = 0; i < n; ++i) {
        auto it = m_in_flight.find(c[i].wr_id);
        if (it == m_in_flight.end()) {
            die("completion for unknown wr_id " + std::to_string(c[i].wr_id));
        }
        const op_record op = it->second;
        m_in_flight.erase(it);
        dest &d             = m_dests[op.dst];
        const bool same_inc = d.known && d.c.incarnation == op.dst_inc;
        if (op.what == kind::write) {
            d.slot_busy[op.slot] = false;
        }
        if (same_inc && op.what == kind::ping) {
            d.ping_in_flight = false;
        }
        if (same_inc && op.what == kind::ack) {
            d.ack_in_flight = false;
        }
        const auto status = static_cast<completion_status>(c[i].status);
        if (status == completion_status::success) {
            ++m_ok;
            if (same_inc && op.what == kind::write) {
                ++d.ok_writes;
            } else if (same_inc && op.what == kind::data) {
                ++d.ok_ams;
            }
            continue;
        }
        if (status == completion_status::invalid) {
            die(std::string("a ") + name_of(op.what) +
                " was refused as invalid (detail " +
                std::to_string(c[i].detail) + ")");
        }
        ++m_failed;
        if (status == completion_status::peer_failed) {
            ++m_failed_gone;
            if (same_inc && d.alive) {
                d.alive    = false;
                d.retry_at = now + milliseconds(500);
            }
        } else if (c[i].detail == IBV_WC_WR_FLUSH_ERR) {
            ++m_failed_flushed;
        } else if (c[i].detail == IBV_WC_RETRY_EXC_ERR) {
            ++m_failed_retries;
        } else {
            ++m_failed_other;
            std::fprintf(stderr,
                         "client: a %s to client %u failed: status %u, %s\n",
                         name_of(op.what), op.dst, c[i].status,
                         ibv_wc_status_str(
                                 static_cast<ibv_wc_status>(c[i].detail)));
        }
    }
    return n;
}

std::string runner::counts() const
{
    char line[512];
    std::snprintf(line, sizeof(line),
                  "ops_ok=%llu ops_failed=%llu failed_gone=%llu "
                  "failed_flushed=%llu failed_retries=%llu failed_other=%llu "
                  "writes_verified=%llu ams_verified=%llu "
                  "controls_verified=%llu corrupt=%llu",
                  static_cast<unsigned long long>(m_ok),
                  static_cast<unsigned long long>(m_failed),
                  static_cast<unsigned long long>(m_failed_gone),
                  static_cast<unsigned long long>(m_failed_flushed),
                  static_cast<unsigned long long>(m_failed_retries),
                  static_cast<unsigned long long>(m_failed_other),
                  static_cast<unsigned long long>(m_writes),
                  static_cast<unsigned long long>(m_ams),
                  static_cast<unsigned long long>(m_controls),
                  static_cast<unsigned long long>(m_bad));
    return line;
}

void runner::tick()
{
    const auto now = clock_type::now();
    if (now - m_last_scan > seconds(1)) {
        scan_cards();
    }
    for (uint32_t id = 0; id < m_o.clients; ++id) {
        dest &d = m_dests[id];
        if (id == m_o.id || !d.known || d.alive || now < d.retry_at) {
            continue;
        }
        if (d.gone) {
            d.retry_at = now + milliseconds(500); /* until a new card */
            continue;
        }
        /* its agent was given up, or its op failed as gone before the
         * notice: ask our agent for the peer again */
        d.peer       = peer_of(d.c.agent, true);
        d.alive      = true;
        d.last_heard = now;
    }
    if (now - m_last_progress > seconds(5)) {
        m_last_progress = now;
        std::printf("progress id=%u inc=%u t=%llds %s\n", m_o.id,
                    m_o.incarnation,
                    static_cast<long long>(
                            std::chrono::duration_cast<seconds>(now - m_start)
                                    .count()),
                    counts().c_str());
        std::fflush(stdout);
    }
}

void runner::pump()
{
    if (m_running) {
        post_work();
    }
    const size_t n = poll();
    const bool got = inbound();
    tick();
    if (n == 0 && !got) {
        m_s.wait(milliseconds(5));
    }
}

} // namespace rvt::test::chaos
