#!/usr/bin/env bash
# treefork over /dev/fuse vs over FUSE over io_uring, side by side, one run each:
#   getattr loop: open + fstat + close of one file (20,000; Python; µs each)
#   lookup loop:  access(2) of a new missing name (20,000; µs each)
#   fio 4 KiB random write over a 256 MiB file (psync, end_fsync=1; IOPS)
#   fio 1 GiB sequential write, bs=1M (psync, end_fsync=1; MB/s)
# Rows: dev, uring with its defaults, and uring with fewer workers or with writes
# served on the ring threads (TREEFORK_RING_WORKERS, TREEFORK_RING_WRITE_INLINE) to
# show what the worker pool buys. Needs root and a release build (cargo build --release); turns
# /sys/module/fuse/parameters/enable_uring on for the uring rows and restores it.
# Usage: bench/transport.sh [TREEFORK_BINARY]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tf="${1:-${CARGO_TARGET_DIR:-$here/../target}/release/treefork}"
work="$(mktemp -d /var/tmp/tf-transport.XXXXXX)"
param=/sys/module/fuse/parameters/enable_uring
orig="$(cat "$param" 2>/dev/null || true)"
cleanup() {
    for m in "$work"/mnt-*; do mountpoint -q "$m" 2>/dev/null && umount -l "$m"; done
    [ -n "$orig" ] && echo "$orig" >"$param" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
[ -n "$orig" ] || { echo "RING UNAVAILABLE: $param does not exist"; exit 1; }
echo Y >"$param"

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

fio_json() { fio --output-format=json --invalidate=0 "$@" | python3 -c 'import json,sys; d=sys.stdin.read(); print(d[d.index("{"):])'; }

row() { # label transport [env...]
    local label=$1 transport=$2; shift 2
    local m="$work/mnt-$transport" s="$work/store-$transport-$RANDOM"
    mkdir -p "$m"
    env "$@" "$tf" --store "$s" mount "$m" --session b --transport "$transport" >/dev/null
    local used; used=$("$tf" --store "$s" session show b --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["transport"])')
    echo hi >"$m/f"
    local g l iops mbs
    g=$(python3 "$work/loops.py" "$m/f" getattr)
    l=$(python3 "$work/loops.py" "$m" lookup)
    fio_json --name=layout --directory="$m" --filename=rand.bin --rw=write --bs=1M --size=256M --end_fsync=1 >/dev/null
    iops=$(fio_json --name=randw --directory="$m" --filename=rand.bin --rw=randwrite --bs=4k --size=256M \
        --ioengine=psync --end_fsync=1 --randrepeat=1 --scramble_buffers=1 |
        python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print(round(j["write"]["total_ios"]/(j["job_runtime"]/1000)))')
    rm -f "$m/rand.bin"
    mbs=$(fio_json --name=seqw --directory="$m" --filename=seq.bin --rw=write --bs=1M --size=1G \
        --ioengine=psync --end_fsync=1 --scramble_buffers=1 |
        python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print(round(1024*1048576/1e6/(j["job_runtime"]/1000)))')
    "$tf" --store "$s" umount "$m" >/dev/null
    rm -rf "$s"
    printf '| %s | %s | %s | %s | %s | %s |\n' "$label" "$used" "$g" "$l" "$iops" "$mbs"
}

echo "# treefork transports — $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, Linux $(uname -r)"
echo
echo "| row | transport in use | open+fstat+close µs | access(missing) µs | 4k randwrite IOPS | 1 GiB seq write MB/s |"
echo "|---|---|---|---|---|---|"
row "dev" dev
row "uring (defaults: every write offloaded, 4 workers)" uring
row "uring, 2 workers" uring TREEFORK_RING_WORKERS=2
row "uring, writes <= 64 KiB on the ring thread" uring TREEFORK_RING_WRITE_INLINE=65536
row "uring, every write on the ring thread" uring TREEFORK_RING_WRITE_INLINE=2097152
