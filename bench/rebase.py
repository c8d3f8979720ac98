#!/usr/bin/env python3
"""`treefork rebase` against `git rebase` on the same change: a generated repository of
--files source files; a session mounted --from it changes --changed of them (a line at
the end of each); meanwhile the repository's branch gains --ahead commits, each
changing another file near its top, so every session file also has repository
changes in it (clean three-way merges). The conflict case adds --conflicts commits
that rewrite the very last line of as many of the session's files.

The same session change as one git commit on a branch of a clone is rebased with
`git rebase` onto the same head (git stops at the first conflict of its one commit:
that is its time to stop). Each case --reps times, median wall time in ms, CLI
process start included for both.

    bench/rebase.py --bin target/release/treefork
    bench/rebase.py --bin target/debug/treefork --reps 1 --files 200   # smoke run

Runs as root (FUSE mounts) in a fresh /var/tmp/tf-rebase-* that it removes."""
import argparse, datetime, os, platform, shutil, statistics, subprocess, tempfile, time

GIT_ENV = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@example.com",
               GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@example.com")


def sh(*args, cwd=None, check=True):
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=GIT_ENV)
    if check and r.returncode != 0:
        raise RuntimeError(f"{args}: {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def src(i):
    return os.path.join("src", f"m{i // 100:02d}", f"f{i:04d}.py")


def body(i, top="", last="tail"):
    lines = [f"# file {i} {top}"] + [f"def g{k}(x):\n    return x + {k}\n" for k in range(12)]
    return "\n".join(lines) + f"\n# {last}\n"


def make_repo(root, files):
    os.makedirs(root)
    for i in range(files):
        p = os.path.join(root, src(i))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        open(p, "w").write(body(i))
    sh("git", "init", "-q", "-b", "main", cwd=root)
    sh("git", "add", "-A", cwd=root)
    sh("git", "commit", "-q", "-m", "base", cwd=root)


def session_edit(path, i):
    with open(path, "a") as f:
        f.write(f"# session change to {i}\n")


def advance(repo, changed, ahead, conflicts):
    """`ahead` commits changing the top line of the session's files (clean merges),
    then `conflicts` commits rewriting the last line of as many of them."""
    for k in range(ahead):
        i = changed[k % len(changed)]
        p = os.path.join(repo, src(i))
        text = open(p).read().split("\n", 1)
        open(p, "w").write(f"# file {i} upstream {k}\n" + text[1])
        sh("git", "commit", "-q", "-am", f"upstream {k}", cwd=repo)
    for k in range(conflicts):
        i = changed[k]
        p = os.path.join(repo, src(i))
        text = open(p).read()
        open(p, "w").write(text.replace("# tail\n", "# tail rewritten upstream\n"))
        sh("git", "commit", "-q", "-am", f"conflict {k}", cwd=repo)


def one(args, work, conflicts):
    repo = os.path.join(work, "repo")
    make_repo(repo, args.files)
    base = sh("git", "rev-parse", "HEAD", cwd=repo).stdout.strip()
    changed = list(range(0, args.files, max(1, args.files // args.changed)))[: args.changed]
    # git side: a clone with the session's change as one commit on a branch.
    clone = os.path.join(work, "clone")
    sh("git", "clone", "-q", repo, clone)
    sh("git", "checkout", "-q", "-b", "work", cwd=clone)
    for i in changed:
        session_edit(os.path.join(clone, src(i)), i)
    sh("git", "commit", "-q", "-am", "work", cwd=clone)
    # treefork side.
    store, mp = os.path.join(work, "store"), os.path.join(work, "mnt")
    os.makedirs(mp)
    tf = lambda *a, check=True: sh(args.bin, "--store", store, *a, check=check)
    tf("mount", mp, "--session", "s", "--from", repo)
    try:
        for i in changed:
            session_edit(os.path.join(mp, src(i)), i)
        advance(repo, changed, args.ahead, conflicts)
        head = sh("git", "rev-parse", "HEAD", cwd=repo).stdout.strip()
        t = time.perf_counter()
        r = tf("-C", mp, "rebase", check=False)
        tf_ms = (time.perf_counter() - t) * 1000
        want = 11 if conflicts else 0
        if r.returncode != want:
            raise RuntimeError(f"rebase exit {r.returncode}: {r.stdout}{r.stderr}")
    finally:
        tf("umount", mp, check=False)
    sh("git", "fetch", "-q", "origin", cwd=clone)
    t = time.perf_counter()
    g = sh("git", "rebase", "-q", head, cwd=clone, check=False)
    git_ms = (time.perf_counter() - t) * 1000
    if (g.returncode != 0) != bool(conflicts):
        raise RuntimeError(f"git rebase exit {g.returncode}: {g.stderr}")
    return tf_ms, git_ms, base


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--changed", type=int, default=100)
    ap.add_argument("--ahead", type=int, default=100)
    ap.add_argument("--conflicts", type=int, default=10)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    rows = []
    for label, conflicts in [("no conflicts", 0), (f"{args.conflicts} conflicts", args.conflicts)]:
        tfs, gits = [], []
        for _ in range(args.reps):
            work = tempfile.mkdtemp(prefix="tf-rebase-", dir="/var/tmp")
            try:
                tf_ms, git_ms, _ = one(args, work, conflicts)
            finally:
                subprocess.run(["umount", "-l", os.path.join(work, "mnt")], capture_output=True)
                shutil.rmtree(work, ignore_errors=True)
            tfs.append(tf_ms)
            gits.append(git_ms)
        m, g = statistics.median(tfs), statistics.median(gits)
        rows.append(f"| {label} | {m:.0f} | {min(tfs):.0f}–{max(tfs):.0f} | {g:.0f} | {m / g:.2f} |")
    print(f"### rebase: {args.changed} changed files onto a head {args.ahead} commits ahead "
          f"({args.files} files; {datetime.date.today()}, {platform.node()}, {os.cpu_count()} cores, "
          f"{args.reps} reps)\n")
    print("| case | treefork rebase ms (median) | min–max | git rebase ms (median) | ratio |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
