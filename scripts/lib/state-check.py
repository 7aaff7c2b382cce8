#!/usr/bin/env python3
"""The invariants of a state directory after a burst, read where it is
mounted (run on each host as the user that owns it): prints one JSON line.

- double: tokens whose uses admitted more nodes than the token has uses
  (token-admitted records grouped by their ledger entry);
- unparsable: records in nodes/ that do not parse (torn);
- torn_audit: audit lines that do not parse;
- uses: use markers in token-uses/ that a node spent (revoked_uses: those
  `tokens revoke` filled); uses_unadmitted: markers whose node has no
  token-admitted record;
- shared_names: names other than the ledger's, claims, temp files and
  `tokens` that have a second link (the rename trap, docs/deploying.md);
  shared_with_temp: those whose other names are all `.tmp-*` leftovers
  (removed by a maintenance pass once a minute old), counted apart;
- meta_unparsable: tokens.meta.json present but not JSON.
"""
import json
import os
import re
import sys
from collections import Counter

state = sys.argv[1]
out = Counter()
admitted = set()
claims = Counter()
for name in os.listdir(os.path.join(state, "nodes")):
    if not name.endswith(".json") or name.startswith("."):
        continue
    out["records"] += 1
    try:
        with open(os.path.join(state, "nodes", name), "rb") as f:
            record = json.load(f)
    except ValueError:
        out["unparsable"] += 1
        continue
    if record.get("admitted") and record.get("admitted_by") == "token":
        out["token_admitted"] += 1
        admitted.add(record.get("id"))
        claims[record.get("token_claim")] += 1
# Every token in these runs has one use.
out["double"] = sum(1 for n in claims.values() if n > 1)
ledger = os.path.join(state, "token-uses")
for name in os.listdir(ledger) if os.path.isdir(ledger) else []:
    # A use is <mac>-<n>; <mac>.ca-<sha256> indexes it, <mac>.revoked revokes.
    if not re.fullmatch(r"[0-9a-f]{64}-[0-9]+", name):
        continue
    with open(os.path.join(ledger, name), "rb") as f:
        text = f.read().strip()
    if text == b"revoked":
        out["revoked_uses"] += 1  # `tokens revoke` fills the uses left
        continue
    out["uses"] += 1
    try:
        holder = json.loads(text)
    except ValueError:
        holder = {}
    if holder.get("id") not in admitted:
        out["uses_unadmitted"] += 1
audit = os.path.join(state, "audit")
for name in os.listdir(audit) if os.path.isdir(audit) else []:
    if name.startswith("."):
        continue  # a probe or temp file of a replica still running
    with open(os.path.join(audit, name), "rb") as f:
        for line in f:
            if not line.strip():
                continue
            out["audit_lines"] += 1
            try:
                json.loads(line)
            except ValueError:
                out["torn_audit"] += 1
names_of = {}  # inode: every name it has in the state directory
linked = []
for root, _, files in os.walk(state):
    for name in files:
        path = os.path.join(root, name)
        shared = (path.startswith(ledger + "/") or name.startswith(".claim-")
                  or name.startswith(".tmp-") or path == os.path.join(state, "tokens"))
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue  # a temp file gone since the listing
        names_of.setdefault((st.st_dev, st.st_ino), []).append(name)
        if not shared and st.st_nlink > 1 and not os.path.islink(path):
            linked.append((path, (st.st_dev, st.st_ino), st.st_nlink))
for path, inode, links in linked:
    others = [n for n in names_of[inode] if n != os.path.basename(path)]
    if len(others) == links - 1 and all(n.startswith(".tmp-") for n in others):
        # A temp name a write could not remove (a host cut off mid-write,
        # its removal lost in the heal): maintenance removes it within a minute.
        out["shared_with_temp"] += 1
        continue
    out["shared_names"] += 1
    print(f"state-check: {path} has {links} links, others here: {others}", file=sys.stderr)
meta = os.path.join(state, "tokens.meta.json")
if os.path.exists(meta):
    try:
        with open(meta, "rb") as f:
            out["meta_tokens"] = len(json.load(f))
    except ValueError:
        out["meta_unparsable"] += 1
for key in ("double", "unparsable", "torn_audit", "uses_unadmitted", "shared_names", "meta_unparsable"):
    out.setdefault(key, 0)
print(json.dumps(dict(sorted(out.items()))))
