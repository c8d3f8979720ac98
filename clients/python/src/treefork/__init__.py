"""treefork: a Python client of the treefork control protocol (version 1).

Standard library only. A :class:`Session` talks to one session's control socket
(found from a mountpoint like the CLI does, or given as a path, e.g. an agent
socket from ``$TREEFORK_SOCKET``) and returns dataclasses; refusals raise
:class:`TreeforkError` subclasses carrying the protocol's error code.

    import treefork
    s = treefork.mount("/tmp/ws", session="task-1", from_="/src/repo")
    s.append_message("user", "fix the parser")
    r = s.exec(["make", "test"])
    s.checkpoint("tests pass" if r.ok else "tests fail")
"""

from ._base import PingInfo
from .connection import PROTOCOL_VERSION, Connection
from .errors import (
    BadRequest,
    BaselineConflict,
    GoodEndFails,
    Busy,
    Conflict,
    ConflictPath,
    Corrupt,
    Forbidden,
    Invalid,
    Locked,
    MetaError,
    MissingObject,
    NotFound,
    NotMounted,
    ObjectTooLarge,
    PosixError,
    ProtocolError,
    RateLimited,
    ShuttingDown,
    StoreIOError,
    StoreFull,
    TooLarge,
    TreeforkConnectionError,
    TreeforkError,
    UnknownOp,
    UnsupportedVersion,
)
from .registry import MountRecord, find_mount
from .session import Fork, Session
from .store import mount, umount
from .types import (
    AdoptResult,
    Bisected,
    BisectPoint,
    BisectStep,
    BranchInfo,
    Change,
    Checkpoint,
    CheckoutResult,
    Comparison,
    Diff,
    DirEntry,
    ExecResult,
    FileContent,
    ForkResult,
    MergeConflict,
    MergeResult,
    Message,
    Operation,
    PromoteChange,
    PromoteResult,
    RestoreResult,
    RewindResult,
    RunOutcome,
    RunSpec,
    Saved,
    ShowResult,
    Status,
    UndoResult,
)

__version__ = "0.1.0"

__all__ = [
    "PROTOCOL_VERSION", "Connection", "Session", "Fork", "PingInfo", "MountRecord", "find_mount",
    "mount", "umount",
    "TreeforkError", "TreeforkConnectionError", "NotMounted", "ProtocolError", "BadRequest",
    "UnsupportedVersion", "UnknownOp", "TooLarge", "Invalid", "NotFound", "Conflict", "Locked",
    "ShuttingDown", "StoreIOError", "StoreFull", "Corrupt", "MissingObject", "ObjectTooLarge", "MetaError",
    "PosixError", "Forbidden", "RateLimited", "Busy", "BaselineConflict", "GoodEndFails", "ConflictPath",
    "AdoptResult", "Bisected", "BisectPoint", "BisectStep", "BranchInfo", "Change", "Checkpoint", "CheckoutResult", "Comparison", "Diff",
    "DirEntry", "ExecResult", "FileContent", "ForkResult", "MergeConflict", "MergeResult", "Message", "Operation",
    "PromoteChange", "PromoteResult", "RestoreResult", "RewindResult", "RunOutcome", "RunSpec",
    "Saved", "ShowResult", "Status", "UndoResult",
]
