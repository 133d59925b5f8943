#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The agent's folders include only what their rules allow.

Each folder of src/uct/ib/rvt/agent/ says in its README what it may
include; this table is those rules, checked against every #include of
every file in the folder:

  device  common/; nothing else of agent/; the only folder that includes
          the verbs headers (<infiniband/...>, <rdma/...>)
  peers   common/, device/nic.h
  attach  common/, device/device_grant.h
  engine  common/, device/nic.h, peers/, attach/
  serve   common/, any folder of agent/

and none of them includes the process's side (client/, uct/). A folder's
own files are always allowed. Prints a PASS line per folder, a FAIL line
per include that breaks its rule; exits 1 if any did.

Usage: check-agent-includes.py [SRC_TOP]   (default: the tree it is in)
"""
import os
import re
import sys

top = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..")
agent = os.path.join(top, "src", "uct", "ib", "rvt", "agent")

# folder -> what it may include of agent/ besides itself: a folder name
# (all of it) or a file path under agent/
RULES = {
    "device": [],
    "peers": ["device/nic.h"],
    "attach": ["device/device_grant.h"],
    "engine": ["device/nic.h", "peers", "attach"],
    "serve": ["device", "peers", "attach", "engine"],
}
VERBS_ONLY_IN = "device"

local = re.compile(r'^\s*#\s*include\s+"uct/ib/rvt/([^"]+)"')
system = re.compile(r'^\s*#\s*include\s+<((?:infiniband|rdma)/[^>]+)>')


def allowed(folder, path):
    """Whether a file of `folder` may include uct/ib/rvt/`path`."""
    if path.startswith("common/"):
        return True
    if not path.startswith("agent/"):
        return False  # client/, uct/: the process's side
    rest = path[len("agent/"):]
    if rest.startswith(folder + "/"):
        return True
    return any(rest == r or rest.startswith(r + "/") for r in RULES[folder])


failed = False
found = sorted(d for d in os.listdir(agent)
               if os.path.isdir(os.path.join(agent, d)))
for folder in found:
    if folder not in RULES:
        print(f"FAIL: agent/{folder}/ has no include rule here "
              f"(test/tools/check-agent-includes.py, RULES)")
        failed = True
        continue
    bad = []
    files = sorted(f for f in os.listdir(os.path.join(agent, folder))
                   if f.endswith((".h", ".cc")))
    for name in files:
        with open(os.path.join(agent, folder, name)) as f:
            for n, line in enumerate(f, 1):
                m = local.match(line)
                if m and not allowed(folder, m.group(1)):
                    bad.append(f"agent/{folder}/{name}:{n} includes "
                               f"{m.group(1)}")
                m = system.match(line)
                if m and folder != VERBS_ONLY_IN:
                    bad.append(f"agent/{folder}/{name}:{n} includes "
                               f"<{m.group(1)}> (only agent/"
                               f"{VERBS_ONLY_IN}/ may)")
    for b in bad:
        print(f"FAIL: {b}, which its folder's rule does not allow "
              f"(agent/{folder}/README.md)")
    if bad:
        failed = True
    else:
        print(f"PASS: agent/{folder}/: {len(files)} files include only "
              f"what its rule allows")
for folder in sorted(set(RULES) - set(found)):
    print(f"FAIL: no folder agent/{folder}/ for its rule")
    failed = True
sys.exit(1 if failed else 0)
