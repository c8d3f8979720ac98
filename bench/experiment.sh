#!/usr/bin/env bash
# `treefork experiment` benchmark (issue 13 §4):
#  1. setup time of an experiment of 8 runs of `true` on the 18,521-file corpus: the
#     daemon's fork + mount of all 8 (`setup_ms`, measured by the CLI around the
#     experiment_begin request; the target is < 100 ms), median of 5;
#  2. 8 parallel `cargo build` of bench/buildcrate, each in its own fork (sources and
#     target dir in the fork, vendored crates from the corpus), all must succeed.
# The corpus is the one bench/fsbench.py vendors (cached under /var/tmp/fsbench-cache).
#   usage: bench/experiment.sh [--setup-only]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=$PWD/target/release/treefork
corpus=$(python3 -c 'import sys; sys.path.insert(0, "bench"); import fsbench; print(fsbench.build_corpus(False)[0])')
work=$(mktemp -d /var/tmp/tf-exp-bench.XXXXXX)
store=$work/store
mp=$work/mnt
cleanup() {
  "$bin" --store "$store" umount "$mp" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$mp"
echo "importing $(find "$corpus" -type f | wc -l) files from $corpus"
"$bin" --store "$store" mount "$mp" --session bench --from "$corpus" >/dev/null
cp -r bench/buildcrate "$mp/build"
rm -rf "$mp/build/target"
"$bin" -C "$mp" checkpoint -m "corpus + buildcrate" >/dev/null

echo "== setup of 8 forks (8 runs of true), 5 experiments"
setups=()
for i in 1 2 3 4 5; do
  out=$(cd "$mp" && "$bin" --json experiment -c true -c true -c true -c true -c true -c true -c true -c true)
  s=$(printf '%s' "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["setup_ms"])')
  echo "  experiment $i: setup ${s} ms"
  setups+=("$s")
done
median=$(printf '%s\n' "${setups[@]}" | sort -n | sed -n 3p)
echo "setup median: ${median} ms (target < 100 ms)"
"$bin" --store "$store" sessions | grep -c -- '-x' | xargs echo "winner forks kept (unmounted):"
[ "${1:-}" = "--setup-only" ] && exit 0

echo "== 8 parallel cargo build of bench/buildcrate, one per fork"
build="env -u CARGO_TARGET_DIR -u RUSTC_WRAPPER -u RUSTFLAGS cargo build --offline --locked --quiet \
  --config source.crates-io.replace-with=\\'corpus\\' --config source.corpus.directory=\\'\$PWD/../vendor\\' \
  && ./target/debug/fsbench-build"
args=()
for i in 1 2 3 4 5 6 7 8; do args+=(-c "$build"); done
t0=$(date +%s.%N)
out=$(cd "$mp/build" && "$bin" --json experiment --timeout 1800 "${args[@]}")
t1=$(date +%s.%N)
printf '%s' "$out" > "$work/builds.json"
python3 - "$work/builds.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
bad = [r for r in d["runs"] if r.get("exit") != 0]
for r in d["runs"]:
    print("  run %s: exit %s in %.1f s, %s files changed"
          % (r["run"], r.get("exit"), r["duration_ms"] / 1000, r["files_changed"]))
    if r.get("exit") != 0:
        print("    " + (r.get("error") or r.get("stderr", ""))[-2000:])
print("  setup %s ms; mean build %.1f s; success rate %s"
      % (d["setup_ms"], d["stats"]["mean_duration_ms"] / 1000, d["stats"]["success_rate"]))
sys.exit(1 if bad else 0)
PY
echo "wall time: $(echo "$t1 - $t0" | bc) s; all 8 builds succeeded"
