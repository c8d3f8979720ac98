#!/usr/bin/env bash
# Cost of `treefork exec`: `treefork exec true` against `true` run directly, from a
# directory inside a mounted workspace, alternating the two (A B A B ...) so a drift
# of the machine's speed hits both; RUNS pairs (default 100) after a warm-up.
# Prints each side's min/median/max wall time and the median of the pairwise
# differences (the overhead; target: at most 15 ms). Whole-process wall times,
# measured with Python's monotonic clock around fork+exec+wait.
#   usage: bench/exec.sh [RUNS]
# Needs root (FUSE mount) and a Rust toolchain. Nothing is written into bench/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "bench/exec.sh: run as root (it mounts FUSE)" >&2; exit 1; fi
runs=${1:-100}
cargo build --release --quiet
bin=$PWD/target/release/treefork
work=$(mktemp -d /var/tmp/execbench-XXXXXX)
cleanup() {
    "$bin" --store "$work/store" umount "$work/mnt" >/dev/null 2>&1 || umount -l "$work/mnt" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/mnt"
"$bin" --store "$work/store" mount "$work/mnt" --session bench >/dev/null
# A small tree, so the before/after comparison has something to skip over.
mkdir -p "$work/mnt/src" && for i in $(seq 1 200); do echo "$i" > "$work/mnt/src/f$i"; done
"$bin" -C "$work/mnt" checkpoint -m base >/dev/null
cd "$work/mnt"
python3 - "$bin" "$runs" <<'PY'
import statistics, subprocess, sys, time
tf, runs = sys.argv[1], int(sys.argv[2])
a_cmd, b_cmd = [tf, "exec", "true"], ["true"]
def once(cmd):
    t = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return (time.monotonic() - t) * 1000
for _ in range(5):
    once(a_cmd); once(b_cmd)
a, b = [], []
for _ in range(runs):
    a.append(once(a_cmd)); b.append(once(b_cmd))
d = [x - y for x, y in zip(a, b)]
row = lambda name, v: print(f"{name:<22} min {min(v):7.2f}  median {statistics.median(v):7.2f}  max {max(v):7.2f}  ms")
print(f"{runs} pairs, alternating")
row("treefork exec true", a)
row("true", b)
row("overhead (A-B)", d)
med = statistics.median(d)
print(f"median overhead {med:.2f} ms (target <= 15 ms): {'within' if med <= 15 else 'OVER'}")
PY
