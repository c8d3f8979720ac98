"""Exceptions: every refusal of the daemon is a :class:`TreeforkError` carrying
the protocol's error ``code`` (docs/protocol.md, "Error codes"), raised as the
subclass registered for that code (:class:`TreeforkError` itself for a code this
client does not know). Callers decide on the class or the code, never on the
message text.
"""

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Type


class TreeforkError(Exception):
    """A request the daemon refused (or a failure to reach it)."""

    code: str = "error"

    def __init__(self, message: str, code: Optional[str] = None, detail: Optional[Dict[str, Any]] = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        #: Fields of the error object besides ``code`` and ``message``.
        self.detail: Dict[str, Any] = dict(detail or {})

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class TreeforkConnectionError(TreeforkError):
    """The socket could not be reached, or the daemon closed the connection."""

    code = "connection"


class NotMounted(TreeforkError):
    """A path is not inside a mounted treefork workspace (no registered mount)."""

    code = "not_mounted"


class ProtocolError(TreeforkError):
    """The daemon answered something this client cannot read."""

    code = "protocol"


class BadRequest(TreeforkError):
    code = "bad_request"


class UnsupportedVersion(TreeforkError):
    code = "unsupported_version"


class UnknownOp(TreeforkError):
    code = "unknown_op"


class TooLarge(TreeforkError):
    code = "too_large"


class Invalid(TreeforkError):
    code = "invalid"


class NotFound(TreeforkError):
    code = "not_found"


class Conflict(TreeforkError):
    code = "conflict"


class Locked(TreeforkError):
    code = "locked"


class ShuttingDown(TreeforkError):
    code = "shutting_down"


class StoreIOError(TreeforkError):
    code = "io"


class StoreFull(StoreIOError):
    """The disk holding the store is down to its free-space reserve: what needed
    the space was refused, nothing acknowledged was lost. The message names what
    to do (delete files in the workspace, then ``treefork gc``). A subclass of
    ``StoreIOError``, which this error was reported as before."""

    code = "store_full"


class Corrupt(TreeforkError):
    code = "corrupt"


class MissingObject(TreeforkError):
    code = "missing_object"


class ObjectTooLarge(TreeforkError):
    code = "object_too_large"


class MetaError(TreeforkError):
    code = "meta"


class PosixError(TreeforkError):
    code = "posix"


class Forbidden(TreeforkError):
    code = "forbidden"


class RateLimited(TreeforkError):
    code = "rate_limited"


class Busy(TreeforkError):
    code = "busy"


class GoodEndFails(TreeforkError):
    """``Session.bisect``: the command already fails at the good end, so the
    range is wrong (nothing in it can be the first bad one); choose another
    ``good`` (an older checkpoint: ``Session.log``). Nothing is recorded."""

    code = "good_end_fails"


@dataclass(frozen=True)
class ConflictPath:
    """A path that changed in the durable repository since the baseline."""

    path: str
    #: ``committed``, ``staged`` or ``unstaged``.
    how: str


class BaselineConflict(TreeforkError):
    """``promote`` refused: chosen paths drifted in the durable repository."""

    code = "BASELINE_CONFLICT"

    def __init__(self, message: str, code: Optional[str] = None, detail: Optional[Dict[str, Any]] = None):
        super().__init__(message, code, detail)
        self.paths: List[ConflictPath] = [
            ConflictPath(path=str(p.get("path", "")), how=str(p.get("how", "")))
            for p in self.detail.get("paths") or []
            if isinstance(p, dict)
        ]


_BY_CODE: Dict[str, Type[TreeforkError]] = {
    c.code: c
    for c in (
        BadRequest, UnsupportedVersion, UnknownOp, TooLarge, Invalid, NotFound, Conflict,
        Locked, ShuttingDown, StoreIOError, StoreFull, Corrupt, MissingObject, ObjectTooLarge,
        MetaError, PosixError, Forbidden, RateLimited, Busy, BaselineConflict, GoodEndFails,
    )
}


def error_from_response(err: Any) -> TreeforkError:
    """The exception for a response's ``error`` object."""
    if not isinstance(err, dict):
        return ProtocolError(f"malformed error object: {err!r}")
    code = str(err.get("code", "error"))
    message = str(err.get("message", ""))
    detail = {k: v for k, v in err.items() if k not in ("code", "message")}
    return _BY_CODE.get(code, TreeforkError)(message, code, detail)
