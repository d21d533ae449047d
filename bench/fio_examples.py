#!/usr/bin/env python3
"""Run every job file of fio's own examples through `iolab run`, and say
which ran, which were refused for an engine iolab does not have (or an
unset ${VAR}, all of which name such engines), and which failed otherwise.

    apt-get install fio-examples
    python3 bench/fio_examples.py [--iolab target/release/iolab] [--dir /usr/share/doc/fio/examples]

Each file runs for a second on a 16 MiB scratch file (`--target`, `--size
16m --runtime 1`), or, when it names a `directory=`, with that directory
moved to a scratch one and each job on its own files. Exit status 1 when
any file failed for a reason other than a missing engine.
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile


def run_one(iolab, path):
    text = open(path, errors="replace").read()
    with tempfile.TemporaryDirectory() as scratch:
        args = [iolab, "run"]
        if re.search(r"^\s*directory\s*=", text, re.M):
            text = re.sub(r"^(\s*directory\s*=).*$", r"\g<1>" + scratch, text, flags=re.M)
            job = os.path.join(scratch, os.path.basename(path))
            open(job, "w").write(text)
            args.append(job)
        else:
            args += [path, "--target", os.path.join(scratch, "img")]
        args += ["--size", "16m", "--runtime", "1"]
        try:
            out = subprocess.run(args, cwd=scratch, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            return "failed", "did not end within 120 s"
    if out.returncode == 0:
        return "ran", ""
    error = next((l for l in out.stderr.splitlines() if "error:" in l), out.stderr.strip()[-200:])
    if "engine has no equivalent" in error or "is not set in the environment" in error:
        return "engine", error
    return "failed", error


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iolab", default="target/release/iolab")
    p.add_argument("--dir", default="/usr/share/doc/fio/examples")
    a = p.parse_args()
    files = sorted(glob.glob(os.path.join(a.dir, "*.fio")))
    if not files:
        sys.exit(f"no .fio files in {a.dir} (apt-get install fio-examples)")
    iolab = os.path.abspath(a.iolab)
    counts = {"ran": 0, "engine": 0, "failed": 0}
    for path in files:
        verdict, why = run_one(iolab, path)
        counts[verdict] += 1
        name = os.path.basename(path)
        print(f"{verdict:7} {name}" + (f": {why}" if verdict == "failed" else ""))
    print(
        f"{len(files)} job files: {counts['ran']} ran, {counts['engine']} need an engine iolab does not have, "
        f"{counts['failed']} failed otherwise"
    )
    sys.exit(1 if counts["failed"] else 0)


if __name__ == "__main__":
    main()
