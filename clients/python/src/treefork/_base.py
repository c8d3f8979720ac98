"""The part of a session client every method group builds on: one
:class:`~treefork.connection.Connection` and what ``ping`` said about the socket."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional

from .connection import Connection, EventCallback
from .errors import NotMounted


@dataclass(frozen=True)
class PingInfo:
    """What ``ping`` answers: the daemon, the socket's role and, on a session or
    agent socket, the session and its mountpoint."""

    pid: int
    store: str
    role: str
    session: Optional[str]
    mountpoint: Optional[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "PingInfo":
        mp = d.get("mountpoint")
        return cls(
            int(d.get("pid") or 0),
            str(d.get("store", "")),
            str(d.get("role", "user")),
            None if d.get("session") is None else str(d["session"]),
            None if mp is None else str(mp),
            d,
        )


class _Base:
    _conn: Connection
    _info: PingInfo
    _on_event: Optional[EventCallback]

    def _call(self, op: str, on_event: Optional[EventCallback] = None, explanation: Optional[str] = None, **args: Any) -> Dict[str, Any]:
        return self._conn.call(op, args, on_event or self._on_event, explanation)

    def _root(self) -> Path:
        if self._info.mountpoint is None:
            raise NotMounted(f"{self._conn.path} is not a session's control socket (ping names no mountpoint)")
        return Path(self._info.mountpoint)
