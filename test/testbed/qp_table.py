#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The device side of a node at scale (docs/performance.md, "The device
side"), from a measurement qp-table-guest.sh made: RC and UD QPs per node,
and the memory the device holds for them (each QP's queues, and the
buffers each process or agent registers), for rc_verbs, the recommended
ud_verbs,rvt and rvt alone, at N nodes and P ranks per node. Prints the
formulas with the measured figures in them, then the table, as Markdown.

A file holds one measurement or a list of them, one per boot: then each
figure is the median of the boots' (the lower middle one, a figure some
boot measured). What a process registers varies from boot to boot (a
rc_verbs process 59, 42 and 42 MB in three), what a QP maps does not.

Usage: qp_table.py MEASUREMENT.json
"""
import json
import statistics
import sys

NODES = (16, 128, 1024, 10000)
RANKS = (32, 64, 128, 256)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    try:
        boots = json.load(open(sys.argv[1]))
        if not isinstance(boots, list):
            boots = [boots]
        m = boots[0]
        probe, cfg = m["probe"], m["config"]
        k, max_qp = cfg["num_qps"], probe["limits"]["max_qp"]

        def median(figure):
            """FIGURE(measurement) over the boots"""
            return statistics.median_low(figure(b) for b in boots)

        def cost(name):
            """what one object of NAME holds"""
            return median(lambda b: next(
                max(o["mapped_bytes"], o["rss_bytes"])
                for o in b["probe"]["objects"] if o["name"] == name))

        q_rc, q_ud, q_rvt = cost("rc_verbs"), cost("ud_verbs"), cost("rvt")
        q_srq = cost("rvt_srq")
        r_rc, r_ud, r_agent = (median(lambda b, w=w: b["registered"][w])
                               for w in ("rc_verbs_process",
                                         "ud_verbs_process", "rvt_agent"))
    except (OSError, ValueError, KeyError, TypeError, IndexError,
            StopIteration, statistics.StatisticsError) as e:
        sys.exit(f"qp_table.py: {sys.argv[1]}: not a measurement of "
                 f"qp-table-guest.sh ({type(e).__name__}: {e})")

    def settings(n, p):
        """(RC QPs, UD QPs, bytes) per node for each setting"""
        rc = (p * p * (n - 1), p,
              p * p * (n - 1) * q_rc + p * (q_ud + r_rc))
        rvt = (k * n, 1, k * n * q_rvt + q_srq + q_ud + r_agent)
        hybrid = (rvt[0], 1 + p, rvt[2] + p * (q_ud + r_ud))
        return {"rc_verbs": rc, "ud_verbs,rvt": hybrid, "rvt": rvt}

    kib = lambda b: f"{b / 1024:,.0f} KiB"
    size = lambda b: (f"{b / 2**20:,.0f} MiB" if b < 10 * 2**30
                      else f"{b / 2**30:,.0f} GiB")
    of_boots = f", the median of {len(boots)} boots" if len(boots) > 1 else ""
    print(f"Measured on {probe['device']} (kernel {m.get('kernel', '?')}), "
          f"{probe['count']} objects of each kind{of_boots}; the device "
          f"allows {max_qp} QPs.\n")
    print("Per object (the larger of the queues it maps and the memory it "
          "adds to its process):\n")
    print(f"- q_rc  = {kib(q_rc)}: an RC QP as UCX's rc_verbs makes it")
    print(f"- q_ud  = {kib(q_ud)}: a UD QP as UCX's ud_verbs makes it")
    print(f"- q_rvt = {kib(q_rvt)}: one of the agent's RC QPs")
    print(f"- q_srq = {kib(q_srq)}: the agent's shared receive queue")
    print("\nRegistered while running (`rdma resource show mr`):\n")
    print(f"- r_rc    = {kib(r_rc)}: a rc_verbs process (with its UD for "
          "wire-up)")
    print(f"- r_ud    = {kib(r_ud)}: a ud_verbs process")
    print(f"- r_agent = {kib(r_agent)}: the agent, one client attached "
          f"({cfg['srq_size']} receive buffers of {cfg['am_size']} B)")
    print("\nPer node, P ranks per node, N nodes, K = "
          f"{k} QPs per remote node (and K to its own):\n")
    print("- rc_verbs:     P x P x (N - 1) RC + P UD; "
          "P x P x (N - 1) x q_rc + P x (q_ud + r_rc)")
    print("- ud_verbs,rvt: K x N RC + 1 + P UD; "
          "K x N x q_rvt + q_srq + q_ud + r_agent + P x (q_ud + r_ud)")
    print("- rvt:          K x N RC + 1 UD; "
          "K x N x q_rvt + q_srq + q_ud + r_agent")
    print()
    names = ("rc_verbs", "ud_verbs,rvt", "rvt")
    print("| N nodes | P ranks | " +
          " | ".join(f"{s}: RC QPs, memory" for s in names) + " |")
    print("|---|---|" + "---|" * len(names))
    over = False
    for n in NODES:
        for p in RANKS:
            cells = []
            for s in names:
                rcq, _, b = settings(n, p)[s]
                mark = " (!)" if rcq > max_qp else ""
                over |= bool(mark)
                cells.append(f"{rcq:,}{mark}, {size(b)}")
            print(f"| {n:,} | {p} | " + " | ".join(cells) + " |")
    if over:
        print(f"\n(!) more RC QPs than this device allows ({max_qp:,}).")


if __name__ == "__main__":
    main()
