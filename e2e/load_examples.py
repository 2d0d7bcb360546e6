#!/usr/bin/env python3
"""Apply example states to a real cluster: objects first, then claims' status.allocation
through the status subresource (the API server ignores status on create), which makes
the scheduler treat those devices as in use. Fake uids in the examples are dropped.
DeviceTaintRules go in the version the server serves them in (v1alpha3 before 1.36, v1beta2,
v1 from 1.37: the same fields for a driver/pool/device selector).

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
    served = served_taint_rule_version(args.kubectl)
    for doc in docs:
        if doc.get("kind") == "DeviceTaintRule" and served:
            doc["apiVersion"] = f"resource.k8s.io/{served}"
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


def served_taint_rule_version(kubectl: str) -> str | None:
    """The preferred resource.k8s.io version that serves DeviceTaintRules, if any."""
    group = subprocess.run([kubectl, "get", "--raw", "/apis/resource.k8s.io"],
                           text=True, capture_output=True)
    if group.returncode != 0:
        return None
    doc = json.loads(group.stdout)
    preferred = doc.get("preferredVersion", {}).get("version")
    versions = sorted((v["version"] for v in doc.get("versions", [])),
                      key=lambda v: v != preferred)
    for version in versions:
        found = subprocess.run([kubectl, "get", "--raw", f"/apis/resource.k8s.io/{version}"],
                               text=True, capture_output=True)
        if found.returncode == 0 and any(r.get("kind") == "DeviceTaintRule"
                                         for r in json.loads(found.stdout).get("resources", [])):
            return version
    return None


if __name__ == "__main__":
    sys.exit(main())
