#!/usr/bin/env python3
"""The first seed's shape in-process: one archive extracted, then removed,
under each metadata policy of iolab's file system, on the same file-backed
image, through `iolab fs untar` and `iolab fs rm` (each timed by iolab
from the mount to the end of the unmount: write-back, commits, the log's
checkpoint and the final flush inside the time).

Each round makes a new file system per policy (policies alternate within
the round), extracts the archive, then removes it with a cold cache.
Prints, per policy and phase, the median seconds (min-max), the ratio to
async's median, and the medians of blocks written, write requests,
synchronous writes, flushes and bytes written to the log.

Usage: bench/policies.py [--archive FILE] [--rounds 5] [--policies async,softdep,log,sync]
                         [--size 1g] [--log-size SIZE] [--dir DIR] [--iolab PATH]
Default archive: glibc-source's (/usr/src/glibc/glibc-*.tar.xz), else
/usr/share/doc tarred on the fly; either is decompressed into /dev/shm first.

With --shapes (random,ordered,small,large,deep,flat): the issue-42 table
instead. For each generated tree shape, one `iolab sweep policies --shape
S --kernel ext4,ext4-nojournal` (the columns alternating within each
repeat, GNU tar and rm through the kernel for ext4, in-process for
iolab), its JSON kept in --out; then one table of every shape: each
policy's medians' ratio to async in the same sweep (one repeat's run to
async's, lowest and highest, in brackets), ext4's with its journal to ext4 without, and each
goal (log <= max(1.05, ext4 journal / no journal), softdep <= 1.15,
sync >= 3) met or not. Cells whose async median is under a second, or
whose repeats spread more than 10%, are marked as the sweep marks them.

    bench/policies.py --shapes random,ordered,small,large,deep,flat --copies 40 --repeat 3 \
        --policies softdep,log,async --out /tmp/shapes
"""
import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def figures(out):
    """Seconds and counters from iolab fs untar/rm output."""
    num = lambda pattern: float(m.group(1)) if (m := re.search(pattern, out)) else 0.0
    size = re.search(r"([0-9.]+) (bytes|KiB|MiB|GiB) of metadata written to the log", out)
    log_bytes = 0.0
    if size:
        log_bytes = float(size.group(1)) * {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[size.group(2)]
    return {
        "seconds": num(r"in ([0-9.]+) s with the unmount"),
        "blocks": num(r"device: (\d+) blocks"),
        "requests": num(r"written in (\d+) requests"),
        "sync writes": num(r"(\d+) synchronous writes"),
        "flushes": num(r"(\d+) flushes"),
        "log MiB": log_bytes / (1 << 20),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    found = sorted(glob.glob("/usr/src/glibc/glibc-*.tar.xz"))
    ap.add_argument("--archive", default=found[-1] if found else None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--policies", default="async,softdep,log,sync")
    ap.add_argument("--size", default="1g")
    ap.add_argument("--log-size", default=None)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--iolab", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "iolab"))
    ap.add_argument("--shapes", default=None, help="the generated shapes' table (see above)")
    ap.add_argument("--copies", default="40", help="--shapes: copies per run; SHAPE=N pairs override one shape's")
    ap.add_argument("--files", default="2000",
                    help="--shapes: files in each generated tree (the table's 2,000; the sweep's own default, "
                         "10,000, at 40 copies does not fit --size 4g); SHAPE=N pairs override one shape's; "
                         "`large` keeps the sweep's 8 unless named")
    ap.add_argument("--repeat", type=int, default=3, help="--shapes: repeats per sweep")
    ap.add_argument("--kernel", default="ext4,ext4-nojournal", help="--shapes: the kernel columns")
    ap.add_argument("--out", default=None, help="--shapes: where each sweep's JSON goes (default: a new temp dir)")
    ap.add_argument("--target", default=None,
                    help="--shapes: the file the sweeps make their file systems on (e.g. on /dev/shm: no disk "
                         "beneath, the policies' own cost; --size sizes it; it is overwritten)")
    args = ap.parse_args()
    if args.shapes:
        return shapes(args)
    policies = args.policies.split(",")
    work = tempfile.mkdtemp(prefix="iolab-policies-", dir=args.dir)
    shm = tempfile.mkdtemp(prefix="iolab-policies-", dir="/dev/shm")
    try:
        archive = os.path.join(shm, "archive.tar")
        if args.archive:
            tool = {".xz": ["xz", "-dc"], ".gz": ["gzip", "-dc"]}.get(os.path.splitext(args.archive)[1], ["cat"])
            with open(archive, "wb") as f:
                subprocess.run([*tool, args.archive], check=True, stdout=f)
        else:
            run("tar", "cf", archive, "-C", "/usr/share", "doc")
        top = run("tar", "tf", archive).split("\n", 1)[0].split("/")[0]
        image = os.path.join(work, "fs.img")
        results = {(p, phase): [] for p in policies for phase in ("tar", "rm")}
        for _ in range(args.rounds):
            for p in policies:
                mkfs = [args.iolab, "fs", "mkfs", image, "--size", args.size, "--force"]
                run(*mkfs, *(["--log-size", args.log_size] if args.log_size else []))
                results[(p, "tar")].append(figures(run(args.iolab, "fs", "untar", image, archive, "--policy", p)))
                results[(p, "rm")].append(figures(run(args.iolab, "fs", "rm", image, top, "--policy", p)))
                os.remove(image)
        print(f"archive {args.archive or '/usr/share/doc'} from memory; {args.rounds} rounds; images of {args.size} "
              f"in {work} (buffered, on {run('df', '--output=fstype', work).split()[-1]}); medians")
        keys = ["blocks", "requests", "sync writes", "flushes", "log MiB"]
        print(f"{'phase':<5} {'policy':<7} {'seconds (min-max)':<20} {'x async':>8} " + " ".join(f"{k:>11}" for k in keys))
        for phase in ("tar", "rm"):
            base = statistics.median(r["seconds"] for r in results[("async", phase)]) if "async" in policies else None
            for p in policies:
                rs = results[(p, phase)]
                t = [r["seconds"] for r in rs]
                med = statistics.median(t)
                ratio = f"{med / base:8.2f}" if base else " " * 8
                counters = " ".join(f"{statistics.median(r[k] for r in rs):11.1f}" for k in keys)
                print(f"{phase:<5} {p:<7} {med:6.2f} ({min(t):.2f}-{max(t):.2f})    {ratio} {counters}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)


def per_shape(spec, shape, default=None):
    """--copies, --files: N for every shape, or N plus SHAPE=N pairs."""
    n = default
    for part in spec.split(","):
        name, _, value = part.rpartition("=")
        if not name:
            n = int(value)
        elif name == shape:
            return int(value)
    return n


def shapes(args):
    out = args.out or tempfile.mkdtemp(prefix="iolab-shapes-")
    os.makedirs(out, exist_ok=True)
    docs = {}
    for shape in args.shapes.split(","):
        path = os.path.join(out, f"{shape}.json")
        cmd = [args.iolab, "sweep", "policies", "--shape", shape, "--copies", str(per_shape(args.copies, shape, 40)),
               "--repeat", str(args.repeat), "--policies", args.policies, "--json", path]
        files = per_shape(args.files, shape) if shape != "large" or "large=" in args.files else None
        if files:
            cmd += ["--files", str(files)]
        if args.kernel:
            cmd += ["--kernel", args.kernel]
        if args.target:
            cmd += ["--target", args.target, "--size", args.size, "--force"]
        print("$", " ".join(cmd[1:]), file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(path) as f:
            docs[shape] = json.load(f)
    print(shapes_table(docs))
    print(f"(each sweep's JSON in {out})")
    if args.target and os.path.exists(args.target):
        os.remove(args.target)


def paired(col, base, phase):
    """The medians' ratio of `col` to `base` (as the sweep's own x), and
    the lowest and highest of one repeat's run to `base`'s."""
    ratios = [a["seconds"] / b["seconds"] for a, b in zip(col[phase]["runs"], base[phase]["runs"])]
    return col[phase]["median_s"] / base[phase]["median_s"], min(ratios), max(ratios)


def shapes_table(docs):
    policies = [c["name"] for c in next(iter(docs.values()))["columns"] if not c["name"].startswith("ext4")]
    head = ["shape (entries x copies, data)", "phase", "async s"]
    head += [f"{p} / async" for p in policies if p != "async"] + ["ext4 / ext4-nojournal", "goals"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 3) + "---|"]
    for shape, doc in docs.items():
        cols = {c["name"]: c for c in doc["columns"]}
        what = f"{shape} ({doc['entries']:,} x {doc['copies']}, {doc['data_bytes'] * doc['copies'] / (1 << 20):.0f} MiB)"
        for phase in ("tar", "rm"):
            base = cols["async"]
            marks = "".join(m for m, d in (("*", "under_a_second"), ("~", "spread_over_10_percent"))
                            if d in base[phase]["doubts"])
            row = [what, phase, f"{base[phase]['median_s']:.2f}{marks}"]
            ext4 = None
            if "ext4" in cols and "ext4-nojournal" in cols:
                ext4 = paired(cols["ext4"], cols["ext4-nojournal"], phase)
            goals = []
            for p in policies:
                if p == "async":
                    continue
                r = paired(cols[p], base, phase)
                row.append(f"x{r[0]:.2f} ({r[1]:.2f}-{r[2]:.2f})")
                limit = {"softdep": 1.15, "log": max(1.05, ext4[0]) if ext4 else 1.05}.get(p)
                if limit:
                    goals.append(f"{p} {'met' if r[0] <= limit else 'MISSED'} (<= {limit:.2f})")
                elif p == "sync":
                    goals.append(f"sync {'met' if r[0] >= 3 else 'MISSED'} (>= 3)")
            row.append(f"x{ext4[0]:.2f} ({ext4[1]:.2f}-{ext4[2]:.2f})" if ext4 else "-")
            row.append("; ".join(goals))
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
