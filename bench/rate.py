#!/usr/bin/env python3
"""How close a rate-limited job comes to the rate asked, iolab against fio
in the same run: 4 KiB random reads of a file laid out in full (buffered,
so the page cache serves them and the limit, not the disk, is what is
measured), one thread, `--rate-iops N` (fio: `--rate_iops=N`), on the
sync engine (fio: psync) and io_uring at depth 4 (fio: io_uring), tools
alternating, each a new process.

Prints, per engine and rate, the medians over the rounds of the IOPS done
as a share of the rate asked, and the elapsed time (a job that ends
before its runtime is a fault, not a rate).

Usage: bench/rate.py [--rates 20000,100000] [--runtime 2] [--rounds 3] [--iolab PATH] [--dir DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile


def iolab_run(exe, target, rate, engine, runtime):
    args = [exe, "run", "--target", target, "--rw", "randread", "--bs", "4k", "--rate-iops", str(rate),
            "--runtime", str(runtime), "--engine", engine, "--json", "-", "-q"]
    if engine == "uring":
        args += ["--iodepth", "4"]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    run = json.loads(out[out.index("{"):])["jobs"][0]["runs"][0]
    return run["read"]["iops"], run["elapsed_s"]


def fio_run(target, rate, engine, runtime):
    args = ["fio", "--name=rate", f"--filename={target}", "--rw=randread", "--bs=4k", f"--rate_iops={rate}",
            "--time_based", f"--runtime={runtime}", "--output-format=json", "--randrepeat=0", "--norandommap"]
    args += ["--ioengine=io_uring", "--iodepth=4"] if engine == "uring" else ["--ioengine=psync"]
    job = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)["jobs"][0]
    return job["read"]["iops"], job["job_runtime"] / 1000.0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rates", default="20000,100000")
    p.add_argument("--runtime", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iolab", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "iolab"))
    p.add_argument("--dir", default=None)
    a = p.parse_args()
    rates = [int(r) for r in a.rates.split(",")]
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        target = os.path.join(d, "rate.img")
        subprocess.run([a.iolab, "run", "--target", target, "--size", "64m", "--rw", "write", "--bs", "1m", "-q"],
                       check=True, capture_output=True)
        got = {}
        for _ in range(a.rounds):
            for engine in ["sync", "uring"]:
                for rate in rates:
                    for tool in ["iolab", "fio"]:
                        iops, elapsed = (iolab_run(a.iolab, target, rate, engine, a.runtime) if tool == "iolab"
                                         else fio_run(target, rate, engine, a.runtime))
                        got.setdefault((engine, rate, tool), []).append((iops / rate, elapsed))
    print("engine  rate      tool    done/asked (min-max)        elapsed s (min)")
    for (engine, rate, tool), runs in got.items():
        shares = [s for s, _ in runs]
        print(f"{engine:7} {rate:<9} {tool:7} {statistics.median(shares):.3f} ({min(shares):.3f}-{max(shares):.3f})"
              f"        {min(e for _, e in runs):.2f}")


if __name__ == "__main__":
    main()
