"""``Session.bisect`` on a real session: the first bad checkpoint found with one
job and with three, the forks removed, one ``bisect`` record in the operation
log, the workspace unmoved; the pure search against a brute force."""

import itertools

import pytest

import treefork
from treefork.bisect import search
from conftest import write


def _ten(session: treefork.Session) -> list:
    ids = []
    for i in range(10):
        write(session.mountpoint / "f", ("good" if i < 6 else "bad") + f" {i}\n")
        ids.append(session.checkpoint(f"cp {i}").id)
    return ids


@pytest.mark.parametrize("jobs", [1, 3])
def test_bisect_finds_the_first_bad_checkpoint(session: treefork.Session, jobs: int) -> None:
    ids = _ten(session)
    before = [o.seq for o in session.op_log()]
    head = session.status().head
    r = session.bisect(argv=["grep", "-q", "good", "f"], jobs=jobs, good=ids[0])
    assert isinstance(r, treefork.Bisected)
    assert r.first_bad is not None and r.first_bad.id == ids[6] and r.first_bad.message == "cp 6"
    assert r.last_good is not None and r.last_good.id == ids[5]
    assert r.candidates == 10 and r.jobs == jobs and r.good.id == ids[0] and r.bad.id == ids[9]
    assert r.steps[0].checkpoint == ids[0] and not r.steps[0].failed
    assert all(s.fork.startswith("s-b") for s in r.steps)
    assert r.raw["first_bad"]["id"] == ids[6]
    ops = session.op_log()
    assert len(ops) == len(before) + 1 and ops[0].kind == "bisect"
    assert ops[0].meta["first_bad"]["id"] == ids[6]
    assert session.status().head == head
    forks = session.mountpoint.parent / (session.mountpoint.name + ".bisect")
    assert not forks.exists()


def test_bisect_with_a_shell_command_passing_at_bad(session: treefork.Session) -> None:
    ids = _ten(session)
    r = session.bisect(command="test -f f", good=ids[2], bad=ids[8], jobs=2)
    assert r.first_bad is None and r.last_good is None and r.rounds == 1
    with pytest.raises(ValueError):
        session.bisect()


def test_bisect_whose_good_end_fails_is_refused(session: treefork.Session) -> None:
    ids = _ten(session)
    before = [o.seq for o in session.op_log()]
    with pytest.raises(treefork.GoodEndFails) as e:
        session.bisect(argv=["grep", "-q", "good", "f"], good=ids[7], jobs=2)
    assert "the range is wrong" in str(e.value) and e.value.code == "good_end_fails"
    assert [o.seq for o in session.op_log()] == before
    assert not (session.mountpoint.parent / (session.mountpoint.name + ".bisect")).exists()


def test_search_matches_brute_force() -> None:
    for n in range(1, 9):
        for fails in itertools.product([False, True], repeat=n):
            for jobs in (1, 2, 4):
                found, rounds = search(n, jobs, lambda pts: [fails[i] for i in pts])
                if not fails[-1]:
                    assert found is None
                    continue
                assert found is not None
                bad, good = found
                assert fails[bad]
                assert good is None and bad == 0 or good is not None and good == bad - 1 and not fails[good]


def test_the_dataclasses_match_the_recorded_document() -> None:
    """``Bisected`` and its parts name exactly the fields of the document
    ``bisect_end`` records (its request's ``result``, from the daemon's schema)."""
    import json
    import subprocess

    from conftest import tf_bin
    from test_schemas import at, mismatches

    out = subprocess.run([tf_bin(), "--json", "schema"], capture_output=True, text=True, check=True).stdout
    req = {v["name"]: v for v in json.loads(out)["verbs"]}["bisect_end"]["request"]
    for cls, path in [
        (treefork.Bisected, ("result",)),
        (treefork.BisectStep, ("result", "steps", "[]")),
        (treefork.BisectPoint, ("result", "good")),
    ]:
        schema = at(req, path)
        assert schema is not None, path
        assert mismatches(cls, schema, (), ()) == [], cls


def test_bisect_tests_see_their_fork_at_the_workspace_path(session: treefork.Session) -> None:
    """Issue 39 item 1: a test that only passes at the workspace's own path (as
    Express's did under a dot-directory) gives the same answer in every fork."""
    ids = _ten(session)
    mp = session.mountpoint
    cmd = f'[ "$(pwd -P)" = "{mp}" ] && [ "$PWD" = "{mp}" ] && grep -q good {mp}/f'
    r = session.bisect(command=cmd, good=ids[0], jobs=2)
    assert r.first_bad is not None and r.first_bad.id == ids[6]
    with pytest.raises(treefork.GoodEndFails):
        session.bisect(command=cmd, good=ids[0], jobs=2, run_at="fork")
