"""``sentinel schedule``: every job on its cron schedule in one long-running process.

Each due job runs as a child ``sentinel run JOB --no-export --format json`` (the exact code path of
a CronJob, with its lock, timeouts and history); the child's JSON report feeds this process's
metrics. apscheduler provides the rest:

* one worker thread, ``max_instances=1``: runs never overlap, a job is never queued twice;
* ``coalesce=True`` with ``misfire_grace_time``: runs missed while busy or down collapse into one,
  and a run later than the grace period is skipped (the next one comes on schedule);
* on stop (SIGTERM/SIGINT) no new run starts, the running child gets SIGTERM, finishes its current
  step (which commits) and skips the rest; the scheduler waits for it, then exits 0.
"""

from __future__ import annotations

import datetime as dt
import json
import signal
import subprocess
import sys
import threading
from types import FrameType
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from prometheus_client import CollectorRegistry, Counter, Gauge

from sentinel import logs
from sentinel.errors import EXIT_LOCKED, StoreError
from sentinel.httpserver import MetricsServer
from sentinel.jobs import Job
from sentinel.metrics import JOB_LABEL, JobMetrics, StateCollector, from_jsonable
from sentinel.runner import RunReport, StepResult
from sentinel.store import Store

log = logs.get(__name__)


class Scheduler:
    def __init__(
        self,
        jobs: tuple[Job, ...],
        *,
        child_args: list[str],
        run_args: list[str],
        db_path: str,
        misfire_grace_seconds: float,
    ) -> None:
        self.jobs = jobs
        self.child_args = child_args
        self.run_args = run_args
        self.db_path = db_path
        self.registry = CollectorRegistry()
        self.job_metrics = JobMetrics(self.registry)
        self.state = StateCollector()
        self.registry.register(self.state)
        self.runs = Counter(
            "sentinel_scheduler_runs", "Runs started by the scheduler, by outcome.",
            [JOB_LABEL, "outcome"], registry=self.registry,
        )  # fmt: skip
        self.next_run = Gauge(
            "sentinel_scheduler_next_run_timestamp_seconds", "Next scheduled run.",
            [JOB_LABEL], registry=self.registry,
        )  # fmt: skip
        self.running = Gauge(
            "sentinel_scheduler_running", "1 while the job runs.", [JOB_LABEL],
            registry=self.registry,
        )  # fmt: skip
        self.started = Gauge(
            "sentinel_scheduler_start_timestamp_seconds", "When the scheduler started.",
            registry=self.registry,
        )  # fmt: skip
        self._scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(max_workers=1)},
            job_defaults={
                "coalesce": True,
                "max_instances": 1,
                "misfire_grace_time": int(misfire_grace_seconds),
            },
            timezone=dt.UTC,
        )
        self._child: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()
        self._stopping = False
        self.current: str | None = None

    def start(self, *, run_now: bool = False) -> None:
        self.started.set_to_current_time()
        self._restore_last_success()
        now = dt.datetime.now(dt.UTC)
        for job in self.jobs:
            self.job_metrics.period.labels(job.name).set(job.period_seconds())
            self.running.labels(job.name).set(0)
            self._scheduler.add_job(
                self.run_job,
                trigger=job.trigger(),
                args=[job],
                id=job.name,
                name=job.name,
                **({"next_run_time": now} if run_now else {}),
            )
        self._scheduler.start()
        self._update_next_runs()
        log.info("schedule.started", jobs=[job.name for job in self.jobs], run_now=run_now)

    def stop(self) -> None:
        """No new runs; the running child finishes its step; returns when it has exited."""
        with self._lock:
            self._stopping = True
            child = self._child
        log.info("schedule.stopping", running=self.current)
        self._scheduler.pause()
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGTERM)
        self._scheduler.shutdown(wait=True)
        log.info("schedule.stopped")

    def health(self) -> dict[str, Any]:
        return {
            "status": "stopping" if self._stopping else "ok",
            "jobs": [job.name for job in self.jobs],
            "running": self.current,
        }

    def run_job(self, job: Job) -> None:
        argv = [sys.executable, "-m", "sentinel", *self.child_args, "run", job.name]
        argv += [*self.run_args, "--no-export", "--format", "json"]
        with self._lock:
            if self._stopping:
                return
            self._child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)  # noqa: S603
            self.current = job.name
        self.running.labels(job.name).set(1)
        try:
            out, _ = self._child.communicate()
            self._record(job, self._child.returncode, out)
        finally:
            with self._lock:
                self._child, self.current = None, None
            self.running.labels(job.name).set(0)
            if not self._stopping:  # shutdown holds the job store lock: reading it would deadlock
                self._update_next_runs()

    def _record(self, job: Job, code: int, out: str) -> None:
        try:
            data = json.loads(out)
        except ValueError:
            outcome = "locked" if code == EXIT_LOCKED else "error"
            self.runs.labels(job.name, outcome).inc()
            self.job_metrics.last_run_success.labels(job.name).set(0)
            self.job_metrics.last_exit_code.labels(job.name).set(code)
            log.error("schedule.run_failed", job=job.name, exit_code=code, outcome=outcome)
            return
        report = report_from_dict(data)
        self.runs.labels(job.name, report.outcome).inc()
        self.job_metrics.record(report, period_seconds=job.period_seconds(), with_success=True)
        if data.get("state"):
            self.state.samples = from_jsonable(data["state"])

    def _update_next_runs(self) -> None:
        for scheduled in self._scheduler.get_jobs():
            when = getattr(scheduled, "next_run_time", None)
            if when is not None:
                self.next_run.labels(scheduled.id).set(when.timestamp())

    def _restore_last_success(self) -> None:
        """After a restart, last success comes from the run history (when it can be read)."""
        try:
            with Store.open(self.db_path, read_only=True) as store:
                rows = store.query(
                    "SELECT job, epoch(max(finished_at)) AS t FROM job_runs"
                    " WHERE outcome IN ('ok', 'partial') GROUP BY job"
                )
        except StoreError as exc:
            log.info("schedule.no_history", reason=exc.message)
            return
        names = {job.name for job in self.jobs}
        for row in rows:
            if row["job"] in names:
                self.job_metrics.last_success.labels(row["job"]).set(row["t"])


def serve(scheduler: Scheduler, server: MetricsServer, *, run_now: bool) -> None:
    """Serve HTTP and run jobs until SIGTERM/SIGINT; then stop gracefully (see module doc)."""
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, request_stop)
    server.start()
    scheduler.start(run_now=run_now)
    while not stop.wait(1.0):
        pass
    scheduler.stop()
    server.stop()


def report_from_dict(data: dict[str, Any]) -> RunReport:
    """A ``RunReport`` back from ``sentinel run --format json``."""

    def when(value: str | None) -> dt.datetime | None:
        return dt.datetime.fromisoformat(value.rstrip("Z")) if value else None

    steps = [
        StepResult(
            index=s["index"],
            command=s["command"],
            started_at=when(s["started_at"]) or dt.datetime.min,
            finished_at=when(s["finished_at"]) or dt.datetime.min,
            exit_code=s["exit_code"],
            outcome=s["outcome"],
        )
        for s in data["steps"]
    ]
    return RunReport(
        job=data["job"],
        run_id=data["run_id"],
        started_at=when(data["started_at"]) or dt.datetime.min,
        finished_at=when(data["finished_at"]),
        outcome=data["outcome"],
        exit_code=data["exit_code"],
        steps=steps,
        skipped=list(data["skipped"]),
        rows_ingested=data["rows_ingested"],
        files_quarantined=data["files_quarantined"],
        last_success_at=when(data["last_success_at"]),
    )
