"""``Session.bisect``: find the first checkpoint where a command fails, like the
CLI's ``bisect run`` (``src/cli/bisect/``, ``treefork::command::bisect``).

The candidates are the checkpoints on the first-parent chain of ``bad`` (default
HEAD) from ``good`` (default: the oldest) on. Per round of the k-ary search,
``bisect_begin`` makes one fork per candidate (the daemon chooses names and
mountpoints), the command runs here in each (own process group, stdin from
/dev/null, output captured, at the caller's place in the fork,
``TREEFORK_SOCKET`` cleared, ``TREEFORK_BISECT_CHECKPOINT`` set), at most
``jobs`` at once, then ``bisect_end`` removes the round's forks. The final
``bisect_end`` records the result as one ``bisect`` operation. A command that
already fails at the good end raises :class:`GoodEndFails` (nothing recorded,
every fork removed). An exception
(``KeyboardInterrupt``) removes every fork (``abort``) before it propagates.
"""

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import place, runner
from ._base import _Base
from .errors import GoodEndFails
from .types import Bisected, Checkpoint

#: Most checkpoints read along the first-parent chain of ``bad``.
MAX_CANDIDATES = 1_000_000


def _split(lo: int, hi: int, n: int) -> List[int]:
    gap = hi - lo
    n = min(n, max(gap - 1, 0))
    return [lo + i * gap // (n + 1) for i in range(1, n + 1)]


def _narrow(lo: int, hi: int, points: List[int], fails: List[bool]) -> Tuple[int, int]:
    inner = [(p, f) for p, f in zip(points, fails) if lo < p < hi]
    new_hi = next((p for p, f in inner if f), hi)
    passed = [p for p, f in inner if not f and p < new_hi]
    return (max(passed) if passed else lo), new_hi


def search(length: int, jobs: int, test: Callable[[List[int]], List[bool]]) -> Tuple[Optional[Tuple[int, Optional[int]]], int]:
    """The k-ary search of ``treefork::command::bisect::search``: ``((first_bad,
    last_good), rounds)``, ``(None, rounds)`` when the command passes at the
    bad end, ``((0, None), 1)`` when it already fails at the good end (a wrong
    range: ``Session.bisect`` raises :class:`GoodEndFails`)."""
    jobs = max(jobs, 1)
    if length == 0:
        return None, 0
    lo, hi = 0, length - 1
    first = [lo] + (_split(lo, hi, max(jobs - 2, 0)) + [hi] if hi > lo else [])
    fails = test(first)
    if not fails[-1]:
        return None, 1
    if fails[0]:
        return (0, None), 1
    lo, hi = _narrow(lo, hi, first, fails)
    rounds = 1
    while hi - lo > 1:
        points = _split(lo, hi, jobs)
        lo, hi = _narrow(lo, hi, points, test(points))
        rounds += 1
    return (hi, lo), rounds


def _point(c: Checkpoint) -> Dict[str, Any]:
    return {"id": c.id, "short": c.short, "message": c.message, "time": c.time}


class _BisectMixin(_Base):
    def bisect(
        self,
        command: Optional[str] = None,
        argv: Optional[Sequence[str]] = None,
        jobs: int = 1,
        good: Optional[str] = None,
        bad: Optional[str] = None,
        timeout: Optional[float] = None,
        cwd: Optional[Union[str, "os.PathLike[str]"]] = None,
        run_at: str = "workspace",
    ) -> Bisected:
        """Find the first checkpoint from ``good`` to ``bad`` where the command
        (``command``: ``sh -c``; or ``argv``) exits non-zero (a timeout counts as
        a failure), ``jobs`` candidates at a time; recorded as one ``bisect``
        operation. The workspace never moves. Each test sees its fork at the
        workspace's own path (``run_at="workspace"``) or at the fork's mountpoint
        (``run_at="fork"``), as :meth:`experiment` does."""
        if (command is None) == (argv is None) or (argv is not None and not list(argv)):
            raise ValueError("give exactly one of command and argv (not empty)")
        if jobs < 1:
            raise ValueError("jobs must be at least 1")
        args: List[str] = ["sh", "-c", command] if command is not None else [str(a) for a in argv or []]
        _, rel = self._place(cwd)  # type: ignore[attr-defined]
        ws = str(self._root()) if place.resolve(run_at) else None  # type: ignore[attr-defined]
        cands = self._candidates(good, bad)
        t0 = time.monotonic()
        state: Dict[str, Any] = {"id": None, "round": 0, "steps": []}

        def test(points: List[int]) -> List[bool]:
            state["round"] += 1
            return self._bisect_round(state, args, cands, points, rel, timeout, jobs, ws)

        try:
            found, rounds = search(len(cands), jobs, test)
        except BaseException:
            if state["id"] is not None:
                self._call("bisect_end", id=state["id"], abort=True)
            raise
        first_bad, last_good = found if found else (None, None)
        if first_bad is not None and last_good is None:
            if state["id"] is not None:
                self._call("bisect_end", id=state["id"], abort=True)
            g = cands[0]
            raise GoodEndFails(
                f"the command already fails at the good end {g['short']} ({g['message']}): "
                "the range is wrong, nothing in it can be the first bad one; give good a "
                "checkpoint where the command passes (an older one: see `treefork log`, then good=REF)"
            )
        doc: Dict[str, Any] = {
            "command": args,
            "first_bad": None if first_bad is None else cands[first_bad],
            "last_good": None if last_good is None else cands[last_good],
            "good": cands[0],
            "bad": cands[-1],
            "candidates": len(cands),
            "jobs": jobs,
            "rounds": rounds,
            "wall_ms": int((time.monotonic() - t0) * 1000),
            "steps": state["steps"],
        }
        if state["id"] is not None:
            self._call("bisect_end", id=state["id"], result=doc)
        return Bisected.from_json(doc)

    def _candidates(self, good: Optional[str], bad: Optional[str]) -> List[Dict[str, Any]]:
        chain = self.log(limit=MAX_CANDIDATES, from_=bad)  # type: ignore[attr-defined]
        if not chain:
            raise ValueError(f"{bad or 'HEAD'} names no checkpoint: the session has none yet")
        if good is not None:
            g = self.log(limit=1, from_=good)  # type: ignore[attr-defined]
            at = next((i for i, c in enumerate(chain) if g and c.id == g[0].id), None)
            if at is None:
                raise ValueError(f"good {good} is not on the first-parent chain of bad {bad or 'HEAD'}")
            chain = chain[: at + 1]
        return [_point(c) for c in reversed(chain)]

    def _bisect_round(
        self,
        state: Dict[str, Any],
        argv: List[str],
        cands: List[Dict[str, Any]],
        points: List[int],
        rel: str,
        timeout: Optional[float],
        jobs: int,
        workspace: Optional[str],
    ) -> List[bool]:
        begun = self._call(
            "bisect_begin",
            id=state["id"],
            checkpoints=[cands[i]["id"] for i in points],
            numbers=points,
            cwd=rel or None,
        )
        state["id"] = str(begun["id"])
        forks = list(begun.get("forks") or [])

        def one(f: Dict[str, Any]) -> Any:
            mp = Path(f["mountpoint"])
            env = {"TREEFORK_SOCKET": "", "TREEFORK_BISECT_CHECKPOINT": str(f["checkpoint"])}
            at = (str(mp), workspace, rel) if workspace else None
            return runner.run(
                argv, cwd=mp / rel if rel else mp, env=env, timeout=timeout, own_group=True, tag=state["id"], place=at
            )

        with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(forks)))) as pool:
            results = list(pool.map(one, forks))
        end = self._call("bisect_end", id=state["id"], remove=[f["session"] for f in forks])
        errors = {e["fork"]: e["error"] for e in end.get("errors") or []}
        verdicts: List[bool] = []
        for f, r in zip(forks, results):
            c = cands[int(f["n"])]
            if r.error:
                raise RuntimeError(f"{argv[0]} could not start in the fork of {c['short']} ({c['message']}): {r.error}")
            step: Dict[str, Any] = {
                "round": state["round"],
                "checkpoint": c["id"],
                "short": c["short"],
                "message": c["message"],
                "index": int(f["n"]),
                "exit": r.exit_code,
                "timed_out": r.timed_out,
                "failed": r.exit_code != 0 or r.timed_out,
                "duration_ms": r.duration_ms,
                "fork": f["session"],
            }
            if r.signal is not None:
                step["signal"] = r.signal
            if f["session"] in errors:
                step["not_removed"] = errors[f["session"]]
            state["steps"].append(step)
            verdicts.append(step["failed"])
        return verdicts
