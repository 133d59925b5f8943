/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What one verbs object costs on this device, measured: creates COUNT
 * objects of each SPEC and prints, as one JSON object, the device's
 * limits and, per spec, the capabilities the device granted and the bytes
 * each object added to the process: its queues mapped from the device
 * (/dev/infiniband/uverbs*, as rxe and siw map them) and its resident
 * memory (VmRSS, where a provider such as mlx5 allocates the queues in
 * the process). qp-table.sh turns these into the per-node table
 * (docs/performance.md, "The device side").
 *
 *   qp_cost_probe DEVICE COUNT SPEC...
 *   SPEC  NAME:rc:SEND_WR:SEND_SGE:INLINE:RECV_WR:RECV_SGE   an RC QP
 *         NAME:ud:SEND_WR:SEND_SGE:INLINE:RECV_WR:RECV_SGE   a UD QP
 *         NAME:srq:WR:SGE                                   a shared RQ
 *         NAME:cq:CQE                                       a CQ
 *   RECV_WR 0: the QPs share one SRQ (rc_verbs' and the agent's RC QPs).
 *
 * Exits 1 with a message naming the spec on any failure.
 */
#include <infiniband/verbs.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

[[noreturn]] void die(const std::string &what)
{
    std::fprintf(stderr, "qp_cost_probe: %s\n", what.c_str());
    std::exit(1);
}

/* bytes of this process's mappings of a uverbs device */
long long mapped_bytes()
{
    std::ifstream maps("/proc/self/maps");
    long long total = 0;
    for (std::string line; std::getline(maps, line);) {
        if (line.find("/dev/infiniband/uverbs") == std::string::npos) {
            continue;
        }
        unsigned long long lo = 0, hi = 0;
        if (std::sscanf(line.c_str(), "%llx-%llx", &lo, &hi) == 2) {
            total += static_cast<long long>(hi - lo);
        }
    }
    return total;
}

long long rss_bytes()
{
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
        long long kib = 0;
        if (std::sscanf(line.c_str(), "VmRSS: %lld kB", &kib) == 1) {
            return kib * 1024;
        }
    }
    return 0;
}

struct spec {
    std::string text, name, kind;
    std::vector<unsigned> n; /* the numbers after the kind */
};

spec parse(const std::string &text)
{
    spec s{text, {}, {}, {}};
    std::stringstream in(text);
    std::string word;
    std::getline(in, s.name, ':');
    std::getline(in, s.kind, ':');
    while (std::getline(in, word, ':')) {
        char *end = nullptr;
        s.n.push_back(
                static_cast<unsigned>(std::strtoul(word.c_str(), &end, 10)));
        if (word.empty() || *end != '\0') {
            die("spec " + text + ": '" + word + "' is not a number");
        }
    }
    const size_t want = s.kind == "rc" || s.kind == "ud" ? 5 :
                        s.kind == "srq"                  ? 2 :
                        s.kind == "cq"                   ? 1 :
                                                           0;
    if (s.name.empty() || want == 0 || s.n.size() != want) {
        die("spec " + text + ": expected NAME:rc|ud:SEND_WR:SEND_SGE:INLINE:" +
            "RECV_WR:RECV_SGE, NAME:srq:WR:SGE or NAME:cq:CQE");
    }
    return s;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc < 4) {
        die("usage: qp_cost_probe DEVICE COUNT SPEC...");
    }
    const std::string want_dev = argv[1];
    const int count            = std::atoi(argv[2]);
    if (count < 1) {
        die(std::string("COUNT ") + argv[2] + ": expected 1 or more");
    }
    int ndev          = 0;
    ibv_device **list = ibv_get_device_list(&ndev);
    ibv_context *ctx  = nullptr;
    for (int i = 0; list != nullptr && i < ndev && ctx == nullptr; ++i) {
        if (want_dev == ibv_get_device_name(list[i])) {
            ctx = ibv_open_device(list[i]);
        }
    }
    if (ctx == nullptr) {
        die("no device " + want_dev + " that opens");
    }
    ibv_device_attr da{};
    if (ibv_query_device(ctx, &da) != 0) {
        die("ibv_query_device failed");
    }
    ibv_pd *pd = ibv_alloc_pd(ctx);
    ibv_cq *cq = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
    if (pd == nullptr || cq == nullptr) {
        die("no PD or CQ");
    }
    std::printf(
            "{\"device\": \"%s\", \"count\": %d, \"limits\": {\"max_qp\": %d, "
            "\"max_qp_wr\": %d, \"max_sge\": %d, \"max_cq\": %d, "
            "\"max_cqe\": %d, \"max_srq\": %d, \"max_srq_wr\": %d, "
            "\"max_mr\": %d}, \"objects\": [",
            want_dev.c_str(), count, da.max_qp, da.max_qp_wr, da.max_sge,
            da.max_cq, da.max_cqe, da.max_srq, da.max_srq_wr, da.max_mr);
    for (int a = 3; a < argc; ++a) {
        const spec s = parse(argv[a]);
        /* the shared RQ of QPs with RECV_WR 0, outside the measurement */
        ibv_srq *srq = nullptr;
        if ((s.kind == "rc" || s.kind == "ud") && s.n[3] == 0) {
            ibv_srq_init_attr sa{};
            sa.attr.max_wr  = 64;
            sa.attr.max_sge = 1;
            if ((srq = ibv_create_srq(pd, &sa)) == nullptr) {
                die("spec " + s.text + ": no SRQ");
            }
        }
        const long long map0 = mapped_bytes(), rss0 = rss_bytes();
        std::vector<ibv_qp *> qps;
        std::vector<ibv_srq *> srqs;
        std::vector<ibv_cq *> cqs;
        unsigned got_wr = 0, got_inline = 0, got_recv = 0;
        for (int i = 0; i < count; ++i) {
            if (s.kind == "cq") {
                ibv_cq *c = ibv_create_cq(ctx, static_cast<int>(s.n[0]),
                                          nullptr, nullptr, 0);
                if (c == nullptr) {
                    die("spec " + s.text + ": ibv_create_cq failed");
                }
                got_wr = static_cast<unsigned>(c->cqe);
                cqs.push_back(c);
            } else if (s.kind == "srq") {
                ibv_srq_init_attr sa{};
                sa.attr.max_wr  = s.n[0];
                sa.attr.max_sge = s.n[1];
                ibv_srq *q      = ibv_create_srq(pd, &sa);
                if (q == nullptr) {
                    die("spec " + s.text + ": ibv_create_srq failed");
                }
                got_recv = sa.attr.max_wr;
                srqs.push_back(q);
            } else {
                ibv_qp_init_attr qa{};
                qa.qp_type          = s.kind == "rc" ? IBV_QPT_RC : IBV_QPT_UD;
                qa.send_cq          = cq;
                qa.recv_cq          = cq;
                qa.srq              = srq;
                qa.cap.max_send_wr  = s.n[0];
                qa.cap.max_send_sge = s.n[1];
                qa.cap.max_inline_data = s.n[2];
                qa.cap.max_recv_wr     = s.n[3];
                qa.cap.max_recv_sge    = srq != nullptr ? 0 : s.n[4];
                ibv_qp *qp             = ibv_create_qp(pd, &qa);
                if (qp == nullptr) {
                    die("spec " + s.text + ": ibv_create_qp failed");
                }
                got_wr     = qa.cap.max_send_wr;
                got_inline = qa.cap.max_inline_data;
                got_recv   = qa.cap.max_recv_wr;
                qps.push_back(qp);
            }
        }
        const long long map = (mapped_bytes() - map0) / count;
        const long long rss = (rss_bytes() - rss0) / count;
        std::printf(
                "%s\n  {\"name\": \"%s\", \"kind\": \"%s\", \"spec\": \"%s\", "
                "\"granted\": {\"wr\": %u, \"inline\": %u, \"recv_wr\": %u}, "
                "\"mapped_bytes\": %lld, \"rss_bytes\": %lld}",
                a == 3 ? "" : ",", s.name.c_str(), s.kind.c_str(),
                s.text.c_str(), got_wr, got_inline, got_recv, map, rss);
        for (ibv_qp *qp : qps) {
            ibv_destroy_qp(qp);
        }
        for (ibv_srq *q : srqs) {
            ibv_destroy_srq(q);
        }
        for (ibv_cq *c : cqs) {
            ibv_destroy_cq(c);
        }
        if (srq != nullptr) {
            ibv_destroy_srq(srq);
        }
    }
    std::printf("\n]}\n");
    ibv_destroy_cq(cq);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    return 0;
}
