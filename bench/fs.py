#!/usr/bin/env python3
"""iolab's file system against ext4, extracting one archive.

Arms, alternating within each round, each on a new file-backed image of
--size on the same disk (the images' directory), timed from the start of
the extraction to the end of the unmount (so write-back and the final
flush are included):
  inproc-async, inproc-sync  iolab fs untar --policy ... (in-process, through
                             fsapi; iolab's own clock, mount to unmount)
  fuse-async, fuse-sync      iolab fs mount --policy ... --transport dev (FUSE
                             through /dev/fuse), then GNU tar
  uring-async, uring-sync    the same with --transport uring (FUSE over
                             io_uring: needs the fuse module's enable_uring)
  ext4-nojournal             mkfs.ext4 -O ^has_journal, loop mount, GNU tar
  ext4-sync                  mkfs.ext4, loop mount -o sync, GNU tar
Prints medians (min-max) and the ratios to ext4-nojournal.

--pin CPU runs every arm's extracting program (GNU tar, iolab fs untar)
and the /dev/fuse server on that one CPU (taskset; iolab fs mount --cpus),
for machines where waking a thread on another CPU is dear (virtual
machines); the io_uring server answers on the caller's CPU by itself.

The archive is decompressed into memory (/dev/shm) first, so no arm pays
for reading or decompressing it. Default archive: glibc-source's
(/usr/src/glibc/glibc-*.tar.xz; apt-get install glibc-source), else
/usr/share/doc tarred on the fly.

Usage: bench/fs.py [--archive FILE] [--rounds N] [--arms a,b,...] [--size 1g]
                   [--pin CPU] [--dir DIR] [--iolab PATH]
Needs root (loop mounts), /dev/fuse and a release build (cargo build --release).
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
import time

ARMS = ["inproc-async", "inproc-sync", "fuse-async", "fuse-sync", "uring-async", "uring-sync", "ext4-nojournal",
        "ext4-sync"]


PIN = []  # taskset -c CPU, with --pin


def sh(*cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def server_pin():
    return ["--cpus", PIN[2]] if PIN else []


def timed_inproc(iolab, image, size, archive, policy):
    sh(iolab, "fs", "mkfs", image, "--size", size, "--force")
    out = subprocess.run([*PIN, iolab, "fs", "untar", image, archive, "--policy", policy],
                         check=True, capture_output=True, text=True).stdout
    m = re.search(r"in ([0-9.]+) s with the unmount", out)
    if not m:
        sys.exit(f"iolab fs untar said: {out}")
    return float(m.group(1))


def timed_fuse(iolab, image, size, mnt, archive, policy, transport):
    sh(iolab, "fs", "mkfs", image, "--size", size, "--force")
    pin = server_pin() if transport == "dev" else []
    server = subprocess.Popen([iolab, "fs", "mount", image, mnt, "--policy", policy, "--transport", transport, *pin],
                              stdout=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    if "mounted at" not in line:
        sys.exit(f"iolab fs mount said: {line}")
    start = time.monotonic()
    sh(*PIN, "tar", "xf", archive, "-C", mnt)
    sh("umount", mnt)
    server.wait()
    elapsed = time.monotonic() - start
    last = server.stdout.read()
    if f"served {'over io_uring' if transport == 'uring' else 'through /dev/fuse'}" not in last:
        sys.exit(f"iolab fs mount --transport {transport} said: {last}")
    return elapsed


def timed_ext4(image, size, mnt, archive, sync):
    sh("truncate", "-s", size, image)
    sh("mkfs.ext4", "-q", "-F", *([] if sync else ["-O", "^has_journal"]), image)
    sh("mount", "-o", "loop,sync" if sync else "loop", image, mnt)
    start = time.monotonic()
    sh(*PIN, "tar", "xf", archive, "-C", mnt)
    sh("umount", mnt)
    return time.monotonic() - start


def default_archive():
    found = sorted(glob.glob("/usr/src/glibc/glibc-*.tar.xz"))
    return found[-1] if found else None


def into_memory(archive, work, shm):
    """The archive as a plain tar in memory; the path and how many entries."""
    plain = os.path.join(shm, "archive.tar")
    if archive is None:
        sh("tar", "cf", plain, "-C", "/usr/share", "doc")
    else:
        decompress = {".xz": ["xz", "-dc"], ".gz": ["gzip", "-dc"]}.get(os.path.splitext(archive)[1], ["cat"])
        with open(plain, "wb") as f:
            subprocess.run([*decompress, archive], check=True, stdout=f)
    entries = subprocess.run(["tar", "tf", plain], check=True, capture_output=True, text=True).stdout.count("\n")
    return plain, entries


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--archive", default=default_archive())
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--size", default="1g", help="each image's size")
    ap.add_argument("--pin", default=None, metavar="CPU", help="run the extraction and the FUSE server on this CPU")
    ap.add_argument("--dir", default=None, help="where the images go (default: a temporary directory)")
    ap.add_argument("--iolab", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "iolab"))
    args = ap.parse_args()
    if args.pin is not None:
        PIN.extend(["taskset", "-c", args.pin])
    chosen = args.arms.split(",")
    for a in chosen:
        if a not in ARMS:
            sys.exit(f"--arms: unknown arm {a}; choose from {','.join(ARMS)}")
    enable = "/sys/module/fuse/parameters/enable_uring"
    if any(a.startswith("uring-") for a in chosen) and open(enable).read().strip() != "Y":
        sys.exit(f"the uring arms need FUSE over io_uring: echo Y > {enable} (as root)")
    work = tempfile.mkdtemp(prefix="iolab-fs-bench-", dir=args.dir)
    shm = tempfile.mkdtemp(prefix="iolab-fs-bench-", dir="/dev/shm")
    mnt = os.path.join(work, "mnt")
    try:
        archive, entries = into_memory(args.archive, work, shm)
        image = os.path.join(work, "fs.img")
        os.mkdir(mnt)
        arms = {
            "inproc-async": lambda: timed_inproc(args.iolab, image, args.size, archive, "async"),
            "inproc-sync": lambda: timed_inproc(args.iolab, image, args.size, archive, "sync"),
            "fuse-async": lambda: timed_fuse(args.iolab, image, args.size, mnt, archive, "async", "dev"),
            "fuse-sync": lambda: timed_fuse(args.iolab, image, args.size, mnt, archive, "sync", "dev"),
            "uring-async": lambda: timed_fuse(args.iolab, image, args.size, mnt, archive, "async", "uring"),
            "uring-sync": lambda: timed_fuse(args.iolab, image, args.size, mnt, archive, "sync", "uring"),
            "ext4-nojournal": lambda: timed_ext4(image, args.size, mnt, archive, False),
            "ext4-sync": lambda: timed_ext4(image, args.size, mnt, archive, True),
        }
        times = {name: [] for name in chosen}
        for _ in range(args.rounds):
            for name in chosen:
                times[name].append(arms[name]())
                os.remove(image)
        base = statistics.median(times["ext4-nojournal"]) if "ext4-nojournal" in times else None
        pinned = f"; extraction and server on CPU {args.pin}" if PIN else ""
        print(f"archive {args.archive or '/usr/share/doc'}: {entries} entries, from memory; images of {args.size} "
              f"in {work}{pinned}")
        print(f"{args.rounds} rounds; seconds, extraction through unmount: median (min-max)"
              + (", ratio to ext4-nojournal" if base else ""))
        for name, t in times.items():
            ratio = f"   x{statistics.median(t) / base:.2f}" if base else ""
            print(f"  {name:<15} {statistics.median(t):7.2f} ({min(t):.2f}-{max(t):.2f}){ratio}")
    finally:
        subprocess.run(["umount", mnt], stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)


if __name__ == "__main__":
    main()
