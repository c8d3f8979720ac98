#!/usr/bin/env bash
# Filesystem benchmark: native ext4 vs fuse-overlayfs vs bindfs vs treefork on fio,
# small-file, source-tree (tar/git/grep/du/find/rm), cargo-build workloads, plus
# treefork's storage efficiency. See bench/README.md.
#   usage: bench/run.sh [--quick] [--targets native,treefork,...] [--workloads seq,tree,...]
# A full run (no options) writes bench/results/<date>.md (+ .json) and the `run`
# section of bench/RESULTS.md; other runs leave their report in /var/tmp/fsbench-last.md.
# Needs root (FUSE mounts, drop_caches) and a Rust toolchain (rustup; Debian's is too old).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "bench/run.sh: run as root (it mounts FUSE filesystems and drops caches)" >&2; exit 1; fi

. bench/need.sh
command -v cargo >/dev/null || { echo "bench/run.sh: cargo not found (install Rust with rustup)" >&2; exit 1; }

cargo build --release --quiet

# Work on the ext4 root, not on a tmpfs /tmp.
work=$(mktemp -d /var/tmp/fsbench-XXXXXX)
cleanup() {
    python3 bench/fsbench.py --cleanup "$work" || true
    rm -rf "$work"
}
trap cleanup EXIT
start=$(date +%s)
# In the background so that a signal to this script is handled at once: the driver
# then unmounts and stops what it started before the EXIT trap sweeps the work dir.
python3 bench/fsbench.py --bin target/release/treefork --work "$work" "$@" &
driver=$!
trap 'kill -TERM $driver 2>/dev/null; wait $driver; exit 130' INT
trap 'kill -TERM $driver 2>/dev/null; wait $driver; exit 143' TERM
wait $driver
echo "bench/run.sh: $(( ($(date +%s) - start) / 60 )) min $(( ($(date +%s) - start) % 60 )) s" >&2
