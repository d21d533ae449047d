#!/usr/bin/env python3
"""iolab's ranks under MPI: how the aggregate scales, and what MPI costs.

Issue 21's benchmark. For 1, 2 and 4 ranks (on this machine's cores,
oversubscribed past them), 4 KiB random reads by one thread per rank:
- `mpirun -np N iolab run ...`: the aggregate IOPS (every rank's requests
  over the first start to the last end) and its ratio to N times one
  iolab run alone (the sum of single-rank runs);
- fio with numjobs=N on the same targets (group_reporting), the peer
  measured in the same round: the ratio iolab/fio;
- the cost of running under mpirun: its wall time less the run's, against
  the same for iolab alone, and the spread of the ranks' starts after the
  barrier (the barrier's skew).
Targets: mem: (each rank's own memory; no fio peer) and files of 256 MiB
per rank laid out on the disk under /tmp, read through the page cache
(buffered, the cache kept warm: iolab's --keep-cache, fio's
invalidate=0).

Usage: bench/mpi.py [--runtime S] [--repeats N] [--iolab PATH]
Needs a release build with the feature (cargo build --release --features
mpi), Open MPI's mpirun and fio on PATH.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader"]


def timed(cmd):
    start = time.monotonic()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return out, time.monotonic() - start


def iolab_alone(iolab, target, runtime):
    cmd = [iolab, "run", "--target", target, "--rw", "randread", "--bs", "4k", "--runtime",
           f"{runtime}s", "--json", "-", "-q", "--size", "256m", "--keep-cache"]
    out, wall = timed(cmd)
    run = json.loads(out)["jobs"][0]["runs"][0]
    return run["read"]["iops"], wall - run["elapsed_s"]


def iolab_ranks(iolab, n, target, runtime):
    cmd = MPIRUN + ["-np", str(n), iolab, "run", "--target", target, "--rw", "randread", "--bs", "4k",
                    "--runtime", f"{runtime}s", "--size", "256m", "--keep-cache", "--json", "-"]
    out, wall = timed(cmd)
    doc = json.loads(out[out.index("{"):])
    agg = doc["aggregate"][0]
    starts = [r["windows"][0][0][0] for r in doc["ranks"]]
    return agg["iops"], wall - agg["window_s"], max(starts) - min(starts)


def fio_jobs(n, files, runtime):
    cmd = ["fio", "--name=iolab-mpi-peer", "--rw=randread", "--bs=4k", "--ioengine=psync", "--size=256m",
           f"--numjobs={n}", "--group_reporting", "--time_based", f"--runtime={runtime}",
           "--invalidate=0", "--output-format=json", f"--filename_format={files}"]
    out, _ = timed(cmd)
    return json.loads(out)["jobs"][0]["read"]["iops"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runtime", type=int, default=3, help="seconds per run (default 3)")
    ap.add_argument("--repeats", type=int, default=3, help="rounds (default 3)")
    ap.add_argument("--iolab", default="target/release/iolab")
    args = ap.parse_args()
    for tool in ("mpirun", "fio"):
        if shutil.which(tool) is None:
            sys.exit(f"bench/mpi.py: {tool} is not on PATH (apt-get install openmpi-bin fio)")
    work = tempfile.mkdtemp(prefix="iolab-mpi-", dir="/tmp")
    try:
        # Lay the files out once (each rank's, and fio's names for them).
        for n in (4,):
            subprocess.run(MPIRUN + ["-np", str(n), args.iolab, "run", "--target", f"{work}/t{{rank}}.img",
                                     "--size", "256m", "--rw", "write", "--bs", "1m", "--json", os.devnull],
                           check=True, capture_output=True)
        targets = [("mem: (each rank's memory)", "mem:256m", None),
                   ("files on /tmp (ext4), buffered", f"{work}/t{{rank}}.img", f"{work}/t$jobnum.img")]
        print(f"# 4 KiB random reads, 1 thread per rank, {args.runtime} s runs, medians of {args.repeats}")
        print("| target | ranks | iolab aggregate IOPS | x (ranks x one alone) | fio numjobs IOPS | iolab/fio "
              "| mpirun's cost (s) | alone's cost (s) | start skew (ms) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for label, target, fio_files in targets:
            alone_target = target.replace("{rank}", "0")
            for n in (1, 2, 4):
                rows = []
                for _ in range(args.repeats):
                    one, one_cost = iolab_alone(args.iolab, alone_target, args.runtime)
                    if n == 1:
                        agg, cost, skew = one, one_cost, 0.0
                    else:
                        agg, cost, skew = iolab_ranks(args.iolab, n, target, args.runtime)
                    fio = fio_jobs(n, fio_files, args.runtime) if fio_files else float("nan")
                    rows.append((agg, agg / (n * one), fio, agg / fio, cost, one_cost, skew * 1000))
                med = [statistics.median(col) for col in zip(*rows)]
                fio_cells = f"{med[2]:,.0f} | {med[3]:.2f}" if fio_files else "- | -"
                print(f"| {label} | {n} | {med[0]:,.0f} | {med[1]:.2f} | {fio_cells} "
                      f"| {med[4]:.2f} | {med[5]:.2f} | {med[6]:.2f} |")
                sys.stdout.flush()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
