#!/usr/bin/env python3
"""What simulating a disk costs: requests simulated per second of CPU.

Issue 18's benchmark: 4 KiB random reads at queue depth 32 on sim:hdd and
sim:ssd (defaults, data discarded), a minute of modeled time each, against
fio's null engine (which does no I/O: the cost of issuing and completing a
request alone) at the same depth, the runs alternating. The table gives the
median requests per CPU-second of each and the ratio. The sim figures are
CPU time for virtual time: a minute modeled takes this much CPU.

Usage: bench/sim.py [--modeled S] [--repeats N] [--iolab PATH]
Needs fio on PATH and a release build of iolab (cargo build --release).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out[out.index("{"):])


def iolab_sim(iolab, model, modeled_s):
    cmd = [iolab, "run", "--target", model, "--rw", "randread", "--bs", "4k", "--iodepth", "32",
           "--runtime", f"{modeled_s}s", "--json", "-", "-q", "--seed", "7"]
    run = run_json(cmd)["jobs"][0]["runs"][0]
    ios = run["read"]["ios"] + run["write"]["ios"]
    cpu_s = run["cpu"]["user_s"] + run["cpu"]["system_s"]
    return ios, cpu_s


def fio_null(runtime_s):
    cmd = ["fio", "--ioengine=null", "--rw=randread", "--bs=4k", "--size=1g", "--iodepth=32",
           "--output-format=json", "--time_based", f"--runtime={runtime_s}", "--numjobs=1",
           "--randrepeat=0", "--norandommap", "--name=bench"]
    j = run_json(cmd)["jobs"][0]
    ios = j["read"]["total_ios"]
    runtime = j["read"]["runtime"] / 1000.0
    cpu_s = (j["usr_cpu"] + j["sys_cpu"]) / 100.0 * runtime
    return ios, cpu_s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modeled", type=int, default=60, help="modeled seconds per sim run (default 60)")
    ap.add_argument("--fio-runtime", type=int, default=3, help="seconds per fio run (default 3)")
    ap.add_argument("--repeats", type=int, default=5, help="runs of each (default 5)")
    ap.add_argument("--iolab", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "iolab"))
    args = ap.parse_args()
    if not shutil.which("fio"):
        sys.exit("fio is not on PATH: apt-get install fio")
    if not os.path.exists(args.iolab):
        sys.exit(f"{args.iolab} not found: cargo build --release")
    rates = {"sim:hdd": [], "sim:ssd": [], "fio null": []}
    cpu = {"sim:hdd": [], "sim:ssd": []}
    for _ in range(args.repeats):
        for model in ["sim:hdd", "sim:ssd"]:
            ios, cpu_s = iolab_sim(args.iolab, model, args.modeled)
            rates[model].append(ios / max(cpu_s, 1e-3))
            cpu[model].append(cpu_s)
        ios, cpu_s = fio_null(args.fio_runtime)
        rates["fio null"].append(ios / max(cpu_s, 1e-3))
    fio = statistics.median(rates["fio null"])
    print(f"# requests per CPU-second, 4 KiB random reads at depth 32; {args.repeats} runs, medians "
          f"(sim: {args.modeled} s modeled a run)")
    print(f"{'what':<10} {'req/CPU-s':>12} {'vs fio null':>12} {'CPU for the run':>16}")
    for what, rs in rates.items():
        med = statistics.median(rs)
        run_cpu = f"{statistics.median(cpu[what]):.3f} s" if what in cpu else "-"
        print(f"{what:<10} {med:>12.0f} {med / fio:>12.2f} {run_cpu:>16}")
    print("\nall runs (req/CPU-s):")
    for what, rs in rates.items():
        print(f"  {what:<10} " + " ".join(f"{r:.0f}" for r in rs))


if __name__ == "__main__":
    main()
