"""Running one command as a child process, as ``src/command/runner.rs``
does for ``exec`` and ``experiment``: argv, cwd and environment overrides;
stdout and stderr captured up to a cap each (with a truncated flag and the
total length); stdin from ``/dev/null`` unless told otherwise; an optional
timeout that stops the child's whole process group (SIGTERM, then SIGKILL after
:data:`KILL_GRACE`); output read until both pipes close or, once the child
exited, :data:`DRAIN_GRACE` passes (a background process holding a pipe does not
keep the run open).

A command that cannot start is a result (``error``, ``not_found``), not an
exception.
"""

import ctypes
import os
import selectors
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

DEFAULT_CAPTURE_LIMIT = 1 << 20
DRAIN_GRACE = 0.1
KILL_GRACE = 1.0
_PR_SET_CHILD_SUBREAPER = 36

# Children running now (with whether each leads its own group), for kill_all.
_live: Dict[int, Tuple["subprocess.Popen[bytes]", bool, Optional[str]]] = {}
_live_lock = threading.Lock()


@dataclass
class RunResult:
    """What one command did."""

    exit_code: Optional[int] = None
    signal: Optional[int] = None
    error: Optional[str] = None
    not_found: bool = False
    pid: Optional[int] = None
    duration_ms: int = 0
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_len: int = 0
    stderr_len: int = 0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    timed_out: bool = False


def become_subreaper() -> None:
    """Make this process the reaper of its orphaned descendants (Linux), so the
    processes a command leaves behind stay in its process tree: the daemon tells
    a recorded command's writers from others by their parent chain. Best effort."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class _Capture:
    def __init__(self, limit: int):
        self.limit = limit
        self.buf = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit - len(self.buf)
        if room > 0:
            self.buf += chunk[:room]


def run(
    argv: Union[str, Sequence[str]],
    cwd: "Optional[Union[str, os.PathLike[str]]]" = None,
    env: Optional[Mapping[str, str]] = None,
    capture_limit: int = DEFAULT_CAPTURE_LIMIT,
    timeout: Optional[float] = None,
    own_group: bool = False,
    stdin_null: bool = True,
    tag: Optional[str] = None,
    place: Optional[Tuple[str, str, str]] = None,
) -> RunResult:
    """Run ``argv`` (a string runs through ``sh -c``) and capture its output.
    ``tag`` names the run for :func:`kill_all`. ``place`` (fork, workspace,
    relative directory): the run sees the fork at the workspace's path
    (:mod:`treefork.place`; ``cwd`` is then unused)."""
    args: List[str] = ["sh", "-c", argv] if isinstance(argv, str) else list(argv)
    if place is not None:
        from . import place as placing

        args = placing.wrap(args, *place)
        cwd = "/"
    full_env: Optional[Dict[str, str]] = None
    if env:
        full_env = dict(os.environ)
        full_env.update(env)
    grouped = own_group or timeout is not None or place is not None
    r = RunResult()
    t0 = time.monotonic()
    try:
        child = subprocess.Popen(
            args,
            cwd=cwd,
            env=full_env,
            stdin=subprocess.DEVNULL if stdin_null else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=grouped,
        )
    except OSError as e:
        r.error = f"cannot run {args[0] if args else ''}: {e.strerror or e}"
        r.not_found = isinstance(e, FileNotFoundError)
        return r
    r.pid = child.pid
    out, err = _Capture(capture_limit), _Capture(capture_limit)
    with _live_lock:
        _live[child.pid] = (child, grouped, tag)
    try:
        status, r.timed_out = _pump(child, out, err, timeout, grouped)
        if place is not None:
            # What the run left in its group would keep its namespace, and so a
            # copy of every mount (the forks' FUSE sessions among them), alive.
            _signal_group(child, signal.SIGKILL, True)
    except BaseException:
        # Interrupted (KeyboardInterrupt in this thread): the command must not
        # outlive the run that was recording it.
        _signal_group(child, signal.SIGKILL, grouped)
        child.wait()
        raise
    finally:
        with _live_lock:
            _live.pop(child.pid, None)
    r.duration_ms = int((time.monotonic() - t0) * 1000)
    if status < 0:
        r.signal = -status
    else:
        r.exit_code = status
    r.stdout, r.stderr = bytes(out.buf), bytes(err.buf)
    r.stdout_len, r.stderr_len = out.total, err.total
    r.stdout_truncated = out.total > len(out.buf)
    r.stderr_truncated = err.total > len(err.buf)
    return r


def _pump(
    child: "subprocess.Popen[bytes]",
    out: _Capture,
    err: _Capture,
    timeout: Optional[float],
    grouped: bool,
) -> Tuple[int, bool]:
    """Read both pipes until they close (or the drain grace after exit), enforce
    the timeout; return the wait status (negative: killed by that signal)."""
    assert child.stdout is not None and child.stderr is not None
    sel = selectors.DefaultSelector()
    sel.register(child.stdout, selectors.EVENT_READ, out)
    sel.register(child.stderr, selectors.EVENT_READ, err)
    start = time.monotonic()
    deadline = None if timeout is None else start + timeout
    timed_out = False
    killed_at: Optional[float] = None
    exited_at: Optional[float] = None
    try:
        while sel.get_map():
            now = time.monotonic()
            if exited_at is None and child.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at >= DRAIN_GRACE:
                break
            if deadline is not None and exited_at is None and now >= deadline:
                if not timed_out:
                    timed_out = True
                    killed_at = now
                    _signal_group(child, signal.SIGTERM, grouped)
                elif killed_at is not None and now - killed_at >= KILL_GRACE:
                    _signal_group(child, signal.SIGKILL, grouped)
                    killed_at = None
            for key, _ in sel.select(timeout=0.05):
                data = os.read(key.fd, 65536)
                if data:
                    key.data.add(data)
                else:
                    sel.unregister(key.fileobj)
    finally:
        sel.close()
        child.stdout.close()
        child.stderr.close()
    while True:
        try:
            status = child.wait(timeout=0.05 if deadline is not None else None)
            break
        except subprocess.TimeoutExpired:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                if not timed_out:
                    timed_out, killed_at = True, now
                    _signal_group(child, signal.SIGTERM, grouped)
                elif killed_at is not None and now - killed_at >= KILL_GRACE:
                    _signal_group(child, signal.SIGKILL, grouped)
                    killed_at = None
    if grouped and timed_out:
        _signal_group(child, signal.SIGKILL, grouped)  # nothing it started outlives the timeout
    return status, timed_out


def kill_all(tag: Optional[str] = None, sig: int = signal.SIGTERM) -> int:
    """Send ``sig`` to every command running now with ``tag`` (every command when
    ``None``; its group when it has one), e.g. when an experiment is interrupted;
    returns how many were signalled."""
    with _live_lock:
        live = [(c, g) for c, g, t in _live.values() if tag is None or t == tag]
    for child, grouped in live:
        _signal_group(child, sig, grouped)
    return len(live)


def _signal_group(child: "subprocess.Popen[bytes]", sig: int, grouped: bool) -> None:
    try:
        if grouped:
            os.killpg(child.pid, sig)
        else:
            child.send_signal(sig)
    except (ProcessLookupError, PermissionError):
        pass
