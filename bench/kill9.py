#!/usr/bin/env python3
"""Each policy's promise under the server's death: kill -9 of `iolab fs mount`.

For each policy and each writer mix, --rounds times: a new image is
mounted (iolab fs mount, --transport dev), several writers run in it at
once, and after a seeded random 3-15 s the server is killed with SIGKILL
(the writers then get ENOTCONN and are stopped). Then, as an administrator
would after the crash:
  fsck -n   what the kill left (the problem names, counted);
  fsck -p   preen: must repair it (exit 0 or 1) for sync, softdep and log
            (async promises nothing; its row says what preen did);
  fsck -n   must then find the image clean.

Writer mixes (4 writers at once, as FUSE's worker threads serve them):
  nofsync  2 x GNU tar extracting a generated tree (files grow through
           their direct, single and double indirect blocks; no fsync),
           stress-ng --hdd 1 (48 MiB files written, no sync) and
           stress-ng --rename 1 --link 1 --dir 1
  fsync    the same tars, stress-ng --hdd 1 --hdd-opts fsync, and dbench 1
           (its client.txt load, which fsyncs)

Prints one row per policy and mix: kills, images preen repaired, images
clean after preen, and the problems the kills left. Exits 1 if a policy
that promises repair (sync, softdep, log) left an image preen could not
make clean.

Usage: bench/kill9.py [--rounds N] [--policies sync,...] [--mixes fsync,nofsync]
                      [--seed S] [--dir DIR] [--iolab PATH]
Needs root, /dev/fuse, stress-ng, dbench, GNU tar and a release build.
"""
import argparse
import collections
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

PROMISES_REPAIR = {"sync", "softdep", "log"}


def writers(mix, mnt, archive):
    cmds = [["tar", "xf", archive, "-C", os.path.join(mnt, "t1")],
            ["tar", "xf", archive, "-C", os.path.join(mnt, "t2")]]
    for t in ("t1", "t2", "s"):
        os.makedirs(os.path.join(mnt, t), exist_ok=True)
    s = os.path.join(mnt, "s")
    if mix == "nofsync":
        cmds.append(["stress-ng", "--hdd", "1", "--hdd-bytes", "48M", "-t", "60", "--temp-path", s])
        cmds.append(["stress-ng", "--rename", "1", "--link", "1", "--dir", "1", "-t", "60", "--temp-path", s])
    else:
        cmds.append(["stress-ng", "--hdd", "1", "--hdd-bytes", "48M", "--hdd-opts", "fsync", "-t", "60",
                     "--temp-path", s])
        cmds.append(["dbench", "-D", s, "-t", "60", "1"])
    return [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            for c in cmds]


def fsck(iolab, image, mode):
    """fsck's exit status, its findings' classes counted, and its text."""
    out = subprocess.run([iolab, "fs", "fsck", mode, "--json", image], capture_output=True, text=True)
    try:
        doc = json.loads(out.stdout)
        problems = collections.Counter(f["class"] for f in doc["findings"])
    except (ValueError, KeyError):
        problems = collections.Counter({"fsck_stopped": 1})
    return out.returncode, problems, out.stdout + out.stderr


def one_kill(iolab, work, policy, mix, archive, delay):
    image, mnt = os.path.join(work, "fs.img"), os.path.join(work, "mnt")
    os.makedirs(mnt, exist_ok=True)
    subprocess.run([iolab, "fs", "mkfs", image, "--size", "2g", "--force"], check=True, stdout=subprocess.DEVNULL)
    server = subprocess.Popen([iolab, "fs", "mount", image, mnt, "--policy", policy, "--transport", "dev"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = server.stdout.readline()
    if "mounted at" not in line:
        raise SystemExit(f"iolab fs mount said: {line!r}")
    procs = writers(mix, mnt, archive)
    time.sleep(delay)
    server.send_signal(signal.SIGKILL)
    server.wait()
    subprocess.run(["umount", "-l", mnt], stderr=subprocess.DEVNULL)
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
    before = fsck(iolab, image, "-n")
    preen = fsck(iolab, image, "-p")
    after = fsck(iolab, image, "-n")
    os.remove(image)
    return before, preen, after


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--policies", default="sync,softdep,log,async")
    ap.add_argument("--mixes", default="nofsync,fsync")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir", default=None, help="where images go (default: a temporary directory)")
    ap.add_argument("--iolab", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "iolab"))
    args = ap.parse_args()
    for tool in ("stress-ng", "dbench", "tar"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is missing: apt-get install stress-ng dbench tar")
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="iolab-kill9-", dir=args.dir)
    try:
        tree = os.path.join(work, "tree")
        rng_tree = random.Random(args.seed)
        for i in range(300):
            d = os.path.join(tree, f"d{i % 17}", f"s{i % 5}")
            os.makedirs(d, exist_ok=True)
            size = rng_tree.choice([0, 100, 3000, 9000, 60_000, 200_000]) if i % 50 else 5 << 20
            with open(os.path.join(d, f"f{i}"), "wb") as f:
                f.write(os.urandom(size))
        archive = os.path.join(work, "tree.tar")
        subprocess.run(["tar", "cf", archive, "-C", work, "tree"], check=True)
        shutil.rmtree(tree)
        print(f"# bench/kill9.py --rounds {args.rounds} --seed {args.seed}: kill -9 of iolab fs mount "
              f"after 3-15 s of 4 writers; 2 GiB image on {fs_type(work)}")
        print("| policy | writers | kills | preen repaired (exit 0/1) | clean after preen | what the kills left "
              "(fsck -n, images with each problem) |")
        print("|---|---|---:|---:|---:|---|")
        broken = False
        for policy in args.policies.split(","):
            for mix in args.mixes.split(","):
                repaired = clean = 0
                left = collections.Counter()
                for _ in range(args.rounds):
                    delay = rng.uniform(3, 15)
                    before, preen, after = one_kill(args.iolab, work, policy, mix, archive, delay)
                    left.update(set(before[1]))
                    repaired += preen[0] in (0, 1)
                    clean += after[0] == 0
                    if after[0] != 0 and policy in PROMISES_REPAIR:
                        broken = True
                        print(f"<!-- {policy}/{mix} after {delay:.1f} s: preen exit {preen[0]}:\n{preen[2]}\n"
                              f"then fsck -n:\n{after[2]} -->", file=sys.stderr)
                shown = ", ".join(f"{k} {v}" for k, v in sorted(left.items())) or "nothing"
                print(f"| {policy} | {mix} | {args.rounds} | {repaired} | {clean} | {shown} |", flush=True)
        sys.exit(1 if broken else 0)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def fs_type(path):
    out = subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True)
    return out.stdout.strip() or "?"


if __name__ == "__main__":
    main()
