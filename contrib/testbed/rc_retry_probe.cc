/* SPDX-License-Identifier: BSD-3-Clause */
// rc_retry_probe: does Soft-RoCE (or any verbs device) duplicate, lose or
// corrupt RC messages when its retransmission timer fires often? Plain
// libibverbs, no rvt code. Run by contrib/testbed/rc-retry-probe.sh.
//
//   rc_retry_probe --server|--client --dir=DIR [--dev=rxeN] [--gid-index=N]
//                  [--qps=4] [--timeout=11] [--seconds=30] [--size=16384]
//                  [--window=16]
//
// Per RC QP pair the client posts ops seq = 0, 1, 2, ...: even seq = RDMA
// WRITE WITH IMM (imm = seq) of --size bytes into the server's slot
// seq % W, odd seq = SEND of 64 bytes (seq, then a pattern). The server
// checks order (duplicate / late / gap) and data, poisons the slot, and
// returns credits ("verified up to seq X"); the client never runs more than
// W ops beyond the last credit, so no slot is rewritten before it is
// checked. The two sides exchange addresses through files in DIR; at the
// end the client writes how many ops completed OK per QP and the server
// counts those never received ("lost").
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Opts {
    bool server = false, client = false;
    std::string dev, dir;
    int gid_index = 1, qps = 4, timeout = 11, seconds = 30, size = 16384,
        window = 16;
};
Opts o;

[[noreturn]] void die(const std::string &msg)
{
    fprintf(stderr, "rc_retry_probe: %s (errno %d %s)\n", msg.c_str(), errno,
            strerror(errno));
    exit(2);
}

uint8_t pat(uint64_t qp, uint64_t seq, uint64_t k)
{
    return static_cast<uint8_t>((seq * 131 + k * 7 + (k >> 8) + qp * 17) &
                                0xff);
}

double secs_since(Clock::time_point t)
{
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// ---- files in the shared directory ----------------------------------------
void write_file(const std::string &name, const std::string &text)
{
    std::string tmp = o.dir + "/" + name + ".tmp", dst = o.dir + "/" + name;
    {
        std::ofstream f(tmp);
        f << text;
        if (!f)
            die("write " + tmp);
    }
    if (rename(tmp.c_str(), dst.c_str()) != 0)
        die("rename " + tmp);
}
bool file_exists(const std::string &name)
{
    return access((o.dir + "/" + name).c_str(), F_OK) == 0;
}
std::string wait_file(const std::string &name, int timeout_s)
{
    auto t0 = Clock::now();
    while (!file_exists(name)) {
        if (secs_since(t0) > timeout_s)
            die("no " + name + " after " + std::to_string(timeout_s) + " s");
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::ifstream f(o.dir + "/" + name);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// ---- hw counters -----------------------------------------------------------
std::map<std::string, long long> hw_counters()
{
    std::map<std::string, long long> m;
    std::string d = "/sys/class/infiniband/" + o.dev + "/ports/1/hw_counters";
    DIR *dp       = opendir(d.c_str());
    if (!dp)
        return m;
    while (dirent *e = readdir(dp)) {
        if (e->d_name[0] == '.')
            continue;
        std::ifstream f(d + "/" + e->d_name);
        long long v;
        if (f >> v)
            m[e->d_name] = v;
    }
    closedir(dp);
    return m;
}
void print_counters(const char *role, const std::map<std::string, long long> &a,
                    const std::map<std::string, long long> &b)
{
    printf("PROBE %s hw_counters %s (name before after delta):", role,
           o.dev.c_str());
    for (auto &[k, v] : b) {
        long long before = a.count(k) ? a.at(k) : 0;
        printf(" %s=%lld/%lld/%+lld", k.c_str(), before, v, v - before);
    }
    printf("\n");
}

// ---- verbs setup -----------------------------------------------------------
struct Dev {
    ibv_context *ctx = nullptr;
    ibv_pd *pd       = nullptr;
    ibv_cq *cq       = nullptr;
    ibv_port_attr port{};
    ibv_gid gid{};
    std::vector<ibv_qp *> qp;
    std::vector<uint32_t> psn;
};

Dev open_dev(int sq_depth, int rq_depth)
{
    Dev d;
    int n             = 0;
    ibv_device **list = ibv_get_device_list(&n);
    for (int i = 0; i < n && !d.ctx; i++)
        if (o.dev == ibv_get_device_name(list[i]))
            d.ctx = ibv_open_device(list[i]);
    if (!d.ctx)
        die("cannot open device " + o.dev);
    ibv_free_device_list(list);
    if (ibv_query_port(d.ctx, 1, &d.port))
        die("query_port");
    if (ibv_query_gid(d.ctx, 1, o.gid_index, &d.gid))
        die("query_gid");
    d.pd = ibv_alloc_pd(d.ctx);
    d.cq = ibv_create_cq(d.ctx, o.qps * (sq_depth + rq_depth) + 16, nullptr,
                         nullptr, 0);
    if (!d.pd || !d.cq)
        die("pd/cq");
    srand(static_cast<unsigned>(getpid() ^ time(nullptr)));
    for (int i = 0; i < o.qps; i++) {
        ibv_qp_init_attr ia{};
        ia.send_cq = ia.recv_cq = d.cq;
        ia.qp_type              = IBV_QPT_RC;
        ia.cap.max_send_wr      = sq_depth;
        ia.cap.max_recv_wr      = rq_depth;
        ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
        ia.cap.max_inline_data                    = 64;
        ibv_qp *q                                 = ibv_create_qp(d.pd, &ia);
        if (!q)
            die("create_qp");
        ibv_qp_attr a{};
        a.qp_state        = IBV_QPS_INIT;
        a.port_num        = 1;
        a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
        if (ibv_modify_qp(q, &a,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                  IBV_QP_ACCESS_FLAGS))
            die("INIT");
        d.qp.push_back(q);
        d.psn.push_back(static_cast<uint32_t>(rand()) & 0xffffff);
    }
    return d;
}

std::string info_text(const Dev &d, void *addr, uint32_t rkey)
{
    std::ostringstream s;
    for (int i = 0; i < 16; i++)
        s << static_cast<int>(d.gid.raw[i]) << " ";
    s << "\n" << reinterpret_cast<uintptr_t>(addr) << " " << rkey << "\n";
    for (int i = 0; i < o.qps; i++)
        s << d.qp[i]->qp_num << " " << d.psn[i] << "\n";
    return s.str();
}

struct Peer {
    ibv_gid gid{};
    uint64_t addr = 0;
    uint32_t rkey = 0;
    std::vector<uint32_t> qpn, psn;
};

Peer parse_info(const std::string &t)
{
    Peer p;
    std::istringstream s(t);
    for (int i = 0; i < 16; i++) {
        int b;
        s >> b;
        p.gid.raw[i] = static_cast<uint8_t>(b);
    }
    s >> p.addr >> p.rkey;
    for (int i = 0; i < o.qps; i++) {
        uint32_t q, n;
        s >> q >> n;
        p.qpn.push_back(q);
        p.psn.push_back(n);
    }
    if (!s)
        die("bad info file");
    return p;
}

void connect(Dev &d, const Peer &p)
{
    for (int i = 0; i < o.qps; i++) {
        ibv_qp_attr a{};
        a.qp_state               = IBV_QPS_RTR;
        a.path_mtu               = d.port.active_mtu;
        a.dest_qp_num            = p.qpn[i];
        a.rq_psn                 = p.psn[i];
        a.max_dest_rd_atomic     = 1;
        a.min_rnr_timer          = 12;
        a.ah_attr.is_global      = 1;
        a.ah_attr.grh.dgid       = p.gid;
        a.ah_attr.grh.sgid_index = static_cast<uint8_t>(o.gid_index);
        a.ah_attr.grh.hop_limit  = 64;
        a.ah_attr.port_num       = 1;
        if (ibv_modify_qp(d.qp[i], &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                  IBV_QP_MAX_DEST_RD_ATOMIC |
                                  IBV_QP_MIN_RNR_TIMER))
            die("RTR");
        ibv_qp_attr r{};
        r.qp_state      = IBV_QPS_RTS;
        r.timeout       = static_cast<uint8_t>(o.timeout);
        r.retry_cnt     = 7;
        r.rnr_retry     = 7;
        r.sq_psn        = d.psn[i];
        r.max_rd_atomic = 1;
        if (ibv_modify_qp(d.qp[i], &r,
                          IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                  IBV_QP_MAX_QP_RD_ATOMIC))
            die("RTS");
    }
}

// The index among d's QPs of the one a completion names; any other QP
// ends the run.
int qp_index(const Dev &d, uint32_t qpn)
{
    for (int i = 0; i < o.qps; i++)
        if (d.qp[i]->qp_num == qpn)
            return i;
    die("completion for unknown qp");
}

// Up to 32 completions of d's CQ; a failed poll ends the run.
int poll_cq(const Dev &d, ibv_wc (&wc)[32])
{
    const int n = ibv_poll_cq(d.cq, 32, wc);
    if (n < 0)
        die("poll_cq");
    return n;
}

void post_recv(ibv_qp *q, uint64_t wr_id, void *buf, uint32_t len,
               uint32_t lkey)
{
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf), len, lkey};
    ibv_recv_wr wr{}, *bad;
    wr.wr_id   = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (ibv_post_recv(q, &wr, &bad))
        die("post_recv");
}

constexpr int kMsg          = 64; // SEND size
constexpr int kCreditRq     = 64; // client's credit receives per QP
constexpr uint64_t kRecvTag = uint64_t(1) << 63; // client: wr_id of a receive

// ---- server ----------------------------------------------------------------
struct SrvQp {
    uint64_t expected = 0, inorder = 0, dups = 0, late = 0, gaps = 0,
             corrupt = 0, dup_corrupt = 0, kind_err = 0, received = 0;
    std::vector<uint8_t> seen;
    uint64_t last_credit = 0, credit_seq = 0;
    int credit_out                = 0;
    Clock::time_point credit_time = Clock::now();
    bool dead                     = false;
};

int corrupt_reports = 0;

void report_write_corruption(const char *what, int qi, uint64_t seq,
                             const uint8_t *b)
{
    size_t size = static_cast<size_t>(o.size), k0 = 0, nbad = 0;
    bool first = true;
    for (size_t k = 0; k < size; k++)
        if (b[k] != pat(qi, seq, k)) {
            if (first)
                k0 = k, first = false;
            nbad++;
        }
    if (corrupt_reports++ >= 10)
        return;
    printf("%s write qp=%d seq=%llu first_bad_offset=%zu bad_bytes=%zu "
           "got=0x%02x want=0x%02x",
           what, qi, (unsigned long long)seq, k0, nbad, b[k0],
           pat(qi, seq, k0));
    bool poison = true;
    for (size_t k = k0; k < k0 + 64 && k < size; k++)
        poison &= b[k] == 0xEE;
    if (poison)
        printf(" [poison: data never landed]");
    size_t run = std::min<size_t>(64, size - k0);
    // an earlier (or later) write's data at the same offset?
    for (long long j = -8; j <= 8; j++) {
        long long s2 = static_cast<long long>(seq) + j * o.window;
        if (j == 0 || s2 < 0)
            continue;
        bool m = true;
        for (size_t k = k0; k < k0 + run; k++)
            m &= b[k] == pat(qi, s2, k);
        if (m)
            printf(" [matches seq %lld at same offset]", s2);
    }
    // this write's own data at another offset?
    for (size_t off = 0; off + run <= size; off++) {
        if (off == k0)
            continue;
        bool m = true;
        for (size_t k = 0; k < run && m; k++)
            m = b[k0 + k] == pat(qi, seq, off + k);
        if (m) {
            printf(" [matches own data at offset %zu]", off);
            break;
        }
    }
    printf("\n");
}

int run_server()
{
    int W = o.window, R = 4 * W;
    Dev d       = open_dev(64, R);
    size_t slot = static_cast<size_t>(o.size);
    std::vector<uint8_t> wbuf(slot * W * o.qps, 0xEE),
            rbuf(static_cast<size_t>(kMsg) * R * o.qps);
    ibv_mr *wmr = ibv_reg_mr(d.pd, wbuf.data(), wbuf.size(),
                             IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ibv_mr *rmr = ibv_reg_mr(d.pd, rbuf.data(), rbuf.size(),
                             IBV_ACCESS_LOCAL_WRITE);
    if (!wmr || !rmr)
        die("reg_mr");
    auto rslot = [&](int qi, int r) {
        return rbuf.data() + (static_cast<size_t>(qi) * R + r) * kMsg;
    };
    for (int qi = 0; qi < o.qps; qi++)
        for (int r = 0; r < R; r++)
            post_recv(d.qp[qi], (uint64_t(qi) << 32) | r, rslot(qi, r), kMsg,
                      rmr->lkey);
    auto c0 = hw_counters();
    write_file("server.info", info_text(d, wbuf.data(), wmr->rkey));
    Peer p = parse_info(wait_file("client.info", 300));
    connect(d, p);
    write_file("server.ready", "1\n");
    std::vector<SrvQp> st(o.qps);
    std::map<std::string, long long> statuses;
    auto t0 = Clock::now();
    Clock::time_point done_at{};
    bool client_done = false;
    uint64_t polls   = 0;
    auto last_check  = Clock::now();
    for (;;) {
        ibv_wc wc[32];
        const int n = poll_cq(d, wc);
        for (int i = 0; i < n; i++) {
            ibv_wc &w = wc[i];
            int qi    = qp_index(d, w.qp_num);
            SrvQp &s  = st[qi];
            if (w.status != IBV_WC_SUCCESS) {
                statuses[ibv_wc_status_str(w.status)]++;
                if (!s.dead && !client_done)
                    printf("server qp=%d error %s opcode=%d vendor_err=0x%x\n",
                           qi, ibv_wc_status_str(w.status), w.opcode,
                           w.vendor_err);
                s.dead = true;
                continue;
            }
            if (w.opcode == IBV_WC_SEND) {
                s.credit_out--;
                continue;
            }
            int r      = static_cast<int>(w.wr_id & 0xffffffff);
            uint8_t *m = rslot(qi, r);
            uint64_t seq;
            bool is_write = w.opcode == IBV_WC_RECV_RDMA_WITH_IMM;
            if (is_write) {
                seq = ntohl(w.imm_data);
                // imm is 32 bits: extend with the expected seq's high bits
                seq |= s.expected & ~uint64_t(0xffffffff);
            } else if (w.opcode == IBV_WC_RECV) {
                memcpy(&seq, m, 8);
            } else {
                die("unexpected opcode " + std::to_string(w.opcode));
            }
            s.received++;
            if (seq > s.expected + (uint64_t(1) << 24)) {
                s.kind_err++;
                printf("WILD qp=%d seq=%llu expected=%llu\n", qi,
                       (unsigned long long)seq, (unsigned long long)s.expected);
                post_recv(d.qp[qi], w.wr_id, m, kMsg, rmr->lkey);
                continue;
            }
            if ((seq & 1) != (is_write ? 0u : 1u)) {
                s.kind_err++;
                printf("KIND qp=%d seq=%llu arrived as %s\n", qi,
                       (unsigned long long)seq,
                       is_write ? "write-imm" : "send");
            }
            bool dup = seq < s.seen.size() && s.seen[seq];
            if (seq >= s.seen.size())
                s.seen.resize(seq + 1024 * 1024, 0);
            s.seen[seq] = 1;
            if (dup) {
                s.dups++;
                if (s.dups <= 10)
                    printf("DUP qp=%d seq=%llu (%s) expected=%llu\n", qi,
                           (unsigned long long)seq, is_write ? "write" : "send",
                           (unsigned long long)s.expected);
            } else if (seq == s.expected) {
                s.inorder++;
                s.expected++;
            } else if (seq > s.expected) {
                s.gaps += seq - s.expected;
                printf("GAP qp=%d seq=%llu expected=%llu (%llu missing)\n", qi,
                       (unsigned long long)seq, (unsigned long long)s.expected,
                       (unsigned long long)(seq - s.expected));
                s.expected = seq + 1;
            } else {
                s.late++;
                printf("LATE qp=%d seq=%llu expected=%llu\n", qi,
                       (unsigned long long)seq, (unsigned long long)s.expected);
            }
            // data
            bool bad = false;
            if (is_write) {
                uint8_t *b = wbuf.data() +
                             (static_cast<size_t>(qi) * W + seq % W) * slot;
                for (size_t k = 0; k < slot && !bad; k++)
                    bad = b[k] != pat(qi, seq, k);
                if (bad)
                    report_write_corruption(
                            dup ? "DUPDATA (slot as a duplicate found it)" :
                                  "CORRUPT",
                            qi, seq, b);
                if (!dup)
                    memset(b, 0xEE, slot);
            } else {
                bad = w.byte_len != kMsg;
                for (size_t k = 8; k < kMsg && !bad; k++)
                    bad = m[k] != pat(qi, seq, k);
                if (bad && !dup && corrupt_reports++ < 10)
                    printf("CORRUPT send qp=%d seq=%llu len=%u\n", qi,
                           (unsigned long long)seq, w.byte_len);
            }
            if (bad)
                (dup ? s.dup_corrupt : s.corrupt)++;
            memset(m, 0, kMsg);
            post_recv(d.qp[qi], w.wr_id, m, kMsg, rmr->lkey);
        }
        // credits
        for (int qi = 0; qi < o.qps; qi++) {
            SrvQp &s = st[qi];
            if (s.dead || client_done || s.expected == s.last_credit ||
                s.credit_out >= 32)
                continue;
            if (s.expected - s.last_credit < static_cast<uint64_t>(W / 2) &&
                secs_since(s.credit_time) < 0.005)
                continue;
            uint64_t msg[2] = {s.credit_seq, s.expected};
            ibv_sge sge{reinterpret_cast<uintptr_t>(msg), sizeof msg, 0};
            ibv_send_wr wr{}, *bad;
            wr.wr_id      = s.credit_seq;
            wr.sg_list    = &sge;
            wr.num_sge    = 1;
            wr.opcode     = IBV_WR_SEND;
            wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
            if (ibv_post_send(d.qp[qi], &wr, &bad))
                die("post credit");
            s.credit_seq++;
            s.credit_out++;
            s.last_credit = s.expected;
            s.credit_time = Clock::now();
        }
        if ((++polls & 255) == 0 && secs_since(last_check) > 0.05) {
            last_check = Clock::now();
            if (!client_done && file_exists("client.done")) {
                client_done = true;
                done_at     = Clock::now();
            }
            if (client_done && secs_since(done_at) > 1.0)
                break;
            if (secs_since(t0) > o.seconds + 300)
                die("client never finished");
        }
    }
    auto c1 = hw_counters();
    // lost: completed OK at the client, never received here
    std::istringstream cd(wait_file("client.done", 1));
    uint64_t tot_recv = 0, tot_dup = 0, tot_gap = 0, tot_late = 0,
             tot_corrupt = 0, tot_lost = 0, tot_kind = 0, tot_dupc = 0;
    for (int qi = 0; qi < o.qps; qi++) {
        SrvQp &s    = st[qi];
        uint64_t ok = 0;
        cd >> ok;
        uint64_t lost = 0;
        for (uint64_t q = 0; q < ok; q++)
            if (q >= s.seen.size() || !s.seen[q]) {
                if (lost < 10)
                    printf("LOST qp=%d seq=%llu\n", qi, (unsigned long long)q);
                lost++;
            }
        printf("PROBE server qp=%d client_ok=%llu received=%llu inorder=%llu "
               "duplicates=%llu late=%llu "
               "gaps=%llu lost=%llu corrupt=%llu dup_corrupt=%llu "
               "kind_err=%llu dead=%d\n",
               qi, (unsigned long long)ok, (unsigned long long)s.received,
               (unsigned long long)s.inorder, (unsigned long long)s.dups,
               (unsigned long long)s.late, (unsigned long long)s.gaps,
               (unsigned long long)lost, (unsigned long long)s.corrupt,
               (unsigned long long)s.dup_corrupt,
               (unsigned long long)s.kind_err, s.dead);
        tot_recv += s.received, tot_dup += s.dups, tot_gap += s.gaps,
                tot_late += s.late;
        tot_corrupt += s.corrupt, tot_lost += lost, tot_kind += s.kind_err,
                tot_dupc += s.dup_corrupt;
    }
    std::string sts;
    for (auto &[k, v] : statuses)
        sts += " [" + k + "]=" + std::to_string(v);
    printf("PROBE server qps=%d timeout=%d size=%d window=%d received=%llu "
           "duplicates=%llu late=%llu "
           "gaps=%llu lost=%llu corrupt=%llu dup_corrupt=%llu kind_err=%llu "
           "errors=%zu%s\n",
           o.qps, o.timeout, o.size, W, (unsigned long long)tot_recv,
           (unsigned long long)tot_dup, (unsigned long long)tot_late,
           (unsigned long long)tot_gap, (unsigned long long)tot_lost,
           (unsigned long long)tot_corrupt, (unsigned long long)tot_dupc,
           (unsigned long long)tot_kind, statuses.size(), sts.c_str());
    print_counters("server", c0, c1);
    fflush(stdout);
    write_file("server.done", "1\n");
    return (tot_dup || tot_gap || tot_late || tot_lost || tot_corrupt ||
            tot_kind || tot_dupc) ?
                   1 :
                   0;
}

// ---- client ----------------------------------------------------------------
struct CliQp {
    uint64_t next = 0, credit = 0, ok = 0, ok_prefix = 0, order_err = 0,
             failed          = 0;
    uint64_t credit_seq_next = 0, credit_dups = 0, credit_gaps = 0;
    std::vector<bool> busy;
    int outstanding = 0;
    bool dead       = false;
};

int run_client()
{
    int W       = o.window;
    size_t slot = std::max<size_t>(static_cast<size_t>(o.size), kMsg);
    Dev d       = open_dev(W + 8, kCreditRq);
    std::vector<uint8_t> sbuf(slot * W * o.qps), cbuf(16u * kCreditRq * o.qps);
    ibv_mr *smr = ibv_reg_mr(d.pd, sbuf.data(), sbuf.size(),
                             IBV_ACCESS_LOCAL_WRITE);
    ibv_mr *cmr = ibv_reg_mr(d.pd, cbuf.data(), cbuf.size(),
                             IBV_ACCESS_LOCAL_WRITE);
    if (!smr || !cmr)
        die("reg_mr");
    auto cslot = [&](int qi, int r) {
        return cbuf.data() + (static_cast<size_t>(qi) * kCreditRq + r) * 16;
    };
    for (int qi = 0; qi < o.qps; qi++)
        for (int r = 0; r < kCreditRq; r++)
            post_recv(d.qp[qi], kRecvTag | (uint64_t(qi) << 32) | r,
                      cslot(qi, r), 16, cmr->lkey);
    auto c0 = hw_counters();
    write_file("client.info", info_text(d, sbuf.data(), 0));
    Peer p = parse_info(wait_file("server.info", 300));
    connect(d, p);
    wait_file("server.ready", 60);
    std::vector<CliQp> st(o.qps);
    for (auto &s : st)
        s.busy.assign(W, false);
    std::map<std::string, long long> statuses;
    auto t0       = Clock::now();
    bool stopping = false;
    for (;;) {
        if (!stopping && secs_since(t0) > o.seconds)
            stopping = true;
        int total_out = 0;
        for (int qi = 0; qi < o.qps; qi++) {
            CliQp &s = st[qi];
            total_out += s.outstanding;
            while (!stopping && !s.dead && s.next < s.credit + W &&
                   !s.busy[s.next % W]) {
                uint64_t seq = s.next;
                uint8_t *b   = sbuf.data() +
                             (static_cast<size_t>(qi) * W + seq % W) * slot;
                bool is_write = (seq & 1) == 0;
                ibv_sge sge{reinterpret_cast<uintptr_t>(b), 0, smr->lkey};
                ibv_send_wr wr{}, *bad;
                wr.wr_id      = (uint64_t(qi) << 48) | seq;
                wr.sg_list    = &sge;
                wr.num_sge    = 1;
                wr.send_flags = IBV_SEND_SIGNALED;
                if (is_write) {
                    for (size_t k = 0; k < static_cast<size_t>(o.size); k++)
                        b[k] = pat(qi, seq, k);
                    sge.length             = static_cast<uint32_t>(o.size);
                    wr.opcode              = IBV_WR_RDMA_WRITE_WITH_IMM;
                    wr.imm_data            = htonl(static_cast<uint32_t>(seq));
                    wr.wr.rdma.remote_addr = p.addr +
                                             (static_cast<uint64_t>(qi) * W +
                                              seq % W) *
                                                     o.size;
                    wr.wr.rdma.rkey = p.rkey;
                } else {
                    memcpy(b, &seq, 8);
                    for (size_t k = 8; k < kMsg; k++)
                        b[k] = pat(qi, seq, k);
                    sge.length = kMsg;
                    wr.opcode  = IBV_WR_SEND;
                }
                if (ibv_post_send(d.qp[qi], &wr, &bad))
                    die("post_send");
                s.busy[seq % W] = true;
                s.outstanding++;
                s.next++;
                total_out++;
            }
        }
        if (stopping && total_out == 0)
            break;
        if (stopping && secs_since(t0) > o.seconds + 120) {
            printf("client: gave up waiting for %d outstanding completions\n",
                   total_out);
            break;
        }
        ibv_wc wc[32];
        const int n = poll_cq(d, wc);
        for (int i = 0; i < n; i++) {
            ibv_wc &w = wc[i];
            int qi    = qp_index(d, w.qp_num);
            CliQp &s  = st[qi];
            if (w.wr_id & kRecvTag) {
                // credit receive; flushed ones are ignored
                if (w.status != IBV_WC_SUCCESS) {
                    s.dead = true;
                    continue;
                }
                int r = static_cast<int>(w.wr_id & 0xffffffff);
                uint64_t msg[2];
                memcpy(msg, cslot(qi, r), 16);
                if (msg[0] < s.credit_seq_next)
                    s.credit_dups++;
                else if (msg[0] > s.credit_seq_next)
                    s.credit_gaps += msg[0] - s.credit_seq_next;
                if (msg[0] >= s.credit_seq_next)
                    s.credit_seq_next = msg[0] + 1;
                if (msg[1] > s.credit)
                    s.credit = msg[1];
                post_recv(d.qp[qi], w.wr_id, cslot(qi, r), 16, cmr->lkey);
                continue;
            }
            uint64_t seq = w.wr_id & ((uint64_t(1) << 48) - 1);
            if ((w.wr_id >> 48) != static_cast<uint64_t>(qi))
                die("wr_id/qp mismatch");
            statuses[ibv_wc_status_str(w.status)]++;
            s.busy[seq % W] = false;
            s.outstanding--;
            if (w.status == IBV_WC_SUCCESS) {
                s.ok++;
                if (seq == s.ok_prefix)
                    s.ok_prefix++;
                else
                    s.order_err++;
            } else {
                s.failed++;
                if (!s.dead)
                    printf("client qp=%d seq=%llu error %s vendor_err=0x%x\n",
                           qi, (unsigned long long)seq,
                           ibv_wc_status_str(w.status), w.vendor_err);
                s.dead = true;
            }
        }
    }
    auto c1 = hw_counters();
    std::ostringstream done;
    uint64_t ok = 0, failed = 0, order = 0, cdup = 0, cgap = 0;
    for (int qi = 0; qi < o.qps; qi++) {
        CliQp &s = st[qi];
        done << s.ok_prefix << "\n";
        printf("PROBE client qp=%d posted=%llu ok=%llu ok_prefix=%llu "
               "failed=%llu order_err=%llu "
               "credit_dups=%llu credit_gaps=%llu dead=%d\n",
               qi, (unsigned long long)s.next, (unsigned long long)s.ok,
               (unsigned long long)s.ok_prefix, (unsigned long long)s.failed,
               (unsigned long long)s.order_err,
               (unsigned long long)s.credit_dups,
               (unsigned long long)s.credit_gaps, s.dead);
        ok += s.ok, failed += s.failed, order += s.order_err,
                cdup += s.credit_dups, cgap += s.credit_gaps;
    }
    write_file("client.done", done.str());
    std::string sts;
    for (auto &[k, v] : statuses)
        sts += " [" + k + "]=" + std::to_string(v);
    printf("PROBE client qps=%d timeout=%d ops_ok=%llu ops_failed=%llu "
           "order_err=%llu credit_dups=%llu "
           "credit_gaps=%llu statuses:%s\n",
           o.qps, o.timeout, (unsigned long long)ok, (unsigned long long)failed,
           (unsigned long long)order, (unsigned long long)cdup,
           (unsigned long long)cgap, sts.c_str());
    print_counters("client", c0, c1);
    fflush(stdout);
    wait_file("server.done", 60);
    return (failed || order || cdup || cgap) ? 1 : 0;
}

} // namespace

int main(int argc, char **argv)
{
    if (const char *e = getenv("RXE_DEV"))
        o.dev = e;
    if (const char *e = getenv("GID_IDX"))
        o.gid_index = atoi(e);
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto val      = [&](const char *name) -> const char      *{
            size_t n = strlen(name);
            return a.compare(0, n, name) == 0 ? argv[i] + n : nullptr;
        };
        const char *v;
        if (a == "--server")
            o.server = true;
        else if (a == "--client")
            o.client = true;
        else if ((v = val("--dev=")))
            o.dev = v;
        else if ((v = val("--gid-index=")))
            o.gid_index = atoi(v);
        else if ((v = val("--dir=")))
            o.dir = v;
        else if ((v = val("--qps=")))
            o.qps = atoi(v);
        else if ((v = val("--timeout=")))
            o.timeout = atoi(v);
        else if ((v = val("--seconds=")))
            o.seconds = atoi(v);
        else if ((v = val("--size=")))
            o.size = atoi(v);
        else if ((v = val("--window=")))
            o.window = atoi(v);
        else {
            fprintf(stderr, "rc_retry_probe: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (o.server == o.client || o.dir.empty() || o.dev.empty() ||
        o.window < 2 || o.window % 2 || o.size < 1 || o.qps < 1 ||
        o.qps > 0xffff) {
        fprintf(stderr, "usage: rc_retry_probe --server|--client --dir=DIR "
                        "[--dev=rxeN] [--gid-index=N] "
                        "[--qps=4] [--timeout=11] [--seconds=30] "
                        "[--size=16384] [--window=16 (even)]\n");
        return 2;
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);
    return o.server ? run_server() : run_client();
}
