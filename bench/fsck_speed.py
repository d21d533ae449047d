#!/usr/bin/env python3
"""`iolab fs fsck -n` against `e2fsck -fn` on the same tree, on the same disk.

Builds two images of --size in one directory (so on the same disk): an
iolab file system holding --copies copies of the archive (`iolab fs untar
--copies N --policy async`), and an ext4 holding the same copies (GNU tar
through a loop mount). Then, --rounds times, alternating, checks each
without repairing it:
  iolab   iolab fs fsck -n IMAGE
  e2fsck  e2fsck -fn IMAGE (forced, read-only)
each once cold (the host's page cache dropped first: echo 3 >
/proc/sys/vm/drop_caches) and once warm (at once again). Measured: wall
time of the whole command (time.perf_counter around it) and its peak
resident memory (wait4's ru_maxrss for that process alone).

Prints the inodes each checked, the median time cold and warm (min-max of
the rounds), the time per inode, iolab's ratio to e2fsck's, and peak
memory. Images are buffered files on the host's file system (its page
cache beneath, hence cold and warm).

Default archive: glibc-source's (/usr/src/glibc/glibc-*.tar.xz;
apt-get install glibc-source), else /usr/share/doc tarred on the fly.

Usage: bench/fsck_speed.py [--copies 3] [--size 4g] [--rounds 3]
                           [--archive FILE] [--dir DIR] [--iolab PATH]
Needs root (loop mount, drop_caches), e2fsprogs and a release build.
"""
import argparse
import glob
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time


def sh(*cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def default_archive(work):
    found = sorted(glob.glob("/usr/src/glibc/glibc-*.tar.xz"))
    if found:
        return found[-1]
    archive = os.path.join(work, "doc.tar")
    sh("tar", "cf", archive, "-C", "/usr/share", "doc")
    return archive


def build_iolab(iolab, image, size, archive, copies):
    sh(iolab, "fs", "mkfs", image, "--size", size, "--force")
    sh(iolab, "fs", "untar", image, archive, "--policy", "async", "--copies", str(copies))


def build_ext4(image, size, archive, copies, mnt):
    sh("truncate", "-s", size, image)
    sh("mkfs.ext4", "-q", "-F", image)
    sh("mount", "-o", "loop", image, mnt)
    try:
        for n in range(1, copies + 1):
            into = os.path.join(mnt, f"copy-{n}")
            os.makedirs(into)
            sh("tar", "xf", archive, "-C", into)
    finally:
        sh("umount", mnt)


def run(cmd, cold):
    """Wall seconds, peak RSS (MiB) and stdout of one command."""
    if cold:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {code}: {out}")
    return seconds, usage.ru_maxrss / 1024, out


def inodes_of(arm, out):
    if arm == "iolab":
        m = re.search(r": (\d+) inodes,", out)
    else:
        m = re.search(r": (\d+)/\d+ files", out)
    return int(m.group(1)) if m else None


def spread(xs):
    return f"{statistics.median(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copies", type=int, default=3)
    ap.add_argument("--size", default="4g")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--archive", default=None)
    ap.add_argument("--dir", default=None, help="where the images go (default: a temporary directory)")
    ap.add_argument("--iolab", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "iolab"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="iolab-fsck-", dir=args.dir)
    try:
        archive = args.archive or default_archive(work)
        iolab_img, ext4_img = os.path.join(work, "iolab.img"), os.path.join(work, "ext4.img")
        mnt = os.path.join(work, "mnt")
        os.makedirs(mnt)
        build_iolab(args.iolab, iolab_img, args.size, archive, args.copies)
        build_ext4(ext4_img, args.size, archive, args.copies, mnt)
        arms = {"iolab": [args.iolab, "fs", "fsck", "-n", iolab_img], "e2fsck": ["e2fsck", "-fn", ext4_img]}
        times = {arm: {"cold": [], "warm": []} for arm in arms}
        rss = {arm: [] for arm in arms}
        inodes = {}
        for _ in range(args.rounds):
            for arm, cmd in arms.items():
                for when in ("cold", "warm"):
                    seconds, peak, out = run(cmd, when == "cold")
                    times[arm][when].append(seconds)
                    rss[arm].append(peak)
                    inodes[arm] = inodes_of(arm, out)
        print(f"# bench/fsck_speed.py --copies {args.copies} --size {args.size} --rounds {args.rounds}: "
              f"{os.path.basename(archive)} x{args.copies}, images on the same disk")
        print("| checker | inodes | cold s, median (min-max) | warm s, median (min-max) | warm us/inode "
              "| peak RSS MiB |")
        print("|---|---:|---:|---:|---:|---:|")
        for arm in arms:
            n = inodes[arm] or 0
            warm = statistics.median(times[arm]["warm"])
            per = f"{warm / n * 1e6:.2f}" if n else "-"
            print(f"| {arm} | {n} | {spread(times[arm]['cold'])} | {spread(times[arm]['warm'])} | {per} "
                  f"| {max(rss[arm]):.1f} |")
        for when in ("cold", "warm"):
            ratio = statistics.median(times["iolab"][when]) / statistics.median(times["e2fsck"][when])
            print(f"# iolab / e2fsck, {when}: x{ratio:.2f}")
    finally:
        subprocess.run(["umount", os.path.join(work, "mnt")], stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
