#!/usr/bin/env bash
# Install treefork's mount(8) helper, so that
#     mount -t fuse.treefork SESSION DIR -o store=/var/lib/treefork
# and an /etc/fstab line such as
#     agent1  /srv/ws/agent1  fuse.treefork  store=/var/lib/treefork,noauto  0 0
# work. mount(8) runs /sbin/mount.fuse.treefork SOURCE DIR -o OPTIONS (it looks
# for helpers in /sbin only); the helper is a symlink to the treefork binary,
# which recognizes the name (argv[0]) and runs `treefork mount-helper`.
#
# Usage: scripts/install-mount-helper.sh [TREEFORK_BINARY] [HELPER_DIR]
#   TREEFORK_BINARY  default: `command -v treefork`
#   HELPER_DIR       default: /sbin
# Also installs the man pages and bash completion when their directories exist
# (set MANDIR / BASH_COMPLETION_DIR to override, or to "" to skip).
# Idempotent; run as root.
set -euo pipefail

bin=${1:-$(command -v treefork || true)}
dir=${2:-/sbin}
if [[ -z "$bin" || ! -x "$bin" ]]; then
    echo "install-mount-helper: no treefork binary (pass its path)" >&2
    exit 1
fi
bin=$(readlink -f "$bin")

ln -sfn "$bin" "$dir/mount.fuse.treefork"
echo "installed $dir/mount.fuse.treefork -> $bin"

mandir=${MANDIR-/usr/local/share/man/man1}
if [[ -n "$mandir" ]] && mkdir -p "$mandir" 2>/dev/null; then
    "$bin" man --out-dir "$mandir"
fi
compdir=${BASH_COMPLETION_DIR-/usr/share/bash-completion/completions}
if [[ -n "$compdir" && -d "$compdir" ]]; then
    "$bin" completions bash > "$compdir/treefork"
    echo "installed bash completion in $compdir/treefork"
fi
