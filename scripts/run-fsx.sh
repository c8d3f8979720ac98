#!/usr/bin/env bash
# Run fsx (File System eXerciser) in DIR (normally a treefork FUSE mount):
#   run 1 "syscall": tests/fsx.toml      - pread/pwrite/truncate/fsync/
#                    fallocate/sendfile/copy_file_range/close-open, no mmap
#   run 2 "mmap":    tests/fsx-mmap.toml - the same plus mmap reads/writes
#                    and msync(MS_INVALIDATE)
# Each run uses a fixed seed (reproducible op sequence) and >= 100,000 ops;
# fsx checks every read against its in-memory model of the file, plus the
# file size after each size-changing op, and stops at the first mismatch.
#
# Usage: scripts/run-fsx.sh DIR
#
# Environment:
#   FSX_SEED      seed for both runs                   (default: 20240601)
#   FSX_OPS       ops per run, must be >= 100000       (default: 100000)
#   FSX_MMAP      0 skips the mmap run, e.g. for a direct_io FS (default: 1)
#   FSX_TIMEOUT   seconds before a run is killed       (default: 1200)
#   FSX_ARTIFACTS where failure artifacts go (<file>.fsxgood = expected
#                 contents); default: a temp dir outside DIR, kept on failure
#
# On failure fsx logs the seed and the last 1024 ops to stderr; rerun one
# run with e.g. `fsx -S SEED -N OPS -f tests/fsx.toml -vv DIR/file`.
# The test files (DIR/fsx.<run>) are removed after a passing run and left
# in place after a failing one.
#
# The last line is "fsx: N passed, M failed" (N, M count runs); the exit
# status is 0 iff every run passed (2 for usage errors).
# Measured with the defaults: tmpfs ~2 s + ~15 s, fuse-overlayfs on ext4
# ~20 s + ~100 s (mmap ops with msync dominate).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

SEED=${FSX_SEED:-20240601}
OPS=${FSX_OPS:-100000}
MMAP=${FSX_MMAP:-1}
TIMEOUT=${FSX_TIMEOUT:-1200}

die() { printf 'run-fsx: %s\n' "$*" >&2; exit 2; }

[[ $# -eq 1 ]] || die "usage: $0 DIR"
DIR=$1
[[ -d "$DIR" ]] || die "not a directory: $DIR"
if ! [[ "$OPS" =~ ^[0-9]+$ ]] || ((OPS < 100000)); then
    die "FSX_OPS must be >= 100000 (got $OPS)"
fi
command -v fsx >/dev/null || die "fsx not installed: run scripts/install-test-tools.sh"

if [[ -n "${FSX_ARTIFACTS:-}" ]]; then
    ARTIFACTS=$FSX_ARTIFACTS
    mkdir -p "$ARTIFACTS"
else
    ARTIFACTS=$(mktemp -d -t fsx-artifacts.XXXXXX)
fi

# run_fsx NAME CONFIG: one fsx run on DIR/fsx.NAME; returns fsx's status.
run_fsx() {
    local name=$1 config=$2 file="$DIR/fsx.$1" start status
    [[ -f "$config" ]] || die "config not found: $config"
    echo "run-fsx: $name: fsx -S $SEED -N $OPS -f $config $file"
    start=$SECONDS
    set +e
    # -P: write fsxgood artifacts outside the FS under test.
    timeout --kill-after=30 "$TIMEOUT" \
        fsx -S "$SEED" -N "$OPS" -f "$config" -P "$ARTIFACTS" "$file"
    status=$?
    set -e
    if ((status == 0)); then
        echo "run-fsx: $name: PASSED in $((SECONDS - start))s"
        rm -f "$file"
    else
        ((status == 124 || status == 137)) && echo "run-fsx: $name: timed out after ${TIMEOUT}s"
        echo "run-fsx: $name: FAILED (exit status $status) after $((SECONDS - start))s;" \
             "seed $SEED, test file $file, artifacts in $ARTIFACTS"
    fi
    return "$status"
}

passed=0
failed=0
if run_fsx syscall "$ROOT/tests/fsx.toml"; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
fi
if [[ "$MMAP" != 0 ]]; then
    if run_fsx mmap "$ROOT/tests/fsx-mmap.toml"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
else
    echo "run-fsx: mmap run skipped (FSX_MMAP=0)"
fi

# Keep artifacts only when something failed (and the dir was ours).
if ((failed == 0)) && [[ -z "${FSX_ARTIFACTS:-}" ]]; then
    rm -rf "$ARTIFACTS"
fi

echo "fsx: $passed passed, $failed failed"
((failed == 0))
