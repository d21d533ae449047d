#!/usr/bin/env python3
"""Volumes against their physical limits (issue 5's benchmark), in one run.

On four files of one disk:
  1. a striped volume of the four (64k stripes) against the four files
     driven in parallel directly, 4 KiB random reads and writes, O_DIRECT,
     four requests in flight in both (ratio goal >= 0.9);
  2. RAID-5 (the seed's: 4 drives, 512k stripes): drive reads and writes per
     4 KiB random write (goal: exactly 2 + 2) and per full-stripe sequential
     write (goal: no reads), from the volume's counters;
  3. RAID-5 random-read throughput healthy and with one drive down.

Usage: bench/volumes.py [--dir DIR] [--drive-size SIZE] [--runtime S] [--repeats N] [--iolab PATH]
Needs a release build of iolab (cargo build --release).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile


def iolab(exe, *args):
    out = subprocess.run([exe, *args], check=True, capture_output=True, text=True).stdout
    return out


def run_json(exe, *args):
    out = iolab(exe, "run", *args, "--json", "-", "-q")
    return json.loads(out[out.index("{"):])


def config(org, drives):
    lines = [f"drive d{i} device d{i}.img" for i in range(1, drives + 1)]
    lines += ["volume data", f"  plex org {org}"]
    lines += [f"    sd length 0 drive d{i}" for i in range(1, drives + 1)]
    return "\n".join(lines) + "\n"


def iops(doc):
    return sum(r["read"]["iops"] + r["write"]["iops"] for j in doc["jobs"] for r in j["runs"])


def striped_vs_members(exe, work, args, rw):
    conf = os.path.join(work, "s.conf")
    common = ["--rw", rw, "--bs", "4k", "--direct", "--runtime", str(args.runtime), "--force"]
    vol = run_json(exe, "--target", conf, "--engine", "sync", "--threads", "4", *common)
    jobfile = os.path.join(work, "members.toml")
    with open(jobfile, "w") as f:
        f.write("concurrent = true\n")
        for i in range(1, 5):
            # The data area of each member, as the volume uses it.
            f.write(f'[[job]]\ntarget = "{work}/d{i}.img"\noffset = "135168"\nengine = "sync"\n')
    members = run_json(exe, jobfile, *common)
    return iops(vol), iops(members)


def drive_io(doc):
    vol = doc["jobs"][0]["volume"]
    reads = sum(d["stats"]["reads"] for d in vol["drives"])
    writes = sum(d["stats"]["writes"] for d in vol["drives"])
    return reads, writes, vol["stats"]["writes"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--drive-size", default="256m")
    ap.add_argument("--runtime", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--iolab", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "iolab"))
    args = ap.parse_args()
    exe = args.iolab
    if not os.path.exists(exe):
        sys.exit(f"{exe} not found: cargo build --release")
    work = tempfile.mkdtemp(prefix="iolab-volbench-", dir=args.dir)
    try:
        # 1. striped vs members
        with open(os.path.join(work, "s.conf"), "w") as f:
            f.write(config("striped 64k", 4))
        iolab(exe, "volume", "create", os.path.join(work, "s.conf"), "--drive-size", args.drive_size)
        iolab(exe, "run", "--target", os.path.join(work, "s.conf"), "--rw", "write", "--bs", "1m", "--direct", "-q")
        print(f"# volumes: 4 drives of {args.drive_size} in {work}, {args.repeats} runs of {args.runtime} s, medians")
        for rw in ["randread", "randwrite"]:
            pairs = [striped_vs_members(exe, work, args, rw) for _ in range(args.repeats)]
            v = statistics.median(p[0] for p in pairs)
            m = statistics.median(p[1] for p in pairs)
            print(f"striped 64k {rw:<9} volume {v:>9.0f} IOPS  members {m:>9.0f} IOPS  ratio {v / m:.2f}"
                  f"   (runs: {' '.join(f'{p[0]:.0f}/{p[1]:.0f}' for p in pairs)})")
        for i in range(1, 5):
            os.remove(os.path.join(work, f"d{i}.img"))
        # 2. RAID-5 costs
        r5 = os.path.join(work, "r5.conf")
        with open(r5, "w") as f:
            f.write(config("raid5 512k", 4))
        iolab(exe, "volume", "create", r5, "--drive-size", args.drive_size)
        doc = run_json(exe, "--target", r5, "--rw", "randwrite", "--bs", "4k", "--ios", "20000", "--direct")
        r, w, n = drive_io(doc)
        print(f"raid5 512k 4k randwrite: {n} volume writes, {r / n:.3f} drive reads and {w / n:.3f} drive writes each")
        doc = run_json(exe, "--target", r5, "--rw", "write", "--bs", "1536k", "--direct")
        r, w, n = drive_io(doc)
        print(f"raid5 512k full-stripe write (1536k): {n} volume writes, {r} drive reads, {w / n:.3f} drive writes each")
        # 3. degraded reads
        common = ["--target", r5, "--rw", "randread", "--bs", "4k", "--direct", "--threads", "4", "--engine", "sync",
                  "--runtime", str(args.runtime)]
        healthy = statistics.median(iops(run_json(exe, *common)) for _ in range(args.repeats))
        iolab(exe, "volume", "setstate", "down", "d2", r5)
        degraded = statistics.median(iops(run_json(exe, *common)) for _ in range(args.repeats))
        print(f"raid5 512k 4k randread: healthy {healthy:.0f} IOPS, d2 down {degraded:.0f} IOPS,"
              f" ratio {degraded / healthy:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
