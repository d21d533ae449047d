#!/usr/bin/env python3
"""The block log's benchmark (issue 7), in one run on one file: a
metadata-like workload (4 KiB random writes, each thread syncing every N
writes) through the block log in `log` mode (home writes at checkpoints,
the default, and right after each commit), `async` and `sync` mode, and
fio's same job on the same file (buffered randwrite, fsync every N) as the
peer for `async`. Each skew is measured: uniform over 1 GiB, and zipf
(a hot set, as metadata has). The file is written in full first so no arm
pays for block allocation; all arms run through the same log layout (log
at the start of the file), so only the mode differs.

Usage: bench/blocklog.py [--dir DIR] [--threads 4] [--sync-every 64] [--log-size 16m]
                         [--skews uniform,zipf:1.1] [--runtime S] [--repeats N] [--iolab PATH]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile


def iolab(exe, args):
    out = subprocess.run([exe, "run", *args, "--json", "-", "-q"], check=True, capture_output=True, text=True).stdout
    doc = json.loads(out[out.index("{"):])
    return doc["jobs"][0]["runs"][0]["write"]["iops"]


def fio(path, offset, size, threads, sync_every, runtime):
    cmd = ["fio", f"--filename={path}", "--ioengine=psync", "--rw=randwrite", "--bs=4k",
           f"--offset={offset}", f"--size={size}", f"--numjobs={threads}", f"--fsync={sync_every}",
           "--time_based", f"--runtime={runtime}", "--group_reporting", "--randrepeat=0", "--norandommap",
           "--name=bench", "--output-format=json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out[out.index("{"):])["jobs"][0]["write"]["iops"]


def measure(exe, target, skew, log_bytes, have_fio, args):
    common = ["--target", target, "--log-size", args.log_size, "--rw", "randwrite", "--bs", "4k",
              "--skew", skew, "--threads", str(args.threads), "--flush-every", str(args.sync_every),
              "--runtime", str(args.runtime), "--engine", "sync"]
    arms = {
        "async": ["--log", "async"],
        "log": ["--log", "log"],
        "log, home/commit": ["--log", "log", "--log-home", "commit"],
        "sync": ["--log", "sync"],
    }
    results = {arm: [] for arm in arms}
    if have_fio and skew == "uniform":
        results["fio (async peer)"] = []
    for _ in range(args.repeats):
        for arm, flags in arms.items():
            results[arm].append(iolab(exe, common + flags))
        if "fio (async peer)" in results:
            results["fio (async peer)"].append(
                fio(target, log_bytes, args.size, args.threads, args.sync_every, args.runtime))
    base = statistics.median(results["async"])
    print(f"# skew {skew}: 4 KiB random writes, {args.threads} threads, sync every {args.sync_every} writes "
          f"per thread, log {args.log_size}, {args.repeats} runs of {args.runtime} s, medians")
    print(f"{'arm':<18} {'IOPS':>10} {'vs async':>9}   runs")
    for name, values in results.items():
        med = statistics.median(values)
        print(f"{name:<18} {med:>10.0f} {med / base:>9.2f}   {' '.join(f'{v:.0f}' for v in values)}")
    sys.stdout.flush()


def parse_size(text):
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    return int(text[:-1]) * units[text[-1].lower()] if text[-1].lower() in units else int(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--sync-every", type=int, default=64)
    ap.add_argument("--log-size", default="16m")
    ap.add_argument("--size", default="1g", help="data area (default 1g)")
    ap.add_argument("--skews", default="uniform,zipf:1.1")
    ap.add_argument("--runtime", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--iolab", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "iolab"))
    args = ap.parse_args()
    exe = args.iolab
    if not os.path.exists(exe):
        sys.exit(f"{exe} not found: cargo build --release")
    have_fio = shutil.which("fio") is not None
    work = tempfile.mkdtemp(prefix="iolab-lbench-", dir=args.dir)
    target = os.path.join(work, "target.img")
    try:
        # Write every byte (log region and data area), then format the log.
        log_bytes = parse_size(args.log_size)
        with open(target, "wb") as f:
            chunk = b"\0" * (1 << 20)
            for _ in range((parse_size(args.size) + log_bytes) >> 20):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        subprocess.run([exe, "run", "--target", target, "--log", "async", "--log-size", args.log_size,
                        "--rw", "read", "--ios", "1", "--force", "-q"], check=True, capture_output=True)
        for skew in args.skews.split(","):
            measure(exe, target, skew, log_bytes, have_fio, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
