#!/usr/bin/env python3
"""The first seed's shape in-process: one archive extracted, then removed,
under each metadata policy of iolab's file system, on the same file-backed
image, through `iolab fs untar` and `iolab fs rm` (each timed by iolab
from the mount to the end of the unmount: write-back, commits, the log's
checkpoint and the final flush inside the time).

Each round makes a new file system per policy (policies alternate within
the round), extracts the archive, then removes it with a cold cache.
Prints, per policy and phase, the median seconds (min-max), the ratio to
async's median, and the medians of blocks written, write requests,
synchronous writes, flushes and bytes written to the log.

Usage: bench/policies.py [--archive FILE] [--rounds 5] [--policies async,softdep,log,sync]
                         [--size 1g] [--log-size SIZE] [--dir DIR] [--iolab PATH]
Default archive: glibc-source's (/usr/src/glibc/glibc-*.tar.xz), else
/usr/share/doc tarred on the fly; either is decompressed into /dev/shm first.
"""
import argparse
import glob
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def figures(out):
    """Seconds and counters from iolab fs untar/rm output."""
    num = lambda pattern: float(m.group(1)) if (m := re.search(pattern, out)) else 0.0
    size = re.search(r"([0-9.]+) (bytes|KiB|MiB|GiB) of metadata written to the log", out)
    log_bytes = 0.0
    if size:
        log_bytes = float(size.group(1)) * {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[size.group(2)]
    return {
        "seconds": num(r"in ([0-9.]+) s with the unmount"),
        "blocks": num(r"device: (\d+) blocks"),
        "requests": num(r"written in (\d+) requests"),
        "sync writes": num(r"(\d+) synchronous writes"),
        "flushes": num(r"(\d+) flushes"),
        "log MiB": log_bytes / (1 << 20),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    found = sorted(glob.glob("/usr/src/glibc/glibc-*.tar.xz"))
    ap.add_argument("--archive", default=found[-1] if found else None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--policies", default="async,softdep,log,sync")
    ap.add_argument("--size", default="1g")
    ap.add_argument("--log-size", default=None)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--iolab", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "iolab"))
    args = ap.parse_args()
    policies = args.policies.split(",")
    work = tempfile.mkdtemp(prefix="iolab-policies-", dir=args.dir)
    shm = tempfile.mkdtemp(prefix="iolab-policies-", dir="/dev/shm")
    try:
        archive = os.path.join(shm, "archive.tar")
        if args.archive:
            tool = {".xz": ["xz", "-dc"], ".gz": ["gzip", "-dc"]}.get(os.path.splitext(args.archive)[1], ["cat"])
            with open(archive, "wb") as f:
                subprocess.run([*tool, args.archive], check=True, stdout=f)
        else:
            run("tar", "cf", archive, "-C", "/usr/share", "doc")
        top = run("tar", "tf", archive).split("\n", 1)[0].split("/")[0]
        image = os.path.join(work, "fs.img")
        results = {(p, phase): [] for p in policies for phase in ("tar", "rm")}
        for _ in range(args.rounds):
            for p in policies:
                mkfs = [args.iolab, "fs", "mkfs", image, "--size", args.size, "--force"]
                run(*mkfs, *(["--log-size", args.log_size] if args.log_size else []))
                results[(p, "tar")].append(figures(run(args.iolab, "fs", "untar", image, archive, "--policy", p)))
                results[(p, "rm")].append(figures(run(args.iolab, "fs", "rm", image, top, "--policy", p)))
                os.remove(image)
        print(f"archive {args.archive or '/usr/share/doc'} from memory; {args.rounds} rounds; images of {args.size} "
              f"in {work} (buffered, on {run('df', '--output=fstype', work).split()[-1]}); medians")
        keys = ["blocks", "requests", "sync writes", "flushes", "log MiB"]
        print(f"{'phase':<5} {'policy':<7} {'seconds (min-max)':<20} {'x async':>8} " + " ".join(f"{k:>11}" for k in keys))
        for phase in ("tar", "rm"):
            base = statistics.median(r["seconds"] for r in results[("async", phase)]) if "async" in policies else None
            for p in policies:
                rs = results[(p, phase)]
                t = [r["seconds"] for r in rs]
                med = statistics.median(t)
                ratio = f"{med / base:8.2f}" if base else " " * 8
                counters = " ".join(f"{statistics.median(r[k] for r in rs):11.1f}" for k in keys)
                print(f"{phase:<5} {p:<7} {med:6.2f} ({min(t):.2f}-{max(t):.2f})    {ratio} {counters}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
