"""Store-level helpers: mounting and unmounting sessions.

:func:`mount` and :func:`umount` run the ``treefork`` CLI (``$TREEFORK_BIN``, else
``treefork`` on ``PATH``), because only the CLI starts a daemon when none serves
the store; :func:`mount` then returns a :class:`~treefork.Session` on the new
mount.
"""

import os
import shutil
import subprocess
from pathlib import Path
from typing import List, Optional, Union

from .errors import TreeforkError
from .session import Session

PathLike = Union[str, "os.PathLike[str]"]


def find_binary(path: Optional[PathLike] = None) -> str:
    """The treefork executable: ``path``, else ``$TREEFORK_BIN``, else ``treefork``."""
    b = os.fspath(path) if path is not None else os.environ.get("TREEFORK_BIN") or shutil.which("treefork")
    if not b:
        raise TreeforkError("no treefork executable: pass binary= or set TREEFORK_BIN", "not_found")
    return b


def _cli(args: List[str], store: Optional[PathLike], bin_path: Optional[PathLike]) -> str:
    cmd = [find_binary(bin_path)]
    if store is not None:
        cmd += ["--store", os.fspath(store)]
    p = subprocess.run(cmd + args, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if p.returncode != 0:
        raise TreeforkError(f"treefork {' '.join(args)}: {p.stderr.strip()}", "cli")
    return p.stdout


def mount(
    mountpoint: PathLike,
    session: str = "default",
    from_: Optional[PathLike] = None,
    store: Optional[PathLike] = None,
    agent_socket: Optional[PathLike] = None,
    task: Optional[str] = None,
    binary: Optional[PathLike] = None,
) -> Session:
    """Mount ``session`` (created, from a copy of ``from_`` when given: a git
    repository makes it promotable) at ``mountpoint`` (an empty directory,
    created if missing) and connect to it."""
    mp = Path(os.path.abspath(os.fspath(mountpoint)))
    mp.mkdir(parents=True, exist_ok=True)
    args = ["mount", str(mp), "--session", session]
    if from_ is not None:
        args += ["--from", os.fspath(from_)]
    if agent_socket is not None:
        args += ["--agent-socket", os.path.abspath(os.fspath(agent_socket))]
    if task is not None:
        args += ["--task", task]
    _cli(args, store, binary)
    return Session.from_mountpoint(mp)


def umount(mountpoint: PathLike, store: Optional[PathLike] = None, binary: Optional[PathLike] = None) -> None:
    """Flush and unmount the session at ``mountpoint``."""
    _cli(["umount", os.path.abspath(os.fspath(mountpoint))], store, binary)
