/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvt-check: whether this node's RDMA device can serve rvt, before any
 * job runs. Each need is answered yes or no, with the reason:
 *
 *   auth          how an agent started here would prove its peers, as
 *                 rvtd --auth=auto chooses (agent/peers/peer_auth.h): munge
 *                 when munged answers, else the job's secret
 *                 ($RVT_JOB_SECRET_FILE, $RVT_JOB_SECRET), else no: the
 *                 refusal rvtd would start with, and its reason
 *
 *   On the device, opened as the agent opens it (agent/device/device.h):
 *     device        it exists and opens
 *     transport     the InfiniBand transport (InfiniBand or RoCE); iWARP
 *                   has no UD QPs and no immediate data
 *     port          active, Ethernet link layer (RoCE), its MTU
 *     gid           the GID the agent would use, and its index
 *     registration  which path a client process takes into the agent's
 *                   protection domain: the provider's import of the
 *                   agent's PD, or REG_MR through the uverbs ioctl on the
 *                   agent's command fd
 *     rc_qp         an RC QP as the agent makes them; the inline bytes
 *                   the device gives it (fewer than the work ring's slot:
 *                   the agent stages short payloads in its own memory)
 *     ud_qp         the UD QP of the agents' handshake
 *     atomics       64-bit fetch-add and compare-and-swap in hardware
 *                   (else UCX's atomics over rvt are unsupported)
 *
 *   Through a real agent: rvtd started as a job's first process starts
 *   it (client/launch.h), for a job key of this check's own, with this
 *   process as its client, the second process in the agent's PD:
 *     agent         it starts and attaches this process
 *     register      1 MiB of this process's memory registered into the
 *                   agent's PD by the path above, checked and accepted by
 *                   the agent against what the device says of the MR
 *     write_imm     an RDMA WRITE WITH IMMEDIATE of 64 KiB to itself over
 *                   the node's own shared RC QPs: the bytes and the
 *                   immediate's notice checked
 *     atomic        a fetch-add over them, the fetched and the new value
 *                   checked (where the device does atomics)
 *
 *   With another node (--listen=PORT on one, --peer=HOST:PORT on the
 *   other, both with the job key rvt-check.peer.PORT so that the two
 *   agents take each other as peers of one job):
 *     peer          the two processes swap their agents' addresses and a
 *                   buffer each over TCP, and this agent connects to the
 *                   other's
 *     peer_write    64 KiB written by RDMA WRITE WITH IMMEDIATE into the
 *                   other process's buffer, over the shared RC QPs: the
 *                   other side says whether every byte arrived
 *     peer_receive  the other side's 64 KiB, here: every byte checked and
 *                   the immediate's notice naming the other process
 *
 * Text, or one JSON object with --json. Exit status 0 when every check
 * says yes, 1 when one says no, 2 on a bad option.
 */
#include "uct/ib/rvt/agent/attach/locate.h"
#include "uct/ib/rvt/agent/device/device.h"
#include "uct/ib/rvt/agent/device/nic.h"
#include "uct/ib/rvt/agent/device/rc_qp.h"
#include "uct/ib/rvt/agent/device/ud_channel.h"
#include "uct/ib/rvt/agent/peers/peer_auth.h"
#include "uct/ib/rvt/client/launch.h"
#include "uct/ib/rvt/client/session.h"
#include "uct/ib/rvt/common/imm.h"
#include "uct/ib/rvt/common/shm_layout.h"
#include "uct/ib/rvt/common/status_json.h"
#include "uct/ib/rvt/common/unique_fd.h"
#include "uct/ib/rvt/tools/usage.h"

#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace rvt;
using namespace std::chrono_literals;

struct options {
    bool json = false;
    std::string device, rvtd;
    long port      = 1;
    long gid_index = -1;
    long listen    = 0; /* TCP port: wait for a --peer check */
    std::string peer; /* --peer as given: HOST:PORT of a --listen check */
    std::string peer_host; /* its two parts, set when it parses */
    long peer_tcp_port = 0;
    long peer_wait     = 60; /* seconds for the other side to come */
    std::string munge_socket; /* empty: MUNGE's default, as rvtd's */
};

/* The TCP port of the peer check, 0 without one. */
long peer_port(const options &o)
{
    return o.listen != 0 ? o.listen : o.peer_tcp_port;
}

/* One answer. */
struct check {
    std::string name;
    bool ok;
    std::string detail;
};

class report {
public:
    void add(std::string name, bool ok, std::string detail)
    {
        m_checks.push_back({std::move(name), ok, std::move(detail)});
    }
    bool ok() const
    {
        for (const check &c : m_checks) {
            if (!c.ok) {
                return false;
            }
        }
        return !m_checks.empty();
    }
    void print_text(const std::string &device) const
    {
        std::printf("rvt-check: device %s\n",
                    device.empty() ? "(none)" : device.c_str());
        for (const check &c : m_checks) {
            std::printf("  %-3s  %-13s %s\n", c.ok ? "yes" : "no",
                        c.name.c_str(), c.detail.c_str());
        }
        std::printf("%s\n", ok() ? "rvt can serve this device" :
                                   "rvt cannot serve this device: see the "
                                   "checks that say no");
    }
    void print_json(const std::string &device) const
    {
        nlohmann::ordered_json j;
        j["device"] = device;
        j["ok"]     = ok();
        j["checks"] = nlohmann::ordered_json::array();
        for (const check &c : m_checks) {
            j["checks"].push_back(
                    {{"name", c.name}, {"ok", c.ok}, {"detail", c.detail}});
        }
        std::printf("%s\n", status_json_text(j).c_str());
    }

private:
    std::vector<check> m_checks;
};

std::string gid_text(const ibv_gid &g)
{
    char text[64];
    std::snprintf(text, sizeof(text),
                  "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:"
                  "%02x%02x:%02x%02x",
                  g.raw[0], g.raw[1], g.raw[2], g.raw[3], g.raw[4], g.raw[5],
                  g.raw[6], g.raw[7], g.raw[8], g.raw[9], g.raw[10], g.raw[11],
                  g.raw[12], g.raw[13], g.raw[14], g.raw[15]);
    return text;
}

/* The transport and port, asked before the agent's own open, so that each
 * gets its own answer; false when nothing after them can work. */
bool check_port(report &r, const std::string &name, uint8_t port)
{
    int n             = 0;
    ibv_device **list = ibv_get_device_list(&n);
    ibv_context *ctx  = nullptr;
    std::string names;
    for (int i = 0; list != nullptr && i < n; ++i) {
        names += std::string(names.empty() ? "" : ", ") +
                 ibv_get_device_name(list[i]);
        if (name == ibv_get_device_name(list[i])) {
            ctx = ibv_open_device(list[i]);
        }
    }
    if (list != nullptr) {
        ibv_free_device_list(list);
    }
    if (ctx == nullptr) {
        r.add("device", false,
              name.empty() ? "no RDMA device on this node" :
                             name + " does not open (devices here: " +
                                     (names.empty() ? "none" : names) + ")");
        return false;
    }
    verbs::context_ptr owner(ctx);
    r.add("device", true, name + " opens");
    const auto transport = agent::check_transport(ctx->device->transport_type);
    r.add("transport", static_cast<bool>(transport),
          transport ? "InfiniBand transport (RC with immediate data, UD)" :
                      transport.error());
    if (!transport) {
        return false;
    }
    ibv_port_attr pattr{};
    if (ibv_query_port(ctx, port, &pattr) != 0) {
        r.add("port", false,
              "port " + std::to_string(port) +
                      ": ibv_query_port failed: " + std::strerror(errno));
        return false;
    }
    const bool active = pattr.state == IBV_PORT_ACTIVE;
    const bool roce   = pattr.link_layer == IBV_LINK_LAYER_ETHERNET;
    r.add("port", active && roce,
          "port " + std::to_string(port) + " " +
                  ibv_port_state_str(pattr.state) +
                  (roce ? ", Ethernet (RoCE)" :
                          ", InfiniBand link layer: rvt addresses agents by "
                          "GID alone (RoCE); InfiniBand ports are not "
                          "supported yet") +
                  ", active MTU " +
                  std::to_string(128u
                                 << static_cast<unsigned>(pattr.active_mtu)));
    return active && roce;
}

/* The QPs the agent makes, on the device the agent opened. */
void check_qps(report &r, const agent::device &dev)
{
    verbs::cq_ptr cq(ibv_create_cq(dev.context(), 16, nullptr, nullptr, 0));
    ibv_srq_init_attr sattr{};
    sattr.attr.max_wr  = 16;
    sattr.attr.max_sge = 1;
    verbs::srq_ptr srq(ibv_create_srq(dev.pd(), &sattr));
    if (!cq || !srq) {
        r.add("rc_qp", false,
              std::string("cannot create the agent's CQ or SRQ: ") +
                      std::strerror(errno));
        return;
    }
    agent::rc_qp_params params;
    params.max_inline   = shm_capacities{}.inline_size;
    uint32_t max_inline = 0;
    auto qp = agent::create_rc_qp(dev, cq.get(), srq.get(), params, max_inline);
    if (!qp) {
        r.add("rc_qp", false, qp.error());
    } else {
        r.add("rc_qp", true,
              std::to_string(max_inline) +
                      " inline bytes (the work ring's "
                      "slot holds " +
                      std::to_string(params.max_inline) +
                      (max_inline >= params.max_inline ?
                               ")" :
                               "; the agent stages the rest in its own "
                               "memory)"));
    }
    auto ud = agent::ud_channel::create(dev, nullptr,
                                        wire::conn::random_qkey());
    r.add("ud_qp", static_cast<bool>(ud),
          ud ? "the handshake's UD QP" : ud.error());
    r.add("atomics", dev.can_atomic(),
          dev.can_atomic() ?
                  "64-bit fetch-add and compare-and-swap" :
                  "the device does no 64-bit RDMA atomics (atomic_cap " +
                          std::to_string(dev.attr().atomic_cap) +
                          ", max_qp_rd_atom " +
                          std::to_string(dev.attr().max_qp_rd_atom) +
                          "): UCX atomics over rvt are unsupported here, "
                          "the rest works");
}

/* A signaled request to client `client` (of `generation`) on `peer`'s
 * node. */
work_request
addressed(work_op op, uint32_t peer, uint32_t client, uint32_t generation)
{
    work_request w{};
    w.op             = static_cast<uint8_t>(op);
    w.flags          = work_signaled;
    w.peer           = peer;
    w.dst_client     = client;
    w.dst_generation = generation;
    return w;
}

/* A request to this process's own client index. */
work_request to_self(const client::session &s, work_op op, uint32_t peer)
{
    return addressed(op, peer, s.client_index(),
                     s.attached().client_generation);
}

/* What came of waiting up to 10 s for the next inbound entry. */
struct write_notice {
    bool noticed; /* an entry arrived (and was released) */
    bool named; /* the notice of a write of `length` by `src_client` */
};

write_notice
await_write_notice(client::session &s, uint32_t src_client, uint32_t length)
{
    client::inbound_view v{};
    const auto budget = std::chrono::steady_clock::now() + 10s;
    bool noticed      = false;
    while (!noticed && std::chrono::steady_clock::now() < budget) {
        noticed = s.peek_inbound(v);
    }
    const bool named = noticed &&
                       v.msg.kind ==
                               static_cast<uint8_t>(inbound_kind::write) &&
                       v.msg.src_client == src_client && v.msg.length == length;
    if (noticed) {
        s.release_inbound();
    }
    return {noticed, named};
}

/* Posts w and waits up to 10 s for its completion; empty when it
 * succeeded, else what happened. */
std::string
post_and_wait(client::session &s, const work_request &w, completion &done)
{
    if (s.post(w) != client::post_status::posted) {
        return "the agent's ring took no request";
    }
    const auto budget = std::chrono::steady_clock::now() + 10s;
    while (s.poll_completions(std::span(&done, 1)) == 0) {
        if (std::chrono::steady_clock::now() > budget) {
            return "no completion in 10 s";
        }
    }
    if (done.status != static_cast<uint32_t>(completion_status::success)) {
        return "completion status " + std::to_string(done.status) +
               ", device status " + std::to_string(done.detail);
    }
    return {};
}

/* ---- the peer check: two nodes, over TCP then RDMA ---------------------- */

constexpr size_t peer_chunk = 64 << 10;

/* What each side tells the other over TCP, in host order (both ends run
 * this program on the same kind of host). */
struct peer_hello {
    char magic[8]; /* "rvtchk1" */
    wire::agent_address agent;
    uint32_t client_index;
    uint32_t client_generation;
    uint64_t addr; /* where the other side writes: peer_chunk bytes */
    uint32_t rkey;
    uint32_t length;
};
constexpr char peer_magic[8] = "rvtchk1";

/* The bytes side `seed` writes: each differs from its neighbours and
 * from the other side's. */
uint8_t pattern(size_t k, uint8_t seed)
{
    return static_cast<uint8_t>(k * 31 + seed);
}

bool send_all(int fd, const void *p, size_t n)
{
    const auto *b = static_cast<const uint8_t *>(p);
    while (n > 0) {
        const ssize_t got = send(fd, b, n, MSG_NOSIGNAL);
        if (got <= 0) {
            return false;
        }
        b += got;
        n -= static_cast<size_t>(got);
    }
    return true;
}

/* Reads n bytes within `wait`; false if the other side closed, failed or
 * took longer. */
bool recv_all(int fd, void *p, size_t n, std::chrono::seconds wait)
{
    auto *b           = static_cast<uint8_t *>(p);
    const auto budget = std::chrono::steady_clock::now() + wait;
    while (n > 0) {
        pollfd pfd{fd, POLLIN, 0};
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                budget - std::chrono::steady_clock::now());
        if (left.count() <= 0 ||
            poll(&pfd, 1, static_cast<int>(left.count())) <= 0) {
            return false;
        }
        const ssize_t got = recv(fd, b, n, 0);
        if (got <= 0) {
            return false;
        }
        b += got;
        n -= static_cast<size_t>(got);
    }
    return true;
}

/* The TCP connection of the peer check: accepted on --listen's port, or
 * made to --peer's, retried until --peer-wait is over (the other side may
 * start later). */
result<unique_fd> peer_socket(const options &o)
{
    const auto budget = std::chrono::steady_clock::now() +
                        std::chrono::seconds(o.peer_wait);
    if (o.listen != 0) {
        unique_fd l(socket(AF_INET6, SOCK_STREAM, 0));
        const int on = 1, off = 0;
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_port   = htons(static_cast<uint16_t>(o.listen));
        a.sin6_addr   = in6addr_any;
        if (!l ||
            setsockopt(l.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) !=
                    0 ||
            setsockopt(l.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) !=
                    0 ||
            bind(l.get(), reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0 ||
            listen(l.get(), 1) != 0) {
            return failure{"listening on TCP port " + std::to_string(o.listen) +
                           ": " + std::strerror(errno)};
        }
        pollfd pfd{l.get(), POLLIN, 0};
        if (poll(&pfd, 1, static_cast<int>(o.peer_wait * 1000)) <= 0) {
            return failure{"no rvt-check --peer came to TCP port " +
                           std::to_string(o.listen) + " in " +
                           std::to_string(o.peer_wait) + " s"};
        }
        unique_fd c(accept(l.get(), nullptr, nullptr));
        if (!c) {
            return failure{std::string("accept: ") + std::strerror(errno)};
        }
        return c;
    }
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *found   = nullptr;
    if (int e = getaddrinfo(o.peer_host.c_str(),
                            std::to_string(o.peer_tcp_port).c_str(), &hints,
                            &found);
        e != 0) {
        return failure{"--peer=" + o.peer + ": " + gai_strerror(e)};
    }
    std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> list(found,
                                                            freeaddrinfo);
    std::string why = "nothing";
    while (std::chrono::steady_clock::now() < budget) {
        for (addrinfo *ai = found; ai != nullptr; ai = ai->ai_next) {
            unique_fd c(socket(ai->ai_family, ai->ai_socktype, 0));
            if (c && connect(c.get(), ai->ai_addr, ai->ai_addrlen) == 0) {
                return c;
            }
            why = std::strerror(errno);
        }
        usleep(200000);
    }
    return failure{"--peer=" + o.peer + ": no rvt-check --listen there in " +
                   std::to_string(o.peer_wait) + " s (last: " + why + ")"};
}

/* The check with another node's rvt-check: `area` is 2 x peer_chunk of
 * this process's registered memory, the first half what we write, the
 * second where the other side writes. */
void check_peer(report &r, const options &o, client::session &s, uint8_t *area,
                uint32_t lkey, uint32_t rkey)
{
    const uint8_t mine = o.listen != 0 ? 1 : 2, theirs = 3 - mine;
    for (size_t k = 0; k < peer_chunk; ++k) {
        area[k] = pattern(k, mine);
    }
    std::memset(area + peer_chunk, 0, peer_chunk);

    auto sock = peer_socket(o);
    if (!sock) {
        r.add("peer", false, sock.error());
        return;
    }
    const int fd = sock.value().get();
    peer_hello me{};
    std::memcpy(me.magic, peer_magic, sizeof(me.magic));
    me.agent             = s.agent_address();
    me.client_index      = s.client_index();
    me.client_generation = s.attached().client_generation;
    me.addr              = reinterpret_cast<uintptr_t>(area + peer_chunk);
    me.rkey              = rkey;
    me.length            = peer_chunk;
    peer_hello other{};
    if (!send_all(fd, &me, sizeof(me)) ||
        !recv_all(fd, &other, sizeof(other), 10s)) {
        r.add("peer", false,
              "the other rvt-check sent no address over TCP in 10 s");
        return;
    }
    if (std::memcmp(other.magic, peer_magic, sizeof(peer_magic)) != 0 ||
        other.length != peer_chunk) {
        r.add("peer", false,
              "the other side is not this version of rvt-check (its hello: "
              "length " +
                      std::to_string(other.length) + ", expected " +
                      std::to_string(peer_chunk) + ")");
        return;
    }
    const std::string where = gid_text(
            *reinterpret_cast<const ibv_gid *>(other.agent.gid));
    auto peer = s.connect_peer(other.agent);
    if (!peer) {
        r.add("peer", false,
              "connecting to the other node's agent (" + where +
                      "): " + peer.error());
        return;
    }
    r.add("peer", true,
          "connected to the agent at " + where + ", its client " +
                  std::to_string(other.client_index));

    /* ours to theirs */
    work_request w = addressed(work_op::rdma_write_imm, peer.value(),
                               other.client_index, other.client_generation);
    w.length       = peer_chunk;
    w.local_addr   = reinterpret_cast<uintptr_t>(area);
    w.lkey         = lkey;
    w.rkey         = other.rkey;
    w.remote_addr  = other.addr;
    completion done{};
    std::string sent = post_and_wait(s, w, done);

    /* theirs to ours: the notice, then every byte */
    const write_notice n = await_write_notice(s, other.client_index,
                                              peer_chunk);
    size_t bad           = 0;
    for (size_t k = 0; k < peer_chunk; ++k) {
        bad += area[peer_chunk + k] != pattern(k, theirs);
    }
    const uint8_t verdict = n.named && bad == 0 ? 1 : 0;
    uint8_t their_verdict = 0;
    const bool told       = send_all(fd, &verdict, 1) &&
                      recv_all(fd, &their_verdict, 1, 20s);
    r.add("peer_write", sent.empty() && told && their_verdict == 1,
          !sent.empty() ? "the write: " + sent :
          !told         ? "the other side gave no verdict over TCP" :
          their_verdict == 1 ?
                  "64 KiB arrived intact there, the other side says" :
                  "the other side did not get our 64 KiB intact "
                  "(see its peer_receive)");
    r.add("peer_receive", verdict == 1,
          bad != 0 ? std::to_string(bad) + " of " + std::to_string(peer_chunk) +
                             " bytes differ" :
          !n.noticed ? "no notice of the other side's write in 10 s" :
          !n.named   ? "a notice that does not name the other side's write" :
                       "64 KiB arrived intact, the immediate's notice named "
                       "the other process");
}

/* What rvtd --auth=auto would choose here, from the same settings (its
 * --munge-socket, the job's secret in the environment), or its refusal. */
void check_auth(report &r, const options &o)
{
    agent::auth_settings as;
    as.munge_socket = o.munge_socket;
    agent::take_secret_env(as);
    std::string why;
    auto auth = agent::make_peer_auth(as, [&why](std::string_view line) {
        why = line;
    });
    if (!auth) {
        r.add("auth", false, "rvtd would refuse to start: " + auth.error());
        return;
    }
    r.add("auth", true,
          auth.value()->describe() + (why.empty() ? "" : " (" + why + ")"));
}

/* Through a real agent, this process its client. */
void check_agent(report &r, const options &o, const std::string &device)
{
    client::launch_options lo;
    lo.device = device;
    lo.port   = static_cast<uint8_t>(o.port);
    /* two nodes' checks share a key, so that their agents are peers */
    lo.job_key    = peer_port(o) != 0 ?
                            "rvt-check.peer." + std::to_string(peer_port(o)) :
                            "rvt-check." + std::to_string(getpid());
    lo.rvtd_path  = o.rvtd;
    lo.extra_args = {"--linger=1",
                     "--gid-index=" + std::to_string(o.gid_index)};
    auto at       = client::attach_or_start(lo);
    if (!at) {
        r.add("agent", false, at.error());
        return;
    }
    auto opened = client::session::open(std::move(at).value());
    if (!opened) {
        r.add("agent", false, opened.error());
        return;
    }
    client::session &s = *opened.value();
    r.add("agent", true,
          "rvtd serves job key " + lo.job_key + ", " +
                  std::to_string(s.num_qps()) + " RC QPs per peer");

    constexpr size_t size = 1 << 20, chunk = 64 << 10;
    std::vector<uint8_t> memory(size + 8);
    auto *buffer = reinterpret_cast<uint8_t *>(
            (reinterpret_cast<uintptr_t>(memory.data()) + 7) & ~uintptr_t{7});
    auto mr          = s.register_memory(buffer, size,
                                         IBV_ACCESS_LOCAL_WRITE |
                                                 IBV_ACCESS_REMOTE_WRITE |
                                                 IBV_ACCESS_REMOTE_READ |
                                                 IBV_ACCESS_REMOTE_ATOMIC);
    const char *path = s.attached().mode == wire::reg_mode::import_pd ?
                               "the provider's import of the agent's PD" :
                               "REG_MR on the agent's command fd (uverbs "
                               "ioctl)";
    if (!mr) {
        r.add("register", false, std::string(path) + ": " + mr.error());
        return;
    }
    r.add("register", true,
          "1 MiB by this process, through " + std::string(path) +
                  ", accepted by the agent");

    auto peer = s.connect_peer(s.agent_address());
    if (!peer) {
        r.add("write_imm", false, "connecting to this node: " + peer.error());
        return;
    }
    s.set_write_notices(true);
    for (size_t k = 0; k < chunk; ++k) {
        buffer[k] = static_cast<uint8_t>(k * 7 + 3);
    }
    std::memset(buffer + chunk, 0, chunk);
    work_request w = to_self(s, work_op::rdma_write_imm, peer.value());
    w.length       = chunk;
    w.local_addr   = reinterpret_cast<uintptr_t>(buffer);
    w.lkey         = mr.value().lkey;
    w.rkey         = mr.value().rkey;
    w.remote_addr  = reinterpret_cast<uintptr_t>(buffer + chunk);
    completion done{};
    if (auto why = post_and_wait(s, w, done); !why.empty()) {
        r.add("write_imm", false, "the write: " + why);
        return;
    }
    const write_notice n = await_write_notice(s, s.client_index(), chunk);
    const bool same      = std::memcmp(buffer, buffer + chunk, chunk) == 0;
    r.add("write_imm", same && n.named,
          std::string(same ? "64 KiB arrived intact" : "the bytes differ") +
                  (n.named   ? ", the immediate's notice named this process" :
                   n.noticed ? ", a notice that does not name this "
                               "write" :
                               ", no notice of the immediate in 10 s"));

    if ((s.attached().features & wire::agent_feature_atomic64) == 0) {
        r.add("atomic", false,
              "the agent's device does no 64-bit atomics (see atomics)");
        return;
    }
    uint64_t word = 40;
    std::memcpy(buffer + 2 * chunk, &word, sizeof(word));
    work_request a = to_self(s, work_op::atomic_fetch_add, peer.value());
    a.length       = 8;
    a.operand      = 2;
    a.rkey         = mr.value().rkey;
    a.remote_addr  = reinterpret_cast<uintptr_t>(buffer + 2 * chunk);
    if (auto why = post_and_wait(s, a, done); !why.empty()) {
        r.add("atomic", false, "the fetch-add: " + why);
        return;
    }
    std::memcpy(&word, buffer + 2 * chunk, sizeof(word));
    r.add("atomic", done.value == 40 && word == 42,
          "fetch-add fetched " + std::to_string(done.value) +
                  " (expected 40) and left " + std::to_string(word) +
                  " (expected 42)");
    if (peer_port(o) != 0) {
        check_peer(r, o, s, buffer + 4 * chunk, mr.value().lkey,
                   mr.value().rkey);
    }
    (void)s.leave(5s);
}

/* parsing, --help and rvt-check(8) all come from this table
 * (tools/usage.h) */
std::vector<tools::option> option_table(options &o)
{
    auto number = [](const char *name, const char *dflt, const char *help,
                     long &out, long lo, long hi, const char *what = "N") {
        return tools::option{name, what, dflt, help,
                             [&out, name, lo, hi](std::string_view v) {
                                 std::string s(v);
                                 char *end = nullptr;
                                 out       = std::strtol(s.c_str(), &end, 10);
                                 if (s.empty() || *end != '\0' || out < lo ||
                                     out > hi) {
                                     return "--" + std::string(name) + "=" + s +
                                            ": expected a whole number "
                                            "from " +
                                            std::to_string(lo) + " to " +
                                            std::to_string(hi);
                                 }
                                 return std::string();
                             }};
    };
    return {
            {"json", "", "", "print the answers as one JSON object",
             [&o](std::string_view) {
                 o.json = true;
                 return std::string();
             }},
            {"device", "NAME", "the first device", "the device to check",
             [&o](std::string_view v) {
                 o.device = v;
                 return std::string();
             }},
            number("port", "1", "the port of that device", o.port, 1, 255),
            number("gid-index", "-1",
                   "GID table index; -1: the first RoCE v2 IPv4 GID, as "
                   "rvtd chooses",
                   o.gid_index, -1, 255),
            number("listen", "0",
                   "TCP port: wait there for `rvt-check --peer` from another "
                   "node and check a transfer each way with it; 0: no peer "
                   "check",
                   o.listen, 0, 65535, "PORT"),
            {"peer", "HOST:PORT", "none",
             "check a transfer each way with `rvt-check --listen=PORT` on "
             "HOST",
             [&o](std::string_view v) {
                 o.peer              = v;
                 const size_t c      = o.peer.rfind(':');
                 const long tcp_port = c == std::string::npos ?
                                               0 :
                                               std::strtol(o.peer.c_str() + c +
                                                                   1,
                                                           nullptr, 10);
                 if (c == 0 || tcp_port < 1 || tcp_port > 65535 ||
                     o.peer.find_first_not_of("0123456789", c + 1) !=
                             std::string::npos) {
                     return "--peer=" + o.peer +
                            ": expected HOST:PORT, PORT from 1 to 65535";
                 }
                 o.peer_host     = o.peer.substr(0, c);
                 o.peer_tcp_port = tcp_port;
                 return std::string();
             }},
            number("peer-wait", "60",
                   "seconds to wait for the other node's rvt-check",
                   o.peer_wait, 1, 3600),
            {"munge-socket", "PATH", "MUNGE's default",
             "munged's socket, for the auth check (as rvtd --munge-socket)",
             [&o](std::string_view v) {
                 o.munge_socket = v;
                 return std::string();
             }},
            {"rvtd", "PATH",
             "$RVT_RVTD, else the installed rvtd, else rvtd in PATH",
             "the agent to start for the checks through a real agent",
             [&o](std::string_view v) {
                 o.rvtd = v;
                 return std::string();
             }},
    };
}

const tools::program_doc doc = {
        .name     = "rvt-check",
        .section  = 8,
        .summary  = "check whether this node's RDMA device can serve rvt",
        .synopsis = "[--json] [--device=NAME] [--port=N] [--gid-index=N] "
                    "[--listen=PORT | --peer=HOST:PORT] [--peer-wait=N] "
                    "[--munge-socket=PATH] [--rvtd=PATH]",
        .description =
                "Checks, before any job, everything rvt needs of this node's "
                "RDMA device, and answers yes or no for each, with the "
                "reason: how the agent would authenticate its peers "
                "(munge when munged answers, else the job's secret from "
                "$RVT_JOB_SECRET_FILE or $RVT_JOB_SECRET, as rvtd "
                "--auth=auto chooses; no, with rvtd's reason, when it would "
                "refuse to start), the InfiniBand transport (iWARP has no UD "
                "QPs and "
                "no immediate data), an active RoCE port, the GID the agent "
                "would use, how a process registers its memory into the "
                "agent's protection domain, the agent's RC and UD QPs and "
                "their inline bytes, and 64-bit atomics.\n\n"
                "Then it starts a real rvtd(8) for a job key of its own and, "
                "as its client, registers 1 MiB into the agent's protection "
                "domain, writes 64 KiB to itself by RDMA WRITE WITH "
                "IMMEDIATE over the node's own shared RC QPs and does a "
                "fetch-add, checking every byte and value. The agent leaves "
                "a second after the check.\n\n"
                "With another node: run `rvt-check --listen=PORT` on one and "
                "`rvt-check --peer=HOST:PORT` on the other (in either order, "
                "within --peer-wait). The two swap their agents' addresses "
                "over TCP, their agents connect, and each writes 64 KiB into "
                "the other's memory by RDMA WRITE WITH IMMEDIATE over the "
                "shared RC QPs; each checks every byte it received and the "
                "immediate's notice, and tells the other.",
        .exit_status = "0 when every check says yes; 1 when one says no; 2 "
                       "on a bad option.",
        .see_also    = "rvtd(8), rvt-status(1)",
};

} // namespace

int main(int argc, char **argv)
{
    options opt;
    const auto table = option_table(opt);
    if (auto code = tools::parse_or_exit(argc, argv, doc, table)) {
        return *code;
    }
    if (opt.listen != 0 && !opt.peer.empty()) {
        std::fprintf(stderr,
                     "rvt-check: --listen=%ld and --peer=%s: "
                     "expected one of them (--listen on one node, "
                     "--peer on the other)\n",
                     opt.listen, opt.peer.c_str());
        return 2;
    }
    const std::string device = agent::named_or_first_device(opt.device);
    report r;
    check_auth(r, opt);
    if (check_port(r, device, static_cast<uint8_t>(opt.port))) {
        auto dev = agent::device::open(device, static_cast<uint8_t>(opt.port),
                                       static_cast<int>(opt.gid_index));
        if (!dev) {
            r.add("gid", false, dev.error());
        } else {
            r.add("gid", true,
                  gid_text(dev.value()->gid()) + " (index " +
                          std::to_string(dev.value()->gid_index()) + ")");
            r.add("registration", true, dev.value()->reg_mode_reason());
            check_qps(r, *dev.value());
        }
        if (dev) {
            dev.value().reset(); /* the agent opens its own */
            check_agent(r, opt, device);
        }
    }
    if (opt.json) {
        r.print_json(device);
    } else {
        r.print_text(device);
    }
    return r.ok() ? 0 : 1;
}
