#!/usr/bin/env python3
"""One phase of the small-files workload of bench/run.sh, on ROOT/small:
NDIRS directories of NPER files of 256 bytes. Prints the phase's seconds, measured
inside the process (interpreter start-up excluded), so Python's overhead is the same
on every target and not part of the figure.
  usage: smallfiles.py ROOT NDIRS NPER create|stat|readdir|rename|unlink"""
import os, sys, time

root, ndirs, nper, phase = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
base = os.path.join(root, "small")
dirs = [os.path.join(base, f"d{d:03d}") for d in range(ndirs)]
data = b"x" * 255 + b"\n"

def create():
    os.mkdir(base)
    for d in dirs:
        os.mkdir(d)
        for f in range(nper):
            fd = os.open(os.path.join(d, f"f{f:04d}.txt"), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
            os.write(fd, data)
            os.close(fd)

def stat():
    for d in dirs:
        for f in range(nper):
            os.lstat(os.path.join(d, f"f{f:04d}.txt"))

def readdir():
    n = 0
    for d in dirs:
        with os.scandir(d) as it:
            for _ in it:
                n += 1
    if n != ndirs * nper:
        raise SystemExit(f"readdir saw {n} entries, expected {ndirs * nper}")

def rename():
    for d in dirs:
        for f in range(nper):
            os.rename(os.path.join(d, f"f{f:04d}.txt"), os.path.join(d, f"r{f:04d}.txt"))

def unlink():
    for d in dirs:
        for f in range(nper):
            os.unlink(os.path.join(d, f"r{f:04d}.txt"))
        os.rmdir(d)
    os.rmdir(base)

fn = {"create": create, "stat": stat, "readdir": readdir, "rename": rename, "unlink": unlink}[phase]
t = time.perf_counter()
fn()
print(f"{time.perf_counter() - t:.6f}")
