#!/usr/bin/env python3
"""What an open below the direct-I/O threshold costs: dd writing one file
through an `iolab fs mount` with the writeback cache.

Arms, alternating within each round, each on a new file system of --size
(a sparse image in --dir), served with the writeback cache:
  cached   the default threshold, far below the empty file system's free
           space: the open keeps the page cache
  direct   --direct-io-below twice --size: the open goes direct, as every
           open for writing does once free space is below the threshold
  nocache  --no-writeback-cache (for reference: every write(2) a request
           through the page cache)
Each run is `dd if=/dev/zero of=MNT/f bs=BS count=...` (with --fsync,
`conv=fsync`), timed from before dd to after it exits: the close, which
through FUSE waits for the kernel to write the file's dirty pages back,
is included. Prints each arm's median and (min-max) seconds, MB/s, and
the ratio of medians to `cached`.

Usage: bench/direct_io.py [--bs 10k] [--mib 200] [--rounds 3] [--size 1g]
                          [--fsync] [--policy async] [--common "FLAGS"]
                          [--dir DIR] [--iolab PATH]
--common adds mount flags to every arm (e.g. "--transport dev").
Needs /dev/fuse and a release build (cargo build --release).
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time

ARMS = {
    "cached": [],
    "direct": None,  # filled in: --direct-io-below twice --size
    "nocache": ["--no-writeback-cache"],
}


def bytes_of(text):
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.lower()
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def one_run(iolab, workdir, size, policy, flags, dd):
    image, mnt = os.path.join(workdir, "fs.img"), os.path.join(workdir, "mnt")
    if os.path.exists(image):
        os.unlink(image)
    os.makedirs(mnt, exist_ok=True)
    subprocess.run([iolab, "fs", "mkfs", image, "--size", size], check=True, stdout=subprocess.DEVNULL)
    server = subprocess.Popen([iolab, "fs", "mount", image, mnt, "--policy", policy, *flags],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        assert "mounted at" in line, line
        start = time.monotonic()
        subprocess.run(["dd", "if=/dev/zero", f"of={mnt}/f", *dd], check=True, stderr=subprocess.DEVNULL)
        seconds = time.monotonic() - start
    finally:
        subprocess.run(["umount", mnt], check=False)
        said = server.communicate()[0]
    return seconds, said


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bs", default="10k")
    parser.add_argument("--mib", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", default="1g")
    parser.add_argument("--fsync", action="store_true")
    parser.add_argument("--policy", default="async")
    parser.add_argument("--common", default="")
    parser.add_argument("--dir", default=None)
    parser.add_argument("--iolab", default="target/release/iolab")
    args = parser.parse_args()
    ARMS["direct"] = ["--direct-io-below", str(2 * bytes_of(args.size))]
    dd = [f"bs={args.bs}", f"count={(args.mib << 20) // bytes_of(args.bs)}"] + (["conv=fsync"] if args.fsync else [])
    times = {arm: [] for arm in ARMS}
    with tempfile.TemporaryDirectory(dir=args.dir) as workdir:
        for _ in range(args.rounds):
            for arm, flags in ARMS.items():
                mount_flags = flags + args.common.split()
                seconds, said = one_run(args.iolab, workdir, args.size, args.policy, mount_flags, dd)
                went = "1 opens for writing went direct" in said
                assert went == (arm == "direct"), f"{arm}: {said}"
                times[arm].append(seconds)
    base = statistics.median(times["cached"])
    print(f"dd {' '.join(dd)} ({args.mib} MiB), policy {args.policy} {args.common}, {args.rounds} rounds")
    for arm, runs in times.items():
        median = statistics.median(runs)
        rate = (args.mib << 20) / median / 1e6
        print(f"{arm:8} {median:6.2f} s ({min(runs):.2f}-{max(runs):.2f})  {rate:7.1f} MB/s  "
              f"x{median / base:.2f}")


if __name__ == "__main__":
    main()
