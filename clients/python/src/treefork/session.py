"""The :class:`Session` client: one connection to a session's control socket
(the session socket a mount registers, or an agent socket handed to an agent),
with a method per request returning dataclasses (:mod:`treefork.types`).

Method groups live beside it: :mod:`treefork.execution` (``exec``,
``experiment``, ``adopt``: the client runs the commands itself, like the CLI) and
:mod:`treefork.messages` (the conversation log). Refusals raise
:class:`~treefork.errors.TreeforkError` subclasses by protocol code.
"""

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from ._base import PingInfo, _Base
from ._blake3 import blake3_hex
from .connection import Connection, EventCallback
from .errors import Corrupt, NotMounted
from .bisect import _BisectMixin
from .execution import _ExecMixin
from .messages import _MessagesMixin
from .registry import find_mount
from .types import (
    BranchInfo,
    Checkpoint,
    CheckoutResult,
    DirEntry,
    Diff,
    FileContent,
    ForkResult,
    MergeResult,
    Operation,
    PromoteResult,
    RestoreResult,
    ShowResult,
    Status,
    UndoResult,
)

PathLike = Union[str, "os.PathLike[str]"]


def _connect(target: Any, timeout: Optional[float]) -> Connection:
    """A connection to ``target``: a socket path, or a path inside a mount."""
    if not isinstance(target, (str, os.PathLike)):
        raise TypeError(
            "treefork.Session takes a Connection, a mountpoint or a socket path, "
            f"not {type(target).__name__}"
        )
    path = os.fspath(target)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise NotMounted(f"{path}: no such socket or mountpoint") from None
    if stat.S_ISSOCK(mode):
        return Connection(path, timeout)
    return Connection(find_mount(path).socket, timeout)


@dataclass(frozen=True)
class Fork(ForkResult):
    """What :meth:`Session.fork` returns: the new session's data, and ``open()``."""

    def open(self) -> "Session":
        """A :class:`Session` on the new mount (found in the registry)."""
        return Session.from_mountpoint(self.mountpoint)


class Session(_ExecMixin, _BisectMixin, _MessagesMixin, _Base):
    """A client of one session's control socket.

    ``on_event`` receives every event line of every request (progress, streamed
    data); by default events are skipped (``show_file`` collects its own data).
    """

    def __init__(
        self,
        conn: "Union[Connection, str, os.PathLike[str]]",
        on_event: Optional[EventCallback] = None,
        timeout: Optional[float] = None,
    ):
        """``conn``: a :class:`Connection`, a session or agent socket's path, or a
        path inside a mounted workspace (like :meth:`from_socket` and
        :meth:`from_mountpoint`)."""
        if not isinstance(conn, Connection):
            conn = _connect(conn, timeout)
        self._conn = conn
        self._on_event = on_event
        self._info = PingInfo.from_json(conn.call("ping"))
        if self._info.session is None:
            conn.close()
            raise NotMounted(f"{conn.path} is not a session's control socket (use treefork.Store)")

    @classmethod
    def from_socket(cls, path: "Union[str, os.PathLike[str]]", on_event: Optional[EventCallback] = None, timeout: Optional[float] = None) -> "Session":
        """Connect to a session or agent socket."""
        return cls(Connection(path, timeout), on_event)

    @classmethod
    def from_mountpoint(cls, path: PathLike, on_event: Optional[EventCallback] = None, timeout: Optional[float] = None) -> "Session":
        """Connect to the session mounted at ``path`` (or at its closest mounted
        ancestor), found in the registry like the CLI finds it."""
        rec = find_mount(path)
        return cls(Connection(rec.socket, timeout), on_event)

    @classmethod
    def from_env(cls, on_event: Optional[EventCallback] = None) -> "Session":
        """``$TREEFORK_SOCKET`` if set (an agent's runtime sets it), else the
        workspace containing the current directory."""
        sock = os.environ.get("TREEFORK_SOCKET")
        if sock:
            return cls.from_socket(sock, on_event)
        return cls.from_mountpoint(os.getcwd(), on_event)

    # -- connection ------------------------------------------------------------

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def name(self) -> str:
        """The session's name."""
        return self._info.session or ""

    @property
    def mountpoint(self) -> Path:
        """The session's workspace root."""
        return self._root()

    @property
    def role(self) -> str:
        """``user`` or ``agent``: what this socket may do."""
        return self._info.role

    def ping(self) -> PingInfo:
        return PingInfo.from_json(self._call("ping"))

    def call(self, op: str, explanation: Optional[str] = None, on_event: Optional[EventCallback] = None, **args: Any) -> Dict[str, Any]:
        """Send any request; the raw response fields (for ops without a method)."""
        return self._call(op, on_event, explanation, **args)

    # -- states and refs -------------------------------------------------------

    def status(self, ignored: bool = False) -> Status:
        """Paths changed since HEAD. Paths the workspace's .gitignore files ignore
        (and ``.git``) are left out; ``ignored`` lists them too, each with
        ``Change.ignored`` set."""
        return Status.from_json(self._call("status", ignored=ignored or None))

    def checkpoint(
        self,
        message: str = "",
        trigger: Optional[str] = None,
        meta: Optional[Dict[str, Any]] = None,
        explanation: Optional[str] = None,
    ) -> Checkpoint:
        r = self._call("checkpoint", None, explanation, message=message, trigger=trigger, meta=meta or None)
        return Checkpoint.from_json(r["checkpoint"])

    def log(self, limit: Optional[int] = None, from_: Optional[str] = None, path: Optional[str] = None) -> List[Checkpoint]:
        """Checkpoints along first parents from ``from_`` (default HEAD), newest first."""
        args: Dict[str, Any] = {"limit": limit, "path": path, "from": from_}
        r = self._call("log", **args)
        return [Checkpoint.from_json(c) for c in r.get("checkpoints") or []]

    def show(self, ref: str = "HEAD") -> ShowResult:
        return ShowResult.from_json(self._call("show", ref=ref))

    def show_file(self, ref: str, path: str, verify: bool = False) -> FileContent:
        """What is at ``path`` in the state ``ref``, without a checkout. The size is
        always checked; ``verify`` also checks the BLAKE3 hash (pure Python: slow
        for large files)."""
        import base64

        parts: List[bytes] = []

        def on_event(ev: Dict[str, Any]) -> None:
            if ev.get("event") == "data":
                parts.append(base64.b64decode(ev.get("data", "")))
            elif self._on_event is not None:
                self._on_event(ev)

        r = self._call("show", on_event, ref=ref, path=path)
        data = b"".join(parts)
        size = r.get("size")
        if r.get("kind") in ("file", "symlink") and size is not None and size != len(data):
            raise Corrupt(f"show {ref}:{path}: got {len(data)} bytes, the daemon announced {size}")
        if verify and r.get("blake3") and blake3_hex(data) != r["blake3"]:
            raise Corrupt(f"show {ref}:{path}: the bytes do not match the announced BLAKE3 hash")
        entries = r.get("entries")
        return FileContent(
            checkpoint=str(r.get("checkpoint", "")),
            path=str(r.get("path", path)),
            kind=str(r.get("kind", "")),
            data=data,
            mode=r.get("mode"),
            size=size,
            blake3=r.get("blake3"),
            entries=None if entries is None else [DirEntry(str(e.get("name", "")), str(e.get("kind", "")), e.get("size")) for e in entries],
            raw=r,
        )

    def diff(
        self,
        a: Optional[str] = None,
        b: Optional[str] = None,
        mode: Optional[str] = None,
        paths: Optional[Sequence[str]] = None,
        ignored: bool = False,
    ) -> Diff:
        """Differences between ``a`` (default HEAD) and ``b`` (default WORKING);
        ``mode``: ``name-status`` (default), ``stat`` or ``patch``; only under
        ``paths`` (workspace-relative files or directories) when given. Ignored
        paths are left out as in :meth:`status` unless ``ignored``."""
        args: Dict[str, Any] = {"a": a, "b": b, "mode": mode, "paths": list(paths) if paths else None}
        return Diff.from_json(self._call("diff", ignored=ignored or None, **args))

    def branch(self, name: str, from_: Optional[str] = None, explanation: Optional[str] = None) -> BranchInfo:
        """Create a branch at ``from_`` (default HEAD, pending changes saved first)."""
        args: Dict[str, Any] = {"name": name, "from": from_}
        return BranchInfo.from_json(self._call("branch", None, explanation, **args))

    def branches(self, all: bool = False, auto: bool = False) -> List[BranchInfo]:
        """The session's own branches (named as it writes them); ``all``: every
        session's too (another's as ``SESSION/BRANCH``); ``auto``: also the
        automatic ``auto/...`` refs."""
        args: Dict[str, Any] = {"all": all or None, "auto": auto or None}
        return [BranchInfo.from_json(b) for b in self._call("branches", **args).get("branches") or []]

    def checkout(self, ref: Optional[str] = None, create: Optional[str] = None, explanation: Optional[str] = None) -> CheckoutResult:
        """Show ``ref``'s tree in the mount (pending changes saved first); with
        ``create``, make that branch at ``ref`` and attach HEAD to it."""
        return CheckoutResult.from_json(self._call("checkout", None, explanation, ref=ref, create=create))

    def restore(self, ref: str, paths: Optional[Sequence[str]] = None, dry_run: bool = False, explanation: Optional[str] = None) -> RestoreResult:
        """Rewind the tree, or ``paths`` (workspace-relative) of it, to ``ref``."""
        return RestoreResult.from_json(self._call("restore", None, explanation, ref=ref, paths=list(paths or []), dry_run=dry_run))

    def fork(
        self,
        name: str,
        mountpoint: PathLike,
        from_: Optional[str] = None,
        from_message: Optional[str] = None,
        explanation: Optional[str] = None,
    ) -> Fork:
        """A new session from ``from_`` (default: a fresh checkpoint) or from a
        message (files as at that message, the conversation up to it), mounted at
        ``mountpoint`` (created if missing). ``result.open()`` connects to it."""
        mp = os.path.abspath(os.fspath(mountpoint))
        args: Dict[str, Any] = {"name": name, "mountpoint": mp, "from": from_, "from_message": from_message}
        return Fork.from_json(self._call("fork", None, explanation, **args))

    # -- merge, cherry-pick, rebase ---------------------------------------------
    #
    # Each answers a MergeResult. A stop on conflicts is an answer, not an error:
    # ``result.conflicted`` is true, the merged tree is in the workspace (text
    # conflicts marked ``<<<<<<< ours`` / ``=======`` / ``>>>>>>> theirs``, binary
    # ones with theirs beside as ``PATH~theirs``); resolve them, then
    # ``*_continue()``, or ``*_abort()``. Starting another while one is stopped
    # raises ``Conflict``; continuing with nothing stopped raises ``Invalid``.

    def merge(
        self,
        ref: str,
        message: Optional[str] = None,
        dry_run: bool = False,
        also: Optional[Sequence[str]] = None,
        explanation: Optional[str] = None,
    ) -> MergeResult:
        """Merge ``ref`` (a checkpoint, branch, session name, experiment run or
        ``REMOTE/NAME``) into the workspace: a three-way merge from the merge
        base. Clean, it takes a checkpoint with two parents (HEAD, then ``ref``;
        ``message`` by default says what was merged); else it stops on conflicts.
        ``also``: more refs merged at once (an octopus merge). ``dry_run`` only
        reports what would change and conflict (status ``planned``)."""
        args: Dict[str, Any] = {"ref": ref, "message": message, "dry_run": dry_run, "also": list(also) if also else None}
        return MergeResult.from_json(self._call("merge", None, explanation, **args))

    def merge_continue(self, explanation: Optional[str] = None) -> MergeResult:
        """Finish the merge stopped on conflicts once every marker and every
        ``PATH~theirs`` is gone; while some are left it answers ``merge_conflict``
        again with those and changes nothing."""
        args: Dict[str, Any] = {"continue": True}
        return MergeResult.from_json(self._call("merge", None, explanation, **args))

    def merge_abort(self, explanation: Optional[str] = None) -> MergeResult:
        """Put the workspace back as it was before the stopped merge (the
        conflicted state is saved first: ``saved``)."""
        args: Dict[str, Any] = {"abort": True}
        return MergeResult.from_json(self._call("merge", None, explanation, **args))

    def cherry_pick(self, ref: str, message: Optional[str] = None, dry_run: bool = False, explanation: Optional[str] = None) -> MergeResult:
        """Apply what the checkpoint ``ref`` changed against its first parent to
        the workspace; clean, a checkpoint with HEAD alone for parent, else a stop
        on conflicts."""
        args: Dict[str, Any] = {"ref": ref, "message": message, "dry_run": dry_run}
        return MergeResult.from_json(self._call("cherry_pick", None, explanation, **args))

    def cherry_pick_continue(self, explanation: Optional[str] = None) -> MergeResult:
        """Finish the cherry-pick stopped on conflicts, once they are resolved."""
        args: Dict[str, Any] = {"continue": True}
        return MergeResult.from_json(self._call("cherry_pick", None, explanation, **args))

    def cherry_pick_abort(self, explanation: Optional[str] = None) -> MergeResult:
        """Put the workspace back as it was before the stopped cherry-pick."""
        args: Dict[str, Any] = {"abort": True}
        return MergeResult.from_json(self._call("cherry_pick", None, explanation, **args))

    def revert(self, ref: str, message: Optional[str] = None, dry_run: bool = False, explanation: Optional[str] = None) -> MergeResult:
        """Take out what the checkpoint ``ref`` changed — or, with ``exec@N``, what
        recorded command N changed — keeping everything after it (a three-way
        merge; a new checkpoint), else a stop on conflicts."""
        args: Dict[str, Any] = {"ref": ref, "message": message, "dry_run": dry_run}
        return MergeResult.from_json(self._call("revert", None, explanation, **args))

    def revert_continue(self, explanation: Optional[str] = None) -> MergeResult:
        """Finish the revert stopped on conflicts, once they are resolved."""
        args: Dict[str, Any] = {"continue": True}
        return MergeResult.from_json(self._call("revert", None, explanation, **args))

    def revert_abort(self, explanation: Optional[str] = None) -> MergeResult:
        """Put the workspace back as it was before the stopped revert."""
        args: Dict[str, Any] = {"abort": True}
        return MergeResult.from_json(self._call("revert", None, explanation, **args))

    def rebase(self, onto: Optional[str] = None, dry_run: bool = False, explanation: Optional[str] = None) -> MergeResult:
        """Replay the session's changes since its baseline commit (a session
        mounted ``--from`` a git work tree) onto ``onto``, a commit as git names it
        in the durable repository (default: the head of the branch the session was
        imported from; an agent socket may not name one). Clean, a checkpoint and
        the new baseline; else a stop on conflicts."""
        args: Dict[str, Any] = {"onto": onto, "dry_run": dry_run}
        return MergeResult.from_json(self._call("rebase", None, explanation, **args))

    def rebase_continue(self, explanation: Optional[str] = None) -> MergeResult:
        """Finish the rebase stopped on conflicts, once they are resolved."""
        args: Dict[str, Any] = {"continue": True}
        return MergeResult.from_json(self._call("rebase", None, explanation, **args))

    def rebase_abort(self, explanation: Optional[str] = None) -> MergeResult:
        """Put the workspace back as it was before the stopped rebase."""
        args: Dict[str, Any] = {"abort": True}
        return MergeResult.from_json(self._call("rebase", None, explanation, **args))

    # -- the operation log -----------------------------------------------------

    def undo(self, what: Optional[str] = None, if_last: Optional[int] = None, explanation: Optional[str] = None) -> UndoResult:
        """Revert the newest not-undone operation (``what``: ``files`` or ``refs``).
        With ``if_last``, refused (``Conflict``) unless that is still the newest."""
        return UndoResult.from_json(self._call("undo", None, explanation, what=what, if_last=if_last))

    def redo(self, what: Optional[str] = None, if_last: Optional[int] = None, explanation: Optional[str] = None) -> UndoResult:
        return UndoResult.from_json(self._call("redo", None, explanation, what=what, if_last=if_last))

    def op_restore(self, operation: int, what: Optional[str] = None, explanation: Optional[str] = None) -> UndoResult:
        """Return to the whole view right after operation ``operation``."""
        return UndoResult.from_json(self._call("op_restore", None, explanation, operation=operation, what=what))

    def op_log(self, limit: Optional[int] = None) -> List[Operation]:
        """The session's operations, newest first."""
        return [Operation.from_json(o) for o in self._call("op_log", limit=limit).get("operations") or []]

    def note(self, text: str, type: Optional[str] = None) -> int:
        """Add a note (``action``, ``decision``, ``error``, ``nudge``) to the log;
        returns its operation number."""
        return int(self._call("note", text=text, type=type)["op"])

    # -- promote and session info ----------------------------------------------

    def promote(
        self,
        paths: Optional[Sequence[str]] = None,
        strategy: str = "commit",
        message: Optional[str] = None,
        dry_run: bool = False,
        branch: Optional[str] = None,
        onto_head: bool = False,
        allow_large: bool = False,
        explanation: Optional[str] = None,
    ) -> PromoteResult:
        """Take chosen paths (default: the touched files) back to the durable git
        repository (user role only). Raises :class:`BaselineConflict` with the
        drifted paths."""
        args: Dict[str, Any] = {"paths": list(paths or []), "strategy": strategy, "message": message, "dry_run": dry_run}
        if branch is not None:
            args["branch"] = branch
        if onto_head:
            args["onto_head"] = True
        if allow_large:
            args["allow_large"] = True
        return PromoteResult.from_json(self._call("promote", None, explanation, **args))

    def info(self) -> Dict[str, Any]:
        """The session's info record, touched-file count and mount state
        (``session_show``)."""
        return self._call("session_show")
