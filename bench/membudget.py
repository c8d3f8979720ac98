#!/usr/bin/env python3
"""One memory budget for the whole daemon (issue 45): N sessions writing at once.

A base session holds a 200 MB file of incompressible data (checkpointed); N forks of it
are mounted (`fork --mount`) and each runs one fio process with two jobs at once for
--seconds: 4 KiB random overwrites of the 200 MB file, and 1 MiB sequential writes of a
new 64 MB file (looped), both ending with an fsync. Meanwhile one more fork stays idle
and is probed every 50 ms (a LOOKUP of a missing name and a 4 KiB read of the big
file). Measured: the daemon's peak RSS (sampled every 100 ms, and VmHWM), per-session
write throughput (fio) and its spread, the idle session's latency, and the budget's
counters (`treefork limits`).

Side by side in one run: --base-bin (a build before the shared budget, per-session seal
marks) at the session counts in --compare-at (keep it small: the old daemon holds about
200 MB per busy session).

usage: bench/membudget.py [--bin target/release/treefork] [--sessions 10,50,100]
         [--seconds 20] [--unsealed-mb 512] [--base-bin PATH --compare-at 10]
Prints a markdown report and writes it to /var/tmp/membudget-last.md.
"""

import argparse
import concurrent.futures as cf
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

MIB = 1 << 20


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))] if xs else float("nan")


def status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


class Run:
    def __init__(self, tf, work, n, seconds, unsealed_mb, read_cache_mb):
        self.tf, self.work, self.n, self.seconds = tf, work, n, seconds
        self.store = os.path.join(work, "store")
        self.base = os.path.join(work, "base")
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("TREEFORK_STORE", "TREEFORK_SOCKET")}
        os.makedirs(self.base)
        self.cli("--store", self.store, "mount", self.base, "--session", "base")
        with open(os.path.join(self.store, "lock")) as f:
            self.pid = int(f.read().split()[0])
        self.limits = None
        if unsealed_mb:
            r = self.cli("--store", self.store, "limits", f"unsealed_bytes={unsealed_mb * MIB}",
                         f"read_cache_bytes={read_cache_mb * MIB}", check=False)
            self.limits = r.returncode == 0
        with open(os.path.join(self.base, "big.bin"), "wb") as f:
            for _ in range(200):
                f.write(os.urandom(MIB))
        self.cli("-C", self.base, "checkpoint", "-m", "big")
        self.forks = [self.fork(f"w{i:03}") for i in range(n)]
        self.idle = self.fork("idle")

    def cli(self, *args, check=True):
        r = subprocess.run([self.tf, *args], env=self.env, capture_output=True, text=True)
        if check and r.returncode != 0:
            raise RuntimeError(f"treefork {' '.join(args)}: {r.stderr.strip()}")
        return r

    def fork(self, name):
        d = os.path.join(self.work, name)
        os.makedirs(d)
        self.cli("-C", self.base, "fork", name, "--mount", d)
        return d

    def fio(self, d):
        out = subprocess.run(
            ["fio", "--output-format=json", "--group_reporting=0",
             f"--directory={d}", "--ioengine=psync", "--end_fsync=1",
             "--time_based", f"--runtime={self.seconds}",
             "--name=rand", "--filename=big.bin", "--rw=randwrite", "--bs=4k", "--size=200m",
             "--name=seq", "--filename=seq.bin", "--rw=write", "--bs=1m", "--size=64m"],
            capture_output=True, text=True)
        if out.returncode != 0:
            return None, out.stderr.strip()[-300:]
        jobs = json.loads(out.stdout)["jobs"]
        return {j["jobname"]: j["write"]["bw"] * 1024 for j in jobs}, None

    def probe(self, stop, lat):
        big = os.path.join(self.idle, "big.bin")
        i = 0
        while not stop.is_set():
            t = time.perf_counter()
            try:
                os.stat(os.path.join(self.idle, f"missing-{i}"))
            except FileNotFoundError:
                pass
            with open(big, "rb") as f:
                f.seek((i * 7919 % 51200) * 4096)
                f.read(4096)
            lat.append(time.perf_counter() - t)
            i += 1
            time.sleep(0.05)

    def go(self):
        before = status(self.pid, "VmRSS")
        stop, peak, lat = threading.Event(), [0], []

        held = [0, 0]  # the ledger's peak (unsealed + parked) and the read cache's, sampled

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], status(self.pid, "VmRSS"))
                time.sleep(0.1)

        def sample_held():
            while not stop.is_set():
                r = self.cli("--store", self.store, "limits", "--json", check=False)
                if r.returncode == 0:
                    m = json.loads(r.stdout).get("memory") or {}
                    held[0] = max(held[0], m.get("unsealed_used", 0))
                    held[1] = max(held[1], m.get("read_cache_used", 0))
                time.sleep(0.5)

        ts = [threading.Thread(target=sample), threading.Thread(target=sample_held),
              threading.Thread(target=self.probe, args=(stop, lat))]
        for t in ts:
            t.start()
        t0 = time.perf_counter()
        with cf.ThreadPoolExecutor(len(self.forks)) as ex:
            res = list(ex.map(self.fio, self.forks))
        wall = time.perf_counter() - t0
        stop.set()
        for t in ts:
            t.join()
        hwm = status(self.pid, "VmHWM")
        time.sleep(10)
        after = status(self.pid, "VmRSS")
        lim = self.cli("--store", self.store, "limits", "--json", check=False)
        mem = json.loads(lim.stdout).get("memory") if lim.returncode == 0 else None
        return dict(before=before, peak=max(peak[0], hwm), after=after, wall=wall,
                    results=res, lat=lat, memory=mem, held=held)

    def close(self):
        for d in [*self.forks, self.idle, self.base]:
            self.cli("--store", self.store, "umount", d, check=False)


def row(tag, n, r):
    ok = [x for x, _ in r["results"] if x]
    failed = [e for x, e in r["results"] if not x]
    per = [x["rand"] + x["seq"] for x in ok]
    rand = [x["rand"] for x in ok]
    spread = (statistics.pstdev(per) / statistics.mean(per)) if len(per) > 1 else 0
    mem = r["memory"] or {}
    lat = r["lat"]
    held = r.get("held") or [0, 0]
    return (f"| {tag} | {n} | {r['before'] / MIB:.0f} | {r['peak'] / MIB:.0f} | "
            f"{held[0] / MIB:.0f} + {held[1] / MIB:.0f} | {r['after'] / MIB:.0f} | "
            f"{sum(per) / MIB:.0f} | {statistics.median(per) / MIB if per else 0:.2f} "
            f"({min(per) / MIB if per else 0:.2f}..{max(per) / MIB if per else 0:.2f}, cv {spread:.2f}) | "
            f"{statistics.median(rand) / 1024 if rand else 0:.0f} | "
            f"{pct(lat, 50) * 1e3:.1f} / {pct(lat, 99) * 1e3:.1f} | "
            f"{mem.get('sealer_seals', '-')} / {mem.get('forced_seals', '-')} | {len(failed)} |"), failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/treefork")
    ap.add_argument("--base-bin")
    ap.add_argument("--compare-at", default="10")
    ap.add_argument("--sessions", default="10,50,100")
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--unsealed-mb", type=int, default=512)
    ap.add_argument("--read-cache-mb", type=int, default=64)
    a = ap.parse_args()
    plan = [("shared budget", os.path.realpath(a.bin), int(n)) for n in a.sessions.split(",")]
    if a.base_bin:
        plan = [("per-session (before)", os.path.realpath(a.base_bin), int(n))
                for n in a.compare_at.split(",")] + plan
    host = os.uname()
    out = [f"## Memory budget: sessions writing at once ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
           f"{os.cpu_count()} CPUs, {host.release})\n",
           f"Each session: fio 4 KiB random overwrites of a 200 MB file + 1 MiB sequential writes of a "
           f"64 MB file, {a.seconds} s, end_fsync. Budget set with `treefork limits "
           f"unsealed_bytes={a.unsealed_mb} MiB read_cache_bytes={a.read_cache_mb} MiB` (the before build "
           f"has neither: per-session seal marks). RSS in MiB; throughput MiB/s; random MiB/s is KiB/s "
           f"of 4 KiB overwrites (median); peak held = the highest `treefork limits` showed (sampled every 0.5 s); idle = stat + 4 KiB read on an idle fork, ms p50 / p99.\n",
           "| build | sessions | RSS before | peak RSS | peak held (unsealed + cache) | 10 s after | total MiB/s | per session median (min..max, cv) "
           "| rand KiB/s | idle p50 / p99 | sealer / forced seals | failed |",
           "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
    fails = []
    for tag, tf, n in plan:
        top = tempfile.mkdtemp(prefix="membudget.", dir="/var/tmp")
        r = None
        try:
            run = Run(tf, top, n, a.seconds, a.unsealed_mb, a.read_cache_mb)
            try:
                r = run.go()
            finally:
                run.close()
        finally:
            shutil.rmtree(top, ignore_errors=True)
        line, failed = row(tag, n, r)
        print(line, file=sys.stderr)
        out.append(line)
        fails += failed
    if fails:
        out.append("\nfio failures: " + "; ".join(fails[:5]))
    text = "\n".join(out) + "\n"
    print(text)
    with open("/var/tmp/membudget-last.md", "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
