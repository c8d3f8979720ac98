"""Commands run by the client and recorded by the daemon (exec, experiment,
adopt), and promote into a real git repository."""

import os
import subprocess
from pathlib import Path

import pytest

import treefork
from conftest import Env, git, write


def test_exec_records_the_command_its_output_and_changes(session: treefork.Session) -> None:
    mp = session.mountpoint
    (mp / "sub").mkdir()
    write(mp / "keep", "k\n")
    r = session.exec("echo out; echo err >&2; echo made > new.txt; pwd; exit 3", cwd="sub", explanation="try it")
    assert r.exit_code == 3 and r.status == 3 and not r.ok
    assert r.stdout == f"out\n{mp / 'sub'}\n".encode() and r.stderr == b"err\n"
    assert [(c.path, c.change) for c in r.changed] == [("sub/new.txt", "added")]
    assert r.before and r.checkpoint and r.checkpoint != r.before
    assert r.record["exit"] == 3 and r.record["cwd"] == "sub" and r.record["n"] == r.exec
    op = session.op_log(limit=1)[0]
    assert op.kind == "exec" and op.seq == r.seq and op.explanation == "try it"
    # The daemon kept the captured output the client sent.
    shown = session.call("history_show", exec=r.exec)
    assert shown["stdout"] and shown["stderr"]
    # Nothing changed: no checkpoint after.
    quiet = session.exec(["true"])
    assert quiet.ok and quiet.checkpoint is None and quiet.changed == []


def test_exec_capture_limit_timeout_and_missing_program(session: treefork.Session) -> None:
    big = session.exec(["sh", "-c", "head -c 100000 /dev/zero"], capture_limit=1000)
    assert len(big.stdout) == 1000 and big.stdout_truncated and big.record["stdout_truncated"]
    slow = session.exec("sleep 30 & sleep 30", timeout=0.5)
    assert slow.timed_out and slow.signal is not None and slow.duration_ms < 10_000
    assert slow.record["timed_out"]
    missing = session.exec(["/no/such/program"])
    assert missing.error and missing.exit_code is None and missing.status == 127
    assert missing.record["error"]


def test_experiment_and_adopt_the_winner(session: treefork.Session) -> None:
    mp = session.mountpoint
    write(mp / "base", "b\n")
    cmp = session.experiment(
        [
            "echo one > result; echo run=$TREEFORK_RUN; exit 1",
            treefork.RunSpec(command="echo two > result; echo $PLAN", label="plan-b", env={"PLAN": "B"}),
        ],
        explanation="compare plans",
    )
    assert cmp.winner == 2 and cmp.ranking[0] == 2 and cmp.op
    assert cmp.run(1).exit == 1 and cmp.run(2).exit == 0 and cmp.run(1).stdout == "run=1\n"
    assert cmp.run(2).label == "plan-b" and cmp.run(2).stdout == "B\n"
    assert not (mp / "result").exists()
    assert session.experiment_show().id == cmp.id
    a = session.adopt(winner=True)
    assert a.run == 2 and a.id == cmp.id
    assert (mp / "result").read_text() == "two\n"
    session.undo()
    assert not (mp / "result").exists()


def test_experiment_ranks_by_score(session: treefork.Session) -> None:
    cmp = session.experiment(["echo 5 > n", "echo 9 > n", "echo 2 > n"], score="cat n")
    assert cmp.rank_by == "score" and cmp.winner == 2
    assert [r.score for r in cmp.runs] == [5.0, 9.0, 2.0]


def test_promote_dry_run_commit_and_baseline_conflict(env: Env, repo: Path) -> None:
    s = env.mount("s", repo)
    head = git(repo, "rev-parse", "HEAD")
    write(s.mountpoint / "src" / "lib.rs", "fn main() { println!(\"hi\"); }\n")
    dry = s.promote(dry_run=True)
    assert dry.dry_run and [(c.path, c.change) for c in dry.changes] == [("src/lib.rs", "modified")]
    assert dry.target.get("ref") == "refs/heads/main" and dry.sha is None
    assert git(repo, "rev-parse", "HEAD") == head  # nothing written
    patch = s.promote(strategy="patch")
    assert patch.patch is not None and b"println" in patch.patch
    done = s.promote(["src/lib.rs"], message="from python")
    assert done.sha and git(repo, "rev-parse", "HEAD") == done.sha
    assert git(repo, "log", "-1", "--format=%s") == "from python"
    assert "println" in git(repo, "show", "HEAD:src/lib.rs")
    # The durable repository changes README behind the session's back.
    (repo / "README").write_text("edited in the repo\n")
    write(s.mountpoint / "README", "edited in the session\n")
    with pytest.raises(treefork.BaselineConflict) as e:
        s.promote(["README"])
    assert e.value.code == "BASELINE_CONFLICT"
    assert [(p.path, p.how) for p in e.value.paths] == [("README", "unstaged")]
    assert (repo / "README").read_text() == "edited in the repo\n"


def test_mount_helper_mounts_from_a_repository(tmp_path: Path, repo: Path) -> None:
    from conftest import tf_bin, umount_retrying

    store, mp = tmp_path / "store2", tmp_path / "ws"
    s = treefork.mount(mp, session="task", from_=repo, store=store, binary=tf_bin(), task="fix the parser")
    try:
        assert s.name == "task" and (mp / "README").read_text() == "hello\n"
        info = s.info()
        assert info["info"]["task"] == "fix the parser" and info["info"]["origin"]["git"] is True
    finally:
        s.close()
        treefork.umount(mp, store=store, binary=tf_bin())
        umount_retrying(store, mp)
    assert not os.path.ismount(mp)


def test_an_interrupted_exec_is_recorded_and_frees_the_session(session: treefork.Session, monkeypatch: pytest.MonkeyPatch) -> None:
    from treefork import runner

    real_run = runner.run

    def interrupted(*a: object, **k: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        session.exec(["true"])
    monkeypatch.setattr(runner, "run", real_run)
    op = session.op_log(limit=1)[0]
    assert op.kind == "exec" and op.meta["exec"]["error"] == "interrupted: KeyboardInterrupt"
    assert session.exec(["true"]).ok  # not refused as busy


def test_an_interrupted_experiment_stops_its_runs_and_removes_its_forks(
    session: treefork.Session, tmp_path: Path
) -> None:
    import signal
    import threading
    import time

    # Ctrl-C (SIGINT to this process) once both runs are going: each run says so
    # in a file outside the workspace (a fixed delay raced a slow begin under load).
    started = [tmp_path / "1", tmp_path / "2"]

    returned = threading.Event()

    def interrupt() -> None:
        deadline = time.monotonic() + 60
        while not all(p.exists() for p in started):
            if returned.is_set() or time.monotonic() > deadline:
                return
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Thread(target=interrupt)
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        cmp = session.experiment([f'touch {tmp_path}/"$TREEFORK_RUN"; sleep 30'] * 2)
        # Not reached unless the runs ended by themselves: say how.
        returned.set()
        pytest.fail(f"the experiment ended before the interrupt: {[(r.exit, r.signal, r.error, r.stderr) for r in cmp.runs]}")
    timer.join()
    assert time.monotonic() - t0 < 60, "the runs were not stopped"
    cmp = session.experiment_show()
    assert cmp.aborted and all(r.signal is not None for r in cmp.runs)
    forks = session.mountpoint.parent / (session.mountpoint.name + ".experiments")
    assert not any(os.path.ismount(p) for p in forks.glob("*")), "a fork is still mounted"


def test_experiment_runs_see_their_fork_at_the_workspace_path(session: treefork.Session) -> None:
    """Issue 39 item 1: a program that checks its own path, or writes through the
    workspace's absolute path, must behave as in the workspace and write its fork."""
    mp = session.mountpoint
    (mp / "sub").mkdir()
    write(mp / "sub" / "f", "base\n")
    cmd = f'pwd; pwd -P; echo "$TREEFORK_RUN" > {mp}/sub/f'
    cmp = session.experiment([cmd, cmd], cwd="sub", score=f"cat {mp}/sub/f")
    for n in (1, 2):
        assert cmp.run(n).stdout == f"{mp / 'sub'}\n{mp / 'sub'}\n", cmp.run(n).stderr
        assert cmp.run(n).score == float(n)
    assert (mp / "sub" / "f").read_text() == "base\n"
    session.adopt(run=2)
    assert (mp / "sub" / "f").read_text() == "2\n"
    # At the fork's mountpoint when asked.
    at_fork = session.experiment(["pwd"], run_at="fork")
    assert at_fork.run(1).stdout.startswith(str(mp.parent / (mp.name + ".experiments")) + "/")
    with pytest.raises(ValueError):
        session.experiment(["true"], run_at="elsewhere")


def test_a_placed_run_leaves_no_process_holding_its_fork(session: treefork.Session) -> None:
    """A background process a run left in its namespace would keep the fork's
    mount alive there: it is killed with the run, and the fork goes away."""
    nap = f"sleep 59.{os.getpid()}"  # a command line no other test runs
    cmp = session.experiment([f"{nap} & echo started"])
    assert cmp.run(1).stdout == "started\n"
    forks = session.mountpoint.parent / (session.mountpoint.name + ".experiments")
    assert not any(os.path.ismount(p) for p in forks.glob("*")), "a fork is still mounted"
    leftover = subprocess.run(["pgrep", "-xf", nap], capture_output=True)
    assert leftover.returncode == 1, leftover.stdout
