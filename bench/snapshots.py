#!/usr/bin/env python3
"""Snapshot latency benchmark; see bench/snapshots.sh. Talks to treefork's session
socket directly (JSON lines) so the figures are the operations, not process start-up;
the CLI round trip (process spawn included) is reported separately."""
import argparse, datetime, json, os, platform, shutil, socket, statistics, subprocess, sys, tempfile, time

from fsbench import update_section  # one writer of RESULTS.md's generated sections

def sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout

def make_tree(root, n):
    os.makedirs(root)
    per_dir = 100
    for d in range((n + per_dir - 1) // per_dir):
        dp = os.path.join(root, f"pkg{d:04d}", "src")
        os.makedirs(dp)
        for f in range(min(per_dir, n - d * per_dir)):
            with open(os.path.join(dp, f"mod{f:03d}.rs"), "w") as fh:
                fh.write(f"// file {d}/{f}\npub fn f{f}() -> u32 {{ {d * per_dir + f} }}\n" * 4)

def touch10(root, rep):
    for i in range(10):
        p = os.path.join(root, f"pkg{i:04d}", "src", "mod000.rs")
        with open(p, "a") as fh:
            fh.write(f"// edit {rep}\n")

class Ctl:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX); self.s.connect(path); self.f = self.s.makefile("rwb")
    def call(self, **op):
        op["v"] = 1
        t = time.perf_counter()
        self.f.write((json.dumps(op) + "\n").encode()); self.f.flush()
        while True:
            r = json.loads(self.f.readline())
            if "event" not in r: break
        dt = (time.perf_counter() - t) * 1000
        if not r.get("ok"): raise RuntimeError(f"{op}: {r}")
        return r, dt

def create_fsync(path):
    """A new 4 KiB file, written and fsync'd: one flush, so one metadata commit."""
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        os.write(fd, os.urandom(4096)); os.fsync(fd)
    finally:
        os.close(fd)

def timed(fn):
    t = time.perf_counter(); fn(); return (time.perf_counter() - t) * 1000

def med(xs): return statistics.median(xs) if xs else float("nan")

def socket_of(mp):
    d = f"/tmp/treefork-{os.getuid()}"
    for x in os.listdir(d):
        if x.startswith("m-"):
            rec = json.load(open(os.path.join(d, x)))
            if rec["mountpoint"] == mp:
                return rec["socket"]
    raise RuntimeError(f"no registry entry for {mp}")

class Tree:
    """One mounted session of n files and its measurements."""
    def __init__(self, bin_, n, work):
        self.bin, self.n, self.work = bin_, n, work
        os.makedirs(work, exist_ok=True)
        self.src = os.path.join(work, f"src-{n}"); make_tree(self.src, n)
        self.store = os.path.join(work, f"store-{n}"); self.mp = os.path.join(work, f"mnt-{n}"); os.makedirs(self.mp)
        sh(bin_, "--store", self.store, "mount", self.mp, "--session", "main", "--from", self.src)
        self.c = Ctl(socket_of(self.mp))
        self.forks, self.ids = [], []
        self.t = {k: [] for k in ("checkpoint", "branch", "fork", "checkout", "diff", "restore", "undo", "cli_checkpoint",
                                  "cli_branch", "cli_checkout", "cli_restore", "cli_undo", "cli_true", "cli_version", "fsync")}

    def warm_up(self):
        self.c.call(op="checkpoint", message="base")
        for w in range(3):
            touch10(self.mp, 10_000 + w)
            self.c.call(op="checkpoint", message=f"warm-up {w}")
            self.c.call(op="branch", name=f"warm{w}", **{"from": "HEAD"})

    def round(self, r):
        c, t = self.c, self.t
        touch10(self.mp, r)
        out, dt = c.call(op="checkpoint", message=f"rep {r}"); t["checkpoint"].append(dt); self.ids.append(out["checkpoint"]["id"])
        t["branch"].append(c.call(op="branch", name=f"b{r}", **{"from": "HEAD"})[1])
        t["diff"].append(c.call(op="diff", a="HEAD~1", b="HEAD")[1])
        fmp = os.path.join(self.work, f"fork-{self.n}-{r}"); os.makedirs(fmp)
        t["fork"].append(c.call(op="fork", name=f"f{r}", **{"from": "HEAD"}, mountpoint=fmp)[1]); self.forks.append(fmp)
        touch10(self.mp, r + 1000)
        t["cli_checkpoint"].append(timed(lambda: sh(self.bin, "-C", self.mp, "checkpoint", "-m", f"cli {r}")))
        for i in range(5):
            t["fsync"].append(timed(lambda: create_fsync(os.path.join(self.mp, f"fsync-{r}-{i}"))))

    def checkouts(self, r):
        c, t = self.c, self.t
        old = self.ids[r % len(self.ids)]
        t["checkout"].append(c.call(op="checkout", ref=old)[1])
        t["checkout"].append(c.call(op="checkout", ref=self.ids[-1])[1])
        # restore and undo of it: the tree swap and its operation record.
        t["restore"].append(c.call(op="restore", ref=old)[1])
        t["undo"].append(c.call(op="undo")[1])
        cli = lambda *a: timed(lambda: sh(self.bin, "-C", self.mp, *a))
        t["cli_branch"].append(cli("branch", f"cli{r}"))
        t["cli_checkout"].append(cli("checkout", old))
        t["cli_checkout"].append(cli("checkout", self.ids[-1]))
        t["cli_restore"].append(cli("restore", old))
        t["cli_undo"].append(cli("undo"))
        # The CLI rows' floors, spawned the same way: the harness alone, and the
        # binary's start-up alone.
        t["cli_true"].append(timed(lambda: sh("/bin/true")))
        t["cli_version"].append(timed(lambda: sh(self.bin, "--version")))

    def close(self):
        for f in self.forks: subprocess.run([self.bin, "--store", self.store, "umount", f], capture_output=True)
        subprocess.run([self.bin, "--store", self.store, "umount", self.mp], capture_output=True)
        res = {k: med(v) for k, v in self.t.items()}
        res["store_bytes"] = int(sh("du", "-sb", self.store).split()[0]); res["tree_bytes"] = int(sh("du", "-sb", self.src).split()[0])
        return res

def baselines(n, src, work, reps):
    """What users do today, on the same tree."""
    res = {}
    base_reps = max(1, min(reps, 3 if n >= 100000 else reps))
    cps = []
    for r in range(base_reps):
        d = os.path.join(work, f"cp-{n}-{r}"); cps.append(timed(lambda: sh("cp", "-a", src, d))); shutil.rmtree(d)
    res["cp -a"] = med(cps)
    repo = os.path.join(work, f"git-{n}"); sh("cp", "-a", src, repo)
    g = lambda *a: sh("git", "-C", repo, "-c", "user.email=b@b", "-c", "user.name=b", *a)
    g("init", "-q"); g("add", "-A"); g("commit", "-qm", "base")
    wts, stashes = [], []
    for r in range(base_reps):
        wt = os.path.join(work, f"wt-{n}-{r}")
        wts.append(timed(lambda: g("worktree", "add", "-q", wt)))
        touch10(repo, r)
        stashes.append(timed(lambda: (g("stash", "-q"), g("stash", "apply", "-q"))))
        g("checkout", "-q", "--", "."); g("stash", "drop", "-q")
    res["git worktree add"] = med(wts); res["git stash+apply"] = med(stashes)
    upper = os.path.join(work, f"upper-{n}"); os.makedirs(upper); touch10_dst = upper
    for i in range(10):
        os.makedirs(os.path.join(upper, f"pkg{i:04d}", "src"), exist_ok=True)
        shutil.copy(os.path.join(src, f"pkg{i:04d}", "src", "mod000.rs"), os.path.join(upper, f"pkg{i:04d}", "src", "mod000.rs"))
    ovs = []
    for r in range(base_reps):
        up2, wk, om = (os.path.join(work, f"{x}-{n}-{r}") for x in ("up2", "wk", "ov"))
        os.makedirs(wk); os.makedirs(om)
        def fork_overlay():
            sh("cp", "-a", upper, up2)
            sh("fuse-overlayfs", "-o", f"lowerdir={src},upperdir={up2},workdir={wk}", om)
        ovs.append(timed(fork_overlay))
        subprocess.run(["umount", om], capture_output=True)
    res["fuse-overlayfs fork"] = med(ovs)
    shutil.rmtree(src, ignore_errors=True); shutil.rmtree(repo, ignore_errors=True)
    return res

def main():
    ap = argparse.ArgumentParser(); ap.add_argument("--bin", required=True); ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--bin-base", help="a second treefork binary measured in the same run (A/B of two builds); "
                    "the report then compares the two and skips the non-treefork baselines")
    ap.add_argument("--reps", type=int, default=9); a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    bins = [("new", os.path.abspath(a.bin))] + ([("base", os.path.abspath(a.bin_base))] if a.bin_base else [])
    work = tempfile.mkdtemp(prefix="tf-bench-", dir="/var/tmp")
    results = {}
    try:
        # All sizes (and both binaries in an A/B run) are mounted at once and their
        # operations interleaved round by round, so a noisy minute on this shared
        # machine hits every size alike and the ratios compare like with like.
        trees = []
        for n in sizes:
            for label, b in bins:
                print(f"== importing {n} files ({label})", file=sys.stderr)
                trees.append((label, Tree(b, n, os.path.join(work, label) if len(bins) > 1 else work)))
        # Steady state, not the import: let writeback and sled's background work settle.
        sh("sync"); time.sleep(2 + max(sizes) / 10000)
        for _, t in trees: t.warm_up()
        for r in range(a.reps):
            for _, t in trees: t.round(r)
        for r in range(a.reps):
            for _, t in trees: t.checkouts(r)
        for label, t in trees:
            results[(label, t.n)] = t.close()
        if len(bins) == 1:
            for _, t in trees:
                print(f"== baselines at {t.n} files", file=sys.stderr)
                results[("new", t.n)].update(baselines(t.n, t.src, work, a.reps))
                print(json.dumps(results[("new", t.n)]), file=sys.stderr)
    finally:
        subprocess.run(["bash", "-c", f"grep -o ' {work}/[^ ]*' /proc/mounts | xargs -r -n1 umount -l"], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    text = report(results, sizes, bins)
    print(text)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    os.makedirs("bench/results", exist_ok=True)
    if len(bins) == 1:
        open(f"bench/results/snapshots-{stamp}.md", "w").write(text)
        update_section("bench/RESULTS.md", "snapshots", text)
    else:
        out = f"bench/results/snapshots-ab-{stamp}.md"
        with open(out, "a") as f:
            f.write(text + "\n\n")
        print(f"appended to {out}", file=sys.stderr)

LABELS = {"checkpoint": "treefork checkpoint (10 files changed)", "branch": "treefork branch", "fork": "treefork fork (until mounted)",
          "checkout": "treefork checkout (10 files differ)", "diff": "treefork diff HEAD~1 HEAD", "cli_checkpoint": "treefork checkpoint via CLI (incl. process start)",
          "restore": "treefork restore (10 files differ)", "undo": "treefork undo (of that restore)",
          "cli_branch": "treefork branch via CLI", "cli_checkout": "treefork checkout via CLI", "cli_restore": "treefork restore via CLI",
          "cli_undo": "treefork undo via CLI", "cli_true": "floor: /bin/true spawned the same way (the harness)",
          "cli_version": "floor: treefork --version (process start-up)",
          "fsync": "create + write 4 KiB + fsync (one metadata commit)"}

def report(results, sizes, bins):
    ab = len(bins) > 1
    rows = ["checkpoint", "branch", "fork", "checkout", "diff", "restore", "undo", "cli_checkpoint", "cli_branch", "cli_checkout",
            "cli_restore", "cli_undo", "cli_true", "cli_version", "fsync"]
    if not ab:
        rows += ["cp -a", "git worktree add", "git stash+apply", "fuse-overlayfs fork"]
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    vers = "; ".join(f"{label}: {sh(b, '--version').strip()} ({b})" for label, b in bins)
    if ab:
        head = ["operation (median ms)"] + [f"{n:,} {label}" for n in sizes for label, _ in bins] + [f"{n:,} new/base" for n in sizes]
    else:
        head = ["operation (median ms)"] + [f"{n:,} files" for n in sizes] + ([f"{sizes[-1]:,} / {sizes[0]:,}"] if len(sizes) > 1 else [])
    lines = [f"# Snapshot benchmark{' (A/B of two builds)' if ab else ''} — {date}", "",
             f"Machine: {os.cpu_count()} cores, {mem:.0f} GiB, Linux {platform.release()}; {vers}, "
             f"{sh('git', '--version').strip()}, fuse-overlayfs {sh('fuse-overlayfs', '--version').splitlines()[0].split()[-1]}.", "",
             "treefork operations are timed on the session's control socket (request to response), in steady state "
             "(after the import's writeback settled and 3 untimed warm-up rounds); every row is the median of "
             "the repetitions; all sizes" + (" and both builds" if ab else "") + " are mounted together and their operations "
             "interleaved round by round. Trees: 100 small files per directory, so the 100,000-file root has 1,000 entries.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if ab:
            vals = [results[(label, n)][r] for n in sizes for label, _ in bins]
            cells = [f"{v:.1f}" for v in vals] + [f"{results[('new', n)][r] / results[('base', n)][r]:.2f}×" for n in sizes]
        else:
            vals = [results[("new", n)][r] for n in sizes]
            cells = [f"{v:.1f}" for v in vals]
            if len(sizes) > 1: cells.append(f"{vals[-1] / vals[0]:.2f}×")
        lines.append(f"| {LABELS.get(r, r)} | " + " | ".join(cells) + " |")
    lines += ["", "Store size after import vs raw tree (du -sb): " + ", ".join(
        f"{n:,} {label}: {results[(label, n)]['store_bytes'] / 2**20:.1f} MiB store / {results[(label, n)]['tree_bytes'] / 2**20:.1f} MiB tree"
        for n in sizes for label, _ in bins), ""]
    return "\n".join(lines)

if __name__ == "__main__":
    main()
