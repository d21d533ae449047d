#!/usr/bin/env python3
"""Random discards: iolab against fio on the same loop device, in one run.

A 1 GiB image on the directory given (default: a temporary one), attached
to a loop device with direct I/O; before each run the image is allocated
again in full (`fallocate`), so every run discards allocated blocks (a
loop device passes BLKDISCARD on as a punched hole in its file). Then
`--rw randtrim --bs 64k` (iolab, sync engine) and `--rw=randtrim
--bs=64k --ioengine=psync` (fio) for the same time, the tools
alternating; the table gives medians (min-max) of trims a second and the
iolab/fio ratio.

Usage: sudo python3 bench/trim.py [--dir DIR] [--runtime S] [--rounds N] [--iolab PATH]
Needs root, losetup, fio, and a release build of iolab.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out[out.index("{"):])


def iolab_trims(iolab, dev, runtime):
    cmd = [iolab, "run", "--target", dev, "--rw", "randtrim", "--bs", "64k", "--engine", "sync",
           "--runtime", str(runtime), "--seed", "7", "--json", "-", "-q"]
    return run_json(cmd)["jobs"][0]["runs"][0]["trim"]["iops"]


def fio_trims(dev, runtime):
    cmd = ["fio", "--name=t", f"--filename={dev}", "--rw=randtrim", "--bs=64k", "--ioengine=psync",
           f"--runtime={runtime}", "--time_based", "--norandommap", "--randrepeat=0",
           "--output-format=json"]
    return run_json(cmd)["jobs"][0]["trim"]["iops"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir")
    p.add_argument("--runtime", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iolab", default="target/release/iolab")
    a = p.parse_args()
    iolab = os.path.abspath(a.iolab)
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        image = os.path.join(d, "trim.img")
        subprocess.run(["fallocate", "-l", "1G", image], check=True)
        dev = subprocess.run(["losetup", "-f", "--show", "--direct-io=on", image],
                             check=True, capture_output=True, text=True).stdout.strip()
        try:
            got = {"iolab": [], "fio": []}
            for _ in range(a.rounds):
                for tool in ("iolab", "fio"):
                    subprocess.run(["fallocate", "-l", "1G", image], check=True)
                    iops = iolab_trims(iolab, dev, a.runtime) if tool == "iolab" else fio_trims(dev, a.runtime)
                    got[tool].append(iops)
        finally:
            subprocess.run(["losetup", "-d", dev], check=False)
    fmt = lambda xs: f"{statistics.median(xs):,.0f} ({min(xs):,.0f}-{max(xs):,.0f})"
    print(f"64 KiB random trims a second on {dev} (loop, direct I/O, over a file in {a.dir or 'a temporary directory'}), "
          f"{a.rounds} rounds of {a.runtime} s")
    print(f"iolab  {fmt(got['iolab'])}")
    print(f"fio    {fmt(got['fio'])}")
    print(f"iolab/fio {statistics.median(got['iolab']) / statistics.median(got['fio']):.2f}")


if __name__ == "__main__":
    main()
