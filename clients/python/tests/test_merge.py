"""merge, cherry_pick and rebase against a real daemon and mounts: a clean
merge of a fork, a stop on conflicts (continue while markers remain, then after
fixing them), abort, a cherry-pick, and a rebase onto a moved git branch."""

from pathlib import Path
from typing import Tuple

import pytest

import treefork
from conftest import Env, git, write

BASE = "one\ntwo\nthree\nfour\nfive\n"


def forked(env: Env, session: treefork.Session) -> Tuple[treefork.Session, Path]:
    """``session`` with ``f`` = BASE checkpointed, and a fork ``child`` of it."""
    write(session.mountpoint / "f", BASE)
    session.checkpoint("base")
    mp = env.root / "mnt-child"
    fk = session.fork("child", mp)
    env.track(mp)
    child = fk.open()
    env.sessions.append(child)
    return child, mp


def test_merge_of_a_fork_brings_both_edits_then_is_up_to_date(env: Env, session: treefork.Session) -> None:
    child, cmp = forked(env, session)
    write(cmp / "f", BASE.replace("five", "FIVE"))
    theirs = child.checkpoint("child edits the last line")
    write(session.mountpoint / "f", BASE.replace("one", "ONE"))
    ours = session.checkpoint("parent edits the first line")

    dry = session.merge("child", dry_run=True)
    assert dry.status == "planned" and not dry.conflicted and dry.checkpoint is None
    assert (session.mountpoint / "f").read_text() == BASE.replace("one", "ONE")

    r = session.merge("child", message="bring in child", explanation="merge the fork")
    assert isinstance(r, treefork.MergeResult)
    assert r.op == "merge" and r.status == "merged" and not r.conflicted and r.conflicts == []
    assert r.theirs == "child" and r.base is not None and r.record is not None
    assert [(c.path, c.change) for c in r.changes] == [("f", "modified")]
    assert (session.mountpoint / "f").read_text() == "ONE\ntwo\nthree\nfour\nFIVE\n"
    assert r.checkpoint is not None and session.status().head == r.checkpoint
    head = session.show(r.checkpoint).checkpoint
    assert head.parents == [ours.id, theirs.id] and head.message == "bring in child"
    assert session.op_log(limit=1)[0].seq == r.record

    again = session.merge("child")
    assert again.status == "up_to_date" and again.checkpoint is None and again.changes == []


def test_conflict_stops_continue_waits_for_the_markers_then_merges(env: Env, session: treefork.Session) -> None:
    child, cmp = forked(env, session)
    write(cmp / "f", BASE.replace("three", "child's three"))
    child.checkpoint("child")
    write(session.mountpoint / "f", BASE.replace("three", "parent's three"))
    session.checkpoint("parent")

    r = session.merge("child")
    assert r.conflicted and r.status == "merge_conflict" and r.checkpoint is None and r.next
    assert [(c.path, c.kind) for c in r.conflicts] == [("f", "content")]
    assert isinstance(r.conflicts[0], treefork.MergeConflict) and r.conflicts[0].detail
    text = (session.mountpoint / "f").read_text()
    assert "<<<<<<< ours" in text and "=======" in text and ">>>>>>> theirs" in text
    assert "parent's three" in text and "child's three" in text

    # Starting another while one is stopped is refused; the stop is kept.
    with pytest.raises(treefork.Conflict):
        session.merge("child")

    still = session.merge_continue()
    assert still.conflicted and [c.path for c in still.conflicts] == ["f"]
    assert (session.mountpoint / "f").read_text() == text

    write(session.mountpoint / "f", BASE.replace("three", "both threes"))
    done = session.merge_continue()
    assert done.status == "merged" and not done.conflicted and done.checkpoint
    assert (session.mountpoint / "f").read_text() == BASE.replace("three", "both threes")
    assert len(session.show(done.checkpoint).checkpoint.parents) == 2

    # Nothing stopped now.
    with pytest.raises(treefork.Invalid):
        session.merge_continue()


def test_abort_puts_the_workspace_back_exactly(env: Env, session: treefork.Session) -> None:
    child, cmp = forked(env, session)
    write(cmp / "f", BASE.replace("two", "child"))
    child.checkpoint("child")
    ours_text = BASE.replace("two", "parent")
    write(session.mountpoint / "f", ours_text)
    ours = session.checkpoint("parent")

    assert session.merge("child").conflicted
    assert (session.mountpoint / "f").read_text() != ours_text
    a = session.merge_abort()
    assert a.status == "aborted" and not a.conflicted
    # The conflicted state was saved first.
    assert a.saved is not None and a.saved.ref.startswith("auto/")
    assert (session.mountpoint / "f").read_bytes() == ours_text.encode()
    st = session.status()
    assert st.head == ours.id and st.changes == []
    with pytest.raises(treefork.Invalid):
        session.merge_abort()


def test_cherry_pick_applies_one_fork_checkpoint(env: Env, session: treefork.Session) -> None:
    child, cmp = forked(env, session)
    write(cmp / "f", BASE.replace("one", "ONE"))
    picked = child.checkpoint("first line")
    write(cmp / "g", "not picked\n")
    child.checkpoint("another file")
    write(session.mountpoint / "f", BASE.replace("five", "FIVE"))
    ours = session.checkpoint("parent")

    r = session.cherry_pick(picked.id, explanation="take the first-line fix")
    assert r.op == "cherry-pick" and r.status == "merged" and r.checkpoint
    assert [(c.path, c.change) for c in r.changes] == [("f", "modified")]
    assert (session.mountpoint / "f").read_text() == "ONE\ntwo\nthree\nfour\nFIVE\n"
    assert not (session.mountpoint / "g").exists()
    assert session.show(r.checkpoint).checkpoint.parents == [ours.id]


def test_cherry_pick_conflict_continue_and_abort(env: Env, session: treefork.Session) -> None:
    child, cmp = forked(env, session)
    write(cmp / "f", BASE.replace("four", "child"))
    picked = child.checkpoint("child")
    write(session.mountpoint / "f", BASE.replace("four", "parent"))
    session.checkpoint("parent")

    r = session.cherry_pick(picked.id)
    assert r.op == "cherry-pick" and r.conflicted and r.conflicts[0].kind == "content"
    assert session.cherry_pick_abort().status == "aborted"
    assert (session.mountpoint / "f").read_text() == BASE.replace("four", "parent")

    assert session.cherry_pick(picked.id).conflicted
    write(session.mountpoint / "f", BASE.replace("four", "resolved"))
    done = session.cherry_pick_continue()
    assert done.op == "cherry-pick" and done.status == "merged" and done.checkpoint


def test_rebase_replays_the_session_onto_the_moved_branch(env: Env, repo: Path) -> None:
    s = env.mount("s", repo)
    write(s.mountpoint / "README", "hello from the session\n")
    s.checkpoint("session edit")
    (repo / "src" / "lib.rs").write_text("fn main() { moved(); }\n")
    git(repo, "commit", "-q", "-am", "upstream moves")
    head = git(repo, "rev-parse", "HEAD")

    dry = s.rebase(dry_run=True)
    assert dry.op == "rebase" and dry.status == "planned"
    assert (s.mountpoint / "src" / "lib.rs").read_text() == "fn main() {}\n"

    r = s.rebase()
    assert r.op == "rebase" and r.status == "merged" and r.checkpoint and r.theirs == head
    assert (s.mountpoint / "src" / "lib.rs").read_text() == "fn main() { moved(); }\n"
    assert (s.mountpoint / "README").read_text() == "hello from the session\n"
    assert s.rebase().status == "up_to_date"
    with pytest.raises(treefork.Invalid):
        s.rebase_continue()


def test_rebase_conflict_abort_then_continue(env: Env, repo: Path) -> None:
    s = env.mount("s", repo)
    write(s.mountpoint / "README", "session\n")
    s.checkpoint("session edit")
    (repo / "README").write_text("upstream\n")
    git(repo, "commit", "-q", "-am", "upstream edit")

    r = s.rebase()
    assert r.op == "rebase" and r.conflicted and [(c.path, c.kind) for c in r.conflicts] == [("README", "content")]
    # A rebase names its sides (git rebase's "ours" would be the repository's).
    text = (s.mountpoint / "README").read_text()
    assert "<<<<<<< session (yours)" in text and ">>>>>>> repository (upstream)" in text
    a = s.rebase_abort()
    assert a.status == "aborted" and (s.mountpoint / "README").read_text() == "session\n"

    assert s.rebase().conflicted
    write(s.mountpoint / "README", "session and upstream\n")
    done = s.rebase_continue()
    assert done.op == "rebase" and done.status == "merged" and done.checkpoint
    assert (s.mountpoint / "README").read_text() == "session and upstream\n"


def test_binary_conflict_keeps_ours_and_writes_theirs_beside(env: Env, session: treefork.Session) -> None:
    (session.mountpoint / "b.bin").write_bytes(b"\0base")
    child, cmp = forked(env, session)
    (cmp / "b.bin").write_bytes(b"\0theirs")
    child.checkpoint("child")
    (session.mountpoint / "b.bin").write_bytes(b"\0ours")
    session.checkpoint("parent")

    r = session.merge("child")
    assert r.conflicted and [(c.path, c.kind, c.theirs_at) for c in r.conflicts] == [("b.bin", "binary", "b.bin~theirs")]
    assert (session.mountpoint / "b.bin").read_bytes() == b"\0ours"
    assert (session.mountpoint / "b.bin~theirs").read_bytes() == b"\0theirs"
    assert session.merge_continue().conflicted  # PATH~theirs is still there
    (session.mountpoint / "b.bin~theirs").unlink()
    assert session.merge_continue().status == "merged"


def test_merge_result_reads_answers_without_optional_fields() -> None:
    r = treefork.MergeResult.from_json(
        {"op": "merge", "status": "merge_conflict", "theirs": "x", "changes": [{"path": "a", "change": "modified"}],
         "conflicts": [{"path": "a", "kind": "content", "detail": "d"}], "future": 1}
    )
    assert r.conflicted and r.base is None and r.checkpoint is None and r.saved is None and r.record is None
    assert r.changes == [treefork.Change("a", "modified")] and r.raw["future"] == 1
    assert r.conflicts == [treefork.MergeConflict("a", "content", None, "d", {})]
    assert not treefork.MergeResult.from_json({"status": "merged"}).conflicted


def test_revert_of_one_exec_keeps_the_later_ones(env: Env, session: treefork.Session) -> None:
    write(session.mountpoint / "f", BASE)
    session.checkpoint("base")
    first = session.exec(["sed", "-i", "s/one/ONE/", "f"])
    session.exec("echo ran > log.txt")
    r = session.revert(f"exec@{first.exec}", explanation="take the edit out")
    assert r.op == "revert" and r.status == "merged" and r.checkpoint, r
    assert (session.mountpoint / "f").read_text() == BASE
    assert (session.mountpoint / "log.txt").read_text() == "ran\n"
