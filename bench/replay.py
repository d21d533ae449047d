#!/usr/bin/env python3
"""Replaying one fio I/O log with iolab and with fio, on the same file.

fio writes the trace (a random 70/30 mix of 4 KiB requests over --size,
an fsync every 32 writes, at fio's rate_iops=--rate-iops in each direction, for --secs;
fio's write_iolog).
Then, alternating within each round, each on the same preallocated file
with O_DIRECT, one request at a time:

  iolab-max   iolab run --replay T --replay-speed max --direct
  fio-max     fio --read_iolog=T --replay_no_stall=1 --direct=1 (psync)
  iolab-timed iolab run --replay T --direct           (the trace's times)
  fio-timed   fio --read_iolog=T --direct=1

Prints per arm the median (min-max) of the replay's own elapsed time
(iolab's elapsed_s; fio's job_runtime), requests a second, and for the
timed arms how far the elapsed time is from the trace's span; the ratio
iolab/fio of the max arms' rates.

Usage: bench/replay.py [--rounds 5] [--secs 5] [--rate-iops 2000] [--size 256m]
                       [--dir DIR] [--iolab PATH]
Needs fio and a release build (cargo build --release).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile


def sh(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def iolab_arm(iolab, trace, target, timed):
    speed = [] if timed else ["--replay-speed", "max"]
    out = sh(iolab, "run", "--replay", trace, "--target", target, "--direct", *speed, "--json", "-", "-q")
    run = json.loads(out)["jobs"][0]["runs"][0]
    return run["elapsed_s"], run["read"]["ios"] + run["write"]["ios"]


def fio_arm(trace, target, timed):
    stall = [] if timed else ["--replay_no_stall=1"]
    out = sh("fio", "--name=r", "--output-format=json", f"--read_iolog={trace}", f"--replay_redirect={target}",
             "--direct=1", "--ioengine=psync", *stall)
    job = json.loads(out)["jobs"][0]
    return job["job_runtime"] / 1000.0, job["read"]["total_ios"] + job["write"]["total_ios"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--secs", type=int, default=5, help="how long the traced run lasts")
    ap.add_argument("--rate-iops", type=int, default=2000, help="the traced run's rate")
    ap.add_argument("--size", default="256m")
    ap.add_argument("--dir", default=None, help="where the file goes (default: a temporary directory)")
    ap.add_argument("--iolab", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "iolab"))
    args = ap.parse_args()
    if shutil.which("fio") is None:
        sys.exit("fio is not installed: apt-get install fio")
    work = tempfile.mkdtemp(prefix="iolab-replay-bench-", dir=args.dir)
    try:
        target, trace = os.path.join(work, "target.img"), os.path.join(work, "trace.log")
        sh("fio", "--name=t", f"--filename={target}", f"--size={args.size}", "--rw=randrw", "--rwmixread=70",
           "--bs=4k", "--direct=1", f"--rate_iops={args.rate_iops}", f"--runtime={args.secs}", "--time_based",
           "--fsync=32", f"--write_iolog={trace}")
        lines = open(trace).read().splitlines()
        stamps = [int(line.split()[0]) for line in lines[1:] if len(line.split()) == 5]
        span = (max(stamps) - min(stamps)) / 1e6
        requests = sum(1 for line in lines if " read " in line or " write " in line)
        arms = {
            "iolab-max": lambda: iolab_arm(args.iolab, trace, target, False),
            "fio-max": lambda: fio_arm(trace, target, False),
            "iolab-timed": lambda: iolab_arm(args.iolab, trace, target, True),
            "fio-timed": lambda: fio_arm(trace, target, True),
        }
        got = {name: [] for name in arms}
        for _ in range(args.rounds):
            for name, arm in arms.items():
                elapsed, ios = arm()
                if ios != requests:
                    sys.exit(f"{name} replayed {ios} requests of the trace's {requests}")
                got[name].append(elapsed)
        print(f"trace: fio write_iolog, {requests} requests over {span:.2f} s; target {target} "
              f"({args.size}, O_DIRECT, depth 1); {args.rounds} rounds, medians (min-max)")
        for name, times in got.items():
            med = statistics.median(times)
            late = f"   {med / span:.3f} of the trace's span" if name.endswith("timed") else ""
            print(f"  {name:<12} {med:7.3f} s ({min(times):.3f}-{max(times):.3f})  {requests / med:9.0f} requests/s{late}")
        ratio = statistics.median(got["fio-max"]) / statistics.median(got["iolab-max"])
        print(f"iolab/fio requests a second, as fast as possible: {ratio:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
