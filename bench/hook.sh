#!/usr/bin/env bash
# Cost of treefork's agent-runtime hooks: one PreToolUse + PostToolUse pair of a
# Bash call (`treefork hook --runtime claude`, the JSON Claude Code sends on stdin)
# in a workspace of 10,000 files, against the same pair of `cat >/dev/null` (a hook
# that does nothing: the floor of any hook, a process start), alternating A B A B.
# Also a read-only call (Read), which treefork answers without the daemon. Prints
# p50/p95 of each and of the overhead (target: p50 of the pair under 10 ms).
#   usage: bench/hook.sh [RUNS]     (default 200)
# Needs root (FUSE mount) and a Rust toolchain. Nothing is written into bench/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "bench/hook.sh: run as root (it mounts FUSE)" >&2; exit 1; fi
runs=${1:-200}
cargo build --release --quiet
bin=$PWD/target/release/treefork
work=$(mktemp -d /var/tmp/hookbench-XXXXXX)
cleanup() {
    "$bin" --store "$work/store" umount "$work/mnt" >/dev/null 2>&1 || umount -l "$work/mnt" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/mnt"
"$bin" --store "$work/store" mount "$work/mnt" --session bench >/dev/null
python3 - "$work/mnt" <<'PY'
import os, sys
root = sys.argv[1]
for d in range(100):
    os.makedirs(f"{root}/src/d{d}", exist_ok=True)
    for f in range(100):
        with open(f"{root}/src/d{d}/f{f}.txt", "w") as fh:
            fh.write(f"{d} {f}\n")
PY
"$bin" -C "$work/mnt" checkpoint -m base >/dev/null
python3 - "$bin" "$runs" "$work/mnt" <<'PY'
import json, statistics, subprocess, sys, time
tf, runs, mnt = sys.argv[1], int(sys.argv[2]), sys.argv[3]
hook = [tf, "hook", "--runtime", "claude"]
def doc(event, i, tool="Bash"):
    d = {"session_id": "bench", "transcript_path": "/dev/null", "cwd": mnt,
         "hook_event_name": event, "tool_name": tool, "tool_use_id": f"toolu_{i}",
         "tool_input": {"command": "true", "file_path": mnt + "/src/d0/f0.txt"}}
    if event == "PostToolUse":
        d["tool_response"] = {"stdout": "", "stderr": "", "interrupted": False}
    return json.dumps(d).encode()
def once(cmd, payload):
    t = time.monotonic()
    r = subprocess.run(cmd, input=payload, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode != 0 or r.stderr:
        sys.exit(f"{cmd}: rc {r.returncode}: {r.stderr.decode()}")
    return (time.monotonic() - t) * 1000
def pair(cmd, i):
    return once(cmd, doc("PreToolUse", i)) + once(cmd, doc("PostToolUse", i))
floor = ["cat"]
for i in range(5):
    pair(hook, f"w{i}"); pair(floor, i)
a, b, r = [], [], []
for i in range(runs):
    a.append(pair(hook, i)); b.append(pair(floor, i))
    r.append(once(hook, doc("PreToolUse", f"r{i}", "Read")))
def pct(v, p):
    v = sorted(v); return v[min(len(v) - 1, int(len(v) * p))]
row = lambda name, v: print(f"{name:<34} p50 {pct(v, .5):7.2f}  p95 {pct(v, .95):7.2f}  max {max(v):7.2f}  ms")
print(f"{runs} pairs, alternating, 10,000-file workspace")
row("treefork hook Pre+Post (Bash)", a)
row("cat Pre+Post (a no-op hook)", b)
row("overhead (A-B)", [x - y for x, y in zip(a, b)])
row("treefork hook Pre (Read, ignored)", r)
p50 = pct(a, .5)
print(f"p50 of the pair {p50:.2f} ms (target < 10 ms): {'within' if p50 < 10 else 'OVER'}")
n = json.loads(subprocess.run([tf, "--json", "-C", mnt, "history", "--limit", "1"], capture_output=True, check=True).stdout)
print("records made:", n["execs"][0]["n"] if n["execs"] else 0)
PY
