#!/usr/bin/env python3
"""Two builds of iolab against each other on the policies' sweep: each
round runs `iolab sweep policies --shape S --copies N --repeat 1
--policies softdep,async` with the old build, then with the new (the
order alternating between rounds), and prints per build the medians of
each column's seconds and of softdep's ratio to async in the same run,
then the new build's time over the old's, round by round.

    bench/policies_ab.py --old /tmp/old/iolab --new target/release/iolab --shape random --rounds 5

Measured, in-process, a new file system per run on the sweep's own
sparse file under the system's temporary directory (buffered).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def sweep(iolab, shape, copies, phase, policies):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([iolab, "sweep", "policies", "--shape", shape, "--copies", str(copies), "--repeat", "1",
                        "--policies", policies, "--json", out.name], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        doc = json.load(open(out.name))
    return {c["name"]: c[phase]["median_s"] for c in doc["columns"]}


def spread(values):
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "iolab"))
    ap.add_argument("--shape", default="random")
    ap.add_argument("--copies", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--phase", default="tar", choices=["tar", "rm"])
    ap.add_argument("--policies", default="softdep,async")
    args = ap.parse_args()
    runs = {"old": [], "new": []}
    for r in range(args.rounds):
        for build in (["old", "new"] if r % 2 == 0 else ["new", "old"]):
            runs[build].append(sweep(getattr(args, build), args.shape, args.copies, args.phase, args.policies))
            print(f"round {r + 1}/{args.rounds} {build}: {runs[build][-1]}", file=sys.stderr, flush=True)
    policies = args.policies.split(",")
    print(f"{args.shape}, {args.copies} copies, {args.phase}, {args.rounds} rounds: median (min-max) seconds")
    for build in ("old", "new"):
        cols = "  ".join(f"{p} {spread([run[p] for run in runs[build]])}" for p in policies)
        line = f"{build:<4} {cols}"
        if "softdep" in policies and "async" in policies:
            line += f"  softdep/async {spread([run['softdep'] / run['async'] for run in runs[build]])}"
        print(line)
    for p in policies:
        print(f"{p} new/old {spread([n[p] / o[p] for n, o in zip(runs['new'], runs['old'])])}")


if __name__ == "__main__":
    sys.exit(main())
