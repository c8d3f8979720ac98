#!/usr/bin/env bash
# Sessions for the web UI to show: a git repository, a session mounted from it
# with checkpoints, commands (one failing), a note, conversation messages, a
# branch, a fork, an experiment with a winner, and a commit made in the
# repository after the session started (so the promote preview shows a conflict).
#
#   scripts/ui-sessions.sh WORKDIR [TREEFORK]
#
# Makes WORKDIR/repo, WORKDIR/store, and mounts WORKDIR/ws (session `fix-parser`)
# and WORKDIR/fork (session `fix-parser-alt`). The browser tests (tests/it/ui.rs)
# and `scripts/demo.sh` use it. Unmount with:
#   treefork --store WORKDIR/store umount WORKDIR/ws; ... umount WORKDIR/fork
set -euo pipefail
W=${1:?usage: ui-sessions.sh WORKDIR [TREEFORK]}
TF=${2:-treefork}
mkdir -p "$W"
W=$(cd "$W" && pwd)
export GIT_AUTHOR_NAME=demo GIT_AUTHOR_EMAIL=demo@example.com
export GIT_COMMITTER_NAME=demo GIT_COMMITTER_EMAIL=demo@example.com
S=(--store "$W/store")

rm -rf "$W/repo"
mkdir -p "$W/repo/src" "$W/ws" "$W/fork"
cd "$W/repo"
git init -q -b main
cat > src/parse.py <<'EOF'
def parse(line):
    key, value = line.split("=")
    return key, value
EOF
printf 'key=value\n' > config.ini
printf '# parser\n' > README.md
git add -A
git commit -q -m "parser: first version"

"$TF" "${S[@]}" mount "$W/ws" --session fix-parser --from "$W/repo" --task "fix the parser on lines with two '='" >/dev/null
cd "$W/ws"
"$TF" messages append --role user --content '"The parser breaks on lines like a=b=c. Fix it."' >/dev/null
"$TF" checkout -b work >/dev/null
"$TF" exec --explanation "reproduce" -- python3 -c 'import sys; sys.path.insert(0, "src"); import parse; parse.parse("a=b=c")' >/dev/null 2>&1 || true
"$TF" note "the split has no maxsplit: a value with '=' fails" >/dev/null
cat > src/parse.py <<'EOF'
def parse(line):
    key, value = line.split("=", 1)
    return key.strip(), value.strip()
EOF
"$TF" checkpoint -m "split once" >/dev/null
"$TF" exec --explanation "check the fix" -- python3 -c 'import sys; sys.path.insert(0, "src"); import parse; print(parse.parse("a=b=c"))' >/dev/null
"$TF" messages append --role assistant --content '"Fixed: split on the first = only; a=b=c parses as (a, b=c)."' >/dev/null
"$TF" fork fix-parser-alt --mount "$W/fork" >/dev/null
"$TF" experiment -c 'printf "key = value\n" > config.ini' -c 'printf "key=value\nother=1\n" > config.ini' -c 'rm config.ini; exit 1' \
  --score 'wc -l < config.ini 2>/dev/null || echo 0' >/dev/null 2>&1
"$TF" messages append --role user --content '"Good. Promote it when the tests pass."' --flush >/dev/null
(cd "$W/fork" && echo "# alternative" >> README.md && "$TF" checkpoint -m "alternative readme" >/dev/null)

# The repository moves on under the session: promote now sees drift.
cd "$W/repo"
printf 'def parse(line):\n    return tuple(line.split("=", 1))\n' > src/parse.py
git commit -q -am "parser: upstream fix"
echo "sessions ready: $W/ws (fix-parser), $W/fork (fix-parser-alt); store $W/store"
