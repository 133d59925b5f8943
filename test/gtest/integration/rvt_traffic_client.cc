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
 *   rvt_traffic_client --chaos --dir=DIR --id=ID --clients=N --until=EPOCH
 *       [--incarnation=INC] [--size=BYTES] [--window=S]
 *
 * --chaos: the chaos run (test/testbed/chaos-guest.sh), where peers are
 * killed and restarted, links go down and processes are stopped at
 * random. It sends rounds to every other client until DIR/stop exists
 * (the driver's word, looked for every second) or at the latest until
 * EPOCH (Unix seconds), tolerating all of that, and verifies everything
 * that arrives; "Chaos mode" below says how. The process started as ID's replacement
 * has a higher INC (the driver counts); it publishes DIR/card.ID.INC.
 * Exit 0 and a "CHAOS ..." summary line when nothing was corrupt, lost,
 * duplicated or left without a completion; else 1.
 */
#include "uct/ib/rvt/client/session.h"
#include "uct/ib/rvt/common/imm.h"

#include "node_session.h"
#include "write_damage.h"

#include <infiniband/verbs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
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
    /* --chaos */
    bool chaos           = false;
    int64_t until        = 0; /* Unix seconds */
    uint32_t incarnation = 0;
    uint32_t window      = 4;
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
        } else if (name == "--chaos") {
            o.chaos = true;
        } else if (name == "--until") {
            o.until = parse_u32(val, "until");
        } else if (name == "--incarnation") {
            o.incarnation = parse_u32(val, "incarnation");
        } else if (name == "--window") {
            o.window = parse_u32(val, "window");
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
    /* chaos: each write's length names its slot and its sender's
     * incarnation's parity (64 bytes less a step), and the shortest still
     * holds the slot's header */
    if (o.chaos && (o.until == 0 || o.window < 1 || o.window > 64 ||
                    o.size < 64 * (2 * o.window + 1))) {
        die("--chaos needs --until=EPOCH, 1 <= --window <= 64 and --size "
            ">= 64 x (2 x window + 1)");
    }
    return o;
}

/*
 * Chaos mode (--chaos). Every process sends rounds to every other client
 * until the deadline; a round to a destination is an RDMA WRITE WITH IMM
 * into one of the S (--window) slots the destination keeps for this
 * sender (two sets: for its odd and its even incarnations, so that a
 * killed process's last writes never land where its replacement writes),
 * then an active message naming the round. Meanwhile peers die and are
 * replaced, links go down and processes are stopped, so:
 *
 *   - Every arrival is verified on its own. A write's length names its
 *     slot and the parity of its sender's incarnation (--size less 64
 *     bytes per slot number, and per window if odd), and the slot starts
 *     with a header (source, destination, both incarnations, round)
 *     followed by bytes computed from all of those; an AM carries the
 *     same fields and a fill computed from them. The sender the agent
 *     reports (its peer and the sender's client index there, the write's
 *     immediate) must be the one the header names, the round must belong
 *     to the slot, and one sender's rounds must increase. Any mismatch is
 *     a corrupt or misdirected arrival: printed at once ("client: BAD
 *     ARRIVAL: ...") and counted.
 *   - A slot is written again only once its destination is done with it:
 *     the destination acknowledges each round's AM (an `ack` AM back),
 *     which it reads after that round's write (one endpoint: RC order), so
 *     by then every write notice up to that round has been checked or will
 *     never come. A sender whose S slots all wait asks with a `ping` after
 *     a second without an ack. So a slot is never checked while the next
 *     round overwrites it.
 *   - Every op completes, ok or failed; failures are counted by kind
 *     (destination gone, flushed, retries exceeded, other) and never
 *     retried. A destination reported gone (client_gone) is left alone
 *     until its card changes (its replacement's DIR/card.ID.INC, higher
 *     INC); one whose node's agent was given up (peer_failed) is asked for
 *     again after 0.5 s. Cards are read again every second.
 *   - At the deadline it stops sending and waits for every op's
 *     completion (one still missing after 60 s is a hang:
 *     "never_completed"); then it sends each destination a `fin` AM
 *     saying what it posted to it and what completed ok, and waits for
 *     every other client's fin. A fin travels behind all of its sender's
 *     writes and AMs to us, so then all that will ever arrive from it has:
 *     every op that completed ok at its sender must have been verified
 *     here (else "lost"), and no more than it posted (else "duplicate").
 *
 * Every wait is bounded: the other clients' first cards (120 s), the
 * drain (60 s), the fins (60 s); the agent's connect_peer (20 s, longer
 * than any stop the driver makes: an earlier timeout would leave its
 * answer on the socket for the next request). A progress line every 5 s,
 * then one summary line, "CHAOS id=.. inc=.. ops_ok=.. ..." (key=value,
 * for chaos-guest.sh).
 */
namespace chaos {

using std::chrono::milliseconds;
using std::chrono::seconds;

/* What each chaos client publishes, as DIR/card.ID.INC. */
struct card {
    wire::agent_address agent;
    uint32_t client_index;
    uint32_t client_generation; /* imm.h */
    uint64_t addr; /* the receive area */
    uint32_t rkey;
    uint32_t id;
    uint32_t incarnation;
    uint32_t pid;
};

/* The first bytes of every write: who wrote it, to whom, which round. */
struct slot_header {
    uint32_t magic;
    uint32_t src;
    uint32_t dst;
    uint32_t src_inc;
    uint32_t dst_inc;
    uint32_t reserved;
    uint64_t round;
};
static_assert(sizeof(slot_header) == 32);
constexpr uint32_t slot_magic  = 0x53534843; /* "CHSS" */
constexpr uint32_t length_step = 64;

enum class kind : uint32_t {
    write = 0,
    data  = 1,
    ping  = 2,
    ack   = 3,
    fin   = 4
};
const char *name_of(kind k)
{
    switch (k) {
    case kind::write:
        return "write";
    case kind::data:
        return "data AM";
    case kind::ping:
        return "ping";
    case kind::ack:
        return "ack";
    case kind::fin:
        return "fin";
    }
    return "?";
}

/* An AM, sent inline (it fits the work-data slot). */
struct message {
    uint32_t magic;
    uint32_t type; /* kind, not write */
    uint32_t src;
    uint32_t dst;
    uint32_t src_inc;
    uint32_t dst_inc;
    uint64_t round; /* data, ping, ack */
    /* fin: the sender's ops to this incarnation of the destination */
    uint64_t posted_writes;
    uint64_t ok_writes;
    uint64_t posted_ams;
    uint64_t ok_ams;
    uint8_t fill[24];
};
static_assert(sizeof(message) == 88);
constexpr uint32_t message_magic = 0x4d414843; /* "CHAM" */
constexpr uint8_t message_am_id  = 10;

uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The seed of a write's body or an AM's fill: everything that names it. */
uint64_t seed_of(uint32_t src, uint32_t dst, uint32_t src_inc, uint32_t dst_inc,
                 uint64_t round, kind what)
{
    return mix(mix(mix((uint64_t{src} << 32) | dst) ^
                   ((uint64_t{src_inc} << 32) | dst_inc)) ^
               round ^ (static_cast<uint64_t>(what) << 56));
}

uint8_t byte_of(uint64_t seed, size_t k)
{
    return static_cast<uint8_t>((seed >> ((k & 7) * 8)) + k * 13 + (k >> 8));
}

void fill_message(message &m)
{
    const uint64_t seed = seed_of(m.src, m.dst, m.src_inc, m.dst_inc, m.round,
                                  static_cast<kind>(m.type));
    for (size_t k = 0; k < sizeof(m.fill); ++k) {
        m.fill[k] = byte_of(seed, k);
    }
}

/* Another client as a destination of ours. */
struct dest {
    bool known = false; /* a card has been read */
    card c{};
    uint32_t peer = 0; /* its agent, as ours numbers it */
    bool alive    = false; /* we send to it */
    bool gone     = false; /* its agent said it left (client_gone) */
    clock_type::time_point retry_at{}; /* when not alive: look again */
    uint64_t next_round = 0;
    int64_t acked       = -1; /* the highest round it acknowledged */
    bool am_pending     = false; /* round next_round - 1's AM unposted */
    bool ping_in_flight = false;
    clock_type::time_point last_heard{}, last_ping{};
    /* ops to this incarnation of it, for our fin */
    uint64_t posted_writes = 0, ok_writes = 0, posted_ams = 0, ok_ams = 0;
    /* the ack we owe it */
    uint64_t ack_round = 0;
    bool ack_due = false, ack_in_flight = false;
    /* our send slots towards it (any incarnation): a write from it is in
     * flight */
    std::vector<bool> slot_busy;
};

/* What arrived from one incarnation of another client. */
struct source {
    int64_t last_write = -1, last_am = -1;
    uint64_t writes = 0, ams = 0;
    bool fin = false;
    message fin_msg{};
};

struct op_record {
    uint32_t dst;
    uint32_t dst_inc;
    kind what;
    uint32_t slot;
};

using id_inc = std::pair<uint32_t, uint32_t>;

class runner {
public:
    runner(const options &o, client::session &s) : m_o(o), m_s(s)
    {
    }
    int run();

private:
    void publish_card();
    void scan_cards();
    uint32_t peer_of(const wire::agent_address &a, bool fresh = false);
    void switch_dest(uint32_t id, const card &c);
    void post_work();
    bool post_write(uint32_t id);
    bool post_message(uint32_t id, kind what, uint64_t round);
    size_t poll();
    bool inbound();
    void check_write(const inbound_message &m);
    std::string
    check_slot(uint32_t src, uint32_t src_inc, uint32_t slot, uint32_t length);
    void check_am(const client::inbound_view &v);
    void bad(const std::string &why);
    void tick();
    /* one pass: post (while running), completions, arrivals, timers */
    void pump();
    std::string counts() const;

    uint8_t *recv_slot(uint32_t src, uint32_t src_inc, uint32_t slot)
    {
        return m_recv.data() +
               ((size_t{src} * 2 + src_inc % 2) * m_o.window + slot) * m_o.size;
    }
    uint8_t *send_slot(uint32_t dst, uint32_t slot)
    {
        return m_send.data() + (size_t{dst} * m_o.window + slot) * m_o.size;
    }
    /* a write's length: --size less a step per slot, and per window for
     * an odd incarnation of its sender ("Chaos mode") */
    uint32_t length_of(uint64_t round, uint32_t src_inc) const
    {
        return m_o.size -
               length_step * static_cast<uint32_t>(round % m_o.window +
                                                   src_inc % 2 * m_o.window);
    }

    const options &m_o;
    client::session &m_s;
    std::vector<uint8_t> m_recv, m_send;
    client::memory_region m_recv_mr{}, m_send_mr{};
    uint8_t m_generation = 0;
    bool m_running       = true;

    std::map<id_inc, card> m_cards;
    std::set<std::string> m_card_files;
    std::map<uint32_t, uint32_t> m_latest; /* id -> highest incarnation */
    /* (peer, client index) -> the cards that had it */
    std::map<std::pair<uint32_t, uint32_t>, std::vector<id_inc>> m_routes;
    std::map<uint64_t, uint32_t> m_peers; /* agent id -> peer index */
    std::vector<dest> m_dests;
    std::map<id_inc, source> m_sources;
    std::map<uint64_t, op_record> m_in_flight;
    uint64_t m_next_wr = 1;
    size_t m_rotate    = 0;

    /* figures */
    uint64_t m_ok = 0, m_failed = 0, m_failed_gone = 0, m_failed_flushed = 0,
             m_failed_retries = 0, m_failed_other = 0;
    uint64_t m_writes = 0, m_ams = 0, m_controls = 0, m_bad = 0;
    uint64_t m_gone_notices = 0, m_peer_failures = 0, m_restarts = 0;
    clock_type::time_point m_last_scan{}, m_last_progress{}, m_start{};
};

void runner::bad(const std::string &why)
{
    ++m_bad;
    std::fprintf(stderr, "client: BAD ARRIVAL: %s\n", why.c_str());
    std::fflush(stderr);
}

void runner::publish_card()
{
    card mine{m_s.agent_address(),
              m_s.client_index(),
              m_s.attached().client_generation,
              reinterpret_cast<uint64_t>(m_recv.data()),
              m_recv_mr.rkey,
              m_o.id,
              m_o.incarnation,
              static_cast<uint32_t>(getpid())};
    const std::string name = "card." + std::to_string(m_o.id) + "." +
                             std::to_string(m_o.incarnation);
    std::string tmp = m_o.dir + "/." + name;
    std::ofstream out(tmp, std::ios::binary);
    out.write(reinterpret_cast<const char *>(&mine), sizeof(mine));
    out.close();
    if (!out || rename(tmp.c_str(), (m_o.dir + "/" + name).c_str()) != 0) {
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
        std::ifstream in(m_o.dir + "/" + name, std::ios::binary);
        if (!in || !in.read(reinterpret_cast<char *>(&c), sizeof(c)) ||
            c.id != key.first || c.incarnation != key.second) {
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
    work_request w{};
    w.wr_id          = m_next_wr;
    w.op             = static_cast<uint8_t>(work_op::rdma_write_imm);
    w.flags          = work_signaled;
    w.peer           = d.peer;
    w.dst_client     = d.c.client_index;
    w.dst_generation = static_cast<uint8_t>(d.c.client_generation);
    w.length         = len;
    w.local_addr     = reinterpret_cast<uint64_t>(src);
    w.lkey           = m_send_mr.lkey;
    w.rkey           = d.c.rkey;
    w.remote_addr    = d.c.addr +
                    ((size_t{m_o.id} * 2 + m_o.incarnation % 2) * m_o.window +
                     slot) * m_o.size;
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
    work_request a{};
    a.wr_id          = m_next_wr;
    a.op             = static_cast<uint8_t>(work_op::send_am);
    a.flags          = work_signaled;
    a.am_id          = message_am_id;
    a.peer           = d.peer;
    a.dst_client     = d.c.client_index;
    a.dst_generation = static_cast<uint8_t>(d.c.client_generation);
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

/* Whether slot `slot` holds a write of `length` bytes from (src,
 * src_inc) to us that we have not seen yet, every byte right: "" if so
 * (and it is counted), else what is wrong. */
std::string runner::check_slot(uint32_t src, uint32_t src_inc, uint32_t slot,
                               uint32_t length)
{
    const uint8_t *p = recv_slot(src, src_inc, slot);
    slot_header h{};
    std::memcpy(&h, p, sizeof(h));
    const std::string what = "write from client " + std::to_string(src) + "." +
                             std::to_string(src_inc) + " round " +
                             std::to_string(h.round) + " slot " +
                             std::to_string(slot);
    if (h.magic != slot_magic || h.src != src || h.src_inc != src_inc) {
        return what + ": the slot holds no write of that client";
    }
    source &s = m_sources[{src, src_inc}];
    if (h.dst != m_o.id || h.dst_inc != m_o.incarnation || h.reserved != 0 ||
        h.round % m_o.window != slot || length_of(h.round, src_inc) != length) {
        return what + ": header names client " + std::to_string(h.dst) + "." +
               std::to_string(h.dst_inc) + ", " + std::to_string(length) +
               " bytes";
    }
    if (static_cast<int64_t>(h.round) <= s.last_write) {
        return what + ": after round " + std::to_string(s.last_write);
    }
    const uint64_t seed = seed_of(src, m_o.id, src_inc, m_o.incarnation,
                                  h.round, kind::write);
    for (size_t k = sizeof(h); k < length; ++k) {
        if (p[k] != byte_of(seed, k)) {
            /* byte k of round r's write from this source, header included */
            auto expected = [&](uint64_t r, size_t at) -> uint8_t {
                if (at >= sizeof(slot_header)) {
                    return byte_of(seed_of(src, m_o.id, src_inc,
                                           m_o.incarnation, r, kind::write),
                                   at);
                }
                slot_header hr = h;
                hr.round       = r;
                uint8_t bytes[sizeof(hr)];
                std::memcpy(bytes, &hr, sizeof(hr));
                return bytes[at];
            };
            return what + ": byte " + std::to_string(k) + " is wrong (" +
                   rvt::test::damage_of(p, length, k, h.round, m_o.window,
                                        expected) +
                   ")";
        }
    }
    s.last_write = static_cast<int64_t>(h.round);
    ++s.writes;
    ++m_writes;
    return "";
}

void runner::check_write(const inbound_message &m)
{
    auto d = imm::decode(m.imm);
    if (!d || d->what != imm::kind::write ||
        d->dst_client != m_s.client_index() || d->src_client != m.src_client ||
        d->generation != m_generation) {
        bad("write with immediate 0x" + std::to_string(m.imm) + " from peer " +
            std::to_string(m.peer) + " client " + std::to_string(m.src_client) +
            " is not for us");
        return;
    }
    const uint32_t step = m_o.size - m.length;
    if (m.length > m_o.size || step % length_step != 0 ||
        step / length_step >= 2 * m_o.window) {
        bad("write of " + std::to_string(m.length) + " bytes names no slot");
        return;
    }
    const uint32_t slot   = step / length_step % m_o.window;
    const uint32_t parity = step / length_step / m_o.window;
    /* The sender the agent names (its peer, the sender's index there): the
     * processes whose cards had that route and whose incarnation has the
     * parity the length says (a client index is reused: by a dead
     * process's replacement too, while a write of the dead one may still
     * wait to be read), the latest first. When none of them wrote the
     * slot, the sender may be a process whose card we have not read yet:
     * read the cards again, then judge. */
    std::string why;
    for (int pass = 0; pass < 2; ++pass) {
        auto r = m_routes.find({m.peer, m.src_client});
        if (r != m_routes.end()) {
            for (auto it = r->second.rbegin(); it != r->second.rend(); ++it) {
                if (it->second % 2 != parity) {
                    continue;
                }
                std::string e = check_slot(it->first, it->second, slot,
                                           m.length);
                if (e.empty()) {
                    return;
                }
                why += (why.empty() ? "" : "; ") + e;
            }
        }
        if (pass == 0) {
            scan_cards();
            why.clear();
        }
    }
    bad("write of " + std::to_string(m.length) + " bytes from peer " +
        std::to_string(m.peer) + " client " + std::to_string(m.src_client) +
        (why.empty() ? ": no card names that sender" : ": " + why));
}

void runner::check_am(const client::inbound_view &v)
{
    auto d = imm::decode(v.msg.imm);
    message m{};
    if (!d || d->what != imm::kind::am || d->am_id != message_am_id ||
        v.msg.am_id != message_am_id || d->dst_client != m_s.client_index() ||
        d->generation != m_generation || v.data.size() != sizeof(m)) {
        bad("AM with immediate " + std::to_string(v.msg.imm) + ", id " +
            std::to_string(v.msg.am_id) + ", " + std::to_string(v.data.size()) +
            " bytes is not ours");
        return;
    }
    std::memcpy(&m, v.data.data(), sizeof(m));
    const auto what = static_cast<kind>(m.type);
    if (m.magic != message_magic || m.type < 1 || m.type > 4 ||
        m.src >= m_o.clients || m.dst != m_o.id ||
        m.dst_inc != m_o.incarnation) {
        bad("AM for client " + std::to_string(m.dst) + "." +
            std::to_string(m.dst_inc) + " (magic " + std::to_string(m.magic) +
            ", type " + std::to_string(m.type) + ")");
        return;
    }
    const std::string name = std::string(name_of(what)) + " from client " +
                             std::to_string(m.src) + "." +
                             std::to_string(m.src_inc) + " round " +
                             std::to_string(m.round);
    message expect = m;
    fill_message(expect);
    if (std::memcmp(expect.fill, m.fill, sizeof(m.fill)) != 0) {
        bad(name + ": fill is wrong");
        return;
    }
    /* it came from that client's agent */
    if (!m_cards.count({m.src, m.src_inc})) {
        scan_cards();
    }
    auto c = m_cards.find({m.src, m.src_inc});
    if (c == m_cards.end() || peer_of(c->second.agent) != v.msg.peer) {
        bad(name + ": arrived from peer " + std::to_string(v.msg.peer) +
            (c == m_cards.end() ? ", no such client" : ", not its agent"));
        return;
    }
    source &s           = m_sources[{m.src, m.src_inc}];
    dest &from          = m_dests[m.src];
    const bool same_inc = from.known && from.c.incarnation == m.src_inc;
    if (what == kind::data) {
        if (static_cast<int64_t>(m.round) <= s.last_am) {
            bad(name + ": after round " + std::to_string(s.last_am));
            return;
        }
        s.last_am = static_cast<int64_t>(m.round);
        ++s.ams;
        ++m_ams;
    } else {
        ++m_controls;
    }
    switch (what) {
    case kind::data:
    case kind::ping:
        if (same_inc && m_running) {
            from.ack_round = std::max(from.ack_round, m.round);
            from.ack_due   = true;
        }
        break;
    case kind::ack:
        if (same_inc) {
            from.acked = std::max(from.acked, static_cast<int64_t>(m.round));
            from.last_heard = clock_type::now();
        }
        break;
    case kind::fin:
        if (s.fin) {
            bad(name + ": a second fin");
            return;
        }
        s.fin     = true;
        s.fin_msg = m;
        break;
    case kind::write:
        break;
    }
}

bool runner::inbound()
{
    client::inbound_view v;
    bool got = false;
    while (m_s.peek_inbound(v)) {
        got             = true;
        const auto kind = static_cast<inbound_kind>(v.msg.kind);
        if (kind == inbound_kind::write) {
            check_write(v.msg);
        } else if (kind == inbound_kind::am) {
            check_am(v);
        } else if (kind == inbound_kind::client_gone) {
            ++m_gone_notices;
            for (auto &d : m_dests) {
                if (d.known && d.peer == v.msg.peer &&
                    d.c.client_index == v.msg.src_client &&
                    static_cast<uint8_t>(d.c.client_generation) ==
                            v.msg.generation) {
                    d.gone     = true;
                    d.alive    = false;
                    d.retry_at = clock_type::now() + milliseconds(500);
                }
            }
        } else if (kind == inbound_kind::peer_failed) {
            ++m_peer_failures;
            std::fprintf(stderr, "client: our agent gave peer %u up\n",
                         v.msg.peer);
            for (auto &d : m_dests) {
                if (d.known && d.peer == v.msg.peer && d.alive) {
                    d.alive    = false;
                    d.retry_at = clock_type::now() + milliseconds(500);
                }
            }
        } else {
            bad("inbound entry of kind " + std::to_string(v.msg.kind));
        }
        m_s.release_inbound();
    }
    if (!m_s.healthy()) {
        die("the agent's rings are corrupt");
    }
    return got;
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

int runner::run()
{
    m_start         = clock_type::now();
    m_last_progress = m_start;
    m_generation    = m_s.attached().client_generation;
    m_s.set_write_notices(true); /* writes are checked from their notices */
    const size_t slots = size_t{m_o.clients} * m_o.window * m_o.size;
    m_recv.assign(slots * 2, 0);
    m_send.assign(slots, 0);
    const int flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                      IBV_ACCESS_REMOTE_READ;
    auto rmr = m_s.register_memory(m_recv.data(), m_recv.size(), flags);
    auto smr = m_s.register_memory(m_send.data(), m_send.size(), flags);
    if (!rmr || !smr) {
        die(!rmr ? rmr.error() : smr.error());
    }
    m_recv_mr = rmr.value();
    m_send_mr = smr.value();
    m_dests.resize(m_o.clients);
    for (auto &d : m_dests) {
        d.slot_busy.assign(m_o.window, false);
    }
    publish_card();

    /* the deadline, a wall-clock time (replacements start late), on the
     * steady clock */
    const auto until =
            m_start +
            milliseconds(
                    m_o.until * 1000 -
                    std::chrono::duration_cast<milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count());
    /* everyone's first card */
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

    /* until the deadline, or the driver's stop */
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
    /* drain: every op gets its completion */
    m_running    = false;
    auto bound   = clock_type::now() + seconds(60);
    auto drained = [&] { return m_in_flight.empty(); };
    while (!drained() && clock_type::now() < bound) {
        pump();
    }
    uint64_t never_completed = m_in_flight.size();
    /* fins to every destination we still send to */
    uint64_t fins_sent = 0, fins_failed_before = m_failed;
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
    bound = clock_type::now() + seconds(60);
    while (!drained() && clock_type::now() < bound) {
        pump();
    }
    never_completed += m_in_flight.size();
    const uint64_t fins_failed = m_failed - fins_failed_before;
    /* every other client's fin (its latest incarnation's) */
    auto fins_in = [&] {
        uint64_t missing = 0;
        for (const auto &[id, inc] : m_latest) {
            if (id != m_o.id && !m_sources[{id, inc}].fin) {
                ++missing;
            }
        }
        return missing;
    };
    bound = clock_type::now() + seconds(60);
    while (fins_in() != 0 && clock_type::now() < bound) {
        pump();
    }
    /* what each fin says against what was verified here */
    uint64_t pairs = 0, lost = 0, duplicate = 0;
    for (const auto &[key, s] : m_sources) {
        if (!s.fin) {
            continue;
        }
        ++pairs;
        const message &f      = s.fin_msg;
        const std::string who = "client " + std::to_string(key.first) + "." +
                                std::to_string(key.second) + ": ";
        if (s.writes < f.ok_writes || s.ams < f.ok_ams) {
            ++lost;
            std::fprintf(stderr,
                         "client: LOST: %s%llu writes and %llu AMs completed "
                         "ok at their sender, %llu and %llu arrived\n",
                         who.c_str(),
                         static_cast<unsigned long long>(f.ok_writes),
                         static_cast<unsigned long long>(f.ok_ams),
                         static_cast<unsigned long long>(s.writes),
                         static_cast<unsigned long long>(s.ams));
        }
        if (s.writes > f.posted_writes || s.ams > f.posted_ams) {
            ++duplicate;
            std::fprintf(stderr,
                         "client: DUPLICATE: %s%llu writes and %llu AMs "
                         "posted, %llu and %llu arrived\n",
                         who.c_str(),
                         static_cast<unsigned long long>(f.posted_writes),
                         static_cast<unsigned long long>(f.posted_ams),
                         static_cast<unsigned long long>(s.writes),
                         static_cast<unsigned long long>(s.ams));
        }
    }
    const uint64_t missing = fins_in();
    std::printf("CHAOS id=%u inc=%u index=%u pid=%d %s gone_notices=%llu "
                "peer_failures=%llu restarts_seen=%llu never_completed=%llu "
                "fins_sent=%llu fins_failed=%llu fins_missing=%llu "
                "pairs_checked=%llu lost=%llu duplicate=%llu\n",
                m_o.id, m_o.incarnation, m_s.client_index(),
                static_cast<int>(getpid()), counts().c_str(),
                static_cast<unsigned long long>(m_gone_notices),
                static_cast<unsigned long long>(m_peer_failures),
                static_cast<unsigned long long>(m_restarts),
                static_cast<unsigned long long>(never_completed),
                static_cast<unsigned long long>(fins_sent),
                static_cast<unsigned long long>(fins_failed),
                static_cast<unsigned long long>(missing),
                static_cast<unsigned long long>(pairs),
                static_cast<unsigned long long>(lost),
                static_cast<unsigned long long>(duplicate));
    std::fflush(stdout);
    if (m_bad || lost || duplicate || never_completed || missing ||
        fins_failed) {
        std::fprintf(stderr,
                     "client: FAILED: %llu bad arrivals, %llu pairs lost, "
                     "%llu duplicated, %llu ops never completed, %llu fins "
                     "missing, %llu failed\n",
                     static_cast<unsigned long long>(m_bad),
                     static_cast<unsigned long long>(lost),
                     static_cast<unsigned long long>(duplicate),
                     static_cast<unsigned long long>(never_completed),
                     static_cast<unsigned long long>(missing),
                     static_cast<unsigned long long>(fins_failed));
        return 1;
    }
    return 0;
}

} // namespace chaos

} // namespace

int main(int argc, char **argv)
{
    const options o = parse(argc, argv);
    auto opened     = test::open_node_session();
    if (!opened) {
        die(opened.error());
    }
    client::session &s = *opened.value();
    if (o.chaos) {
        return chaos::runner(o, s).run();
    }
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
