#!/usr/bin/env python3
"""`treefork bisect run` against `git bisect run` on the same history: a generated
Python project of --checkpoints commits (default 64) where the test suite starts
failing at commit --first-bad; the same snapshots as treefork checkpoints of one
session and as git commits of one repository. Bisects with each --jobs value
(treefork: one throwaway fork per candidate, N at once) and with `git bisect run`
(one worktree, one candidate at a time), each --reps times, and prints a markdown
table (median wall time). The test command sleeps --test-ms first, standing in for
a real suite's run time, so the gain of running candidates at once shows.

    bench/bisect.py --bin target/release/treefork                 # 64 commits, jobs 1 and 4
    bench/bisect.py --bin target/debug/treefork --checkpoints 8 --reps 1 --test-ms 0   # smoke run

Runs as root (FUSE mounts) in a fresh /var/tmp/tf-bisect-* that it removes."""
import argparse, datetime, json, os, platform, shutil, statistics, subprocess, sys, tempfile, time

MODULES = 24  # source files of the generated project


def sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def project_at(root, i, first_bad, test_ms):
    """The project as commit `i` leaves it: commit i rewrites module i % MODULES (a new
    function each time), and from `first_bad` on `calc/core.py` has an off-by-one."""
    m = i % MODULES
    funcs = "".join(f"def f{j}(x):\n    return x * {j} + {i}\n\n" for j in range(i // MODULES + 1))
    write(os.path.join(root, "calc", f"mod{m:02d}.py"), f"# module {m}, commit {i}\n{funcs}")
    bug = " + 1" if i >= first_bad else ""
    write(os.path.join(root, "calc", "core.py"),
          f"# commit {i}\ndef add(a, b):\n    return a + b{bug}\n\n\ndef total(xs):\n    s = 0\n"
          "    for x in xs:\n        s = add(s, x)\n    return s\n")
    write(os.path.join(root, "calc", "__init__.py"), "")
    write(os.path.join(root, "tests", "__init__.py"), "")
    write(os.path.join(root, "tests", "test_core.py"),
          "import time, unittest\nfrom calc import core\n\n\nclass Core(unittest.TestCase):\n"
          "    def test_add(self):\n"
          f"        time.sleep({test_ms / 1000.0})\n"
          "        self.assertEqual(core.add(2, 3), 5)\n\n"
          "    def test_total(self):\n        self.assertEqual(core.total([1, 2, 3]), 6)\n")


TEST = ["python3", "-m", "unittest", "-q", "tests.test_core"]
# No bytecode caches: git's checkouts could leave a stale one of the same size and
# second, and both sides then run the same way.
os.environ["PYTHONDONTWRITEBYTECODE"] = "1"


class Histories:
    """The same history as a treefork session and as a git repository."""

    def __init__(self, bin_, work, n, first_bad, test_ms):
        self.bin, self.work = bin_, work
        self.store, self.mp = os.path.join(work, "store"), os.path.join(work, "ws")
        self.repo = os.path.join(work, "repo")
        os.makedirs(self.mp); os.makedirs(self.repo)
        sh(bin_, "--store", self.store, "mount", self.mp, "--session", "bench")
        g = self.git
        g("init", "-q")
        self.ids, self.shas = [], []
        for i in range(n):
            project_at(self.mp, i, first_bad, test_ms)
            out = json.loads(sh(bin_, "--store", self.store, "-C", self.mp, "--json", "checkpoint", "-m", f"commit {i}"))
            self.ids.append(out["checkpoint"]["id"])
            project_at(self.repo, i, first_bad, test_ms)
            g("add", "-A"); g("commit", "-qm", f"commit {i}")
            self.shas.append(g("rev-parse", "HEAD").strip())
        sh("sync")

    def git(self, *a):
        return sh("git", "-C", self.repo, "-c", "user.email=b@b", "-c", "user.name=b", *a)

    def treefork(self, jobs):
        """One `treefork bisect run`: (wall s, steps, rounds, first bad index)."""
        t = time.perf_counter()
        out = sh(self.bin, "--store", self.store, "--json", "bisect", "run", "--good", self.ids[0], "-j", str(jobs),
                 "--", *TEST, cwd=self.mp)
        wall = time.perf_counter() - t
        doc = json.loads(out)
        return wall, len(doc["steps"]), doc["rounds"], self.ids.index(doc["first_bad"]["id"])

    def git_bisect(self):
        """One `git bisect run` (start and reset included): (wall s, steps, first bad index)."""
        t = time.perf_counter()
        self.git("bisect", "start", self.shas[-1], self.shas[0])
        out = self.git("bisect", "run", *TEST)
        self.git("bisect", "reset")
        wall = time.perf_counter() - t
        steps = sum(1 for l in out.splitlines() if l.startswith("running "))
        first = next(l.split()[0] for l in out.splitlines() if l.endswith("is the first bad commit"))
        return wall, steps, self.shas.index(first)

    def close(self):
        subprocess.run([self.bin, "--store", self.store, "umount", self.mp], capture_output=True)


def med(xs):
    return statistics.median(xs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--checkpoints", type=int, default=64, help="length of the history")
    ap.add_argument("--first-bad", type=int, help="commit where the tests start failing [default: 2/3 of the way]")
    ap.add_argument("--jobs", default="1,4", help="comma-separated --jobs values for treefork")
    ap.add_argument("--test-ms", type=int, default=300, help="time the test suite sleeps per run")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    n = a.checkpoints
    first_bad = a.first_bad if a.first_bad is not None else (2 * n) // 3
    jobs = [int(j) for j in a.jobs.split(",")]
    bin_ = os.path.abspath(a.bin)
    work = tempfile.mkdtemp(prefix="tf-bisect-", dir="/var/tmp")
    rows = {}
    try:
        print(f"== building {n} commits (first bad: {first_bad})", file=sys.stderr)
        h = Histories(bin_, work, n, first_bad, a.test_ms)
        for r in range(a.reps):
            for j in jobs:
                rows.setdefault(f"treefork -j {j}", []).append(h.treefork(j))
            rows.setdefault("git bisect run", []).append(h.git_bisect())
            print(f"== rep {r + 1}/{a.reps} done", file=sys.stderr)
        h.close()
    finally:
        subprocess.run(["bash", "-c", f"grep -o ' {work}/[^ ]*' /proc/mounts | xargs -r -n1 umount -l"], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    print(report(rows, n, first_bad, a, bin_))


def report(rows, n, first_bad, a, bin_):
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    vers = f"{sh(bin_, '--version').strip()} ({bin_}), {sh('git', '--version').strip()}"
    lines = [f"# Bisect benchmark — {date}", "",
             f"Machine: {os.cpu_count()} cores, Linux {platform.release()}; {vers}.", "",
             f"A generated Python project ({MODULES} modules, one changed per commit), {n} commits; the tests "
             f"(`{' '.join(TEST)}`, sleeping {a.test_ms} ms) fail from commit {first_bad} on. Median of {a.reps} "
             "runs. treefork tests both ends first (git trusts them) and runs each candidate in a fork of "
             "its checkpoint; git checks each candidate out in its one worktree.", "",
             "| bisect | steps | rounds | wall s | first bad found |", "|---|---|---|---|---|"]
    base = None
    for name, rs in rows.items():
        wall = med([r[0] for r in rs])
        steps = med([r[1] for r in rs])
        rounds = med([r[2] for r in rs]) if len(rs[0]) == 4 else steps
        found = sorted({r[-1] for r in rs})
        ok = "✓" if found == [first_bad] else f"⚠ {found}"
        base = wall if name == "git bisect run" else base
        lines.append(f"| {name} | {steps:g} | {rounds:g} | {wall:.2f} | {ok} |")
    if base:
        lines += ["", "Wall time relative to git bisect run: " + ", ".join(
            f"{name} {med([r[0] for r in rs]) / base:.2f}×" for name, rs in rows.items() if name != "git bisect run")]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
