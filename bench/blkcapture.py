#!/usr/bin/env python3
"""Capture a block device's requests as blktrace records, through the
kernel's `blk` ftrace tracer, while a command runs.

    sudo python3 bench/blkcapture.py /dev/loop0 trace.bin -- dd if=/dev/zero of=/dev/loop0 bs=4k count=100 oflag=direct

The output is a stream of `struct blk_io_trace` records, as `blktrace -o -`
writes them: `blkparse -i - < trace.bin` reads it, and `iolab run --replay
trace.bin` replays it. Use it where blktrace itself cannot open its relay
files in debugfs (EPERM on some kernels); elsewhere `blktrace -d DEV -o -
> trace.bin` gives the same records. Needs root and tracefs.
"""

import errno
import os
import subprocess
import sys

TRACEFS = "/sys/kernel/tracing"


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def drain(fd, out):
    """Everything the trace buffer holds now, without waiting for more."""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError as e:
            if e.errno == errno.EAGAIN:
                return
            raise
        if not chunk:
            return
        out.write(chunk)


def main():
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        sys.exit("usage: blkcapture.py DEVICE OUT -- COMMAND...")
    dev, out_path, cmd = sys.argv[1], sys.argv[2], sys.argv[4:]
    name = os.path.basename(os.path.realpath(dev))
    if not os.path.isdir(f"{TRACEFS}/options"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], check=True)
    enable = f"/sys/block/{name}/trace/enable"
    write(f"{TRACEFS}/tracing_on", "0")
    write(f"{TRACEFS}/current_tracer", "blk")
    write(enable, "1")
    write(f"{TRACEFS}/trace_options", "bin")
    write(f"{TRACEFS}/trace_options", "nocontext-info")
    write(f"{TRACEFS}/trace", "")
    status = 1
    try:
        fd = os.open(f"{TRACEFS}/trace_pipe", os.O_RDONLY | os.O_NONBLOCK)
        with open(out_path, "wb") as out:
            write(f"{TRACEFS}/tracing_on", "1")
            proc = subprocess.Popen(cmd)
            while proc.poll() is None:
                drain(fd, out)
                try:
                    proc.wait(timeout=0.2)
                except subprocess.TimeoutExpired:
                    pass
            write(f"{TRACEFS}/tracing_on", "0")
            drain(fd, out)
            status = proc.returncode
        os.close(fd)
    finally:
        write(f"{TRACEFS}/tracing_on", "0")
        write(enable, "0")
        write(f"{TRACEFS}/trace_options", "nobin")
        write(f"{TRACEFS}/trace_options", "context-info")
        write(f"{TRACEFS}/current_tracer", "nop")
    sys.exit(status)


if __name__ == "__main__":
    main()
