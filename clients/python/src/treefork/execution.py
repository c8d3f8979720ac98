"""Commands the client runs and the daemon records, like the CLI's ``exec`` and
``experiment`` (``src/cli/exec.rs``, ``src/cli/experiment/``).

``exec``: ``exec_begin`` (the daemon saves the before state and starts watching
writers), the command run here as this process's child (:mod:`treefork.runner`;
this process becomes a subreaper so what the command leaves behind stays in its
tree), the captured output sent in chunks (``exec_output``), then ``exec_end``.

``experiment``: ``experiment_begin`` (the daemon checkpoints and mounts one fork
per run), the runs in parallel threads (each in its own process group, in its
fork, stdin from /dev/null, ``TREEFORK_EXPERIMENT``/``TREEFORK_RUN`` set and
``TREEFORK_SOCKET`` cleared), an optional score command per run, then
``experiment_end`` with every result (cut to the daemon's limits). An exception
while the runs go (``KeyboardInterrupt``) ends the experiment with ``abort``:
every fork is removed.
"""

import base64
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import place, runner
from ._base import _Base
from .types import AdoptResult, Change, Comparison, ExecResult, RunSpec

#: Most bytes of each stream an exec record keeps: the daemon's own cap,
#: ``treefork::ops::exec::MAX_CAPTURE`` (tests/it/exec.rs holds the two equal).
MAX_CAPTURE_LIMIT = 4 << 20
#: Raw bytes per ``exec_output`` request (well under the 1 MiB request bound).
CHUNK = 512 << 10
#: Most bytes of each stream an experiment result may carry.
MAX_RESULT_OUTPUT = 64 << 10
#: The bytes of results sent with ``experiment_end``.
RESULTS_BUDGET = 900 << 10

Command = Union[str, Sequence[str]]


class _ExecMixin(_Base):
    def _place(self, cwd: Optional[Union[str, "os.PathLike[str]"]]) -> Tuple[Path, str]:
        """The command's directory and its path relative to the workspace root."""
        root = self._root()
        if cwd is None:
            return root, ""
        p = Path(cwd)
        full = p if p.is_absolute() else root / p
        full = Path(os.path.normpath(full))
        try:
            rel = full.relative_to(root)
        except ValueError:
            raise ValueError(f"cwd {cwd} is outside the workspace {root}") from None
        return full, "" if str(rel) == "." else str(rel)

    def exec(
        self,
        command: Command,
        cwd: Optional[Union[str, "os.PathLike[str]"]] = None,
        env: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
        capture_limit: int = runner.DEFAULT_CAPTURE_LIMIT,
        explanation: Optional[str] = None,
    ) -> ExecResult:
        """Run ``command`` (argv list, or a string for ``sh -c``) in the workspace
        (``cwd``: relative to its root, or absolute inside it) and record it: one
        operation of kind ``exec`` with the before/after states and the paths it
        changed. A command that cannot start is a result with ``error``."""
        if not 0 <= capture_limit <= MAX_CAPTURE_LIMIT:
            raise ValueError(f"capture_limit is at most {MAX_CAPTURE_LIMIT} bytes")
        if timeout is not None and not timeout > 0:
            raise ValueError("timeout must be a positive number of seconds")
        argv = ["sh", "-c", command] if isinstance(command, str) else [str(a) for a in command]
        if not argv:
            raise ValueError("empty command")
        here, rel = self._place(cwd)
        runner.become_subreaper()
        begun = self._call("exec_begin", None, explanation, argv=argv, cwd=rel)
        n = int(begun["exec"])
        try:
            r = runner.run(argv, cwd=here, env=env, capture_limit=capture_limit, timeout=timeout, stdin_null=True)
        except BaseException as e:
            # Interrupted: record the exec as ended, so the session's next exec is
            # not refused as busy while this client lives on.
            self._call("exec_end", exec=n, error=f"interrupted: {type(e).__name__}")
            raise
        for stream, data in (("stdout", r.stdout), ("stderr", r.stderr)):
            for i in range(0, len(data), CHUNK):
                chunk = base64.b64encode(data[i : i + CHUNK]).decode()
                self._call("exec_output", exec=n, stream=stream, data=chunk)
        end: Dict[str, Any] = {
            "exec": n,
            "exit_code": r.exit_code,
            "signal": r.signal,
            "error": r.error,
            "pid": r.pid,
            "duration_ms": r.duration_ms,
        }
        for flag in ("stdout_truncated", "stderr_truncated", "timed_out"):
            if getattr(r, flag):
                end[flag] = True
        done = self._call("exec_end", **end)
        rec = dict(done.get("exec") or {})
        return ExecResult(
            exec=n,
            seq=done.get("seq"),
            exit_code=r.exit_code,
            signal=r.signal,
            error=r.error,
            timed_out=r.timed_out,
            duration_ms=r.duration_ms,
            stdout=r.stdout,
            stderr=r.stderr,
            stdout_truncated=r.stdout_truncated,
            stderr_truncated=r.stderr_truncated,
            before=begun.get("before"),
            checkpoint=done.get("checkpoint"),
            changed=[Change.from_json(c) for c in rec.get("changed") or []],
            record=rec,
            not_found=r.not_found,
        )

    def experiment(
        self,
        runs: Sequence[Union[RunSpec, Command]],
        from_: Optional[str] = None,
        rank_by: Optional[str] = None,
        score: Optional[str] = None,
        timeout: Optional[float] = None,
        jobs: Optional[int] = None,
        keep: bool = False,
        cwd: Optional[Union[str, "os.PathLike[str]"]] = None,
        explanation: Optional[str] = None,
        run_at: str = "workspace",
    ) -> Comparison:
        """Try each run in its own fork of the session, at most ``jobs`` at a time
        (default: all at once), rank them (``rank_by``: ``exit``, ``duration``,
        ``output`` or ``score``; ``score`` is a ``sh -c`` command run in each fork
        after its run, whose last printed number is the run's score) and record
        the experiment. Each run sees its fork at the workspace's own path
        (``run_at="workspace"``, a private mount namespace per run) or at the
        fork's mountpoint (``run_at="fork"``). Adopt a run with :meth:`adopt`."""
        at_workspace = place.resolve(run_at)
        specs = [r if isinstance(r, RunSpec) else RunSpec(command=_wire_command(r), label=_label(r)) for r in runs]
        _, rel = self._place(cwd)
        args: Dict[str, Any] = {"runs": [s.to_json() for s in specs], "cwd": rel or None, "from": from_}
        begun = self._call("experiment_begin", None, explanation, **args)
        exp_id = str(begun["id"])
        forks = {int(f["run"]): Path(f["mountpoint"]) for f in begun.get("forks") or []}
        try:
            ws = str(self._root()) if at_workspace else None
            results = self._run_all(exp_id, specs, forks, rel, score, timeout, jobs, ws)
        except _Interrupted as i:
            # Every run was stopped; the daemon records them and removes every fork.
            self._call("experiment_end", id=exp_id, results=_fit(i.results), abort=True)
            raise i.cause from None
        if rank_by is None and score is not None:
            rank_by = "score"
        end = self._call("experiment_end", id=exp_id, results=_fit(results), rank_by=rank_by, keep=keep)
        return Comparison.from_json(end)

    def _run_all(
        self,
        exp_id: str,
        specs: List[RunSpec],
        forks: Dict[int, Path],
        rel: str,
        score: Optional[str],
        timeout: Optional[float],
        jobs: Optional[int],
        workspace: Optional[str],
    ) -> List[Dict[str, Any]]:
        def one(i: int) -> Dict[str, Any]:
            n = i + 1
            spec = specs[i]
            d = forks[n] / rel if rel else forks[n]
            at = (str(forks[n]), workspace, rel) if workspace else None
            env = {"TREEFORK_EXPERIMENT": exp_id, "TREEFORK_RUN": str(n), "TREEFORK_SOCKET": ""}
            env.update(spec.env)
            r = runner.run(spec.command, cwd=d, env=env, timeout=timeout, own_group=True, tag=exp_id, place=at)
            res: Dict[str, Any] = {
                "run": n,
                "exit": r.exit_code,
                "signal": r.signal,
                "error": r.error,
                "timed_out": r.timed_out,
                "duration_ms": r.duration_ms,
                "stdout": r.stdout.decode(errors="replace"),
                "stderr": r.stderr.decode(errors="replace"),
                "stdout_len": r.stdout_len,
                "stderr_len": r.stderr_len,
                "truncated": r.stdout_truncated or r.stderr_truncated,
            }
            if score is not None and r.pid is not None:
                s = runner.run(score, cwd=d, env={"TREEFORK_SOCKET": ""}, timeout=timeout, own_group=True, tag=exp_id, place=at)
                nums = [w for w in s.stdout.decode(errors="replace").split() if _NUM.fullmatch(w)]
                # Kept with the result (capped by the runner, as run output).
                res["score_stdout"] = s.stdout.decode(errors="replace")
                res["score_stderr"] = s.stderr.decode(errors="replace")
                if s.error:
                    res["score_error"] = s.error
                elif nums:
                    res["score"] = float(nums[-1])
                else:
                    res["score_error"] = f"the score command printed no number (exit {s.exit_code})"
            return res

        workers = max(1, min(jobs or len(specs), len(specs)))
        pool = ThreadPoolExecutor(max_workers=workers)
        futures = [pool.submit(one, i) for i in range(len(specs))]
        try:
            return [f.result() for f in futures]
        except BaseException as e:
            for f in futures:
                f.cancel()
            runner.kill_all(exp_id)
            pool.shutdown(wait=True)
            results = []
            for i, f in enumerate(futures):
                if f.cancelled() or f.exception() is not None:
                    results.append({"run": i + 1, "interrupted": True, "error": "not started: the experiment was interrupted"})
                else:
                    results.append({**f.result(), "interrupted": True})
            raise _Interrupted(e, results) from e
        finally:
            pool.shutdown(wait=True)

    def experiment_show(self, id: Optional[str] = None) -> Comparison:
        """A recorded experiment again (default: the newest)."""
        return Comparison.from_json(self._call("experiment_show", id=id))

    def adopt(self, run: Optional[int] = None, winner: bool = False, id: Optional[str] = None, explanation: Optional[str] = None) -> AdoptResult:
        """Bring run ``run`` (or the winner) of experiment ``id`` (default: the
        newest) into the session, pending changes saved first; undoable."""
        if (run is None) == (not winner):
            raise ValueError("give either run or winner=True")
        return AdoptResult.from_json(self._call("experiment_adopt", None, explanation, id=id, run=run, winner=winner))


class _Interrupted(Exception):
    """The runs of an experiment were stopped by ``cause`` (e.g. KeyboardInterrupt)."""

    def __init__(self, cause: BaseException, results: List[Dict[str, Any]]):
        super().__init__(str(cause))
        self.cause = cause
        self.results = results


_NUM = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")


def _wire_command(c: Command) -> Any:
    return c if isinstance(c, str) else [str(a) for a in c]


def _label(c: Command) -> str:
    text = c if isinstance(c, str) else " ".join(str(a) for a in c)
    return text[:60]


def _cut(s: str, cap: int) -> Tuple[str, bool]:
    b = s.encode()
    if len(b) <= cap:
        return s, False
    return b[:cap].decode(errors="ignore"), True


def _fit(results: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Cut captured outputs so every result fits the daemon's limits: at most
    :data:`MAX_RESULT_OUTPUT` bytes a stream, all within :data:`RESULTS_BUDGET`."""
    cap = MAX_RESULT_OUTPUT
    while True:
        for r in results:
            for k in ("stdout", "stderr", "score_stdout", "score_stderr"):
                if k not in r:
                    continue
                r[k], cut = _cut(r[k], cap)
                if cut:
                    r["truncated"] = True
        if len(json.dumps(results).encode()) <= RESULTS_BUDGET or cap == 0:
            return results
        cap //= 2
