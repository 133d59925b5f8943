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

The agent's RC QPs have two send depths (rvtd's --sq-depth and
--shallow-sq-depth): a node's own and those of its first deep_peers remote
nodes are deep (q_rvt), every further remote node's shallow
(q_rvt_shallow). A measurement made before the two depths (no
"rvt_shallow" object, no config.deep_peers) is read as every QP deep, as
the agent then made them; one with only one of the two is refused.

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
        names = {o["name"] for o in m["probe"]["objects"]}
        deep_peers = cfg.get("deep_peers")
        if ("rvt_shallow" in names) != (deep_peers is not None):
            raise ValueError("rvt_shallow and config.deep_peers go together"
                             " (a measurement has both or, made before the "
                             "shallow QPs, neither)")
        two_depths = deep_peers is not None
        if two_depths:
            q_shallow = cost("rvt_shallow")
            deep_peers = int(deep_peers)
        else:  # before the two depths: every QP deep
            q_shallow, deep_peers = q_rvt, None
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
        # remote nodes N - 1: the first deep_peers deep, the rest shallow;
        # and the node's own K, deep
        shallow = 0 if deep_peers is None else max(0, n - 1 - deep_peers)
        deep = n - shallow
        rvt = (k * n, 1, k * deep * q_rvt + k * shallow * q_shallow +
               q_srq + q_ud + r_agent)
        hybrid = (rvt[0], 1 + p, rvt[2] + p * (q_ud + r_ud))
        return {"rc_verbs": rc, "ud_verbs,rvt": hybrid, "rvt": rvt}

    kib = lambda b: f"{b / 1024:,.0f} KiB"
    wr = lambda name: next(o.get("granted", {}).get("wr", "?")
                           for o in probe["objects"] if o["name"] == name)
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
    if two_depths:
        print(f"- q_rvt = {kib(q_rvt)}: one of the agent's deep RC QPs "
              f"({wr('rvt')} send WRs)")
        print(f"- q_rvt_shallow = {kib(q_shallow)}: one of its shallow RC "
              f"QPs ({wr('rvt_shallow')} send WRs)")
    else:
        print(f"- q_rvt = {kib(q_rvt)}: one of the agent's RC QPs "
              "(measured before the shallow ones: every QP deep)")
    print(f"- q_srq = {kib(q_srq)}: the agent's shared receive queue")
    print("\nRegistered while running (`rdma resource show mr`):\n")
    print(f"- r_rc    = {kib(r_rc)}: a rc_verbs process (with its UD for "
          "wire-up)")
    print(f"- r_ud    = {kib(r_ud)}: a ud_verbs process")
    print(f"- r_agent = {kib(r_agent)}: the agent, one client attached "
          f"({cfg['srq_size']} receive buffers of {cfg['am_size']} B)")
    print("\nPer node, P ranks per node, N nodes, K = "
          f"{k} QPs per remote node (and K to its own)", end="")
    if two_depths:
        print(f", D = {deep_peers:,} remote nodes with deep QPs:\n")
        q_agent = ("K x (min(N - 1, D) + 1) x q_rvt + "
                   "K x max(0, N - 1 - D) x q_rvt_shallow")
    else:
        print(":\n")
        q_agent = "K x N x q_rvt"
    print("- rc_verbs:     P x P x (N - 1) RC + P UD; "
          "P x P x (N - 1) x q_rc + P x (q_ud + r_rc)")
    print("- ud_verbs,rvt: K x N RC + 1 + P UD; "
          f"{q_agent} + q_srq + q_ud + r_agent + P x (q_ud + r_ud)")
    print("- rvt:          K x N RC + 1 UD; "
          f"{q_agent} + q_srq + q_ud + r_agent")
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
