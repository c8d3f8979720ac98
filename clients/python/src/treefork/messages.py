"""The conversation log (issue 15 §1): appending messages tied to the
workspace's state, listing them, rewinding files and conversation together, and
the session's conversation metadata. Requests: docs/protocol.md, "Messages".

``append_message`` returns once the daemon has queued the message (bounded
queue; a full queue makes the call wait); ``flush_messages`` returns once
everything appended before it is durable. A client-chosen ``id`` makes an
append idempotent: :meth:`append_message` always sends one (a fresh UUID unless
given), so a retried request never adds the message twice.
"""

import uuid
from typing import Any, Dict, List, Optional

from ._base import _Base
from .types import Message, RewindResult

ROLES = ("user", "assistant", "tool", "system")


class _MessagesMixin(_Base):
    def append_message(
        self,
        role: str,
        content: Any,
        tool_calls: Any = None,
        tool_call_id: Optional[str] = None,
        meta: Optional[Dict[str, Any]] = None,
        id: Optional[str] = None,
        stream: Optional[str] = None,
    ) -> str:
        """Append a message (``role``: user, assistant, tool or system; ``content``:
        any JSON); ``stream`` is ``messages`` (default) or ``transcript`` (raw SDK
        messages). Returns its id."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}")
        r = self._call(
            "message_append",
            role=role,
            content=content,
            tool_calls=tool_calls,
            tool_call_id=tool_call_id,
            meta=meta,
            id=id or str(uuid.uuid4()),
            stream=stream,
        )
        return str(r["id"])

    def flush_messages(self) -> int:
        """Wait until every message appended before is durable; returns how many are."""
        return int(self._call("message_flush").get("durable") or 0)

    def messages(
        self,
        stream: Optional[str] = None,
        limit: Optional[int] = None,
        upto: Optional[str] = None,
        after: Optional[str] = None,
    ) -> List[Message]:
        """The messages oldest first (the newest ``limit`` when given), up to
        message ``upto`` or after message ``after``. The daemon answers in
        bounded pages (``more`` set when messages were left out); without
        ``limit`` every page is fetched, each after the last id received."""
        out: List[Message] = []
        while True:
            r = self._call("messages", stream=stream, limit=limit, upto=upto, after=after)
            page = [Message.from_json(m) for m in r.get("messages") or []]
            out.extend(page)
            if limit is not None or not r.get("more") or not page:
                return out
            after = page[-1].id

    def rewind(
        self,
        to: Optional[str] = None,
        what: Optional[str] = None,
        dry_run: bool = False,
        explanation: Optional[str] = None,
        prompt: Optional[int] = None,
    ) -> RewindResult:
        """Bring the files back to message ``to``'s workspace and hide the messages
        after it (``what``: ``files``, ``conversation`` or ``both``, the default);
        or, with ``prompt=N`` instead of ``to``, to before the Nth prompt (user
        message), hiding it too. Recorded as an operation: :meth:`undo` brings
        everything back."""
        if (to is None) == (prompt is None):
            raise ValueError("rewind takes a message id (to) or a prompt number (prompt)")
        args: Dict[str, Any] = {"to": to, "prompt": prompt, "what": what}
        if dry_run:
            args["dry_run"] = True
        return RewindResult.from_json(self._call("rewind", None, explanation, **args))

    def update_meta(
        self,
        model: Optional[str] = None,
        add_turns: Optional[int] = None,
        add_cost: Optional[float] = None,
        exit_reason: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Merge into the session's conversation metadata (``meta.conversation``:
        model, turns, cost, exit reason); turns and cost are added."""
        return self._call("session_meta_update", model=model, add_turns=add_turns, add_cost=add_cost, exit_reason=exit_reason)

    def continue_session(self, project: str, name: str, mountpoint: str) -> Dict[str, Any]:
        """Fork the latest session whose durable repository is ``project`` into a
        new session ``name`` mounted at ``mountpoint``, its messages copied (user
        role only)."""
        return self._call("continue", project=project, name=name, mountpoint=mountpoint)
