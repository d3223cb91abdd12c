"""`sentinel schedule` as a real process: HTTP endpoints, SIGTERM mid-job, and a real Prometheus."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import httpx
import pytest

from sentinel.store import Store
from tests.ops_fixtures import (
    feed_fifo,
    free_port,
    log_events,
    start_sentinel,
    start_server,
    stop,
    wait_for,
    write_job,
)
from tests.test_metrics import samples, value

PROMETHEUS = shutil.which("prometheus")
TOKEN = "-".join(["sd", "test", "token", "7f3a"])


def write_config(tmp_path: Path) -> None:
    (tmp_path / "sentinel.toml").write_text(
        '[metrics]\njobs_dir = "jobs"\nlock_wait_seconds = 5\n'
        'sd_token = { env = "SENTINEL_TEST_SD_TOKEN" }\n',
        encoding="utf-8",
    )


def test_schedule_serves_http_and_stops_after_the_running_step(tmp_path: Path) -> None:
    write_config(tmp_path)
    fifo = tmp_path / "query.fifo"
    os.mkfifo(fifo)
    write_job(
        tmp_path / "jobs",
        "pipeline",
        [
            {"run": "config check"},
            {"run": f"sql -f {fifo}", "timeout": "1m"},
            {"run": "config check"},
        ],
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "schedule.log"
    proc = start_sentinel(
        "--config", "sentinel.toml", "--db", "s.duckdb", "schedule", "--run-now",
        "--listen", f"127.0.0.1:{port}", cwd=tmp_path, log=log,
        env={"SENTINEL_TEST_SD_TOKEN": TOKEN},
    )  # fmt: skip
    try:
        wait_for(lambda: any("sql -f" in e["step"] for e in log_events(log, "job.step_started")))
        health = httpx.get(f"{url}/healthz").json()
        assert health == {"status": "ok", "jobs": ["pipeline"], "running": "pipeline"}
        scraped = samples(httpx.get(f"{url}/metrics").text)
        assert value(scraped, "sentinel_scheduler_running", sentinel_job="pipeline") == 1
        assert value(scraped, "sentinel_job_period_seconds", sentinel_job="pipeline") == 300
        assert httpx.get(f"{url}/sd").status_code == 401
        wrong = httpx.get(f"{url}/sd", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        sd = httpx.get(f"{url}/sd", headers={"Authorization": f"Bearer {TOKEN}"})
        assert sd.status_code == 200
        assert sd.headers["content-type"].startswith("application/json")
        assert sd.json() == [
            {"targets": [f"127.0.0.1:{port}"], "labels": {"sentinel_role": "scheduler"}}
        ]

        proc.send_signal(signal.SIGTERM)
        wait_for(lambda: log_events(log, "job.stop_requested"))
        assert proc.poll() is None, "the scheduler waits for the running step"
        feed_fifo(fifo, "SELECT 7 AS finished_after_sigterm")
        assert proc.wait(timeout=30) == 0
    finally:
        stop(proc)
    with Store.open(tmp_path / "s.duckdb", read_only=True) as store:
        runs = store.query("SELECT outcome, exit_code FROM job_runs")
        steps = store.query("SELECT command, outcome FROM job_steps ORDER BY step_index")
    assert runs == [{"outcome": "interrupted", "exit_code": 1}]
    assert steps == [
        {"command": "config check", "outcome": "ok"},
        {"command": f"sql -f {fifo}", "outcome": "ok"},
    ]
    assert "finished_after_sigterm" in log.read_text()
    assert [e["event"] for e in log_events(log, "schedule.stopped")] == ["schedule.stopped"]


@pytest.mark.skipif(
    PROMETHEUS is None,
    reason="needs Debian's prometheus package (apt-get install prometheus; .ci/run installs it)",
)
def test_prometheus_discovers_scrapes_and_answers_last_success(tmp_path: Path) -> None:
    write_config(tmp_path)
    write_job(tmp_path / "jobs", "quick", [{"run": "config check"}])
    port, prom_port = free_port(), free_port()
    sched = start_sentinel(
        "--config", "sentinel.toml", "--db", "s.duckdb", "schedule", "--run-now",
        "--listen", f"127.0.0.1:{port}", cwd=tmp_path, log=tmp_path / "schedule.log",
        env={"SENTINEL_TEST_SD_TOKEN": TOKEN},
    )  # fmt: skip
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: sentinel\n"
        "    http_sd_configs:\n"
        f"      - url: http://127.0.0.1:{port}/sd\n"
        "        refresh_interval: 1s\n"
        f"        authorization: {{credentials: {TOKEN}}}\n",
        encoding="utf-8",
    )
    prom_url = f"http://127.0.0.1:{prom_port}"
    prom = start_server(
        [str(PROMETHEUS), f"--config.file={tmp_path / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{prom_port}"],
        prom_url, tmp_path / "prometheus.log",
    )  # fmt: skip
    try:
        query = 'sentinel_job_last_success_timestamp_seconds{sentinel_job="quick"}'

        def answered() -> list[dict[str, object]]:
            body = httpx.get(f"{prom_url}/api/v1/query", params={"query": query}).json()
            return list(body["data"]["result"])

        result = wait_for(answered, timeout=40, every=0.5)
        labels = result[0]["metric"]
        assert labels["job"] == "sentinel"
        assert labels["sentinel_role"] == "scheduler"
        assert labels["instance"] == f"127.0.0.1:{port}"
        scraped = samples(httpx.get(f"http://127.0.0.1:{port}/metrics").text)
        expected = value(scraped, "sentinel_job_last_success_timestamp_seconds")
        assert expected is not None
        assert abs(float(result[0]["value"][1]) - expected) < 0.01
    finally:
        stop(prom)
        stop(sched)


def test_runs_never_overlap_and_misfires_coalesce(tmp_path: Path) -> None:
    """What apscheduler is told: one worker, one instance per job, coalesce, the grace period."""
    from sentinel import logs
    from sentinel.jobs import load_jobs
    from sentinel.scheduler import Scheduler

    logs.configure("info")  # bind logs to this test's stderr (an earlier test's may be closed)

    write_job(tmp_path / "jobs", "a", [{"run": "config check"}], schedule="*/15 * * * *")
    write_job(tmp_path / "jobs", "b", [{"run": "config check"}], schedule="0 6 * * *")
    scheduler = Scheduler(
        load_jobs(tmp_path / "jobs"),
        child_args=[],
        run_args=[],
        db_path=str(tmp_path / "none.duckdb"),
        misfire_grace_seconds=120,
    )
    scheduler.start()
    try:
        scheduled = {job.id: job for job in scheduler._scheduler.get_jobs()}
        assert set(scheduled) == {"a", "b"}
        for job in scheduled.values():
            assert (job.coalesce, job.max_instances, job.misfire_grace_time) == (True, 1, 120)
        assert scheduled["a"].next_run_time.minute % 15 == 0
        assert scheduler._scheduler._executors["default"]._pool._max_workers == 1
    finally:
        scheduler.stop()
    assert scheduler.health()["status"] == "stopping"
