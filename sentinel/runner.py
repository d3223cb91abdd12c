"""Run one job: its steps in order, in this process, one DuckDB writer, under a lock.

Each step is a ``sentinel`` command line run in-process through an ``invoke`` callable (the CLI's
``main``), so a job is exactly what a person would type, step by step. Step exit codes map to
outcomes: 0 ok, 3 partial, anything else failed.

Semantics a platform team can rely on:

* **Lock.** ``JobLock`` is an ``fcntl.flock`` on ``<database>.lock``. A second run waits up to a
  bounded time and then raises ``LockedError`` (exit 4); two runs never write at once.
* **Timeouts.** A step that outlives its timeout is interrupted by ``SIGALRM`` (main thread only)
  raising ``StepTimeout`` inside it. That is the same as a crash at that point, which every stage
  must already survive: ``Store.transaction`` rolls back on any exception, committed work stays,
  and the stage's cursor only moves with its data. The CronJob's ``activeDeadlineSeconds`` is the
  hard backstop for a step stuck inside native code.
* **Stop.** SIGTERM/SIGINT during a run let the running step finish (and commit), then skip the
  rest; the run ends as ``interrupted``.
* **History.** A ``job_runs`` row is written when the run starts and a ``job_steps`` row as each
  step ends, each committed at once, so a killed run leaves what it finished.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from sentinel import logs
from sentinel.errors import EXIT_ERROR, EXIT_OK, EXIT_PARTIAL, LockedError
from sentinel.jobs import Job, Step
from sentinel.store import Store
from sentinel.timeutil import utcnow

log = logs.get(__name__)

Invoke = Callable[[list[str]], int]
SUCCESS_OUTCOMES = ("ok", "partial")


class StepTimeout(BaseException):
    """Raised inside a step that ran past its timeout; a BaseException so that a stage's
    ``except Exception`` cannot swallow it."""


def lock_path(db_path: str) -> Path:
    return Path(f"{db_path}.lock")


class JobLock:
    """An exclusive ``flock`` beside the database, waited for at most ``wait_seconds``."""

    def __init__(self, path: Path, owner: str) -> None:
        self.path = path
        self.owner = owner
        self._file: TextIO | None = None

    @contextlib.contextmanager
    def held(self, wait_seconds: float, poll_seconds: float = 0.2) -> Iterator[JobLock]:
        self.acquire(wait_seconds, poll_seconds)
        try:
            yield self
        finally:
            self.release()

    def acquire(self, wait_seconds: float, poll_seconds: float = 0.2) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+", encoding="utf-8")
        deadline = time.monotonic() + wait_seconds
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = self.path.read_text(encoding="utf-8").strip() or "unknown"
                    handle.close()
                    raise LockedError(
                        f"another sentinel run holds {self.path} ({holder}); "
                        f"gave up after waiting {wait_seconds:g}s",
                        hint="runs of one database never overlap; this one will run next time "
                        "(raise metrics.lock_wait_seconds or --lock-wait to wait longer)",
                    ) from None
                time.sleep(poll_seconds)
        handle.seek(0)
        handle.truncate()
        handle.write(f"{self.owner} since {utcnow().isoformat()}Z\n")
        handle.flush()
        self._file = handle

    def release(self) -> None:
        if self._file is not None:
            self._file.seek(0)
            self._file.truncate()
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None


@dataclass
class StepResult:
    index: int
    command: str
    started_at: dt.datetime
    finished_at: dt.datetime
    exit_code: int
    outcome: str

    @property
    def duration_seconds(self) -> float:
        return (self.finished_at - self.started_at).total_seconds()


@dataclass
class RunReport:
    job: str
    run_id: str
    started_at: dt.datetime
    finished_at: dt.datetime | None = None
    outcome: str = "running"
    exit_code: int = EXIT_OK
    steps: list[StepResult] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    rows_ingested: int = 0
    files_quarantined: int = 0
    last_success_at: dt.datetime | None = None

    @property
    def succeeded(self) -> bool:
        return self.outcome in SUCCESS_OUTCOMES

    @property
    def duration_seconds(self) -> float:
        end = self.finished_at or utcnow()
        return (end - self.started_at).total_seconds()

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["duration_seconds"] = round(self.duration_seconds, 3)
        for step, raw in zip(self.steps, data["steps"], strict=True):
            raw["duration_seconds"] = round(step.duration_seconds, 3)
        return data


class _Stop:
    """Set by SIGTERM/SIGINT: finish the running step, skip the rest."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True
        log.warning("job.stop_requested", signal=signal.Signals(signum).name)


def run_job(job: Job, invoke: Invoke, db_path: str, *, global_args: list[str]) -> RunReport:
    """Run ``job``'s steps in order; the caller holds the lock. Never raises for a step failure."""
    report = RunReport(job=job.name, run_id=uuid.uuid4().hex, started_at=utcnow())
    history = _History(db_path)
    load_before = history.start(report)
    stop = _Stop()
    with _signals(stop):
        stopped_by_failure = False
        for index, step in enumerate(job.steps):
            if stop.requested or stopped_by_failure:
                report.skipped.append(step.run)
                continue
            result = _run_step(index, step, invoke, global_args)
            report.steps.append(result)
            history.step_done(report.run_id, result)
            if result.outcome not in SUCCESS_OUTCOMES and step.on_failure == "stop":
                stopped_by_failure = True
    _conclude(report, job, interrupted=stop.requested and bool(report.skipped))
    history.finish(report, load_before)
    log.info(
        "job.finished",
        job=job.name,
        outcome=report.outcome,
        exit_code=report.exit_code,
        duration_seconds=round(report.duration_seconds, 3),
        skipped=len(report.skipped),
    )
    return report


def _conclude(report: RunReport, job: Job, *, interrupted: bool) -> None:
    report.finished_at = utcnow()
    outcomes = [step.outcome for step in report.steps]
    fatal = any(
        s.outcome not in SUCCESS_OUTCOMES and job.steps[s.index].on_failure == "stop"
        for s in report.steps
    )
    worked = any(o in SUCCESS_OUTCOMES for o in outcomes)
    if interrupted:
        report.outcome, report.exit_code = "interrupted", EXIT_ERROR
    elif fatal or not worked:
        report.outcome, report.exit_code = "failed", EXIT_ERROR
    elif all(o == "ok" for o in outcomes):
        report.outcome, report.exit_code = "ok", EXIT_OK
    else:
        report.outcome, report.exit_code = "partial", EXIT_PARTIAL


def _run_step(index: int, step: Step, invoke: Invoke, global_args: list[str]) -> StepResult:
    started = utcnow()
    log.info("job.step_started", step=step.run, timeout_seconds=step.timeout_seconds)
    try:
        with _deadline(step.timeout_seconds), contextlib.redirect_stdout(sys.stderr):
            code = invoke([*global_args, *step.args])
        outcome = {EXIT_OK: "ok", EXIT_PARTIAL: "partial"}.get(code, "failed")
    except StepTimeout:
        code, outcome = 124, "timeout"
        log.error("job.step_timeout", step=step.run, timeout_seconds=step.timeout_seconds)
    except Exception as exc:  # a bug in a stage must not kill the job runner
        code, outcome = EXIT_ERROR, "failed"
        log.exception("job.step_crashed", step=step.run, error=type(exc).__name__)
    result = StepResult(index, step.run, started, utcnow(), code, outcome)
    log.info(
        "job.step_finished",
        step=step.run,
        outcome=outcome,
        exit_code=code,
        duration_seconds=round(result.duration_seconds, 3),
    )
    return result


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise StepTimeout in this thread after ``seconds`` (only possible on the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: FrameType | None) -> None:
        raise StepTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _signals(handler: _Stop) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class _History:
    """Writes ``job_runs`` / ``job_steps``; each write is its own short connection and commit."""

    def __init__(self, db_path: str) -> None:
        self.db_path = db_path

    def start(self, report: RunReport) -> int:
        with Store.open(self.db_path) as store:
            store.execute(
                "INSERT INTO job_runs (run_id, job, started_at, outcome, pid, host)"
                " VALUES (?, ?, ?, 'running', ?, ?)",
                [report.run_id, report.job, report.started_at, os.getpid(), socket.gethostname()],
            )
            return int(store.scalar("SELECT coalesce(max(load_id), 0) FROM loads") or 0)

    def step_done(self, run_id: str, result: StepResult) -> None:
        with Store.open(self.db_path) as store:
            store.execute(
                "INSERT INTO job_steps VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    run_id,
                    result.index,
                    result.command,
                    result.started_at,
                    result.finished_at,
                    result.exit_code,
                    result.outcome,
                ],
            )

    def finish(self, report: RunReport, load_before: int) -> None:
        with Store.open(self.db_path) as store:
            row = store.query(
                "SELECT coalesce(sum(events), 0) AS events,"
                " coalesce(sum(quarantined), 0) AS quarantined FROM loads WHERE load_id > ?",
                [load_before],
            )[0]
            report.rows_ingested = int(row["events"])
            report.files_quarantined = int(row["quarantined"])
            store.execute(
                "UPDATE job_runs SET finished_at = ?, outcome = ?, exit_code = ?,"
                " rows_ingested = ?, files_quarantined = ? WHERE run_id = ?",
                [
                    report.finished_at,
                    report.outcome,
                    report.exit_code,
                    report.rows_ingested,
                    report.files_quarantined,
                    report.run_id,
                ],
            )
            report.last_success_at = store.scalar(
                "SELECT max(finished_at) FROM job_runs WHERE job = ?"
                " AND outcome IN ('ok', 'partial')",
                [report.job],
            )
