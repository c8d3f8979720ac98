#!/usr/bin/env bash
# Peak RSS of the treefork daemon for a 100,000-file workspace (the benchmarks issue's
# memory target): import a generated tree of 1,000 directories x 100 small files with
# `mount --from`, walk it (`find`, `du`: loads every inode into the live table), read
# every file, let the kernel forget them (drop_caches: FORGETs, so the daemon can evict
# clean inodes), change 1,000 files and checkpoint. Prints VmRSS/VmHWM after each step.
# Usage: bench/rss100k.sh [path/to/treefork]   (default: target/release/treefork)
set -euo pipefail
cd "$(dirname "$0")/.."
T=${1:-target/release/treefork}
[ -x "$T" ] || cargo build --release --quiet
T=$(realpath "$T")
W=$(mktemp -d /var/tmp/rss100k.XXXXXX)
S=$W/store; M=$W/m
trap '"$T" --store "$S" umount "$M" >/dev/null 2>&1 || true; rm -rf "$W"' EXIT
mkdir -p "$M" "$W/src"
python3 - "$W/src" <<'PY'
import os, sys
root = sys.argv[1]
for d in range(1000):
    p = os.path.join(root, f"d{d:03}")
    os.mkdir(p)
    for f in range(100):
        with open(os.path.join(p, f"f{f:02}.txt"), "w") as fh:
            fh.write(f"file {d}/{f}\n" * (1 + (d * 7 + f) % 40))
PY
mem() { awk '/VmRSS|VmHWM/ {printf "%s %.0f MiB  ", $1, $2/1024}' "/proc/$pid/status"; echo; }
"$T" --store "$S" mount "$M" --session big --from "$W/src" >/dev/null
pid=$(cat "$S/lock")
echo -n "after import (100,000 files):        "; mem
sync; echo 3 > /proc/sys/vm/drop_caches
find "$M" -type f | wc -l >/dev/null; du -s "$M" >/dev/null
echo -n "after find + du:                     "; mem
find "$M" -type f -exec cat {} + >/dev/null
echo -n "after reading every file:            "; mem
sync; echo 3 > /proc/sys/vm/drop_caches; sleep 6   # FORGETs, then an idle flush
echo -n "after drop_caches (kernel forgets):  "; mem
for d in $(seq -w 0 99); do for f in 0 1 2 3 4 5 6 7 8 9; do echo changed >> "$M/d0$d/f0$f.txt"; done; done
"$T" -C "$M" checkpoint -m rss >/dev/null
echo -n "after 1,000 changes + checkpoint:    "; mem
