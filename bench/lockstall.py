#!/usr/bin/env python3
"""Metadata latency under a big rewrite (issue 12, defect 8): p50/p99/max of stat(2) on a
small file of a treefork mount while another process rewrites a large file of the same
mount (random 64 KiB blocks with fsync every 256 MiB, so flushes and seals run), and the
same stat loop with no writer as the reference. With --bin-base the two builds run in
the same invocation, alternating phases, so a noisy minute hits both.

    usage: bench/lockstall.py --bin target/release/treefork [--bin-base OLD] [--size-gib 4] [--secs 30]
                              [--probe stat|xattr]

Note: the kernel caches attributes (TTL 1 h), so a stat(2) of the small file is
mostly answered without the daemon; `--probe xattr` times getxattr(2) instead,
which the kernel never caches, so every probe takes the session's table lock.
"""
import argparse, datetime, os, platform, random, shutil, statistics, subprocess, sys, tempfile, threading, time

def sh(*a):
    return subprocess.run(a, check=True, capture_output=True, text=True).stdout

PROBES = {"stat": os.stat, "xattr": lambda p: os.getxattr(p, "user.lockstall")}
probe = PROBES["stat"]

def stat_loop(path, secs, stop=None):
    lat = []
    end = time.perf_counter() + secs
    while time.perf_counter() < end and not (stop and stop.is_set()):
        t = time.perf_counter_ns(); probe(path); lat.append((time.perf_counter_ns() - t) / 1000)
        time.sleep(0.001)
    return lat

def rewrite(path, size, secs, stop, done):
    blk = os.urandom(64 << 10)
    fd = os.open(path, os.O_WRONLY)
    nblk = size // len(blk); written = 0; end = time.time() + secs
    try:
        while time.time() < end and not stop.is_set():
            os.pwrite(fd, blk, random.randrange(nblk) * len(blk))
            written += len(blk)
            if written % (256 << 20) == 0:
                os.fsync(fd)
    finally:
        os.close(fd); done.append(written)

def pct(xs, p):
    xs = sorted(xs); return xs[min(len(xs) - 1, int(len(xs) * p))] if xs else float("nan")

class Mnt:
    def __init__(self, label, bin_, work, size):
        self.label, self.bin = label, bin_
        self.store = os.path.join(work, label, "store"); self.mp = os.path.join(work, label, "mnt")
        os.makedirs(self.mp)
        sh(bin_, "--store", self.store, "mount", self.mp, "--session", "stall")
        self.big = os.path.join(self.mp, "big"); self.small = os.path.join(self.mp, "small")
        open(self.small, "w").write("x")
        os.setxattr(self.small, "user.lockstall", b"1")
        print(f"== {label}: writing {size >> 30} GiB", file=sys.stderr)
        subprocess.run(["dd", "if=/dev/urandom", f"of={self.big}", "bs=4M", f"count={size >> 22}", "conv=fsync", "status=none"], check=True)

    def phase(self, size, secs):
        idle = stat_loop(self.small, secs / 3)
        stop, done = threading.Event(), []
        w = threading.Thread(target=rewrite, args=(self.big, size, secs, stop, done)); w.start()
        busy = stat_loop(self.small, secs, stop)
        stop.set(); w.join()
        return idle, busy, done[0] / secs / 2**20

    def close(self):
        subprocess.run([self.bin, "--store", self.store, "umount", self.mp], capture_output=True)

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True); ap.add_argument("--bin-base")
    ap.add_argument("--size-gib", type=float, default=4); ap.add_argument("--secs", type=float, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--probe", choices=sorted(PROBES), default="stat")
    a = ap.parse_args()
    global probe
    probe = PROBES[a.probe]
    size = int(a.size_gib * 2**30) // (4 << 20) * (4 << 20)
    work = tempfile.mkdtemp(prefix="tf-stall-", dir="/var/tmp")
    bins = [("new", os.path.abspath(a.bin))] + ([("base", os.path.abspath(a.bin_base))] if a.bin_base else [])
    res = {l: {"idle": [], "busy": [], "mibs": []} for l, _ in bins}
    mnts = []
    try:
        for l, b in bins:
            mnts.append(Mnt(l, b, work, size))
        for r in range(a.rounds):
            for m in mnts:
                print(f"== round {r + 1}: {m.label}", file=sys.stderr)
                idle, busy, mibs = m.phase(size, a.secs)
                res[m.label]["idle"] += idle; res[m.label]["busy"] += busy; res[m.label]["mibs"].append(mibs)
    finally:
        for m in mnts:
            m.close()
        subprocess.run(["bash", "-c", f"grep -o ' {work}/[^ ]*' /proc/mounts | xargs -r -n1 umount -l"], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# stat latency during a {size >> 30} GiB rewrite — {date}", "",
             f"Machine: {os.cpu_count()} cores, Linux {platform.release()}. " +
             "; ".join(f"{l}: {sh(b, '--version').strip()} ({b})" for l, b in bins), "",
             f"{'stat(2)' if a.probe == 'stat' else 'getxattr(2)'} of a 1-byte file every 1 ms; 'busy' while another thread rewrites random 64 KiB blocks of a "
             f"{size >> 30} GiB file in the same mount (fsync every 256 MiB), {a.secs:.0f} s per phase, {a.rounds} rounds.", "",
             "| build | idle p50 µs | idle p99 µs | busy p50 µs | busy p99 µs | busy max µs | rewrite MiB/s |", "|---|---|---|---|---|---|---|"]
    for l, _ in bins:
        x = res[l]
        lines.append(f"| {l} | {pct(x['idle'], .5):.0f} | {pct(x['idle'], .99):.0f} | {pct(x['busy'], .5):.0f} | "
                     f"{pct(x['busy'], .99):.0f} | {max(x['busy']):.0f} | {statistics.mean(x['mibs']):.0f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs("bench/results", exist_ok=True)
    out = f"bench/results/lockstall-{datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d')}.md"
    open(out, "a").write(text + "\n")
    print(f"appended to {out}", file=sys.stderr)

if __name__ == "__main__":
    main()
