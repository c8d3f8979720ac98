"""``Session.bisect``: find the first checkpoint where a command fails, like the
CLI's ``bisect run`` (``src/cli/bisect/``, ``treefork::command::bisect``).

The search is the daemon's (``ops::bisect``): ``bisect_begin`` with ``search``
finds the candidates (the checkpoints on the first-parent chain of ``bad``,
default HEAD, from ``good``, default the oldest, on) and makes the first
round's forks; this client only runs the command in each fork it is given (own
process group, stdin from /dev/null, output captured, at the caller's place in
the fork, ``TREEFORK_SOCKET`` cleared, ``TREEFORK_BISECT_CHECKPOINT`` set), at
most ``jobs`` at once, and reports what each did with ``bisect_step``, which
removes those forks and answers the next round or the end. The final
``bisect_end`` records the daemon's result as one ``bisect`` operation. A
command that already fails at the good end raises :class:`GoodEndFails`
(nothing recorded, every fork removed). An exception (``KeyboardInterrupt``)
removes every fork (``abort``) before it propagates.
"""

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import place, runner
from ._base import _Base
from .errors import GoodEndFails, Invalid, ProtocolError
from .types import Bisected


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
    """A model of the daemon's k-ary search (``treefork::ops::bisect::search``),
    checked against brute force by the tests; :meth:`Session.bisect` does not use
    it (the daemon decides). ``((first_bad, last_good), rounds)``, ``(None,
    rounds)`` when the command passes at the bad end, ``((0, None), 1)`` when it
    already fails at the good end."""
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
        spec = {"good": good, "bad": bad, "jobs": jobs, "command": args, "keep": False}
        try:
            begun = self._call("bisect_begin", cwd=rel or None, search=spec)
        except Invalid as e:
            # A range that is no range (good not behind bad, no checkpoint).
            raise ValueError(e.message) from e
        at: Dict[str, Any] = begun["search"]
        bid = str(begun["id"])
        over = False  # the daemon ended the bisect itself (its forks removed)
        try:
            while True:
                nxt = at["next"]
                if nxt["kind"] == "test":
                    results = self._bisect_round(bid, args, nxt["forks"], rel, timeout, jobs, ws)
                    at = self._call("bisect_step", id=bid, results=results)
                elif nxt["kind"] == "found":
                    ended = self._call("bisect_end", id=bid)
                    return Bisected.from_json(ended["result"])
                elif nxt["kind"] == "good_end_fails":
                    over = True
                    g = nxt["good"]
                    raise GoodEndFails(
                        f"the command already fails at the good end {g['short']} ({g['message']}): "
                        "the range is wrong, nothing in it can be the first bad one; give good a "
                        "checkpoint where the command passes (an older one: see `treefork log`, then good=REF)"
                    )
                elif nxt["kind"] == "cannot_start":
                    over = True
                    raise RuntimeError(nxt["message"])
                else:
                    raise ProtocolError(f"bisect_step: unknown next {nxt['kind']!r}")
        except BaseException:
            if not over:
                self._call("bisect_end", id=bid, abort=True)
            raise

    def _bisect_round(
        self,
        bid: str,
        argv: List[str],
        forks: List[Dict[str, Any]],
        rel: str,
        timeout: Optional[float],
        jobs: int,
        workspace: Optional[str],
    ) -> List[Dict[str, Any]]:
        """Run the command in every fork, at most ``jobs`` at once; what each did."""

        def one(f: Dict[str, Any]) -> Any:
            mp = Path(f["mountpoint"])
            env = {"TREEFORK_SOCKET": "", "TREEFORK_BISECT_CHECKPOINT": str(f["checkpoint"])}
            at = (str(mp), workspace, rel) if workspace else None
            return runner.run(
                argv, cwd=mp / rel if rel else mp, env=env, timeout=timeout, own_group=True, tag=bid, place=at
            )

        with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(forks)))) as pool:
            runs = list(pool.map(one, forks))
        results: List[Dict[str, Any]] = []
        for f, r in zip(forks, runs):
            outcome: Dict[str, Any] = {
                "exit": r.exit_code,
                "signal": r.signal,
                "timed_out": r.timed_out,
                "duration_ms": r.duration_ms,
            }
            if r.error:
                outcome["error"] = r.error
            results.append({"candidate": int(f["n"]), "outcome": outcome})
        return results
