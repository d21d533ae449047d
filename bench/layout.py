#!/usr/bin/env python3
"""What reading holes does to a figure, and what laying out costs.

Three arms on a new 1 GiB file each round, alternating, in one run:
  holes   iolab randread on a new sparse file with --layout never (the
          figure iolab used to print plainly; now marked read*)
  layout  iolab randread on a new sparse file, laid out first (default);
          the layout's own time is taken from the JSON
  fio     fio randread on the file the layout arm left (fio's own layout
          is not needed: the file is written)
All: 4 KiB random reads, O_DIRECT, io_uring, queue depth 32, 1 thread.
Prints medians and min-max over the rounds, and the ratios to fio.

Usage: bench/layout.py [--dir DIR] [--runtime S] [--rounds N] [--iolab PATH]
Needs fio on PATH and a release build of iolab (cargo build --release).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out[out.index("{"):])


def iolab_read(iolab, path, runtime, layout):
    cmd = [iolab, "run", "--target", path, "--size", "1g", "--rw", "randread", "--bs", "4k", "--direct",
           "--engine", "uring", "--iodepth", "32", "--runtime", str(runtime), "--layout", layout,
           "--json", "-", "-q", "--seed", "7"]
    job = run_json(cmd)["jobs"][0]
    return job["runs"][0]["read"]["iops"], job["target"]["layout"]["seconds"]


def fio_read(path, runtime):
    cmd = ["fio", f"--filename={path}", "--ioengine=io_uring", "--fixedbufs", "--registerfiles", "--direct=1",
           "--iodepth=32", "--rw=randread", "--bs=4k", "--size=1g", "--output-format=json", "--time_based",
           f"--runtime={runtime}", "--numjobs=1", "--randrepeat=0", "--norandommap", "--name=bench"]
    return run_json(cmd)["jobs"][0]["read"]["iops"]


def spread(values):
    return f"{statistics.median(values):>10.0f}  ({min(values):.0f}-{max(values):.0f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=None, help="directory for the test files (default: a temporary one)")
    ap.add_argument("--runtime", type=int, default=5, help="seconds per run (default 5)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the three arms (default 3)")
    ap.add_argument("--iolab", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "iolab"))
    args = ap.parse_args()
    if not shutil.which("fio"):
        sys.exit("fio is not on PATH: apt-get install fio")
    if not os.path.exists(args.iolab):
        sys.exit(f"{args.iolab} not found: cargo build --release")
    workdir = tempfile.mkdtemp(prefix="iolab-bench-", dir=args.dir)
    arms = {"holes": [], "layout": [], "fio": []}
    layout_s = []
    ratios = {"holes": [], "layout": []}
    try:
        for _ in range(args.rounds):
            sparse = os.path.join(workdir, "sparse.img")
            laid = os.path.join(workdir, "laid.img")
            for p in (sparse, laid):
                if os.path.exists(p):
                    os.remove(p)
            holes, _ = iolab_read(args.iolab, sparse, args.runtime, "never")
            layout, seconds = iolab_read(args.iolab, laid, args.runtime, "auto")
            fio = fio_read(laid, args.runtime)
            for arm, v in (("holes", holes), ("layout", layout), ("fio", fio)):
                arms[arm].append(v)
            layout_s.append(seconds)
            ratios["holes"].append(holes / fio)
            ratios["layout"].append(layout / fio)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"{args.rounds} rounds, {args.runtime} s per run; read IOPS median (min-max), ratio to fio median")
    for arm in ("holes", "layout", "fio"):
        ratio = f"{statistics.median(ratios[arm]):.2f}" if arm in ratios else "1.00"
        print(f"  {arm:<7} {spread(arms[arm])}   x{ratio}")
    print(f"  layout of 1 GiB: {statistics.median(layout_s):.2f} s median ({min(layout_s):.2f}-{max(layout_s):.2f})")


if __name__ == "__main__":
    main()
