"""Session basics against a real daemon and mount: finding the socket, states
and refs, the operation log, errors by code, events."""

import os
from pathlib import Path

import pytest

import treefork
from conftest import Env, write


def test_from_mountpoint_finds_the_session_from_any_path_inside(env: Env, session: treefork.Session) -> None:
    sub = session.mountpoint / "a" / "b"
    sub.mkdir(parents=True)
    with treefork.Session.from_mountpoint(sub) as s2:
        assert s2.name == "s" and s2.role == "user"
        assert s2.mountpoint == env.root / "mnt-s"
        assert s2.ping().session == "s"
    rec = treefork.find_mount(sub)
    assert rec.session == "s" and rec.store == env.store.resolve()
    with treefork.Session.from_socket(rec.socket) as s3:
        assert s3.name == "s"
    with pytest.raises(treefork.NotMounted):
        treefork.Session.from_mountpoint(env.root)


def test_the_constructor_takes_a_mountpoint_or_a_socket_path(env: Env, session: treefork.Session) -> None:
    with treefork.Session(session.mountpoint) as s2:
        assert s2.name == "s" and s2.ping().session == "s"
    with treefork.Session(str(treefork.find_mount(session.mountpoint).socket)) as s3:
        assert s3.name == "s"
    with pytest.raises(treefork.NotMounted, match="not inside a mounted treefork workspace"):
        treefork.Session(env.root)
    with pytest.raises(treefork.NotMounted, match="no such socket or mountpoint"):
        treefork.Session(env.root / "missing")
    with pytest.raises(TypeError, match="a mountpoint or a socket path, not int"):
        treefork.Session(42)  # type: ignore[arg-type]


def test_checkpoint_log_status_diff_show(session: treefork.Session) -> None:
    mp = session.mountpoint
    write(mp / "a.txt", "one\n")
    st = session.status()
    assert st.head is None and [(c.path, c.change) for c in st.changes] == [("a.txt", "added")]
    c1 = session.checkpoint("first", meta={"step": 1}, explanation="start")
    assert c1.message == "first" and c1.meta == {"step": 1} and c1.trigger == "manual" and len(c1.id) == 64
    assert session.status().changes == [] and session.status().head == c1.id
    write(mp / "a.txt", "one\ntwo\n")
    d = session.diff(mode="stat")
    assert [(e.path, e.change, e.added, e.removed) for e in d.entries] == [("a.txt", "modified", 1, 0)]
    p = session.diff(mode="patch")
    assert p.patch is not None and "+two" in p.patch
    # .gitignore is followed (ignored=True lists and marks), and diff takes paths.
    write(mp / ".gitignore", "*.log\n")
    write(mp / "x.log", "noise\n")
    write(mp / "b.txt", "b\n")
    assert [c.path for c in session.status().changes] == [".gitignore", "a.txt", "b.txt"]
    st = session.status(ignored=True)
    assert [(c.path, c.ignored) for c in st.changes if c.path.endswith(".log")] == [("x.log", True)]
    assert [e.path for e in session.diff(paths=["b.txt"]).entries] == ["b.txt"]
    assert [(e.path, e.ignored) for e in session.diff(paths=["x.log"], ignored=True).entries] == [("x.log", True)]
    for f in (".gitignore", "x.log", "b.txt"):
        (mp / f).unlink()
    c2 = session.checkpoint("second", trigger="milestone")
    assert c2.parent == c1.id and c2.parents == [c1.id]
    assert [c.id for c in session.log()] == [c2.id, c1.id]
    assert [c.id for c in session.log(limit=1, from_="HEAD~1")] == [c1.id]
    shown = session.show("HEAD")
    assert shown.checkpoint.id == c2.id and [(c.path, c.change) for c in shown.changes or []] == [("a.txt", "modified")]
    assert session.op_log(limit=2)[-1].explanation == "start"


def test_show_file_reads_stored_bytes_and_checks_their_blake3(session: treefork.Session) -> None:
    # 5,000 bytes span five BLAKE3 chunks: the pure-Python hash must agree with the daemon's.
    data = bytes(range(251)) * 20
    (session.mountpoint / "bin").write_bytes(data[:5000])
    (session.mountpoint / "d").mkdir()
    c = session.checkpoint("bytes")
    (session.mountpoint / "bin").write_bytes(b"changed")
    f = session.show_file(c.id, "bin", verify=True)
    assert f.kind == "file" and f.data == data[:5000] and f.size == 5000
    assert f.blake3 == treefork._blake3.blake3_hex(data[:5000])
    d = session.show_file("HEAD", "")
    assert d.kind == "dir" and sorted(e.name for e in d.entries or []) == ["bin", "d"]
    with pytest.raises(treefork.NotFound) as e:
        session.show_file("HEAD", "missing")
    assert e.value.code == "not_found"


def test_branch_checkout_restore_undo_redo(session: treefork.Session) -> None:
    mp = session.mountpoint
    write(mp / "f", "base\n")
    base = session.checkpoint("base")
    b = session.branch("try-1")
    assert b.name == "try-1" and b.checkpoint == base.id
    assert [x.name for x in session.branches()] == ["try-1"]
    co = session.checkout("try-1")
    assert co.branch == "try-1" and not co.detached and co.saved is None and co.op
    assert [(x.name, x.current) for x in session.branches()] == [("try-1", True)]
    write(mp / "f", "edited\n")
    dry = session.restore("HEAD", dry_run=True)
    assert dry.dry_run and [(c.path, c.change) for c in dry.changes] == [("f", "modified")]
    assert (mp / "f").read_text() == "edited\n"
    r = session.restore("HEAD", paths=["f"])
    assert (mp / "f").read_text() == "base\n" and r.saved is not None and r.saved.ref.startswith("auto/")
    # Branch names are the session's own: the automatic ref is listed only when
    # asked for, by the name the answer gave, owned by the session.
    assert r.saved.ref not in [x.name for x in session.branches()]
    saved = [x for x in session.branches(auto=True) if x.name == r.saved.ref]
    assert len(saved) == 1 and saved[0].owner == session.name, saved
    last = session.op_log(limit=1)[0]
    assert last.kind == "restore" and last.seq == r.op
    u = session.undo(if_last=last.seq)
    assert u.of == last.seq and (mp / "f").read_text() == "edited\n"
    red = session.redo()
    assert red.op > u.op and (mp / "f").read_text() == "base\n"
    with pytest.raises(treefork.Conflict):
        session.undo(if_last=last.seq)  # another operation came after it


def test_errors_carry_their_protocol_code(session: treefork.Session) -> None:
    session.checkpoint("x")
    session.branch("b")
    with pytest.raises(treefork.Conflict) as e:
        session.branch("b")
    assert e.value.code == "conflict" and isinstance(e.value, treefork.TreeforkError)
    with pytest.raises(treefork.Invalid):
        session.checkpoint("reserved trigger", trigger="exec")
    with pytest.raises(treefork.NotFound):
        session.checkout("no-such-ref")
    with pytest.raises(treefork.UnknownOp):
        session.call("no_such_op")
    # The connection stays usable after refusals.
    assert session.status().head is not None


def test_events_go_to_the_callback(session: treefork.Session) -> None:
    write(session.mountpoint / "a", "1\n")
    write(session.mountpoint / "b", "2\n")
    seen = []
    r = session.call("diff", mode="patch", stream=True, on_event=seen.append)
    assert r["patch"] is None
    assert [ev["path"] for ev in seen if ev["event"] == "patch"] == ["a", "b"]
    # Without a callback, events are skipped and the response still comes.
    assert session.call("diff", mode="patch", stream=True)["patch"] is None


def test_fork_mounts_an_independent_session(env: Env, session: treefork.Session) -> None:
    write(session.mountpoint / "f", "parent\n")
    mp = env.root / "fork-mnt"
    fk = session.fork("child", mp)
    env.track(mp)
    assert fk.session == "child" and Path(fk.mountpoint) == mp and fk.checkpoint
    with fk.open() as child:
        assert child.name == "child"
        assert (mp / "f").read_text() == "parent\n"
        write(mp / "f", "child\n")
        assert (session.mountpoint / "f").read_text() == "parent\n"
        assert [c.path for c in child.status().changes] == ["f"]


def test_agent_socket_serves_the_agent_role(env: Env, tmp_path: Path) -> None:
    sock = tmp_path / "agent.sock"
    user = env.mount("s", None, "--agent-socket", str(sock))
    agent = treefork.Session.from_socket(sock)
    try:
        assert agent.role == "agent" and agent.name == "s" and agent.mountpoint == user.mountpoint
        write(agent.mountpoint / "x", "1\n")
        assert agent.checkpoint("by agent").message == "by agent"
        with pytest.raises(treefork.Forbidden):
            agent.promote(dry_run=True)
        with pytest.raises(treefork.Forbidden):
            agent.call("branch_delete", name="whatever")
    finally:
        agent.close()
