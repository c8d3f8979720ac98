#!/usr/bin/env bash
# `rm -rf` of a node_modules-shaped tree (issue 39, item 9): native ext4 against a
# treefork mount over /dev/fuse and, where the kernel has it, over FUSE-over-io_uring,
# side by side in one run (A B C A B C ...), in two states:
#   fresh  - the tree was written just before (`npm install` then `rm -rf node_modules`)
#   synced - after `sync` (the files' pages and the kernel's dirty times written back)
# and the FUSE requests the kernel sends per removed file (counted from the daemon's
# fuser debug log of one extra, unmeasured pass), which is where the time goes.
#   usage: bench/rmrf.sh [ROUNDS] [DIRS] [FILES_PER_DIR]   (defaults 5 300 25: 7,500 files)
# Needs root (FUSE mount) and a Rust toolchain. Prints a markdown table; nothing is
# written into bench/ (figures are quoted by hand in bench/RESULTS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "bench/rmrf.sh: run as root (it mounts FUSE)" >&2; exit 1; fi
rounds=${1:-5} dirs=${2:-300} per=${3:-25}
cargo build --release --quiet
bin=$PWD/target/release/treefork
work=$(mktemp -d /var/tmp/rmrfbench-XXXXXX)
ring_switch=/sys/module/fuse/parameters/enable_uring
ring_was=$(cat "$ring_switch" 2>/dev/null || echo)
cleanup() {
    for m in dev ring count; do
        "$bin" --store "$work/store" umount "$work/$m" >/dev/null 2>&1 || umount -l "$work/$m" 2>/dev/null || true
    done
    [ -n "$ring_was" ] && echo "$ring_was" > "$ring_switch" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/native" "$work/dev" "$work/ring" "$work/count"
"$bin" --store "$work/store" mount "$work/dev" --session dev --transport dev >/dev/null
targets="native dev"
if [ -e "$ring_switch" ]; then
    echo Y > "$ring_switch"
    "$bin" --store "$work/store" mount "$work/ring" --session ring --transport uring >/dev/null
    targets="native dev ring"
fi
python3 - "$work" "$rounds" "$dirs" "$per" "$targets" <<'PY'
import os, statistics, subprocess, sys, time
work, rounds, dirs, per, targets = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split()
def make(root):
    for d in range(dirs):
        p = os.path.join(root, "node_modules", f"pkg{d}", "lib")
        os.makedirs(p, exist_ok=True)
        for f in range(per):
            with open(os.path.join(p, f"f{f}.js"), "w") as fh:
                fh.write("module.exports = %d;\n" % f * 20)
def rm(root):
    t = time.monotonic()
    subprocess.run(["rm", "-rf", os.path.join(root, "node_modules")], check=True)
    return time.monotonic() - t
res = {(s, t): [] for s in ("fresh", "synced") for t in targets}
for _ in range(rounds):
    for state in ("fresh", "synced"):
        for t in targets:
            root = os.path.join(work, t)
            make(root)
            if state == "synced":
                subprocess.run(["sync"], check=True)
            res[(state, t)].append(rm(root))
n = dirs * per
print(f"rm -rf of {n:,} files in {dirs} directories, median of {rounds} rounds (seconds; ratio to native)\n")
print("| state | " + " | ".join(targets) + " |")
print("|---|" + "---:|" * len(targets))
for state in ("fresh", "synced"):
    nat = statistics.median(res[(state, "native")])
    cells = []
    for t in targets:
        m = statistics.median(res[(state, t)])
        cells.append(f"{m:.2f}" if t == "native" else f"{m:.2f} ({m / nat:.1f}x)")
    print(f"| {state} | " + " | ".join(cells) + " |")
PY
# One counting pass: a mount whose daemon logs every FUSE request (fuser's debug log).
"$bin" --store "$work/store" umount "$work/dev" >/dev/null
"$bin" --store "$work/store" umount "$work/ring" >/dev/null 2>&1 || true
pkill -f "treefork --store $work/store daemon" 2>/dev/null || true
sleep 1
RUST_LOG=fuser=debug "$bin" --store "$work/cstore" mount "$work/count" --session count --transport dev >/dev/null
python3 - "$work/count" "$dirs" "$per" <<'PY'
import os, sys
root, dirs, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for d in range(dirs):
    p = os.path.join(root, "node_modules", f"pkg{d}", "lib")
    os.makedirs(p, exist_ok=True)
    for f in range(per):
        with open(os.path.join(p, f"f{f}.js"), "w") as fh:
            fh.write("x\n")
PY
log="$work/cstore/daemon.log"
: > "$log"
rm -rf "$work/count/node_modules"
sleep 1
echo
echo "FUSE requests per removed file (/dev/fuse, fresh tree; $((dirs * per)) files):"
grep -o 'ino 0x[0-9a-f]* [A-Z]*' "$log" | awk '{print $3}' | sort | uniq -c | sort -rn |
    awk -v n=$((dirs * per)) '{printf "  %-12s %7d  %.2f per file\n", $2, $1, $1 / n}'
"$bin" --store "$work/cstore" umount "$work/count" >/dev/null
