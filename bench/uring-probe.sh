#!/usr/bin/env bash
# FUSE transport round trip on this machine: the same minimal server (bench/uring-probe)
# answering over /dev/fuse and over FUSE-over-io_uring, with treefork and ext4 beside
# them, in one run. Two loops of 20,000 iterations each (Python, one process):
#   getattr: open + fstat + close of one file (the fstat is a GETATTR: in writeback
#            mode every close invalidates the cached st_blocks);
#   lookup:  access(2) of a new missing name (one LOOKUP each).
# Needs root, /dev/fuse and (for the io_uring rows) a kernel with CONFIG_FUSE_IO_URING;
# flips /sys/module/fuse/parameters/enable_uring to Y for its rows and restores it.
# Prints a markdown table; ~1 minute.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
work="$(mktemp -d /var/tmp/uring-probe.XXXXXX)"
param=/sys/module/fuse/parameters/enable_uring
orig=""
[ -e "$param" ] && orig="$(cat "$param")"
probe_pid=""
cleanup() {
    for m in "$work"/mnt-*; do mountpoint -q "$m" 2>/dev/null && umount -l "$m"; done
    [ -n "$probe_pid" ] && kill "$probe_pid" 2>/dev/null || true
    [ -n "$orig" ] && echo "$orig" >"$param" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

(cd "$here/uring-probe" && cargo build --release --locked -q)
(cd "$repo" && cargo build --release -q)
probe="$here/uring-probe/target/release/uring-probe"
tf="$repo/target/release/treefork"

cat >"$work/loops.py" <<'EOF'
import os, sys, time
path, kind, n = sys.argv[1], sys.argv[2], 20000
t = time.perf_counter()
if kind == "getattr":
    for _ in range(n):
        fd = os.open(path, os.O_RDONLY); os.fstat(fd); os.close(fd)
else:
    for i in range(n):
        os.access(f"{path}/missing{i}", os.F_OK)
print(f"{(time.perf_counter() - t) / n * 1e6:.1f}")
EOF

wait_mounted() { for _ in $(seq 100); do mountpoint -q "$1" && return 0; sleep 0.05; done; echo "not mounted: $1" >&2; exit 1; }

row() { # name dir-for-lookups file-for-getattr
    local g l
    g="$(python3 "$work/loops.py" "$3" getattr)"
    l="$(python3 "$work/loops.py" "$2" lookup)"
    printf '| %s | %s | %s |\n' "$1" "$g" "$l"
}

echo "# FUSE transport round trip — $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), Linux $(uname -r). enable_uring was: ${orig:-absent}."
echo
echo "| server | open + fstat + close (µs per iteration) | access(2) of a missing name (µs) |"
echo "|---|---|---|"

mkdir -p "$work/native"; echo hi >"$work/native/f"
row "ext4 (no FUSE)" "$work/native" "$work/native/f"

m="$work/mnt-tf"; mkdir -p "$m"
"$tf" --store "$work/store" mount "$m" --session probe >/dev/null
wait_mounted "$m"; echo hi >"$m/f"
row "treefork (/dev/fuse, fuser, 4 threads)" "$m" "$m/f"
"$tf" --store "$work/store" umount "$m" >/dev/null

run_probe() { # label flag
    local m="$work/mnt-probe"; mkdir -p "$m"
    "$probe" "$m" $2 2>"$work/probe.log" &
    probe_pid=$!
    wait_mounted "$m"
    if [ -n "$2" ] && ! grep -q "registered" "$work/probe.log"; then
        sleep 0.5
        grep -q "registered" "$work/probe.log" || { echo "| $1 | not available ($(tail -1 "$work/probe.log")) | |"; umount "$m"; wait "$probe_pid" || true; probe_pid=""; return; }
    fi
    row "$1" "$m" "$m/f"
    umount "$m"; wait "$probe_pid" 2>/dev/null || true; probe_pid=""
}

run_probe "minimal server over /dev/fuse (4 threads)" ""
if [ -n "$orig" ]; then
    echo Y >"$param"
    run_probe "minimal server over io_uring (1 queue + pinned thread per CPU)" "--uring"
    echo "$orig" >"$param"
else
    echo "| minimal server over io_uring | kernel has no $param | |"
fi
