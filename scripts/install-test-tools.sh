#!/usr/bin/env bash
# Install what the external file-system test suites need, idempotently:
#   - fuse3 (fusermount3, /etc/fuse.conf) from Debian, only if missing;
#   - chromium (headless) for the web UI's browser tests, only if missing;
#   - e2fsprogs (mkfs.ext4, e2fsck), util-linux (fsfreeze) and mount (losetup,
#     mount, umount) for the power-cut test (tests/it/powercut/), only if missing;
#   - the "tests" user/group that pjdfstest switches to (nobody/nogroup is
#     the other one and ships with Debian);
#   - pjdfstest and fsx from crates.io, pinned, only if that exact version
#     is not installed already.
# Safe to run on every CI run: when everything is present it does nothing
# but a few checks (well under a second).  Must run as root (apt, useradd).
set -euo pipefail

# Pinned versions (crates.io).  Bump deliberately: pjdfstest's test names are
# what tests/pjdfstest-exceptions.md refers to.
PJDFSTEST_VERSION=0.2.2
FSX_VERSION=0.3.2

# Debian packages needed at test time.  python3 is already on the machine.
# e2fsprogs, util-linux, mount: the power-cut test (ext4 on loop devices, fsfreeze).
# groff-base: nroff renders the generated man page (tests/it/cliconv.rs).
# chromium: the web UI's browser tests (tests/it/ui.rs), headless.
APT_PACKAGES=(fuse3 e2fsprogs util-linux mount groff-base chromium)

CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
export PATH="$CARGO_BIN:$PATH"

log() { printf 'install-test-tools: %s\n' "$*"; }

if [[ $(id -u) -ne 0 ]]; then
    log "must run as root (apt-get, useradd)" >&2
    exit 1
fi

# --- Debian packages --------------------------------------------------------
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    # dpkg-query prints "install ok installed" for an installed package.
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed'; then
        missing+=("$pkg")
    fi
done
if ((${#missing[@]})); then
    log "apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
    log "apt packages present: ${APT_PACKAGES[*]}"
fi

if [[ ! -c /dev/fuse ]]; then
    log "WARNING: /dev/fuse is missing; FUSE mounts will fail" >&2
fi
if [[ ! -e /dev/loop-control ]]; then
    log "WARNING: /dev/loop-control is missing; the power-cut test will fail" >&2
fi

# --- users/groups for pjdfstest (see [dummy_auth] in tests/pjdfstest.toml) ---
if ! getent group nogroup >/dev/null || ! getent passwd nobody >/dev/null; then
    log "nobody/nogroup missing; pjdfstest needs them" >&2
    exit 1
fi
if ! getent passwd tests >/dev/null; then
    log "creating system user/group 'tests' for pjdfstest"
    # --user-group makes "tests" the primary group, as pjdfstest requires.
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin tests
fi

# --- crates.io tools --------------------------------------------------------
# install_crate NAME VERSION: cargo install the pinned version unless the
# binary in CARGO_BIN already reports exactly "NAME VERSION" for --version.
install_crate() {
    local name=$1 version=$2 have=""
    if [[ -x "$CARGO_BIN/$name" ]]; then
        have=$("$CARGO_BIN/$name" --version 2>/dev/null || true)
    fi
    if [[ "$have" == "$name $version" ]]; then
        log "$name $version already installed"
        return
    fi
    log "cargo install $name $version (found: ${have:-none})"
    # --force replaces a different installed version.
    cargo install --locked --force --version "$version" "$name"
}

install_crate pjdfstest "$PJDFSTEST_VERSION"
install_crate fsx "$FSX_VERSION"

log "done"
