"""Finding a session's control socket from a path, as the ``treefork`` CLI does.

Mirrors ``src/control/registry.rs``: the daemon keeps its sockets and mount
records in the runtime directory ``$XDG_RUNTIME_DIR/treefork`` (else
``/tmp/treefork-<uid>``). Each mount has a record
``m-<16 hex of blake3(mountpoint)>.json`` (``{"mountpoint", "store", "session",
"socket", "agent_socket"?}``); the session's socket defaults to
``s-<16 hex of blake3(mountpoint)>.sock``. A path is looked up at itself, then at
each ancestor, and a record counts only if it names exactly that mountpoint.

The runtime directory is trusted only when it is a real directory (not a
symbolic link) owned by this uid with mode 0700, as the CLI requires: in a shared
``/tmp`` another user could have created it to plant records. This module never
creates it (a client has nothing to put there).
"""

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from ._blake3 import blake3_hex
from .errors import Forbidden, NotMounted


@dataclass(frozen=True)
class MountRecord:
    """What the daemon registered about one of its mounts."""

    mountpoint: Path
    store: Path
    session: str
    socket: Path
    agent_socket: Optional[Path] = None


def runtime_dir() -> Path:
    """The runtime directory (checked; may not exist yet)."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg) / "treefork"
    return Path(f"/tmp/treefork-{os.getuid()}")


def _checked_runtime_dir() -> Optional[Path]:
    d = runtime_dir()
    try:
        st = os.lstat(d)
    except FileNotFoundError:
        return None
    mode = stat.S_IMODE(st.st_mode)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or mode != 0o700:
        raise Forbidden(
            f"runtime directory {d} is unsafe: it must be a directory owned by uid "
            f"{os.getuid()} with mode 0700 (it has uid {st.st_uid}, mode {mode:04o})"
        )
    return d


def _hash16(path: Path) -> str:
    return blake3_hex(os.fsencode(str(path)))[:16]


def session_socket_path(mountpoint: Union[str, Path]) -> Path:
    """The default control socket of the session mounted at ``mountpoint``."""
    return runtime_dir() / f"s-{_hash16(Path(mountpoint))}.sock"


def daemon_socket_path(store: Union[str, Path]) -> Path:
    """The socket of the daemon serving the store at ``store`` (canonical path)."""
    return runtime_dir() / f"d-{_hash16(Path(store))}.sock"


def _record_at(rt: Path, p: Path) -> Optional[MountRecord]:
    try:
        raw = json.loads((rt / f"m-{_hash16(p)}.json").read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict) or raw.get("mountpoint") != str(p):
        return None
    sock = raw.get("socket")
    agent = raw.get("agent_socket")
    return MountRecord(
        mountpoint=p,
        store=Path(raw.get("store", "")),
        session=str(raw.get("session", "")),
        socket=Path(sock) if sock else session_socket_path(p),
        agent_socket=Path(agent) if agent else None,
    )


def find_mount(path: "Union[str, os.PathLike[str]]") -> MountRecord:
    """The mount registered at ``path`` or at its closest registered ancestor.

    Tried with the path as given (made absolute) and with symbolic links
    resolved, like the CLI. Raises :class:`NotMounted` when none is found.
    """
    rt = _checked_runtime_dir()
    given = Path(os.path.abspath(path))
    if rt is not None:
        for start in (Path(os.path.realpath(given)), given):
            for p in (start, *start.parents):
                rec = _record_at(rt, p)
                if rec is not None:
                    return rec
    raise NotMounted(f"{path} is not inside a mounted treefork workspace")
