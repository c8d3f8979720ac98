#!/usr/bin/env bash
# Fuzz every decoder: scripts/fuzz.sh [MINUTES] [TARGET...]
#
# Runs each libFuzzer target of fuzz/ (one per decoder family of `treefork::fuzz`)
# for MINUTES minutes (default 5; fractions like 0.5 work), one job, and prints each
# target's executions. Corpus: fuzz/corpus/<target>/ holds the committed seeds (written
# by today's encoders at each start, see `treefork::fuzz::init`); what the fuzzer
# finds goes to fuzz/work/<target>/ (not committed, kept between runs). A crash
# leaves its input in fuzz/artifacts/<target>/ and makes the script exit 1 after the
# other targets ran.
#
# Toolchain: cargo-fuzz needs nightly flags (-Zsanitizer); the stable toolchain
# accepts them with RUSTC_BOOTSTRAP=1. Env: FUZZ_SANITIZER (address | none; default
# address), FUZZ_RSS_MB (default 2048), FUZZ_MAX_LEN (default 65536 bytes),
# FUZZ_JOBS (cargo build jobs, default 1: the machine is shared).
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION=0.13.2
MINUTES=${1:-5}
shift || true
SANITIZER=${FUZZ_SANITIZER:-address}
RSS_MB=${FUZZ_RSS_MB:-2048}
MAX_LEN=${FUZZ_MAX_LEN:-65536}
export CARGO_BUILD_JOBS=${FUZZ_JOBS:-1}
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version 2>/dev/null | grep -q " $CARGO_FUZZ_VERSION\$"; then
  echo "==> installing cargo-fuzz $CARGO_FUZZ_VERSION"
  cargo install --locked "cargo-fuzz@$CARGO_FUZZ_VERSION"
fi

if [ $# -gt 0 ]; then
  TARGETS=("$@")
else
  mapfile -t TARGETS < <(cd fuzz && cargo fuzz list)
fi
SECONDS_PER=$(awk -v m="$MINUTES" 'BEGIN { s = int(m * 60); print (s < 1 ? 1 : s) }')

echo "==> building ${#TARGETS[@]} targets (sanitizer $SANITIZER)"
start=$(date +%s)
(cd fuzz && cargo fuzz build --sanitizer "$SANITIZER")
echo "    built in $(($(date +%s) - start)) s"

failed=()
report=()
for t in "${TARGETS[@]}"; do
  mkdir -p "fuzz/corpus/$t" "fuzz/work/$t" "fuzz/artifacts/$t"
  log=$(mktemp)
  echo "==> $t: ${SECONDS_PER} s"
  rc=0
  (cd fuzz && TREEFORK_FUZZ_SEEDS="$PWD/corpus" cargo fuzz run --sanitizer "$SANITIZER" "$t" \
    "work/$t" "corpus/$t" -- -max_total_time="$SECONDS_PER" -rss_limit_mb="$RSS_MB" \
    -malloc_limit_mb="$RSS_MB" -max_len="$MAX_LEN" -timeout=10 -print_final_stats=1) \
    >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  line="$(printf '%-18s %10s execs %8s/s  cov %6s  %4s s' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "$SECONDS_PER")"
  if [ $rc -ne 0 ]; then
    failed+=("$t")
    line="$line  FAILED (rc $rc)"
    grep -E 'panicked|ERROR: libFuzzer|Test unit written|SUMMARY' "$log" | head -20 || true
  fi
  report+=("$line")
  rm -f "$log"
done

echo
echo "==> fuzz summary ($MINUTES min per target)"
printf '%s\n' "${report[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "crashes in: ${failed[*]} (inputs in fuzz/artifacts/)"
  exit 1
fi
