#!/usr/bin/env python3
"""Programs other people wrote, through `iolab fs mount`, against ext4.

Each round runs every arm once, alternating, each on a new file-backed
image of --size in the same directory (the same disk): iolab's file
system under each --policies through `iolab fs mount` (FUSE, default
transport, default cache), and ext4 (mkfs.ext4 defaults: its journal,
data=ordered) on a loop device. Workloads (--workloads):

  tar        GNU tar extracts the archive (decompressed into /dev/shm
             first), timed to the end of the unmount; seconds, lower is better
  dbench     dbench -t SECS 4 (its default client.txt); MB/s, higher is better
  sync-file  stress-ng --sync-file 1 --sync-file-bytes B for SECS (ftruncate,
             fdatasync, fallocate of B and sync_file_range, three times an
             op); bogo ops a second, higher is better
  fsync4     fio, four writers at once, each writing 4 KiB at random in a
             32 MiB file of its own and fsyncing after every write, for
             SECS; IOPS, higher is better (how concurrent fsyncs share
             flushes)

Prints, per workload and arm, the median of the rounds (min-max) and
the ratio to ext4's median in the same run (for tar, time / ext4's; for
the others, ext4's / iolab's: above 1 is slower than ext4 either way),
and for iolab the FUSE requests the kernel sent per second, from the
server's unmount line.

Usage: bench/mount.py [--workloads tar,dbench,sync-file,fsync4] [--policies softdep,log,async,sync]
                      [--rounds 3] [--secs 10] [--sync-file-bytes 1g] [--size 2g]
                      [--archive FILE] [--dir DIR] [--iolab PATH]
Needs root (loop mounts), /dev/fuse, dbench, stress-ng, fio, and a release
build (cargo build --release).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from fs import default_archive, into_memory  # bench/fs.py: the archive, decompressed into memory

WORKLOADS = ["tar", "dbench", "sync-file", "fsync4"]
POLICIES = ["softdep", "log", "async", "sync"]


def sh(*cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def run_workload(workload, mnt, archive, secs, sync_bytes):
    """Runs one workload in `mnt`: its figure (seconds for tar)."""
    if workload == "tar":
        start = time.monotonic()
        sh("tar", "xf", archive, "-C", mnt)
        return start
    if workload == "dbench":
        out = subprocess.run(["dbench", "-D", mnt, "-t", str(secs), "4"], check=True, capture_output=True,
                             text=True).stdout
        m = re.search(r"Throughput ([0-9.]+) MB/sec", out)
        if not m:
            sys.exit(f"dbench said: {out[-500:]}")
        return float(m.group(1))
    if workload == "fsync4":
        out = subprocess.run(["fio", "--name=fsync4", f"--directory={mnt}", "--rw=randwrite", "--bs=4k",
                              "--size=32m", "--numjobs=4", "--fsync=1", f"--runtime={secs}", "--time_based",
                              "--group_reporting", "--output-format=json"], check=True, capture_output=True,
                             text=True).stdout
        return float(json.loads(out)["jobs"][0]["write"]["iops"])
    out = subprocess.run(["stress-ng", "--sync-file", "1", "--sync-file-bytes", sync_bytes, "-t", f"{secs}s",
                          "--temp-path", mnt, "--metrics-brief"], check=True, capture_output=True, text=True)
    m = re.search(r"sync-file\s+(\d+)\s+([0-9.]+)", out.stderr + out.stdout)
    if not m:
        sys.exit(f"stress-ng said: {(out.stderr + out.stdout)[-500:]}")
    return int(m.group(1)) / float(m.group(2))


def figure(workload, got, unmounted_at):
    """tar's figure is the time from its start to the unmount's end."""
    return unmounted_at - got if workload == "tar" else got


def iolab_arm(iolab, image, size, mnt, policy, workload, archive, secs, sync_bytes):
    sh(iolab, "fs", "mkfs", image, "--size", size, "--force")
    server = subprocess.Popen([iolab, "fs", "mount", image, mnt, "--policy", policy], stdout=subprocess.PIPE,
                              text=True)
    line = server.stdout.readline()
    if "mounted at" not in line:
        sys.exit(f"iolab fs mount said: {line}")
    start = time.monotonic()
    got = run_workload(workload, mnt, archive, secs, sync_bytes)
    sh("umount", mnt)
    server.wait()
    end = time.monotonic()
    last = server.stdout.read()
    m = re.search(r"; (\d+) requests:", last)
    if not m:
        sys.exit(f"iolab fs mount said at unmount: {last}")
    return figure(workload, got, end), int(m.group(1)) / (end - start)


def ext4_arm(image, size, mnt, workload, archive, secs, sync_bytes):
    sh("truncate", "-s", size, image)
    sh("mkfs.ext4", "-q", "-F", image)
    sh("mount", "-o", "loop", image, mnt)
    got = run_workload(workload, mnt, archive, secs, sync_bytes)
    sh("umount", mnt)
    return figure(workload, got, time.monotonic()), None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--secs", type=int, default=10, help="how long dbench, stress-ng and fio run")
    ap.add_argument("--sync-file-bytes", default="1g", help="stress-ng's --sync-file-bytes")
    ap.add_argument("--size", default="2g", help="each image's size")
    ap.add_argument("--archive", default=default_archive())
    ap.add_argument("--dir", default=None, help="where the images go (default: a temporary directory)")
    ap.add_argument("--iolab", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "iolab"))
    args = ap.parse_args()
    workloads = args.workloads.split(",")
    policies = args.policies.split(",")
    for w in workloads:
        if w not in WORKLOADS:
            sys.exit(f"--workloads: unknown workload {w}; choose from {','.join(WORKLOADS)}")
    for p in policies:
        if p not in POLICIES:
            sys.exit(f"--policies: unknown policy {p}; choose from {','.join(POLICIES)}")
    needs = {"dbench": "dbench", "sync-file": "stress-ng", "fsync4": "fio"}
    for program in [needs[w] for w in workloads if w in needs]:
        if shutil.which(program) is None:
            sys.exit(f"{program} is not installed: apt-get install {program}")
    work = tempfile.mkdtemp(prefix="iolab-mount-bench-", dir=args.dir)
    shm = tempfile.mkdtemp(prefix="iolab-mount-bench-", dir="/dev/shm")
    mnt = os.path.join(work, "mnt")
    os.mkdir(mnt)
    image = os.path.join(work, "fs.img")
    arms = [f"iolab-{p}" for p in policies] + ["ext4"]
    try:
        archive = into_memory(args.archive, work, shm)[0] if "tar" in workloads else None
        got = {(w, a): [] for w in workloads for a in arms}
        rates = {(w, a): [] for w in workloads for a in arms}
        for _ in range(args.rounds):
            for w in workloads:
                for a in arms:
                    if a == "ext4":
                        value, rate = ext4_arm(image, args.size, mnt, w, archive, args.secs, args.sync_file_bytes)
                    else:
                        value, rate = iolab_arm(args.iolab, image, args.size, mnt, a[len("iolab-"):], w, archive,
                                                args.secs, args.sync_file_bytes)
                    got[(w, a)].append(value)
                    if rate is not None:
                        rates[(w, a)].append(rate)
                    os.remove(image)
        print(f"images of {args.size} in {work} (buffered, the host's page cache beneath); {args.rounds} rounds, "
              "medians (min-max); x: how many times slower than ext4 in the same run")
        units = {"tar": "s", "dbench": "MB/s", "sync-file": "ops/s", "fsync4": "IOPS"}
        for w in workloads:
            what = {"tar": f"GNU tar xf {args.archive or '/usr/share/doc'} (from /dev/shm) to the unmount's end",
                    "dbench": f"dbench -t {args.secs} 4",
                    "sync-file": f"stress-ng --sync-file 1 --sync-file-bytes {args.sync_file_bytes} -t {args.secs}s",
                    "fsync4": f"fio --rw=randwrite --bs=4k --size=32m --numjobs=4 --fsync=1 --runtime={args.secs}"}[w]
            print(f"{w}: {what}")
            base = statistics.median(got[(w, "ext4")])
            for a in arms:
                v = got[(w, a)]
                med = statistics.median(v)
                slower = med / base if w == "tar" else (base / med if med else float("inf"))
                req = f"   {statistics.median(rates[(w, a)]):9.0f} requests/s" if rates[(w, a)] else ""
                print(f"  {a:<14} {med:9.2f} {units[w]:<5} ({min(v):.2f}-{max(v):.2f})   x{slower:.2f}{req}")
    finally:
        subprocess.run(["umount", mnt], stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)


if __name__ == "__main__":
    main()
