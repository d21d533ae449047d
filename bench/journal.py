#!/usr/bin/env python3
"""The second seed's table (issue 4's benchmark), in one run on one file:
IOPS of 4 KiB random writes with validation off, on with and without the
pre-read, and with the journal in sync, async and group mode (without the
pre-read; group also with it). Every arm uses the same
engine and concurrency (sync engine, --threads N, O_DIRECT), so only
validation and the journal differ. The journal sits in a directory on the
same disk as the target.

With --engine uring every arm runs on one thread with --iodepth requests in
flight (default 32) instead of --threads threads on the sync engine.

When fio is on PATH, a "fio" arm runs the same writes unvalidated (io_uring
at the same depth, or psync with as many jobs as threads), so that "off"
itself is checked against a peer in the same run.

Usage: bench/journal.py [--dir DIR] [--engine sync|uring] [--threads 32] [--iodepth 32]
                        [--runtime S] [--repeats N] [--iolab PATH]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile


def run(exe, args):
    out = subprocess.run([exe, "run", *args, "--json", "-", "-q"], check=True, capture_output=True, text=True).stdout
    doc = json.loads(out[out.index("{"):])
    r = doc["jobs"][0]["runs"][0]
    return r["write"]["iops"], r


def run_fio(target, args, size):
    common = ["--output-format=json", "--time_based", f"--runtime={args.runtime}", "--bs=4k", "--direct=1",
              "--rw=randwrite", f"--size={size}", "--randrepeat=0", "--norandommap", "--group_reporting",
              "--name=bench", f"--filename={target}"]
    if args.engine == "uring":
        cmd = ["fio", "--ioengine=io_uring", "--fixedbufs", "--registerfiles", f"--iodepth={args.iodepth}",
               "--numjobs=1", *common]
    else:
        cmd = ["fio", "--ioengine=psync", f"--numjobs={args.threads}", *common]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out[out.index("{"):])["jobs"][0]["write"]["iops"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--engine", choices=["sync", "uring"], default="sync")
    ap.add_argument("--threads", type=int, default=32)
    ap.add_argument("--iodepth", type=int, default=32)
    ap.add_argument("--runtime", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--size", default="1g")
    ap.add_argument("--iolab", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "iolab"))
    args = ap.parse_args()
    exe = args.iolab
    if not os.path.exists(exe):
        sys.exit(f"{exe} not found: cargo build --release")
    work = tempfile.mkdtemp(prefix="iolab-jbench-", dir=args.dir)
    target = os.path.join(work, "target.img")
    try:
        subprocess.run([exe, "run", "--target", target, "--size", args.size, "--rw", "write", "--bs", "1m",
                        "--direct", "-q"], check=True, capture_output=True)
        if args.engine == "uring":
            concurrency = ["--engine", "uring", "--threads", "1", "--iodepth", str(args.iodepth)]
            shape = f"uring engine, 1 thread, depth {args.iodepth}"
        else:
            concurrency = ["--engine", "sync", "--threads", str(args.threads)]
            shape = f"sync engine, {args.threads} threads"
        common = ["--target", target, "--rw", "randwrite", "--bs", "4k", "--direct", *concurrency,
                  "--runtime", str(args.runtime), "--force"]
        # The journal arms run without the pre-read, so they compare with
        # "no preread": the pre-read doubles the I/O whatever the journal.
        arms = {
            "off": [],
            "validate": ["--validate"],
            "no preread": ["--validate", "--no-preread"],
            "journal sync": ["--validate", "--no-preread", "--journal-mode", "sync"],
            "journal async": ["--validate", "--no-preread", "--journal-mode", "async"],
            "journal group": ["--validate", "--no-preread", "--journal-mode", "group"],
            "group+preread": ["--validate", "--journal-mode", "group"],
        }
        fio = shutil.which("fio") is not None
        results = {name: [] for name in arms}
        if fio:
            results["fio"] = []
        for i in range(args.repeats):
            if fio:
                results["fio"].append(run_fio(target, args, args.size.upper()))
            for name, extra in arms.items():
                flags = list(extra)
                if "--journal-mode" in flags:
                    jdir = os.path.join(work, f"j-{name.replace(' ', '-').replace('+', '-')}-{i}")
                    flags += ["--journal", jdir]
                results[name].append(run(exe, common + flags)[0])
                if "--journal-mode" in flags:
                    shutil.rmtree(jdir, ignore_errors=True)
        # Each repeat runs every arm back to back, so the ratio to "off" of
        # the same repeat cancels most of the drift of a shared machine;
        # "vs off" is the median of those per-repeat ratios.
        print(f"# 4 KiB random writes, {shape}, {args.repeats} runs of {args.runtime} s, medians")
        print(f"{'arm':<15} {'IOPS':>10} {'vs off':>8}   runs (IOPS / ratio to off in the same repeat)")
        for name, values in results.items():
            med = statistics.median(values)
            ratios = [v / o for v, o in zip(values, results["off"])]
            runs = " ".join(f"{v:.0f}/{r:.2f}" for v, r in zip(values, ratios))
            print(f"{name:<15} {med:>10.0f} {statistics.median(ratios):>8.2f}   {runs}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
