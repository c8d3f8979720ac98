"""The dataclasses :class:`treefork.Session` methods return.

Each is built from a daemon response by ``from_json``; unknown fields are
ignored and missing optional ones default, so a newer daemon's answers still
read. Every result keeps the whole response in ``raw`` for fields a class does
not name. Field meanings: docs/protocol.md, under each op.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

Json = Dict[str, Any]


def _s(v: Any) -> Optional[str]:
    return None if v is None else str(v)


@dataclass(frozen=True)
class Change:
    """One changed path (``added``, ``modified``, ``deleted``, ...)."""

    path: str
    change: str
    #: With ``diff(mode="stat")``: line counts, or ``binary``.
    added: Optional[int] = None
    removed: Optional[int] = None
    binary: bool = False
    #: Asked for with ``ignored=True``: the workspace's .gitignore files ignore it.
    ignored: bool = False

    @classmethod
    def from_json(cls, d: Json) -> "Change":
        return cls(
            path=str(d.get("path", "")),
            change=str(d.get("change", d.get("type", ""))),
            added=d.get("added"),
            removed=d.get("removed"),
            binary=bool(d.get("binary", False)),
            ignored=bool(d.get("ignored", False)),
        )


def _changes(v: Any) -> List[Change]:
    return [Change.from_json(c) for c in v or [] if isinstance(c, dict)]


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint record."""

    id: str
    short: str
    session: str
    root: str
    parent: Optional[str]
    parents: List[str]
    time: int
    time_ns: str
    message: str
    trigger: str
    meta: Json
    files_changed: Optional[int]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> "Checkpoint":
        return cls(
            id=str(d.get("id", "")),
            short=str(d.get("short", str(d.get("id", ""))[:12])),
            session=str(d.get("session", "")),
            root=str(d.get("root", "")),
            parent=_s(d.get("parent")),
            parents=[str(p) for p in d.get("parents") or []],
            time=int(d.get("time") or 0),
            time_ns=str(d.get("time_ns", "")),
            message=str(d.get("message", "")),
            trigger=str(d.get("trigger", "")),
            meta=dict(d.get("meta") or {}),
            files_changed=d.get("files_changed"),
            raw=d,
        )


@dataclass(frozen=True)
class Status:
    """HEAD, the attached branch and the pending changes."""

    head: Optional[str]
    branch: Optional[str]
    changes: List[Change]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> "Status":
        return cls(_s(d.get("head")), _s(d.get("branch")), _changes(d.get("changes")), d)


@dataclass(frozen=True)
class Diff:
    """Differences between two states (roots ``a`` and ``b``)."""

    a: str
    b: str
    entries: List[Change]
    #: With ``mode="patch"``: unified diffs of text files.
    patch: Optional[str]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> "Diff":
        return cls(str(d.get("a", "")), str(d.get("b", "")), _changes(d.get("entries")), _s(d.get("patch")), d)


@dataclass(frozen=True)
class ShowResult:
    """A checkpoint and the paths it changed against its first parent."""

    checkpoint: Checkpoint
    #: ``None`` for a checkpoint without parents.
    changes: Optional[List[Change]]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> "ShowResult":
        ch = d.get("changes")
        return cls(Checkpoint.from_json(d.get("checkpoint") or {}), None if ch is None else _changes(ch), d)


@dataclass(frozen=True)
class DirEntry:
    name: str
    kind: str
    size: Optional[int] = None


@dataclass(frozen=True)
class FileContent:
    """What is at a path in a stored state (:meth:`Session.show_file`)."""

    checkpoint: str
    path: str
    #: ``file``, ``dir``, ``symlink``, ``fifo``, ...
    kind: str
    #: A file's bytes or a link's target (empty for other kinds).
    data: bytes
    mode: Optional[int]
    size: Optional[int]
    blake3: Optional[str]
    #: A directory's entries.
    entries: Optional[List[DirEntry]]
    raw: Json = field(repr=False, compare=False)

    @property
    def text(self) -> str:
        """The bytes as UTF-8 (raises ``UnicodeDecodeError`` when they are not)."""
        return self.data.decode()


@dataclass(frozen=True)
class Saved:
    """Pending changes saved before an operation: a checkpoint beside HEAD."""

    checkpoint: str
    ref: str

    @classmethod
    def from_json(cls, d: Any) -> "Optional[Saved]":
        if not isinstance(d, dict):
            return None
        return cls(str(d.get("checkpoint", "")), str(d.get("ref", "")))


@dataclass(frozen=True)
class BranchInfo:
    """A branch (``branches``), or the one just made (``branch``)."""

    name: str
    checkpoint: str
    created: Optional[int] = None
    message: Optional[str] = None
    session: Optional[str] = None
    #: Whether the session's HEAD is attached to it (``branches``).
    current: bool = False
    #: The session it belongs to (``None``: a store-wide branch of an older
    #: store); another session's is named ``SESSION/BRANCH`` (``branches``).
    owner: Optional[str] = None

    @classmethod
    def from_json(cls, d: Json) -> "BranchInfo":
        return cls(
            str(d.get("name", d.get("branch", ""))),
            str(d.get("checkpoint", "")),
            d.get("created"),
            _s(d.get("message")),
            _s(d.get("session")),
            bool(d.get("current", False)),
            _s(d.get("owner")),
        )


@dataclass(frozen=True)
class ForkResult:
    """A new session, mounted (:meth:`treefork.Session.fork` returns a
    :class:`treefork.session.Fork`, which can also ``open()`` it)."""

    session: str
    mountpoint: str
    checkpoint: Optional[str]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> "ForkResult":
        return cls(str(d.get("session", "")), str(d.get("mountpoint", "")), _s(d.get("checkpoint")), d)


@dataclass(frozen=True)
class CheckoutResult:
    checkpoint: Checkpoint
    branch: Optional[str]
    detached: bool
    op: Optional[int]
    saved: Optional[Saved]
    #: Things to know (e.g. why HEAD was not attached to the branch).
    notes: List[str]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> "CheckoutResult":
        return cls(
            Checkpoint.from_json(d.get("checkpoint") or {}),
            _s(d.get("branch")),
            bool(d.get("detached", False)),
            d.get("op"),
            Saved.from_json(d.get("saved")),
            [str(n) for n in d.get("notes") or []],
            d,
        )


@dataclass(frozen=True)
class RestoreResult:
    dry_run: bool
    changes: List[Change]
    saved: Optional[Saved]
    op: Optional[int]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> "RestoreResult":
        return cls(bool(d.get("dry_run")), _changes(d.get("changes")), Saved.from_json(d.get("saved")), d.get("op"), d)


@dataclass(frozen=True)
class MergeConflict:
    """One conflicted path of a ``merge``, ``cherry_pick`` or ``rebase`` (the
    protocol's ``Conflict``; named apart from the :class:`treefork.Conflict` error)."""

    path: str
    #: ``content`` or ``add_add`` (markers in the file), ``binary``,
    #: ``modify_delete``, ``delete_modify``, ``kind`` or ``mode``.
    kind: str
    #: Where theirs' version was written beside ours (``PATH~theirs``), if it was.
    theirs_at: Optional[str]
    #: What each side did, in words.
    detail: str
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> "MergeConflict":
        return cls(str(d.get("path", "")), str(d.get("kind", "")), _s(d.get("theirs_at")), str(d.get("detail", "")), d)


@dataclass(frozen=True)
class MergeResult:
    """A ``merge``, ``cherry_pick`` or ``rebase`` (or its ``continue``/``abort``)."""

    #: ``merge``, ``cherry-pick`` or ``rebase``.
    op: str
    #: ``merged``, ``merge_conflict``, ``up_to_date``, ``planned`` or ``aborted``.
    status: str
    #: What was brought in, as named (a rebase: the commit it went onto).
    theirs: str
    #: The merge base: a checkpoint id, or (rebase) the old baseline commit.
    base: Optional[str]
    #: The paths the workspace changed at (or would, on a dry run).
    changes: List[Change]
    #: The conflicts, by path (empty when clean).
    conflicts: List[MergeConflict]
    #: The checkpoint taken (status ``merged``).
    checkpoint: Optional[str]
    saved: Optional[Saved]
    #: The operation recorded.
    record: Optional[int]
    #: What to do next, in words.
    next: Optional[str]
    raw: Json = field(repr=False, compare=False)

    @property
    def conflicted(self) -> bool:
        """Stopped on conflicts: resolve them, then ``*_continue()`` (or ``*_abort()``)."""
        return self.status == "merge_conflict"

    @classmethod
    def from_json(cls, d: Json) -> "MergeResult":
        return cls(
            str(d.get("op", "")),
            str(d.get("status", "")),
            str(d.get("theirs", "")),
            _s(d.get("base")),
            _changes(d.get("changes")),
            [MergeConflict.from_json(c) for c in d.get("conflicts") or [] if isinstance(c, dict)],
            _s(d.get("checkpoint")),
            Saved.from_json(d.get("saved")),
            d.get("record"),
            _s(d.get("next")),
            d,
        )


@dataclass(frozen=True)
class UndoResult:
    """An ``undo``, ``redo`` or ``op_restore``: the operation it appended."""

    op: int
    of: Optional[int]
    summary: str
    head: Optional[str]
    branch: Optional[str]
    saved: Optional[Saved]
    notes: List[str]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> "UndoResult":
        return cls(
            int(d.get("op") or 0),
            d.get("of"),
            str(d.get("summary", "")),
            _s(d.get("head")),
            _s(d.get("branch")),
            Saved.from_json(d.get("saved")),
            [str(n) for n in d.get("notes") or []],
            d,
        )


@dataclass(frozen=True)
class Operation:
    """One record of the session's operation log."""

    seq: int
    parent: Optional[int]
    time: int
    time_ns: str
    kind: str
    actor: Json
    request: Any
    explanation: Optional[str]
    before: Json
    after: Json
    undoes: Optional[int]
    redoes: Optional[int]
    inert: bool
    meta: Json
    summary: str
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> "Operation":
        return cls(
            int(d.get("seq") or 0),
            d.get("parent"),
            int(d.get("time") or 0),
            str(d.get("time_ns", "")),
            str(d.get("kind", "")),
            dict(d.get("actor") or {}),
            d.get("request"),
            _s(d.get("explanation")),
            dict(d.get("before") or {}),
            dict(d.get("after") or {}),
            d.get("undoes"),
            d.get("redoes"),
            bool(d.get("inert", False)),
            dict(d.get("meta") or {}),
            str(d.get("summary", "")),
            d,
        )


@dataclass(frozen=True)
class ExecResult:
    """A command run and recorded by :meth:`Session.exec`."""

    #: The exec number (per session, from 1).
    exec: int
    #: The operation's number in the session's log.
    seq: Optional[int]
    exit_code: Optional[int]
    signal: Optional[int]
    #: Why the command could not run.
    error: Optional[str]
    timed_out: bool
    duration_ms: int
    #: Captured output, at most the capture limit of each stream.
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    #: The checkpoint before, and the one after (``None`` when nothing changed).
    before: Optional[str]
    checkpoint: Optional[str]
    changed: List[Change]
    #: The daemon's whole ``meta.exec`` record.
    record: Json = field(repr=False, compare=False)
    #: The program was not found.
    not_found: bool = False

    @property
    def status(self) -> int:
        """A shell's status: the exit code, 128 + N for signal N, 127 when the
        program was not found, 126 for other failures to run."""
        if self.exit_code is not None:
            return self.exit_code
        if self.signal is not None:
            return 128 + self.signal
        return 127 if self.not_found else 126

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True)
class RunSpec:
    """One run of an experiment: a command (argv list, or a string for ``sh -c``)."""

    command: Any
    label: str = ""
    env: Dict[str, str] = field(default_factory=dict)

    def to_json(self) -> Json:
        return {"label": self.label, "command": self.command, "env": dict(self.env)}


@dataclass(frozen=True)
class RunOutcome:
    """One run as the daemon recorded it in an experiment's comparison."""

    run: int
    label: str
    exit: Optional[int]
    signal: Optional[int]
    error: Optional[str]
    timed_out: bool
    duration_ms: int
    stdout: str
    stderr: str
    score: Optional[float]
    fork: Optional[str]
    checkpoint: Optional[str]
    files_changed: Optional[int]
    #: What it ran: an argument list, or a string for ``sh -c``.
    command: Any
    #: The environment variables set for it.
    env: Dict[str, str]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> "RunOutcome":
        ck = d.get("checkpoint")
        if isinstance(ck, dict):
            ck = ck.get("id")
        return cls(
            int(d.get("run") or 0),
            str(d.get("label", "")),
            d.get("exit"),
            d.get("signal"),
            _s(d.get("error")),
            bool(d.get("timed_out", False)),
            int(d.get("duration_ms") or 0),
            str(d.get("stdout", "")),
            str(d.get("stderr", "")),
            d.get("score"),
            _s(d.get("fork")),
            _s(ck),
            d.get("files_changed"),
            d.get("command"),
            {str(k): str(v) for k, v in (d.get("env") or {}).items()},
            d,
        )


@dataclass(frozen=True)
class Comparison:
    """A recorded experiment: every run, the ranking and the winner."""

    id: str
    base: Optional[str]
    rank_by: str
    runs: List[RunOutcome]
    ranking: List[int]
    #: The best-ranked run that exited 0 (``None`` when no run did).
    winner: Optional[int]
    aborted: bool
    op: Optional[int]
    #: Which rule decided the winner, in words (``None`` without a winner).
    decided_by: Optional[str]
    #: The session it ran from.
    source: str
    #: The caller's directory relative to the workspace root (``None``: the root).
    cwd: Optional[str]
    #: Whether every fork was left mounted.
    keep: bool
    #: ``{"runs", "min_duration_ms", "max_duration_ms", "mean_duration_ms", "success_rate"}``.
    stats: Json
    #: Each pair of runs compared: ``{"a", "b", "files", "files_truncated",
    #: "exit_code_diff", "stdout_diff", "stderr_diff"}``.
    pairs: List[Json]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> "Comparison":
        return cls(
            str(d.get("id", "")),
            _s(d.get("base")),
            str(d.get("rank_by", "")),
            [RunOutcome.from_json(r) for r in d.get("runs") or []],
            [int(r) for r in d.get("ranking") or []],
            d.get("winner"),
            bool(d.get("aborted", False)),
            d.get("op"),
            _s(d.get("decided_by")),
            str(d.get("source", "")),
            _s(d.get("cwd")),
            bool(d.get("keep", False)),
            dict(d.get("stats") or {}),
            list(d.get("pairs") or []),
            d,
        )

    def run(self, n: int) -> RunOutcome:
        """Run number ``n``."""
        for r in self.runs:
            if r.run == n:
                return r
        raise KeyError(n)


@dataclass(frozen=True)
class AdoptResult:
    id: str
    run: int
    checkpoint: Checkpoint
    saved: Optional[Saved]
    op: Optional[int]
    removed: Optional[str]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> "AdoptResult":
        return cls(
            str(d.get("id", "")),
            int(d.get("run") or 0),
            Checkpoint.from_json(d.get("checkpoint") or {}),
            Saved.from_json(d.get("saved")),
            d.get("op"),
            _s(d.get("removed")),
            d,
        )


@dataclass(frozen=True)
class PromoteChange:
    path: str
    change: str
    mode: Optional[str]
    old_mode: Optional[str]
    size: Optional[int]


@dataclass(frozen=True)
class PromoteResult:
    dry_run: bool
    strategy: str
    changes: List[PromoteChange]
    #: ``[{"path", "why"}]``.
    skipped: List[Json]
    unchanged: List[Json]
    target: Json
    sha: Optional[str]
    branch: Optional[str]
    parent: Optional[str]
    worktree_error: Optional[str]
    saved: Optional[str]
    op: Optional[int]
    #: With ``strategy="patch"``: the patch (``git apply`` takes it).
    patch: Optional[bytes]
    #: Touched paths in neither state (temporary files created and removed).
    transient: List[str]
    #: What the session's lifecycle does next (until-promote), in words.
    lifecycle: Optional[str]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> "PromoteResult":
        import base64

        patch: Optional[bytes] = None
        if d.get("patch") is not None:
            patch = str(d["patch"]).encode()
        elif d.get("patch_base64") is not None:
            patch = base64.b64decode(d["patch_base64"])
        return cls(
            bool(d.get("dry_run", False)),
            str(d.get("strategy", "")),
            [
                PromoteChange(str(c.get("path", "")), str(c.get("change", "")), c.get("mode"), c.get("old_mode"), c.get("size"))
                for c in d.get("changes") or []
            ],
            list(d.get("skipped") or []),
            list(d.get("unchanged") or []),
            dict(d.get("target") or {}),
            _s(d.get("sha")),
            _s(d.get("branch")),
            _s(d.get("parent")),
            _s(d.get("worktree_error")),
            _s(d.get("saved")),
            d.get("op"),
            patch,
            [str(t) for t in d.get("transient") or []],
            _s(d.get("lifecycle")),
            d,
        )


@dataclass(frozen=True)
class Message:
    """One message of the session's conversation log."""

    id: str
    seq: int
    time: int
    time_ns: str
    role: str
    content: Any
    tool_calls: Any
    tool_call_id: Optional[str]
    meta: Optional[Json]
    #: The operation number current when it was appended.
    op: Optional[int]
    #: HEAD when it was appended (``None`` before the first checkpoint).
    checkpoint: Optional[str]
    #: The workspace root when it was recorded.
    workspace: Optional[str]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> "Message":
        return cls(
            str(d.get("id", "")),
            int(d.get("seq") or 0),
            int(d.get("time") or 0),
            str(d.get("time_ns", "")),
            str(d.get("role", "")),
            d.get("content"),
            d.get("tool_calls"),
            _s(d.get("tool_call_id")),
            d.get("meta"),
            d.get("op"),
            _s(d.get("checkpoint")),
            _s(d.get("workspace")),
            d,
        )


@dataclass(frozen=True)
class RewindResult:
    """A ``rewind`` to a message: what changed in the files and the conversation."""

    op: Optional[int]
    files: Json
    dropped: int
    #: Whether it only reported what would change.
    dry_run: bool
    #: The message rewound to (its id) and its sequence number.
    message: str
    seq: int
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> "RewindResult":
        conv = d.get("conversation") or {}
        return cls(
            d.get("op"),
            dict(d.get("files") or {}),
            int(conv.get("dropped") or 0),
            bool(d.get("dry_run", False)),
            str(d.get("message", "")),
            int(d.get("seq") or 0),
            d,
        )


@dataclass(frozen=True)
class BisectPoint:
    """A checkpoint as a bisect names it."""

    id: str
    short: str
    message: str
    #: Unix time in seconds.
    time: int

    @classmethod
    def from_json(cls, d: Json) -> "BisectPoint":
        return cls(str(d.get("id", "")), str(d.get("short", "")), str(d.get("message", "")), int(d.get("time") or 0))


@dataclass(frozen=True)
class BisectStep:
    """One candidate tested by a bisect."""

    round: int
    checkpoint: str
    short: str
    message: str
    #: Position among the candidates (0 = the good end).
    index: int
    exit: Optional[int]
    signal: Optional[int]
    timed_out: bool
    #: Anything but exit 0 (a timeout included).
    failed: bool
    duration_ms: int
    fork: str
    kept_at: Optional[str]
    not_removed: Optional[str]

    @classmethod
    def from_json(cls, d: Json) -> "BisectStep":
        return cls(
            int(d.get("round") or 0),
            str(d.get("checkpoint", "")),
            str(d.get("short", "")),
            str(d.get("message", "")),
            int(d.get("index") or 0),
            d.get("exit"),
            d.get("signal"),
            bool(d.get("timed_out", False)),
            bool(d.get("failed", False)),
            int(d.get("duration_ms") or 0),
            str(d.get("fork", "")),
            _s(d.get("kept_at")),
            _s(d.get("not_removed")),
        )


@dataclass(frozen=True)
class Bisected:
    """What a bisect found (the document of ``treefork --json bisect run``)."""

    command: List[str]
    #: The first checkpoint where the command fails (``None``: it passes at bad).
    first_bad: Optional[BisectPoint]
    #: The one right before it, where it passed (``None`` when the first bad is
    #: the good end, or there is none).
    last_good: Optional[BisectPoint]
    good: BisectPoint
    bad: BisectPoint
    candidates: int
    jobs: int
    rounds: int
    wall_ms: int
    steps: List[BisectStep]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> "Bisected":
        def point(v: Any) -> Optional[BisectPoint]:
            return None if v is None else BisectPoint.from_json(v)

        return cls(
            [str(a) for a in d.get("command") or []],
            point(d.get("first_bad")),
            point(d.get("last_good")),
            BisectPoint.from_json(d.get("good") or {}),
            BisectPoint.from_json(d.get("bad") or {}),
            int(d.get("candidates") or 0),
            int(d.get("jobs") or 0),
            int(d.get("rounds") or 0),
            int(d.get("wall_ms") or 0),
            [BisectStep.from_json(s) for s in d.get("steps") or []],
            d,
        )
