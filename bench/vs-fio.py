#!/usr/bin/env python3
"""iolab against fio on the same jobs, in one run, with ratios.

Jobs (issue 3's benchmark):
  a) 4 KiB random writes, O_DIRECT, io_uring, queue depth 32, 1 thread, 1 GiB file
  b) the same with random reads (the file is written in full first)
  c) engine overhead: iolab on a null target against fio's null engine
Each job runs REPEATS times per tool, the tools alternating; the table gives
medians and the iolab/fio ratios of IOPS and of CPU time per I/O.

Usage: bench/vs-fio.py [--dir DIR] [--runtime S] [--repeats N] [--iolab PATH]
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


def iolab_job(iolab, job, path, runtime):
    common = ["--runtime", str(runtime), "--json", "-", "-q", "--seed", "7"]
    if job == "null":
        cmd = [iolab, "run", "--target", "null:1g", "--rw", "randread", "--bs", "4k", *common]
    else:
        rw = "randwrite" if job == "randwrite" else "randread"
        cmd = [iolab, "run", "--target", path, "--rw", rw, "--bs", "4k", "--direct",
               "--engine", "uring", "--iodepth", "32", "--force", *common]
    run = run_json(cmd)["jobs"][0]["runs"][0]
    ios = run["read"]["ios"] + run["write"]["ios"]
    iops = run["read"]["iops"] + run["write"]["iops"]
    cpu_s = run["cpu"]["user_s"] + run["cpu"]["system_s"]
    return iops, cpu_s / ios


def fio_job(job, path, runtime):
    common = ["--output-format=json", "--time_based", f"--runtime={runtime}", "--bs=4k",
              "--numjobs=1", "--group_reporting", "--randrepeat=0", "--norandommap", "--name=bench"]
    if job == "null":
        cmd = ["fio", "--ioengine=null", "--rw=randread", "--size=1g", "--iodepth=1", *common]
    else:
        rw = "randwrite" if job == "randwrite" else "randread"
        cmd = ["fio", f"--filename={path}", "--ioengine=io_uring", "--fixedbufs", "--registerfiles",
               "--direct=1", "--iodepth=32", f"--rw={rw}", "--size=1g", *common]
    j = run_json(cmd)["jobs"][0]
    ios = j["read"]["total_ios"] + j["write"]["total_ios"]
    iops = j["read"]["iops"] + j["write"]["iops"]
    runtime_s = max(j["read"]["runtime"], j["write"]["runtime"]) / 1000.0
    cpu_s = (j["usr_cpu"] + j["sys_cpu"]) / 100.0 * runtime_s
    return iops, cpu_s / max(ios, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=None, help="directory for the 1 GiB test file (default: a temporary one)")
    ap.add_argument("--runtime", type=int, default=5, help="seconds per run (default 5)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per tool and job (default 3)")
    ap.add_argument("--iolab", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "iolab"))
    args = ap.parse_args()
    if not shutil.which("fio"):
        sys.exit("fio is not on PATH: apt-get install fio")
    if not os.path.exists(args.iolab):
        sys.exit(f"{args.iolab} not found: cargo build --release")
    workdir = tempfile.mkdtemp(prefix="iolab-bench-", dir=args.dir)
    path = os.path.join(workdir, "bench.img")
    try:
        # Write the file in full so random reads hit real blocks, not holes.
        subprocess.run([args.iolab, "run", "--target", path, "--size", "1g", "--rw", "write", "--bs", "1m",
                        "--direct", "-q"], check=True, capture_output=True)
        rows = []
        for job in ["randwrite", "randread", "null"]:
            results = {"iolab": [], "fio": []}
            for _ in range(args.repeats):
                results["iolab"].append(iolab_job(args.iolab, job, path, args.runtime))
                results["fio"].append(fio_job(job, path, args.runtime))
            med = {tool: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs))
                   for tool, rs in results.items()}
            rows.append((job, med, results))
        print(f"# iolab vs fio: {args.repeats} runs of {args.runtime} s per tool and job, medians")
        print(f"{'job':<10} {'iolab IOPS':>12} {'fio IOPS':>12} {'IOPS ratio':>10} "
              f"{'iolab CPU/IO':>13} {'fio CPU/IO':>11} {'CPU ratio':>9}")
        for job, med, _ in rows:
            (ii, ic), (fi, fc) = med["iolab"], med["fio"]
            print(f"{job:<10} {ii:>12.0f} {fi:>12.0f} {ii / fi:>10.2f} {ic * 1e6:>11.2f}us {fc * 1e6:>9.2f}us "
                  f"{ic / fc:>9.2f}")
        print("\nall runs (IOPS):")
        for job, _, results in rows:
            for tool, rs in results.items():
                print(f"  {job:<10} {tool:<6} " + " ".join(f"{r[0]:.0f}" for r in rs))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
