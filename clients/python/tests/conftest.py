"""Fixtures: real treefork daemons and FUSE mounts, driven through the CLI
(``$TREEFORK_BIN``), each test in its own store under a temporary directory.

Mount tests need root, /dev/fuse and ``TREEFORK_BIN``; when one is missing they
fail with a clear message (a mount test that cannot mount must never pass)."""

import os
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

import treefork

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def tf_bin() -> str:
    b = os.environ.get("TREEFORK_BIN")
    assert b, "set TREEFORK_BIN to the treefork binary under test (scripts/test.sh does)"
    assert os.access(b, os.X_OK), f"TREEFORK_BIN={b} is not executable"
    assert os.path.exists("/dev/fuse"), "mount tests need /dev/fuse"
    assert os.geteuid() == 0, "mount tests need root"
    return b


def tf(store: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("TREEFORK_SOCKET", "TREEFORK_STORE")}
    p = subprocess.run([tf_bin(), "--store", str(store), *args], capture_output=True, text=True, env=env)
    if check:
        assert p.returncode == 0, f"treefork {args}: {p.stderr}\n{daemon_log(store)}"
    return p


def daemon_log(store: Path) -> str:
    try:
        return (store / "daemon.log").read_text(errors="replace")[-4000:]
    except OSError:
        return ""


def umount_retrying(store: Path, mp: Path) -> None:
    err = ""
    for _ in range(50):
        if not os.path.ismount(mp):
            return
        p = tf(store, "umount", str(mp), check=False)
        if p.returncode == 0:
            return
        err = p.stderr
        time.sleep(0.1)
    raise AssertionError(f"{mp} stayed busy: {err}")


def git(repo: Path, *args: str) -> str:
    p = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env={**os.environ, **GIT_ENV})
    assert p.returncode == 0, f"git {args}: {p.stderr}"
    return p.stdout.strip()


class Env:
    """A store in a temporary directory and the mounts made in it (all unmounted
    at the end)."""

    def __init__(self, root: Path):
        self.root = root
        self.store = root / "store"
        self.mounts: List[Path] = []
        self.sessions: List[treefork.Session] = []

    def mount(self, name: str = "s", from_: "Path | None" = None, *extra: str) -> treefork.Session:
        mp = self.root / f"mnt-{name}"
        mp.mkdir()
        args = ["mount", str(mp), "--session", name]
        if from_ is not None:
            args += ["--from", str(from_)]
        tf(self.store, *args, *extra)
        self.mounts.append(mp)
        s = treefork.Session.from_mountpoint(mp)
        self.sessions.append(s)
        return s

    def track(self, mp: Path) -> None:
        self.mounts.append(Path(mp))

    def close(self) -> None:
        for s in self.sessions:
            s.close()
        for mp in reversed(self.mounts):
            if os.path.ismount(mp):
                umount_retrying(self.store, mp)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    tf_bin()
    e = Env(tmp_path)
    try:
        yield e
    finally:
        e.close()


@pytest.fixture
def session(env: Env) -> treefork.Session:
    """Session ``s`` mounted, empty."""
    return env.mount("s")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository (branch main, one commit: README, src/lib.rs)."""
    r = tmp_path / "repo"
    (r / "src").mkdir(parents=True)
    git(r, "init", "-q", "-b", "main")
    (r / "README").write_text("hello\n")
    (r / "src" / "lib.rs").write_text("fn main() {}\n")
    git(r, "add", "-A")
    git(r, "commit", "-q", "-m", "initial")
    return r


def write(path: Path, text: str) -> None:
    """Write and fsync, so the daemon sees the bytes at once."""
    with open(path, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def wait_for(pred: Callable[[], bool], what: str, secs: float = 10.0) -> None:
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
