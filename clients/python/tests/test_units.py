"""Parts of the client that need no daemon: BLAKE3, the registry lookup, error
mapping, the process runner, and fitting experiment results to the limits."""

import json
import os
import time
from pathlib import Path

import pytest

import treefork
from treefork import _blake3, errors, execution, registry, runner


def test_blake3_known_answers() -> None:
    assert _blake3.blake3_hex(b"") == "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
    assert _blake3.blake3_hex(b"abc") == "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"


def test_registry_lookup_walks_ancestors_and_checks_the_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = tmp_path / "rt"
    (rt / "treefork").mkdir(parents=True, mode=0o700)
    os.chmod(rt / "treefork", 0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(rt))
    mp = tmp_path / "ws"
    (mp / "a").mkdir(parents=True)
    rec = {"mountpoint": str(mp), "store": "/st", "session": "s", "socket": "/x.sock"}
    name = f"m-{_blake3.blake3_hex(str(mp).encode())[:16]}.json"
    (rt / "treefork" / name).write_text(json.dumps(rec))
    found = registry.find_mount(mp / "a")
    assert found.session == "s" and found.socket == Path("/x.sock") and found.mountpoint == mp
    # A record that names another mountpoint does not count.
    (rt / "treefork" / name).write_text(json.dumps({**rec, "mountpoint": "/elsewhere"}))
    with pytest.raises(treefork.NotMounted):
        registry.find_mount(mp / "a")
    # A runtime directory others could write to is refused.
    os.chmod(rt / "treefork", 0o755)
    with pytest.raises(treefork.Forbidden):
        registry.find_mount(mp)


def test_errors_map_codes_to_classes() -> None:
    e = errors.error_from_response({"code": "BASELINE_CONFLICT", "message": "m", "paths": [{"path": "a", "how": "committed"}]})
    assert isinstance(e, treefork.BaselineConflict) and e.paths == [treefork.ConflictPath("a", "committed")]
    assert isinstance(errors.error_from_response({"code": "busy", "message": ""}), treefork.Busy)
    unknown = errors.error_from_response({"code": "brand_new", "message": "x"})
    assert type(unknown) is treefork.TreeforkError and unknown.code == "brand_new"


def test_runner_caps_output_and_times_out_the_whole_group(tmp_path: Path) -> None:
    r = runner.run(["sh", "-c", "head -c 5000 /dev/zero; echo e >&2"], capture_limit=100)
    assert r.exit_code == 0 and len(r.stdout) == 100 and r.stdout_len == 5000 and r.stdout_truncated
    assert r.stderr == b"e\n" and not r.stderr_truncated
    marker = tmp_path / "late"
    t0 = time.monotonic()
    r = runner.run(f"(sleep 2; touch {marker}) & sleep 30", timeout=0.3)
    assert r.timed_out and r.signal is not None and time.monotonic() - t0 < 5
    time.sleep(2.5)
    assert not marker.exists(), "a process the command started outlived the timeout"
    r = runner.run(["/no/such/binary"])
    assert r.not_found and r.error and r.pid is None


def test_runner_does_not_wait_for_background_holders_of_the_pipes() -> None:
    t0 = time.monotonic()
    r = runner.run("sleep 5 & echo started")
    assert r.exit_code == 0 and r.stdout == b"started\n" and time.monotonic() - t0 < 3


def test_fit_keeps_experiment_results_within_the_request_budget() -> None:
    big = "é" * execution.MAX_RESULT_OUTPUT
    rs = [{"run": n, "stdout": big, "stderr": "x" * execution.MAX_RESULT_OUTPUT, "truncated": False} for n in range(1, 33)]
    fitted = execution._fit(rs)
    assert len(json.dumps(fitted).encode()) <= execution.RESULTS_BUDGET
    assert all(r["truncated"] and len(r["stdout"].encode()) <= execution.MAX_RESULT_OUTPUT for r in fitted)
