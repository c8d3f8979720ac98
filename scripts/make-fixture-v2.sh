#!/usr/bin/env bash
# Build tests/fixtures/store-v2.tar.gz: a store written by the release before the
# record format change (22a34dd: store descriptor version 2, checkpoint and session
# records version 1). tests/it/upgrade.rs opens it with the current binary.
#
# Usage (as root, /dev/fuse present):
#   scripts/make-fixture-v2.sh [OLD_BINARY] [OUT]
# OLD_BINARY defaults to /work/old/treefork-22a34dd (`cargo build` of commit 22a34dd);
# OUT defaults to tests/fixtures/store-v2.tar.gz.
#
# What the store holds (tests/it/upgrade.rs knows the same contents):
#   checkpoint "first" (manual) of session main:
#     small.txt        "hello v2\n"
#     empty            ""
#     run.sh           "#!/bin/sh\necho hi\n", mode 0755
#     big.txt          `seq -f '%08g the quick brown fox' 1 200000` (5.8 MB, many blocks)
#     link             symlink -> small.txt
#     dir/nested/deep.txt  "deep\n"
#     dir/hard.txt     hard link to dir/nested/deep.txt
#   checkpoint "second" (milestone), child of first: small.txt += "more\n", second.txt
#   branch "feature" -> first
#   session "forked": a fork of feature plus fork-only.txt "fork\n", checkpoint "fork work"
#   an auto checkpoint (before-checkout, branch auto/before-checkout-*), child of
#     second: pending.txt "pending\n", saved by `checkout feature` in main
#   session main: checked out at feature, plus after.txt "after\n" (not checkpointed)
# (Main is not checked out back to the auto save: in 22a34dd, and still at the time of
# writing, a checkout between two trees that both hold a hard link splits the link.)
# and expect/*.json: the old binary's own `log`, `branches` and `sessions` output.
set -euo pipefail

OLD=${1:-/work/old/treefork-22a34dd}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${2:-$ROOT/tests/fixtures/store-v2.tar.gz}
[ -x "$OLD" ] || { echo "old treefork binary not found: $OLD" >&2; exit 1; }

T=$(mktemp -d /tmp/tf-fixture-XXXXXX)
S=$T/fixture/store
E=$T/fixture/expect
MAIN=$T/main
FORK=$T/fork
mkdir -p "$S" "$E" "$MAIN" "$FORK"
cleanup() {
    "$OLD" --store "$S" umount "$FORK" >/dev/null 2>&1 || true
    "$OLD" --store "$S" umount "$MAIN" >/dev/null 2>&1 || true
    rm -rf "$T"
}
trap cleanup EXIT

tf() { "$OLD" --store "$S" "$@"; }
tm() { "$OLD" --store "$S" -C "$MAIN" "$@"; }

tf mount "$MAIN" --session main >/dev/null
printf 'hello v2\n' >"$MAIN/small.txt"
: >"$MAIN/empty"
printf '#!/bin/sh\necho hi\n' >"$MAIN/run.sh"
chmod 0755 "$MAIN/run.sh"
seq -f '%08g the quick brown fox' 1 200000 >"$MAIN/big.txt"
ln -s small.txt "$MAIN/link"
mkdir -p "$MAIN/dir/nested"
printf 'deep\n' >"$MAIN/dir/nested/deep.txt"
ln "$MAIN/dir/nested/deep.txt" "$MAIN/dir/hard.txt"
tm checkpoint -m first >/dev/null

printf 'more\n' >>"$MAIN/small.txt"
printf 'second\n' >"$MAIN/second.txt"
tm checkpoint -m second --trigger milestone >/dev/null
tm branch feature HEAD~1 >/dev/null

# A fork of the branch, with work of its own.
tm fork forked --from feature --mount "$FORK" >/dev/null
printf 'fork\n' >"$FORK/fork-only.txt"
"$OLD" --store "$S" -C "$FORK" checkpoint -m "fork work" >/dev/null

# Pending changes are saved by a checkout: an auto checkpoint (trigger
# before-checkout) under an auto/before-checkout-* branch.
printf 'pending\n' >"$MAIN/pending.txt"
tm --json log >"$E/log-main-before-checkout.json"
tm checkout feature >/dev/null
printf 'after\n' >"$MAIN/after.txt"

tm --json log >"$E/log-main.json"
"$OLD" --store "$S" -C "$FORK" --json log >"$E/log-forked.json"
tm --json branches >"$E/branches.json"
tf --json sessions >"$E/sessions.json"

tf umount "$FORK" >/dev/null
tf umount "$MAIN" >/dev/null
# The daemon exits when its last mount is gone; wait for the store lock to be free.
for _ in $(seq 100); do
    flock -n "$S/lock" true 2>/dev/null && break
    sleep 0.1
done
flock -n "$S/lock" true || { echo "daemon still holds $S/lock" >&2; exit 1; }
rm -f "$S/lock" "$S/daemon.log"

mkdir -p "$(dirname "$OUT")"
tar -C "$T/fixture" --sort=name --owner=0 --group=0 --numeric-owner \
    --mtime=@0 -czf "$OUT" store expect
echo "wrote $OUT ($(stat -c %s "$OUT") bytes)"
