#!/usr/bin/env python3
"""iolab's file system against ext4, extracting one archive with GNU tar.

Arms, alternating within each round, each on a new 512 MiB file-backed
image on the same disk, timed from the start of `tar xf` to the end of
`umount` (so write-back is included):
  iolab-async, iolab-sync   iolab fs mount --policy ... (FUSE), then tar
  ext4-nojournal            mkfs.ext4 -O ^has_journal, loop mount
  ext4-sync                 mkfs.ext4, loop mount -o sync
Prints medians (min-max) and the ratios to ext4-nojournal.

Usage: bench/fs.py [--archive FILE] [--rounds N] [--dir DIR] [--iolab PATH]
Default archive: /usr/share/doc tarred on the fly. Needs root (loop
mounts), /dev/fuse and a release build (cargo build --release).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def sh(*cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def timed_iolab(iolab, image, mnt, archive, policy):
    sh(iolab, "fs", "mkfs", image, "--size", "512m", "--force")
    server = subprocess.Popen([iolab, "fs", "mount", image, mnt, "--policy", policy], stdout=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    if "mounted at" not in line:
        sys.exit(f"iolab fs mount said: {line}")
    start = time.monotonic()
    sh("tar", "xf", archive, "-C", mnt)
    sh("umount", mnt)
    server.wait()
    return time.monotonic() - start


def timed_ext4(image, mnt, archive, sync):
    with open(image, "wb") as f:
        f.truncate(512 << 20)
    sh("mkfs.ext4", "-q", "-F", *([] if sync else ["-O", "^has_journal"]), image)
    sh("mount", "-o", "loop,sync" if sync else "loop", image, mnt)
    start = time.monotonic()
    sh("tar", "xf", archive, "-C", mnt)
    sh("umount", mnt)
    return time.monotonic() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--archive", default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the images go (default: a temporary directory)")
    ap.add_argument("--iolab", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "iolab"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="iolab-fs-bench-", dir=args.dir)
    try:
        archive = args.archive or os.path.join(work, "doc.tar")
        if not args.archive:
            sh("tar", "cf", archive, "-C", "/usr/share", "doc")
        image, mnt = os.path.join(work, "fs.img"), os.path.join(work, "mnt")
        os.mkdir(mnt)
        arms = {
            "iolab-async": lambda: timed_iolab(args.iolab, image, mnt, archive, "async"),
            "iolab-sync": lambda: timed_iolab(args.iolab, image, mnt, archive, "sync"),
            "ext4-nojournal": lambda: timed_ext4(image, mnt, archive, False),
            "ext4-sync": lambda: timed_ext4(image, mnt, archive, True),
        }
        times = {name: [] for name in arms}
        for _ in range(args.rounds):
            for name, arm in arms.items():
                times[name].append(arm())
                os.remove(image)
        base = statistics.median(times["ext4-nojournal"])
        entries = subprocess.run(["tar", "tf", archive], check=True, capture_output=True, text=True).stdout.count("\n")
        print(f"{args.rounds} rounds, {entries} entries; seconds, tar xf through umount: median (min-max), ratio to ext4-nojournal")
        for name, t in times.items():
            print(f"  {name:<15} {statistics.median(t):7.2f} ({min(t):.2f}-{max(t):.2f})   x{statistics.median(t) / base:.1f}")
    finally:
        subprocess.run(["umount", os.path.join(work, "mnt")], stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
