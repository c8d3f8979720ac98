"""The conversation log through the client (message protocol of issue 15, as
fixed in the common brief). The daemon side is the MSG package's: these tests
run against a real daemon and mount like the others."""

from pathlib import Path

import pytest

import treefork
from conftest import Env, write



def test_append_flush_list_are_tied_to_the_workspace(session: treefork.Session) -> None:
    write(session.mountpoint / "f", "v1\n")
    c = session.checkpoint("v1")
    m1 = session.append_message("user", {"text": "fix it"}, meta={"turn": 1})
    m2 = session.append_message("assistant", "done", tool_calls=[{"id": "t1", "name": "edit"}])
    assert session.append_message("user", {"text": "fix it"}, id=m1) == m1  # idempotent
    assert session.flush_messages() >= 2
    msgs = session.messages()
    assert [m.id for m in msgs] == [m1, m2]
    assert msgs[0].role == "user" and msgs[0].content == {"text": "fix it"} and msgs[0].meta == {"turn": 1}
    assert msgs[0].checkpoint == c.id and msgs[0].workspace == c.root and msgs[0].seq < msgs[1].seq
    assert msgs[1].tool_calls == [{"id": "t1", "name": "edit"}]
    assert [m.id for m in session.messages(limit=1)] == [m2]
    assert [m.id for m in session.messages(upto=m1)] == [m1]
    assert [m.id for m in session.messages(after=m1)] == [m2]
    session.append_message("system", {"raw": True}, stream="transcript")
    assert len(session.messages(stream="transcript")) == 1 and len(session.messages()) == 2
    with pytest.raises(ValueError):
        session.append_message("robot", "x")


def test_rewind_files_and_conversation_then_undo(session: treefork.Session) -> None:
    mp = session.mountpoint
    write(mp / "f", "before\n")
    session.checkpoint("before")
    first = session.append_message("user", "step 1")
    session.exec("echo after > f")
    session.append_message("assistant", "edited f")
    session.flush_messages()
    dry = session.rewind(first, dry_run=True)
    assert dry.dropped == 1 and (mp / "f").read_text() == "after\n"
    r = session.rewind(first)
    assert r.dropped == 1 and r.op is not None
    assert (mp / "f").read_text() == "before\n"
    assert [m.id for m in session.messages()] == [first]
    session.undo()
    assert (mp / "f").read_text() == "after\n" and len(session.messages()) == 2
    only = session.rewind(first, what="conversation")
    assert only.dropped == 1 and (mp / "f").read_text() == "after\n"
    # Before prompt 1: the prompt is hidden too.
    session.undo()
    before = session.rewind(prompt=1)
    assert before.dropped == 2 and (mp / "f").read_text() == "before\n"
    assert session.messages() == []


def test_fork_from_a_message(env: Env, session: treefork.Session) -> None:
    mp = session.mountpoint
    write(mp / "f", "one\n")
    m1 = session.append_message("user", "one")
    session.exec("echo two > f")
    session.append_message("user", "two")
    session.flush_messages()
    fmp = env.root / "from-msg"
    fk = session.fork("branch-at-1", fmp, from_message=m1)
    env.track(fmp)
    with fk.open() as child:
        assert (fmp / "f").read_text() == "one\n"
        assert [m.id for m in child.messages()] == [m1]
    assert (mp / "f").read_text() == "two\n"


def test_session_meta_update_merges_conversation_metadata(session: treefork.Session) -> None:
    session.update_meta(model="m-1", add_turns=2, add_cost=0.5)
    session.update_meta(add_turns=1, add_cost=0.25, exit_reason="done")
    conv = session.info()["info"]["meta"]["conversation"]
    assert conv == {"model": "m-1", "turns": 3, "cost": 0.75, "exit_reason": "done"}


def test_continue_forks_the_latest_session_of_a_project(env: Env, repo: Path) -> None:
    s = env.mount("first", repo)
    mid = s.append_message("user", "hello")
    s.flush_messages()
    mp = env.root / "continued"
    r = s.continue_session(str(repo), "second", str(mp))
    env.track(mp)
    assert r["session"] == "second"
    with treefork.Session.from_mountpoint(mp) as c:
        assert [m.id for m in c.messages()] == [mid]
