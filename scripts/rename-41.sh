#!/usr/bin/env bash
# Issue 41, "names that say one thing each": three renames.
#
#   control::protocol::Request  ->  control::protocol::Envelope   (the wire envelope;
#                                   verbs::Request, the enum of every verb's request, stays)
#   remote::ops   (src/remote/ops/)  ->  remote::serve  (src/remote/serve/)
#   session::ops  (src/session/ops.rs) ->  session::posix (src/session/posix.rs)
#
# The top-level `crate::ops` (src/ops/) is NOT renamed: only paths that name the two
# modules above are rewritten (`remote::ops`, `remote/ops/`, `session::ops`,
# `session/ops.rs`, and `super::ops` / `self::ops` / `mod ops` inside src/remote/ and
# src/session/ where they mean these modules).
#
# Idempotent: run it again (say after merging a branch that still uses the old names)
# and it moves and rewrites only what is left; a second run changes nothing. Files
# are moved with `git mv`. It ends by listing what it could not decide by itself
# (lines to look at by hand); the build is the final check.
#
# Usage: scripts/rename-41.sh   (from anywhere inside the checkout)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

self=scripts/rename-41.sh
scope=(src docs tests scripts clients fuzz bench README.md)

# ---- 1. files --------------------------------------------------------------------

# Move `from` to `to` with git mv; a folder whose target exists already (a branch
# merged after the first run added files to the old folder) is merged file by file.
move() {
    local from=$1 to=$2
    [ -e "$from" ] || return 0
    if [ -d "$from" ] && [ -d "$to" ]; then
        local f rel
        while IFS= read -r f; do
            rel=${f#"$from"/}
            if [ -e "$to/$rel" ]; then
                echo "rename-41: both $f and $to/$rel exist: merge them by hand" >&2
                exit 1
            fi
            mkdir -p "$(dirname "$to/$rel")"
            git mv "$f" "$to/$rel"
        done < <(git ls-files "$from")
        find "$from" -type d -empty -delete
        if [ -e "$from" ]; then
            echo "rename-41: $from still holds untracked files: move them by hand" >&2
            exit 1
        fi
    elif [ -e "$to" ]; then
        echo "rename-41: both $from and $to exist: merge them by hand" >&2
        exit 1
    else
        git mv "$from" "$to"
    fi
}

move src/remote/ops src/remote/serve
move src/session/ops.rs src/session/posix.rs
move src/session/ops src/session/posix

# ---- 2. text ---------------------------------------------------------------------

# Tracked files under `scope` (but this script) whose text matches the Perl regex $1.
files() {
    git grep -lIP -e "$1" -- "${scope[@]}" ":!$self" 2>/dev/null || true
}

# Apply the Perl substitution(s) $2 to every file of `files $1`.
apply() {
    local re=$1 code=$2 f
    files "$re" | while IFS= read -r f; do
        perl -0pi -e "$code" "$f"
    done
}

# 2a. Envelope. `protocol::Request` and `control::Request` (control re-exports protocol
# with a glob) always mean the envelope; so does `Request` inside control/ unless it is
# `verbs::Request`.
apply '\b(protocol|control)::Request\b' \
    's/\b(protocol|control)::Request\b/$1::Envelope/g'
apply '\bcontrol::\{[^{}]*\bRequest\b' \
    's{\bcontrol::\{([^{}]*)\}}{my $x = $1; $x =~ s/(?<!::)\bRequest\b/Envelope/g; "control::{$x}"}ge'
if [ -f src/control/protocol.rs ]; then
    perl -0pi -e 's/(?<!verbs::)\bRequest\b/Envelope/g;
        s{^/// A request: an op \(`T`: `verbs::Request`\), optionally aimed at a session by name\n/// \(on the store socket; a session socket implies its session\)\.\n}{/// The envelope of one request line: its op (`T`: `verbs::Request`), optionally aimed\n/// at a session by name (on the store socket; a session socket implies its session),\n/// and its explanation.\n}m' src/control/protocol.rs
fi
# Within control/ only: elsewhere (src/verbs/) `super::Request` is verbs::Request.
git grep -lP '\bsuper::(protocol::)?Request\b' -- src/control 2>/dev/null |
    while IFS= read -r f; do
        perl -pi -e 's/\bsuper::(protocol::)?Request\b/super::$1Envelope/g' "$f"
    done || true

# 2b. remote::ops -> remote::serve, src/remote/ops/ -> src/remote/serve/.
apply '\bremote::ops\b|\bremote/ops(?=/|\.rs\b)' \
    's/\bremote::ops\b/remote::serve/g; s{\bremote/ops(?=/|\.rs\b)}{remote/serve}g'
apply '\bremote::\{[^{}]*\bops\b' \
    's{\bremote::\{([^{}]*)\}}{my $x = $1; $x =~ s/(?<!::)\bops\b/serve/g; "remote::{$x}"}ge'

# 2c. session::ops -> session::posix, src/session/ops.rs -> src/session/posix.rs.
apply '\bsession::ops\b|\bsession/ops(?=/|\.rs\b)' \
    's/\bsession::ops\b/session::posix/g; s{\bsession/ops(?=/|\.rs\b)}{session/posix}g'
apply '\bsession::\{[^{}]*\bops\b' \
    's{\bsession::\{([^{}]*)\}}{my $x = $1; $x =~ s/(?<!::)\bops\b/posix/g; "session::{$x}"}ge'

# 2d. Inside the parents. In a file under src/remote/ or src/session/ (but the
# parent's own mod.rs, where `super` is the crate and `super::ops` is crate::ops),
# `super::ops` names the renamed module: neither parent may import crate::ops (the
# layer table), so no `ops` there means anything else.
for parent in remote:serve session:posix; do
    dir=src/${parent%%:*} new=${parent##*:}
    [ -d "$dir" ] || continue
    git grep -lP '\bsuper::ops\b' -- "$dir" ":!$dir/mod.rs" 2>/dev/null |
        while IFS= read -r f; do
            perl -pi -e "s/\\bsuper::ops\\b/super::$new/g" "$f"
        done || true
    if [ -f "$dir/mod.rs" ]; then
        # In the parent's mod.rs: its `mod ops;` declaration, and `self::ops` / `use ops`
        # paths (a bare `ops` there is the child module).
        perl -pi -e "s/^(\\s*(?:pub(?:\\([^)]*\\))?\\s+)?mod\\s+)ops;/\${1}$new;/;
            s/\\bself::ops\\b/self::$new/g;
            s/^(\\s*(?:pub(?:\\([^)]*\\))?\\s+)?use\\s+)ops::/\${1}$new::/" "$dir/mod.rs"
    fi
done

# 2e. Prose that names the modules by their last segment only (each checked by hand).
[ -f src/remote/mod.rs ] &&
    perl -pi -e 's/dispatched by `ops`\./dispatched by `serve`./' src/remote/mod.rs
[ -f src/session/mod.rs ] &&
    perl -pi -e 's/\(`ops`, `data`\)/(`posix`, `data`)/' src/session/mod.rs
if [ -f docs/design.md ]; then
    # The remote row of the "Layers" table (scripts/layers.py reads the table: only
    # the word changes, the columns stay), and two names of session::ops' items.
    perl -pi -e 's/(lazy \(the store.s Fallback\), )ops\//${1}serve\//;
        s/(?<![\w:])ops::(DEBUG_PANIC_XATTR|chown_killed|killed_suidgid|NewNode|SetAttr|Caller|DirEntry)\b/session::posix::$1/g' \
        docs/design.md
fi

# ---- 3. what is left to look at --------------------------------------------------

left=$(
    {
        git grep -nP '\b(remote|session)::\{[^}]*\{[^}]*\bops\b' -- "${scope[@]}" ":!$self"
        git grep -nP '\bsuper::super::ops\b' -- src/remote src/session
        git grep -nP '\b(super::ops|ops::)' -- src/remote/mod.rs src/session/mod.rs
        git grep -nP '(?<!verbs::)(?<![\w:])Request\b' -- src/control
        git grep -nP '(?<![\w:])ops::(DEBUG_PANIC_XATTR|chown_killed|killed_suidgid|NewNode|SetAttr|Caller|DirEntry|drop_link)\b' \
            -- "${scope[@]}" ":!$self"
        git grep -nP '(?<![\w:/])ops::(store_trim|remote_gc|remote_add|remote_rm|remote_list|remote_trust)\b' \
            -- "${scope[@]}" ":!$self"
    } 2>/dev/null || true
)
if [ -n "$left" ]; then
    echo "rename-41: look at these by hand (old names the script cannot decide):"
    echo "$left"
fi
echo "rename-41: done; now cargo fmt, cargo clippy --all-targets, scripts/layers.py --check"
