#!/usr/bin/env bash
# A/B of two treefork builds in one run: the current tree against BASE_REV (default: the
# previous release tag or the given commit), each benchmark run ROUNDS times (default 2:
# single runs on this shared VM swing up to 2x, so a difference counts only beyond the
# round-to-round spread). Both builds are targets of the same run (interleaved per workload).
#   usage: [ONLY=snapshots] bench/ab.sh BASE_REV [ROUNDS] [SIZES]   (ONLY=snapshots: skip the fs workloads)
# Writes bench/results/ab-<date>-r<N>.md (filesystem workloads: native, treefork = this
# tree, treefork-base = BASE_REV) and bench/results/snapshots-ab-<date>.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/need.sh
base_rev=${1:?usage: bench/ab.sh BASE_REV [ROUNDS] [SIZES]}
rounds=${2:-2}
sizes=${3:-1000,10000,100000}
src=/var/tmp/treefork-ab-src
tgt=/var/tmp/treefork-ab-target
rev=$(git rev-parse --short "$base_rev")
rm -rf "$src"; git worktree prune
git worktree add -q --detach "$src" "$base_rev"
trap 'git worktree remove --force "$src" 2>/dev/null || true' EXIT
(cd "$src" && CARGO_TARGET_DIR="$tgt" cargo build --release --quiet)
cargo build --release --quiet
cp "$tgt/release/treefork" "/var/tmp/treefork-base-$rev"
stamp=$(date -u +%F)
for r in $(seq 1 "$rounds"); do
  if [ "${ONLY:-}" != snapshots ]; then
    echo "== round $r: filesystem workloads (native, treefork, treefork-base=$rev)" >&2
    python3 bench/fsbench.py --bin target/release/treefork --bin-base "/var/tmp/treefork-base-$rev" \
      --targets native,treefork,treefork-base
    cp /var/tmp/fsbench-last.md "bench/results/ab-$stamp-r$r.md"
  fi
  echo "== round $r: snapshot operations" >&2
  python3 bench/snapshots.py --bin target/release/treefork --bin-base "/var/tmp/treefork-base-$rev" --sizes "$sizes"
done
