#!/usr/bin/env bash
# Daemon CPU (and wall time) of `git init && git add -A && git commit` of a source tree
# unpacked into a fresh treefork mount, for each binary given, interleaved per round
# (side by side in one run: this VM is shared and noisy). git writes every loose object
# as a temporary file + link() + unlink() + fsync: a workload of hard links and flushes.
#   usage: bench/gitadd.sh TAR ROUNDS BIN [BIN...]
#   e.g.   bench/gitadd.sh /var/tmp/fsbench-cache/corpus-*/full/corpus.tar 2 \
#            /var/tmp/treefork-base-REV target/release/treefork
set -euo pipefail
tar=${1:?usage: bench/gitadd.sh TAR ROUNDS BIN [BIN...]}; rounds=${2:?}; shift 2
GIT="git -c gc.auto=0 -c core.fsmonitor=false -c init.defaultBranch=main -c user.name=b -c user.email=b@b"
tck=$(getconf CLK_TCK)
printf '| round | binary | daemon CPU s | wall s |\n|---|---|---|---|\n'
for r in $(seq 1 "$rounds"); do
  for bin in "$@"; do
    w=$(mktemp -d /var/tmp/gitadd.XXXX); mkdir -p "$w/mnt"
    "$bin" --store "$w/store" mount "$w/mnt" --session g >/dev/null
    tar xf "$tar" -C "$w/mnt"; sync
    src=$(find "$w/mnt" -mindepth 1 -maxdepth 1 -type d | head -1)
    pid=$(cat "$w/store/lock")
    c0=$(awk '{print $14+$15}' "/proc/$pid/stat"); t0=$(date +%s.%N)
    (cd "$src" && $GIT init -q && $GIT add -A && $GIT commit -q -m corpus)
    c1=$(awk '{print $14+$15}' "/proc/$pid/stat"); t1=$(date +%s.%N)
    printf '| %s | %s | %.1f | %.1f |\n' "$r" "$bin" "$(echo "($c1-$c0)/$tck" | bc -l)" "$(echo "$t1-$t0" | bc -l)"
    "$bin" --store "$w/store" umount "$w/mnt" >/dev/null; rm -rf "$w"
  done
done
