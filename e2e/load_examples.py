#!/usr/bin/env python3
"""Apply example states to a real cluster: objects first, then claims' status.allocation
through the status subresource (the API server ignores status on create), which makes
the scheduler treat those devices as in use. Fake uids in the examples are dropped.

usage: e2e/load_examples.py [--kubectl PATH] FILE...
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import yaml


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kubectl", default="kubectl")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    statuses = []
    docs = []
    for path in args.files:
        with open(path, encoding="utf-8") as fh:
            docs.extend(d for d in yaml.safe_load_all(fh) if d)
    for doc in docs:
        doc.get("metadata", {}).pop("uid", None)
        status = doc.pop("status", None)
        if doc.get("kind") == "ResourceClaim" and status:
            statuses.append((doc["metadata"], status))
    # Namespaces and classes first so that everything else finds them.
    docs.sort(key=lambda d: {"Namespace": 0, "DeviceClass": 1}.get(d.get("kind", ""), 2))
    text = yaml.safe_dump_all(docs)
    proc = subprocess.run([args.kubectl, "apply", "--server-side", "--force-conflicts", "-f",
                           "-"], input=text, text=True, capture_output=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        return proc.returncode
    for meta, status in statuses:
        patch = json.dumps({"status": status})
        proc = subprocess.run([args.kubectl, "patch", "resourceclaim", meta["name"], "-n",
                               meta.get("namespace", "default"), "--subresource=status",
                               "--type=merge", "-p", patch], text=True, capture_output=True)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            return proc.returncode
    print(f"applied {len(docs)} objects, {len(statuses)} claim allocations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
