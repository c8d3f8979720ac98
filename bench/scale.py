#!/usr/bin/env python3
"""A thousand sessions on one daemon (issue 42): forks of a 15,000-file tree mounted
with `fork --mount`, measured at 1, 100 and 1,000 mounts (the daemon's RSS, threads and
descriptors; fork latency p50/p99 of the batch), then unmount/mount latency, every
session writing a small file and checkpointing at once (throughput, p99), 50 parallel
cold `grep -r`, and fairness: LOOKUP latency on an idle mount while another mount is
hammered, against the same with no load.

Side by side in one run: the same steps up to --compare-at mounts with the per-mount
fuser server (TREEFORK_FUSE_SERVER=fuser, 4 threads a mount: the server before issue 42).

usage: bench/scale.py [--bin target/release/treefork] [--mounts 1000] [--compare-at 100]
Prints a markdown report and writes it to /var/tmp/scale-last.md.
"""

import argparse
import concurrent.futures as cf
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def ms(xs):
    return f"{pct(xs, 50) * 1e3:.1f} / {pct(xs, 99) * 1e3:.1f}"


def proc_stats(pid):
    st = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "Threads"):
                st[k] = int(v.split()[0])
    st["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return st


def make_tree(root, dirs=150, files=100):
    for d in range(dirs):
        p = os.path.join(root, f"d{d:03}")
        os.mkdir(p)
        for i in range(files):
            with open(os.path.join(p, f"f{i:02}.txt"), "w") as fh:
                fh.write(f"line {d}/{i}\n" * (1 + (d * 7 + i) % 30))


class Run:
    def __init__(self, tf, work, src, server):
        self.tf, self.work, self.server = tf, work, server
        self.store = os.path.join(work, "store")
        self.base = os.path.join(work, "base")
        self.env = dict(os.environ)
        self.env.pop("TREEFORK_STORE", None)
        self.env.pop("TREEFORK_SOCKET", None)
        if server == "fuser":
            self.env["TREEFORK_FUSE_SERVER"] = "fuser"
        else:
            self.env.pop("TREEFORK_FUSE_SERVER", None)
        os.makedirs(self.base)
        self.cli("--store", self.store, "mount", self.base, "--session", "base", "--from", src)
        with open(os.path.join(self.store, "lock")) as f:
            self.pid = int(f.read().split()[0])
        self.cli("-C", self.base, "checkpoint", "-m", "base")
        self.mounts = []

    def cli(self, *args, check=True):
        r = subprocess.run([self.tf, *args], env=self.env, capture_output=True, text=True)
        if check and r.returncode != 0:
            raise RuntimeError(f"treefork {' '.join(args)}: {r.stderr.strip()}")
        return r

    def fork(self, i):
        d = os.path.join(self.work, f"k{i:04}")
        os.makedirs(d, exist_ok=True)
        t = time.perf_counter()
        self.cli("-C", self.base, "fork", f"k{i:04}", "--mount", d)
        self.mounts.append(d)
        return time.perf_counter() - t

    def grow_to(self, n):
        lat = []
        while len(self.mounts) + 1 < n:
            lat.append(self.fork(len(self.mounts)))
        return lat

    def stats(self):
        return proc_stats(self.pid)

    def peak_threads(self, fn, *args):
        """Run fn(*args), sampling the daemon's thread count every 20 ms: (result, peak)."""
        stop, peak = threading.Event(), [0]

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], proc_stats(self.pid)["Threads"])
                time.sleep(0.02)

        t = threading.Thread(target=sample)
        t.start()
        try:
            return fn(*args), peak[0]
        finally:
            stop.set()
            t.join()

    def timed(self, *args):
        t = time.perf_counter()
        self.cli(*args)
        return time.perf_counter() - t

    def remount(self, k):
        """Unmount and mount again the first k forks: latencies of each."""
        um, mo = [], []
        for d in self.mounts[:k]:
            t = time.perf_counter()
            self.cli("--store", self.store, "umount", d)
            um.append(time.perf_counter() - t)
            t = time.perf_counter()
            self.cli("--store", self.store, "mount", d, "--session", os.path.basename(d))
            mo.append(time.perf_counter() - t)
        return um, mo

    def write_and_checkpoint_all(self, par=32):
        def one(d):
            with open(os.path.join(d, "note.txt"), "w") as f:
                f.write(f"{d}\n")
            t = time.perf_counter()
            self.cli("-C", d, "checkpoint", "-m", "note")
            return time.perf_counter() - t

        t = time.perf_counter()
        with cf.ThreadPoolExecutor(par) as ex:
            lat = list(ex.map(one, self.mounts))
        return len(lat) / (time.perf_counter() - t), lat

    def cold_greps(self, n=50):
        subprocess.run(["sync"])
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        ds = self.mounts[:n]
        t = time.perf_counter()
        with cf.ThreadPoolExecutor(n) as ex:
            list(ex.map(lambda d: subprocess.run(["grep", "-rq", "no-such-text", d]), ds))
        return time.perf_counter() - t

    def fairness(self, samples=400):
        """LOOKUP latency (stat of a new missing name) on mount 1, alone and while
        mount 0 is hammered by 16 writer/reader threads."""
        quiet, busy = self.mounts[1], self.mounts[0]

        def probe(tag):
            lat = []
            for i in range(samples):
                t = time.perf_counter()
                try:
                    os.stat(os.path.join(quiet, f"missing-{tag}-{i}"))
                except FileNotFoundError:
                    pass
                lat.append(time.perf_counter() - t)
            return lat

        alone = probe("alone")
        stop = threading.Event()

        def hammer(j):
            p = os.path.join(busy, f"h{j}")
            os.makedirs(p, exist_ok=True)
            k = 0
            while not stop.is_set():
                with open(os.path.join(p, f"x{k % 200}"), "w") as f:
                    f.write("x" * 4096)
                k += 1

        ts = [threading.Thread(target=hammer, args=(j,)) for j in range(16)]
        for t in ts:
            t.start()
        time.sleep(0.5)
        loaded = probe("loaded")
        stop.set()
        for t in ts:
            t.join()
        return alone, loaded

    def close(self):
        for d in reversed(self.mounts):
            self.cli("--store", self.store, "umount", d, check=False)
        self.cli("--store", self.store, "umount", self.base, check=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/treefork")
    ap.add_argument("--mounts", type=int, default=1000)
    ap.add_argument("--compare-at", type=int, default=100)
    a = ap.parse_args()
    tf = os.path.realpath(a.bin)
    top = tempfile.mkdtemp(prefix="scale.", dir="/var/tmp")
    src = os.path.join(top, "src")
    os.mkdir(src)
    make_tree(src)
    out = []
    host = os.uname()
    out.append(f"## Scale: {a.mounts} mounted sessions on one daemon ({time.strftime('%Y-%m-%d')}, "
               f"{os.cpu_count()} CPUs, {host.release})\n")
    out.append("Forks of a 15,000-file tree (150 dirs x 100 files), each `fork --mount`; the base "
               "workspace is one more mount. Latencies are p50 / p99 in ms.\n")
    rows = []
    try:
        for server, upto in (("fuser", a.compare_at), ("pool", a.mounts)):
            work = os.path.join(top, server)
            os.mkdir(work)
            r = Run(tf, work, src, server)
            try:
                marks = [m for m in (1, 100, 1000, upto) if m <= upto]
                for m in sorted(set(marks)):
                    lat = r.grow_to(m)
                    s = r.stats()
                    rows.append((server, len(r.mounts) + 1, s, lat))
                    print(server, len(r.mounts) + 1, s, file=sys.stderr)
                if server == "pool":
                    t_sessions = (r.timed("--store", r.store, "sessions"),
                                  r.timed("--store", r.store, "sessions", "--json"),
                                  r.timed("--store", r.store, "session", "sweep"))
                    um, mo = r.remount(50)
                    (tput, cl), p1 = r.peak_threads(r.write_and_checkpoint_all)
                    s_after = r.stats()
                    g, p2 = r.peak_threads(r.cold_greps)
                    s_grep = r.stats()
                    (alone, loaded), p3 = r.peak_threads(r.fairness)
                    peaks = (p1, p2, p3)
                    extra = (t_sessions, um, mo, tput, cl, s_after, g, s_grep, alone, loaded, peaks)
            finally:
                r.close()
    finally:
        shutil.rmtree(top, ignore_errors=True)
    out.append("| server | mounts | RSS MiB | threads | fds | fork p50 / p99 (ms, this batch) |")
    out.append("|---|---:|---:|---:|---:|---:|")
    for server, n, s, lat in rows:
        out.append(f"| {server} | {n} | {s['VmRSS'] / 1024:.0f} | {s['Threads']} | {s['fds']} | "
                   f"{ms(lat) if lat else '-'} |")
    t_sessions, um, mo, tput, cl, s_after, g, s_grep, alone, loaded, peaks = extra
    out.append("")
    out.append(f"- with {a.mounts} mounted: `treefork sessions` {t_sessions[0] * 1e3:.0f} ms, "
               f"`sessions --json` (the web UI's sessions page) {t_sessions[1] * 1e3:.0f} ms, "
               f"`session sweep` (the eviction sweep over every session) {t_sessions[2] * 1e3:.0f} ms")
    out.append(f"- peak daemon threads (spares included): checkpoint-all {peaks[0]}, "
               f"cold greps {peaks[1]}, fairness hammer {peaks[2]}")
    out.append(f"- unmount / mount of 50 forks at {a.mounts}: unmount {ms(um)}, mount {ms(mo)}")
    out.append(f"- every session writes a file and checkpoints (32 at once): {tput:.0f} checkpoints/s, "
               f"latency {ms(cl)}; RSS after {s_after['VmRSS'] / 1024:.0f} MiB")
    out.append(f"- 50 parallel cold `grep -r` over the 15,000 files: {g:.1f} s; RSS after "
               f"{s_grep['VmRSS'] / 1024:.0f} MiB (peak {s_grep['VmHWM'] / 1024:.0f} MiB)")
    out.append(f"- fairness, LOOKUP on an idle mount: alone {ms(alone)}, while another mount is "
               f"hammered by 16 threads {ms(loaded)}")
    text = "\n".join(out) + "\n"
    print(text)
    with open("/var/tmp/scale-last.md", "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
