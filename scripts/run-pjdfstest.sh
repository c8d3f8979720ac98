#!/usr/bin/env bash
# Run the pjdfstest POSIX conformance suite against DIR (normally a treefork
# FUSE mount) and judge the result against tests/pjdfstest-exceptions.md.
#
# Usage: scripts/run-pjdfstest.sh DIR [PATTERN...]
#   PATTERN  optional pjdfstest name filters (substring match), e.g. "rename"
#
# Environment:
#   PJDFSTEST_CONFIG      config file      (default: tests/pjdfstest.toml)
#   PJDFSTEST_EXCEPTIONS  exceptions file  (default: tests/pjdfstest-exceptions.md)
#   PJDFSTEST_SECONDARY   a dir on ANOTHER file system, enables the
#                         {link,rename}::exdev_target tests (default: unset)
#   PJDFSTEST_TIMEOUT     seconds before the run is killed (default: 900)
#   PJDFSTEST_LOG         also write the full output here (default: a temp
#                         file, deleted if the run passes)
#
# Must run as root: ~100 tests need root (chown, mknod, switching to the
# nobody/tests users) and are skipped otherwise.  pjdfstest creates one temp
# dir inside DIR and removes it at the end.  A full run takes a few seconds.
#
# Output: pjdfstest's own per-test lines ("NAME  ok|FAILED|skipped"), then
# a summary; the last line is "pjdfstest: N passed, M failed" where M counts
# only failures NOT listed in the exceptions file (listed ones are counted
# separately as "expected"), plus 1 if pjdfstest did not run to completion.
# Exit status: 0 iff M == 0; 2 for usage errors.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

CONFIG=${PJDFSTEST_CONFIG:-$ROOT/tests/pjdfstest.toml}
EXCEPTIONS=${PJDFSTEST_EXCEPTIONS:-$ROOT/tests/pjdfstest-exceptions.md}
TIMEOUT=${PJDFSTEST_TIMEOUT:-900}

die() { printf 'run-pjdfstest: %s\n' "$*" >&2; exit 2; }

[[ $# -ge 1 ]] || die "usage: $0 DIR [PATTERN...]"
DIR=$1
shift
[[ -d "$DIR" ]] || die "not a directory: $DIR"
[[ -r "$CONFIG" ]] || die "config not found: $CONFIG"
[[ -f "$EXCEPTIONS" ]] || die "exceptions file not found: $EXCEPTIONS"
command -v pjdfstest >/dev/null || die "pjdfstest not installed: run scripts/install-test-tools.sh"

if [[ $(id -u) -ne 0 ]]; then
    echo "run-pjdfstest: WARNING: not root, tests that need root will be skipped" >&2
else
    # Tests switch to these users; if they cannot search DIR (a FUSE mount
    # without allow_other, or a 0700 root dir / ancestor), ~60 tests fail
    # with EACCES.  Say so up front instead of leaving it to be guessed.
    for user in nobody tests; do
        if ! runuser -u "$user" -- test -x "$DIR" 2>/dev/null; then
            echo "run-pjdfstest: WARNING: user '$user' cannot search $DIR" \
                 "(FUSE mount without allow_other, or mode/ancestors not o+x);" \
                 "user-switching tests will fail" >&2
        fi
    done
fi

# Full output also goes to a log file: PJDFSTEST_LOG if given, else a temp
# file that is removed when the run passes and kept (path printed) if not.
if [[ -n "${PJDFSTEST_LOG:-}" ]]; then
    LOG=$PJDFSTEST_LOG
    : >"$LOG"
else
    LOG=$(mktemp -t pjdfstest.XXXXXX.log)
    trap 'rc=$?; if ((rc == 0)); then rm -f "$LOG"; else echo "run-pjdfstest: full log kept: $LOG" >&2; fi' EXIT
fi

args=(-c "$CONFIG" -p "$DIR")
if [[ -n "${PJDFSTEST_SECONDARY:-}" ]]; then
    args+=(-s "$PJDFSTEST_SECONDARY")
fi

# NO_COLOR: plain names in the output (pjdfstest colors them otherwise).
# RUST_BACKTRACE=0: one panic message per failure instead of a backtrace
# (override by exporting PJDFSTEST_BACKTRACE=1).
# pjdfstest itself exits 1 when anything fails; we judge failures ourselves.
start=$SECONDS
set +e
NO_COLOR=1 RUST_BACKTRACE=${PJDFSTEST_BACKTRACE:-0} \
    timeout --kill-after=30 "$TIMEOUT" pjdfstest "${args[@]}" "$@" 2>&1 | tee "$LOG"
status=${PIPESTATUS[0]}
set -e
elapsed=$((SECONDS - start))

# Strip any stray ANSI color codes before parsing.
clean=$(sed 's/\x1b\[[0-9;]*m//g' "$LOG")

# Per-test result lines look like "<name><spaces><result>" with the name in
# column 0; panic messages and backtraces are indented, so they never match.
results=$(printf '%s\n' "$clean" |
    sed -nE 's/^([^[:space:]]+)[[:space:]]+(ok|FAILED|skipped|failed as expected|PASSED UNEXPECTEDLY)$/\1\t\2/p')
indent() { while IFS= read -r line; do printf '  %s\n' "$line"; done <<<"$1"; }
names_with() { printf '%s\n' "$results" | awk -F'\t' -v r="$1" '$2 == r {print $1}'; }

passed=$(names_with ok | grep -c . || true)
skipped=$(names_with skipped | grep -c . || true)
failed_names=$(names_with FAILED | sort -u)

# Exception names: top-level markdown list items starting with `name`.
# shellcheck disable=SC2016  # the backticks are literal markdown
exceptions=$(sed -nE 's/^[-*+][[:space:]]+`([^`]+)`.*/\1/p' "$EXCEPTIONS" | sort -u)

# Split failures into unexpected (not listed) and expected (listed).
unexpected=$(comm -23 <(printf '%s\n' "$failed_names" | grep . || true) \
                      <(printf '%s\n' "$exceptions" | grep . || true))
expected=$(comm -12 <(printf '%s\n' "$failed_names" | grep . || true) \
                    <(printf '%s\n' "$exceptions" | grep . || true))
now_passing=$(comm -12 <(names_with ok | sort -u) \
                       <(printf '%s\n' "$exceptions" | grep . || true))
n_unexpected=$(printf '%s\n' "$unexpected" | grep -c . || true)
n_expected=$(printf '%s\n' "$expected" | grep -c . || true)

echo
echo "run-pjdfstest: finished in ${elapsed}s (pjdfstest exit status $status)"
if [[ -n "$expected" ]]; then
    echo "run-pjdfstest: $n_expected failure(s) listed in $(basename "$EXCEPTIONS") (expected):"
    indent "$expected"
fi
if [[ -n "$now_passing" ]]; then
    echo "run-pjdfstest: listed in $(basename "$EXCEPTIONS") but now passing (remove them):"
    indent "$now_passing"
fi
if [[ -n "$unexpected" ]]; then
    echo "run-pjdfstest: UNEXPECTED failures ($n_unexpected):"
    indent "$unexpected"
fi

# pjdfstest prints "Summary: ..." last; without it the run did not finish:
# bad config/user setup (exits before any test), a crash, or a hang killed
# by timeout (exit 124/137).  Count that as a failure whatever the counts.
incomplete=0
if ! printf '%s\n' "$clean" | grep -q '^Summary: '; then
    incomplete=1
    echo "run-pjdfstest: pjdfstest did not complete (exit status $status); counts are partial"
fi
echo "run-pjdfstest: $skipped skipped (missing feature / remount / secondary fs), $n_expected expected failure(s)"

# An incomplete run counts as one extra failure so the final line never reads
# "0 failed" for a run that exits non-zero.
echo "pjdfstest: $passed passed, $((n_unexpected + incomplete)) failed"
if ((n_unexpected > 0 || incomplete)); then
    exit 1
fi
