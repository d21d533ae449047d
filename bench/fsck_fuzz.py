#!/usr/bin/env python3
"""The fsck image fuzzer (crates/ffs/tests/it/fsck_fuzz.rs, issue 43) at
scale: a small image holding a seeded tree, its metadata corrupted at
random (bytes over metadata blocks, inode fields at their bounds resealed,
entries pointed at other directories, the root or free inodes, `..`
pointed elsewhere, record lengths), then `fsck -y`, which must converge
(`fsck -n` clean), keep every file readable through fsapi and let
`rm -rf` of everything succeed.

Every case runs, failing or not (IOLAB_FSCK_FUZZ_KEEP_GOING); the output
is how many cases ran and each failure, with the corruptions that made it.

Usage: bench/fsck_fuzz.py [--cases 20000] [--seed 43] [--debug]
Exit status: 0 when no case failed, 1 when some did, 2 when the test
binary did not build or run.
"""
import argparse
import os
import re
import subprocess
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=20000, help="cases to run (default 20000)")
    p.add_argument("--seed", type=int, default=43, help="the run's seed (default 43)")
    p.add_argument("--debug", action="store_true", help="a debug build (default: --release)")
    a = p.parse_args()
    env = dict(os.environ)
    env.update(
        IOLAB_FSCK_FUZZ_CASES=str(a.cases),
        IOLAB_FSCK_FUZZ_SEED=str(a.seed),
        IOLAB_FSCK_FUZZ_KEEP_GOING="1",
    )
    cmd = ["nice", "-n", "10", "cargo", "test"]
    if not a.debug:
        cmd.append("--release")
    cmd += ["-p", "ffs", "--test", "it", "fsck_fuzz::", "--", "--nocapture", "--test-threads", "1"]
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, errors="replace")
    out = run.stdout + run.stderr
    summary = re.search(r"fsck fuzz: (\d+) cases, (\d+) failures \(seed (\d+)\)", out)
    if not summary:
        sys.stderr.write(out[-4000:])
        print("the fuzzer did not run to its end", file=sys.stderr)
        return 2
    failures = [line for line in out.splitlines() if line.startswith("FAILURE")]
    kinds = {}
    for line in failures:
        what = re.sub(r"\d+", "N", line.split("]: ", 1)[-1])[:120]
        kinds[what] = kinds.get(what, 0) + 1
    ran, failed, seed = summary.groups()
    print(f"cases: {ran}, failures: {failed}, seed: {seed}")
    for what, n in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"  {n:6}  {what}")
    if failures:
        print("\nfailing cases (shape, [(corruption kind, seed)...]):")
        blocks = re.findall(r"^FAILURE .*?(?=^FAILURE |^fsck fuzz:)", out, re.S | re.M)
        for block in blocks[:20]:
            print(block.rstrip()[:3000])
    return 0 if failed == "0" else 1


if __name__ == "__main__":
    sys.exit(main())
