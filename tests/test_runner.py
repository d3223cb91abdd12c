"""`sentinel run JOB`: exit codes, history, timeouts, and the lock between processes."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from sentinel.store import Store
from tests.conftest import run_sentinel
from tests.ops_fixtures import feed_fifo, start_sentinel, wait_for, write_job


def history(db: Path) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    with Store.open(db, read_only=True) as store:
        runs = store.query("SELECT * FROM job_runs ORDER BY started_at")
        steps = store.query("SELECT * FROM job_steps ORDER BY run_id, step_index")
    return runs, steps


def test_ok_partial_and_failed_runs(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    jobs = tmp_path / "jobs"
    write_job(jobs, "fine", [{"run": "config check"}, {"run": "sql 'SELECT 1'"}])
    write_job(
        jobs,
        "degraded",
        [{"run": "sql 'SELECT * FROM nope'", "on_failure": "continue"}, {"run": "config check"}],
    )
    write_job(
        jobs,
        "broken",
        [{"run": "sql 'SELECT * FROM nope'"}, {"run": "config check"}, {"run": "sql 'SELECT 2'"}],
    )
    db = str(tmp_path / "s.duckdb")
    codes = {}
    for name in ("fine", "degraded", "broken"):
        result = cli("--db", db, "run", name, "--jobs-dir", str(jobs), "--json")
        codes[name] = result.exit_code
        report = json.loads(result.stdout)
        assert report["job"] == name
    assert codes == {"fine": 0, "degraded": 3, "broken": 1}
    assert report["outcome"] == "failed"
    assert report["skipped"] == ["config check", "sql 'SELECT 2'"]
    assert [s["outcome"] for s in report["steps"]] == ["failed"]
    runs, steps = history(Path(db))
    assert [(r["job"], r["outcome"], r["exit_code"]) for r in runs] == [
        ("fine", "ok", 0),
        ("degraded", "partial", 3),
        ("broken", "failed", 1),
    ]
    assert len(steps) == 2 + 2 + 1
    assert report["last_success_at"] is None  # "broken" never succeeded


def test_step_output_goes_to_stderr_so_stdout_stays_the_report(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    write_job(tmp_path / "jobs", "q", [{"run": "sql 'SELECT 4242 AS marker' --json"}])
    result = cli(
        "--db",
        str(tmp_path / "s.duckdb"),
        "run",
        "q",
        "--jobs-dir",
        str(tmp_path / "jobs"),
        "--json",
    )
    assert result.exit_code == 0
    assert json.loads(result.stdout)["outcome"] == "ok"
    assert '"marker": 4242' in result.stderr


def test_a_step_past_its_timeout_is_interrupted_and_the_job_stops(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fifo = tmp_path / "query.fifo"
    os.mkfifo(fifo)  # nobody writes: `sql -f` blocks opening it until the timeout fires
    write_job(
        tmp_path / "jobs",
        "stuck",
        [
            {"run": "config check"},
            {"run": f"sql -f {fifo}", "timeout": "1s"},
            {"run": "config check"},
        ],
    )
    db = tmp_path / "s.duckdb"
    started = time.monotonic()
    result = cli("--db", str(db), "run", "stuck", "--jobs-dir", str(tmp_path / "jobs"), "--json")
    assert time.monotonic() - started < 10
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert [(s["outcome"], s["exit_code"]) for s in report["steps"]] == [
        ("ok", 0),
        ("timeout", 124),
    ]
    assert report["skipped"] == ["config check"]
    assert 0.9 < report["steps"][1]["duration_seconds"] < 5
    runs, steps = history(db)
    assert runs[0]["outcome"] == "failed"
    assert [s["outcome"] for s in steps] == ["ok", "timeout"]


def test_overlapping_runs_never_write_at_once(tmp_path: Path) -> None:
    """A holds the lock (blocked in a step); B gives up with exit 4; C waits and runs after A."""
    jobs = tmp_path / "jobs"
    fifo = tmp_path / "query.fifo"
    os.mkfifo(fifo)
    write_job(jobs, "slow", [{"run": f"sql -f {fifo}", "timeout": "1m"}])
    write_job(jobs, "quick", [{"run": "config check"}])
    common = ["--db", str(tmp_path / "s.duckdb")]
    a = start_sentinel(
        *common, "run", "slow", "--jobs-dir", str(jobs), cwd=tmp_path, log=tmp_path / "a.log"
    )
    try:
        wait_for(lambda: "job.step_started" in (tmp_path / "a.log").read_text())
        b = run_sentinel(
            *common, "run", "quick", "--jobs-dir", str(jobs), "--lock-wait", "0.5", cwd=tmp_path
        )
        assert b.returncode == 4, b.stderr
        assert "another sentinel run holds" in b.stderr
        assert "job slow pid" in b.stderr
        c_result: dict[str, object] = {}

        def run_c() -> None:
            c = run_sentinel(
                *common,
                "run",
                "quick",
                "--jobs-dir",
                str(jobs),
                "--lock-wait",
                "30",
                "--json",
                cwd=tmp_path,
            )
            c_result["code"], c_result["out"] = c.returncode, c.stdout

        waiter = threading.Thread(target=run_c)
        waiter.start()
        time.sleep(1.5)
        assert waiter.is_alive(), "C must still be waiting for the lock"
        feed_fifo(fifo, "SELECT 1 AS released")
        assert a.wait(timeout=30) == 0
        waiter.join(timeout=60)
    finally:
        if a.poll() is None:
            a.kill()
    assert c_result["code"] == 0
    runs, _ = history(tmp_path / "s.duckdb")
    assert [r["job"] for r in runs] == ["slow", "quick"]
    assert runs[1]["started_at"] >= runs[0]["finished_at"]
