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

A second table measures the RAID-5 stripe log: 4 KiB random writes on a
four-drive RAID-5 (64k stripes) of files, each write durable when it
returns: through the stripe log on a fifth drive, against the same volume
without a log flushing after every write; and, for scale, without a log
and without any flush (nothing durable).

Usage: bench/blocklog.py [--dir DIR] [--threads 4] [--sync-every 64] [--log-size 16m]
                         [--skews uniform,zipf:1.1] [--raid5-threads 8] [--no-raid5]
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


RAID5 = """drive d1 device d1.img
drive d2 device d2.img
drive d3 device d3.img
drive d4 device d4.img
{log_drive}volume raid
  plex org raid5 64k{log}
    sd length 0 drive d1
    sd length 0 drive d2
    sd length 0 drive d3
    sd length 0 drive d4
"""


def measure_raid5(exe, work, args):
    confs = {}
    for name, logged in [("logged", True), ("plain", False)]:
        d = os.path.join(work, name)
        os.makedirs(d)
        conf = os.path.join(d, "r5.conf")
        with open(conf, "w") as f:
            f.write(RAID5.format(log_drive="drive j device j.img\n" if logged else "", log=" log j" if logged else ""))
        subprocess.run([exe, "volume", "create", conf, "--drive-size", "512m"], check=True, capture_output=True)
        subprocess.run([exe, "run", "--target", conf, "--rw", "write", "--bs", "192k", "-q"], check=True,
                       capture_output=True)
        confs[name] = conf
    common = ["--rw", "randwrite", "--bs", "4k", "--threads", str(args.raid5_threads),
              "--runtime", str(args.runtime)]
    arms = {
        "stripe log": ["--target", confs["logged"]],
        "no log, flush each": ["--target", confs["plain"], "--flush-every", "1"],
        "no log, no flush": ["--target", confs["plain"]],
    }
    results = {arm: [] for arm in arms}
    for _ in range(args.repeats):
        for arm, flags in arms.items():
            results[arm].append(iolab(exe, flags + common))
    base = statistics.median(results["no log, flush each"])
    print(f"# RAID-5 (4 drives of 512 MiB, 64k stripes, files): 4 KiB random writes, {args.raid5_threads} threads, "
          f"{args.repeats} runs of {args.runtime} s, medians")
    print(f"{'arm':<20} {'IOPS':>10} {'vs flush each':>14}   runs")
    for name, values in results.items():
        med = statistics.median(values)
        print(f"{name:<20} {med:>10.0f} {med / base:>14.2f}   {' '.join(f'{v:.0f}' for v in values)}")


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
    ap.add_argument("--raid5-threads", type=int, default=8)
    ap.add_argument("--no-raid5", action="store_true")
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
        os.remove(target)
        if not args.no_raid5:
            measure_raid5(exe, work, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
