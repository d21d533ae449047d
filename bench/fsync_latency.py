#!/usr/bin/env python3
"""How long an fsync of one small file takes while another program fills the file system.

For each arm, on a new 2 GiB file-backed image in the same directory
(so on the same disk): GNU tar extracts an archive into the mount, over
and over, in the background; meanwhile this script writes 4 KiB to a
small file of its own and fsyncs it, --samples times, one every
--interval seconds, timing each fsync (time.perf_counter around
os.fsync). The first sample is taken once tar has run for a second.

Arms:
  iolab-POLICY   iolab fs mount --policy POLICY --transport dev (FUSE through
                 /dev/fuse, the kernel's writeback cache on: the default mount)
  ext4           mkfs.ext4 (its journal, data=ordered), loop-mounted
Prints, per arm, the median, 90th percentile and largest fsync latency
in milliseconds, and the median's ratio to ext4's. Measured, buffered
writes, the host's page cache beneath the image files.

Usage: bench/fsync_latency.py [--arms iolab-sync,...,ext4] [--samples 40]
                              [--interval 0.05] [--archive FILE] [--dir DIR]
                              [--iolab PATH]
Needs root (loop mounts), /dev/fuse, GNU tar and a release build.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time

ARMS = ["iolab-sync", "iolab-softdep", "iolab-log", "iolab-async", "ext4"]


def sh(*cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def mount_iolab(iolab, image, mnt, policy):
    sh(iolab, "fs", "mkfs", image, "--size", "2g", "--force")
    server = subprocess.Popen([iolab, "fs", "mount", image, mnt, "--policy", policy, "--transport", "dev"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = server.stdout.readline()
    if "mounted at" not in line:
        raise SystemExit(f"iolab fs mount said: {line!r}")
    return server


def mount_ext4(image, mnt):
    sh("truncate", "-s", "2g", image)
    sh("mkfs.ext4", "-q", "-F", image)
    sh("mount", "-o", "loop", image, mnt)


def sample(mnt, archive, samples, interval):
    """fsync latencies (ms) of a small file while tar extracts beside it."""
    target = os.path.join(mnt, "busy")
    os.makedirs(target, exist_ok=True)
    loop = ("n=0; while :; do mkdir -p {t}/$n && tar xf {a} -C {t}/$n || exit; n=$((n+1)); done"
            .format(t=target, a=archive))
    tar = subprocess.Popen(["sh", "-c", loop], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    try:
        time.sleep(1)
        fd = os.open(os.path.join(mnt, "small"), os.O_WRONLY | os.O_CREAT, 0o644)
        latencies = []
        for i in range(samples):
            os.pwrite(fd, os.urandom(4096), 0)
            start = time.perf_counter()
            os.fsync(fd)
            latencies.append((time.perf_counter() - start) * 1000)
            time.sleep(interval)
        os.close(fd)
        return latencies
    finally:
        os.killpg(tar.pid, 9)
        tar.wait()
        # The shell is gone, but the tar it started may still hold the
        # mount for a moment: the unmount waits until the group is empty.
        for _ in range(200):
            try:
                os.killpg(tar.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.01)


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--samples", type=int, default=40)
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("--archive", default=None, help="default: /usr/share/doc tarred")
    ap.add_argument("--dir", default=None, help="where the images go (default: a temporary directory)")
    ap.add_argument("--iolab", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "iolab"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="iolab-fsync-", dir=args.dir)
    try:
        archive = args.archive
        if archive is None:
            archive = os.path.join(work, "doc.tar")
            sh("tar", "cf", archive, "-C", "/usr/share", "doc")
        image, mnt = os.path.join(work, "fs.img"), os.path.join(work, "mnt")
        os.makedirs(mnt)
        rows = {}
        notes = []
        for arm in args.arms.split(","):
            if arm == "ext4":
                mount_ext4(image, mnt)
                try:
                    rows[arm] = sample(mnt, archive, args.samples, args.interval)
                finally:
                    sh("umount", mnt)
            else:
                server = mount_iolab(args.iolab, image, mnt, arm.removeprefix("iolab-"))
                try:
                    rows[arm] = sample(mnt, archive, args.samples, args.interval)
                finally:
                    subprocess.run(["umount", mnt])
                    said = server.communicate()[0]
                # softdep's unmount line says how many fsyncs wrote the
                # file's share and how many the whole cache.
                shares = re.search(r"\d+ fsyncs of the file's share and \d+ of the whole cache", said)
                if shares:
                    notes.append(f"{arm}: {shares.group(0)}")
            os.remove(image)
        print(f"# bench/fsync_latency.py --samples {args.samples}: fsync of a 4 KiB rewrite while GNU tar "
              f"extracts {os.path.basename(archive)} in the same mount; 2 GiB images on the same disk")
        print("| arm | fsync median ms | p90 ms | max ms | median / ext4's |")
        print("|---|---:|---:|---:|---:|")
        base = statistics.median(rows["ext4"]) if "ext4" in rows else None
        for arm, xs in rows.items():
            med = statistics.median(xs)
            ratio = f"x{med / base:.1f}" if base else "-"
            print(f"| {arm} | {med:.2f} | {percentile(xs, 90):.2f} | {max(xs):.2f} | {ratio} |")
        for note in notes:
            print(f"# {note}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
