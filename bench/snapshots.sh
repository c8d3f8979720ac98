#!/usr/bin/env bash
# Snapshot-operation benchmark (issue "snapshots"): treefork checkpoint / branch /
# fork / checkout / diff latency at 1k, 10k and 100k files, side by side with what
# users do today (cp -a, git worktree add, git stash + apply, fuse-overlayfs over a
# copied upper dir). Writes bench/results/snapshots-<date>.md and bench/RESULTS.md.
#   usage: bench/snapshots.sh [SIZES]     e.g. bench/snapshots.sh 1000,10000
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v fuse-overlayfs >/dev/null || need+=(fuse-overlayfs)
command -v git >/dev/null || need+=(git)
command -v fusermount3 >/dev/null || need+=(fuse3)
if [ ${#need[@]} -gt 0 ]; then apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null; fi
cargo build --release --quiet
exec python3 bench/snapshots.py --bin target/release/treefork --sizes "${1:-1000,10000,100000}"
