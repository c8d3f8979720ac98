"""One connection to a control socket: newline-delimited JSON, protocol v1.

A request is one line ``{"v": 1, "op": ..., ...}``; the daemon answers with zero
or more event lines (objects with an ``"event"`` key) and exactly one response
line (``{"ok": true, ...}`` or ``{"ok": false, "error": {...}}``). Requests on one
connection are answered in order, so calls are serialized by a lock: a
:class:`Connection` may be shared between threads, one request at a time.

A request answered ``rate_limited`` did not run; it is sent again after a short
pause (a few times) before the error is raised.
"""

import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Union

from .errors import ProtocolError, RateLimited, TreeforkConnectionError, error_from_response

#: Protocol version spoken by this client.
PROTOCOL_VERSION = 1
#: Largest request line the daemon accepts.
MAX_REQUEST = 1 << 20

#: A callback for event lines (``{"event": "progress", ...}``).
EventCallback = Callable[[Dict[str, Any]], None]

_RATE_RETRIES = 20


class Connection:
    """A connected client of one control socket."""

    def __init__(self, path: "Union[str, os.PathLike[str]]", timeout: Optional[float] = None):
        self.path = Path(path)
        self._lock = threading.Lock()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(str(self.path))
        except OSError as e:
            sock.close()
            raise TreeforkConnectionError(f"cannot connect to control socket {self.path}: {e}") from e
        self._sock: Optional[socket.socket] = sock
        self._file = sock.makefile("rb")

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            if self._sock is not None:
                self._file.close()
                self._sock.close()
                self._sock = None

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def call(
        self,
        op: str,
        args: Optional[Dict[str, Any]] = None,
        on_event: Optional[EventCallback] = None,
        explanation: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Send one request; feed its events to ``on_event`` (else skip them);
        return the response's fields (without ``ok``), or raise the error."""
        req: Dict[str, Any] = {"v": PROTOCOL_VERSION, "op": op}
        for k, v in (args or {}).items():
            if v is not None:
                req[k] = v
        if explanation is not None:
            req["explanation"] = explanation
        line = json.dumps(req, separators=(",", ":")).encode() + b"\n"
        for attempt in range(_RATE_RETRIES + 1):
            try:
                return self._roundtrip(line, on_event)
            except RateLimited:
                if attempt == _RATE_RETRIES:
                    raise
                time.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")

    def _roundtrip(self, line: bytes, on_event: Optional[EventCallback]) -> Dict[str, Any]:
        with self._lock:
            if self._sock is None:
                raise TreeforkConnectionError("the connection is closed")
            try:
                self._sock.sendall(line)
            except OSError as e:
                # A refused connection (forbidden, busy) is answered and closed at
                # once, possibly before the request was written: read that answer.
                resp = self._read_line()
                if resp is None:
                    raise TreeforkConnectionError(f"cannot send to {self.path}: {e}") from e
                return _result(resp)
            while True:
                resp = self._read_line()
                if resp is None:
                    raise TreeforkConnectionError(f"the daemon at {self.path} closed the connection")
                if "event" in resp:
                    if on_event is not None:
                        on_event(resp)
                    continue
                return _result(resp)

    def _read_line(self) -> Optional[Dict[str, Any]]:
        try:
            raw = self._file.readline()
        except OSError as e:
            raise TreeforkConnectionError(f"reading from {self.path}: {e}") from e
        if not raw:
            return None
        try:
            v = json.loads(raw)
        except ValueError as e:
            raise ProtocolError(f"the daemon sent a line that is not JSON: {raw[:200]!r}") from e
        if not isinstance(v, dict):
            raise ProtocolError(f"the daemon sent a line that is not an object: {raw[:200]!r}")
        return v


def _result(resp: Dict[str, Any]) -> Dict[str, Any]:
    if resp.get("ok") is True:
        out = dict(resp)
        del out["ok"]
        return out
    raise error_from_response(resp.get("error"))
