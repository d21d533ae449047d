#!/usr/bin/env python3
"""Same-run A/B of two iolab builds on a noisy machine.

Each round runs every arm with every build, alternating, on one file; a
build's arm is reported as the median of its per-round ratios to the same
build's first arm ("off" by default) and to build A's same arm. Ratios
taken within a round cancel most of a noisy host's drift, which absolute
IOPS do not.

Usage: bench/ab.py --a OLD_BINARY --b NEW_BINARY [--rounds 6] [--runtime 4]
                   [--size 1g] [--dir DIR] [--common "FLAGS"]
                   [--arm "name=FLAGS" ...]

Default arms (sync engine, 32 threads, 4 KiB random writes, O_DIRECT):
  off, validate (no pre-read), group (no pre-read)
A journal arm gets its own --journal directory beside the target.
"""
import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

DEFAULT_COMMON = "--rw randwrite --bs 4k --direct --engine sync --threads 32"
DEFAULT_ARMS = [
    "off=",
    "validate=--validate --no-preread",
    "group=--validate --no-preread --journal-mode group",
]


def run(exe, args):
    out = subprocess.run([exe, "run", *args, "--json", "-", "-q"], check=True, capture_output=True, text=True).stdout
    doc = json.loads(out[out.index("{"):])
    run = doc["jobs"][0]["runs"][0]
    return run["write"]["iops"] + run["read"]["iops"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="the build to compare against")
    ap.add_argument("--b", required=True, help="the build under test")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--runtime", type=int, default=4)
    ap.add_argument("--size", default="1g")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--common", default=DEFAULT_COMMON)
    ap.add_argument("--arm", action="append", default=None, metavar="NAME=FLAGS")
    args = ap.parse_args()
    for exe in (args.a, args.b):
        if not os.path.exists(exe):
            sys.exit(f"{exe} not found")
    arms = []
    for spec in args.arm or DEFAULT_ARMS:
        name, sep, flags = spec.partition("=")
        if not sep:
            sys.exit(f"--arm {spec!r}: expected NAME=FLAGS")
        arms.append((name, shlex.split(flags)))
    builds = [("A", args.a), ("B", args.b)]
    work = tempfile.mkdtemp(prefix="iolab-ab-", dir=args.dir)
    target = os.path.join(work, "target.img")
    iops = {(b, name): [] for b, _ in builds for name, _ in arms}
    try:
        subprocess.run([args.a, "run", "--target", target, "--size", args.size, "--rw", "write", "--bs", "1m",
                        "--direct", "-q"], check=True, capture_output=True)
        common = ["--target", target, *shlex.split(args.common), "--runtime", str(args.runtime), "--force"]
        for r in range(args.rounds):
            # Alternate which build goes first, so neither always follows the other.
            order = builds if r % 2 == 0 else builds[::-1]
            for name, flags in arms:
                for b, exe in order:
                    extra = list(flags)
                    if "--journal-mode" in extra:
                        jdir = os.path.join(work, "journal")
                        shutil.rmtree(jdir, ignore_errors=True)
                        extra += ["--journal", jdir]
                    iops[(b, name)].append(run(exe, common + extra))
            line = "  ".join(f"{b}:{name}={iops[(b, name)][-1]:.0f}" for b, _ in builds for name, _ in arms)
            print(f"round {r + 1}: {line}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    base = arms[0][0]
    print(f"# {args.rounds} rounds of {args.runtime} s; common flags: {args.common}")
    print(f"# A = {args.a}\n# B = {args.b}")
    print(f"{'arm':<12} {'A IOPS':>9} {'B IOPS':>9} {'A/' + base:>8} {'B/' + base:>8} {'B/A':>6}  B/A per round")
    for name, _ in arms:
        a, b = iops[("A", name)], iops[("B", name)]
        a_rel = [x / y for x, y in zip(a, iops[("A", base)])]
        b_rel = [x / y for x, y in zip(b, iops[("B", base)])]
        b_over_a = [y / x for x, y in zip(a, b)]
        print(f"{name:<12} {statistics.median(a):>9.0f} {statistics.median(b):>9.0f} "
              f"{statistics.median(a_rel):>8.3f} {statistics.median(b_rel):>8.3f} "
              f"{statistics.median(b_over_a):>6.3f}  " + " ".join(f"{x:.2f}" for x in b_over_a))


if __name__ == "__main__":
    main()
