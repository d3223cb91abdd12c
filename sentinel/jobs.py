"""Job definitions: ``jobs/<name>.toml`` files into frozen dataclasses.

A job is a name, a cron schedule and ordered steps. Each step is a ``sentinel`` command line
(``run = "ingest cloudtrail"``) with a timeout and what its failure means for the steps after it
(``on_failure = "stop"`` skips them, ``"continue"`` runs them and makes the job partial).

    name = "weights"
    schedule = "*/15 * * * *"
    steps = [
      { run = "ingest cloudtrail", timeout = "10m", on_failure = "continue" },
      { run = "detect", timeout = "10m" },
    ]

Every problem in every file is collected and reported at once, with file and line.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
import shlex
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from apscheduler.triggers.cron import CronTrigger

from sentinel.config import _KeyLines
from sentinel.errors import ConfigError, Problem

OnFailure = Literal["stop", "continue"]
ON_FAILURE: tuple[OnFailure, ...] = ("stop", "continue")
DEFAULT_TIMEOUT_SECONDS = 30 * 60.0
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,50}$")
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_JOB_KEYS = {"name", "description", "schedule", "timezone", "steps"}
_STEP_KEYS = {"run", "timeout", "on_failure"}


@dataclass(frozen=True)
class Step:
    run: str
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    on_failure: OnFailure = "stop"

    @property
    def args(self) -> list[str]:
        """The command line after ``sentinel`` (global options are added by the runner)."""
        return shlex.split(self.run)


@dataclass(frozen=True)
class Job:
    name: str
    schedule: str
    steps: tuple[Step, ...]
    description: str = ""
    timezone: str = "UTC"
    path: str = ""

    def trigger(self) -> CronTrigger:
        return CronTrigger.from_crontab(self.schedule, timezone=self.timezone)

    def next_runs(self, now: dt.datetime, count: int = 1) -> list[dt.datetime]:
        trigger = self.trigger()
        runs: list[dt.datetime] = []
        cursor = now
        while len(runs) < count:
            nxt = trigger.get_next_fire_time(None, cursor)
            if nxt is None:
                break
            runs.append(nxt)
            cursor = nxt + dt.timedelta(seconds=1)
        return runs

    def period_seconds(self, now: dt.datetime | None = None) -> float:
        """The longest gap between runs over the next day's worth of runs (for alert windows)."""
        runs = self.next_runs(now or dt.datetime.now(dt.UTC), count=50)
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(runs)]
        return max(gaps) if gaps else 0.0

    @property
    def timeout_seconds(self) -> float:
        """The worst-case run time: every step running to its timeout."""
        return sum(step.timeout_seconds for step in self.steps)


def parse_duration(text: str) -> float | None:
    """``"90s"``, ``"10m"``, ``"1h30m"`` into seconds; None when it is not a duration."""
    match = _DURATION.match(text.strip())
    if not match or not any(match.groups()):
        return None
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return float(hours * 3600 + minutes * 60 + seconds)


def load_jobs(directory: Path) -> tuple[Job, ...]:
    """Every ``*.toml`` in ``directory`` by name; ConfigError lists all problems at once."""
    if not directory.is_dir():
        raise ConfigError(
            [Problem(str(directory), None, "jobs directory not found")],
            hint="set metrics.jobs_dir in sentinel.toml or pass --jobs-dir DIR",
        )
    problems: list[Problem] = []
    jobs = [_load_file(path, problems) for path in sorted(directory.glob("*.toml"))]
    found = [job for job in jobs if job is not None]
    if problems:
        raise ConfigError(problems, hint="see docs/ops.md for the job file format")
    return tuple(sorted(found, key=lambda j: j.name))


def find_job(jobs: Iterable[Job], name: str) -> Job | None:
    return next((job for job in jobs if job.name == name), None)


def _load_file(path: Path, problems: list[Problem]) -> Job | None:
    text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        problems.append(Problem(str(path), None, str(exc)))
        return None
    lines = _KeyLines(text)
    before = len(problems)

    def problem(keys: tuple[str, ...], message: str) -> None:
        problems.append(Problem(str(path), lines.line(keys), message))

    for key in sorted(set(data) - _JOB_KEYS):
        problem((key,), f"unknown key {key!r} (allowed: {', '.join(sorted(_JOB_KEYS))})")
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not _NAME.match(name):
        problem(("name",), "name must be lower-case letters, digits, '_' or '-'")
    elif name != path.stem:
        problem(("name",), f"name {name!r} must match the file name {path.stem!r}")
    schedule, timezone = data.get("schedule"), data.get("timezone", "UTC")
    if not isinstance(schedule, str):
        problem(("schedule",), 'schedule is required: a cron expression such as "*/15 * * * *"')
    else:
        try:
            CronTrigger.from_crontab(schedule, timezone=timezone)
        except (ValueError, LookupError) as exc:
            problem(("schedule",), f"invalid schedule {schedule!r} or timezone: {exc}")
    steps = _steps(data.get("steps"), problem)
    if len(problems) > before:
        return None
    return Job(
        name=str(name),
        schedule=str(schedule),
        steps=steps,
        description=str(data.get("description", "")),
        timezone=str(timezone),
        path=str(path),
    )


def _steps(raw: Any, problem: Any) -> tuple[Step, ...]:
    if not isinstance(raw, list) or not raw:
        problem(("steps",), "steps must be a non-empty list of { run = ... } tables")
        return ()
    steps = []
    for index, item in enumerate(raw):
        where = ("steps", str(index))
        if not isinstance(item, dict):
            problem(("steps",), f"step {index + 1}: expected a table")
            continue
        for key in sorted(set(item) - _STEP_KEYS):
            problem(where, f"step {index + 1}: unknown key {key!r}")
        run = item.get("run")
        if not isinstance(run, str) or not run.strip():
            problem(where, f"step {index + 1}: 'run' must be a sentinel command line")
            continue
        timeout = parse_duration(str(item.get("timeout", "30m")))
        if timeout is None or timeout <= 0:
            problem(where, f"step {index + 1}: timeout must look like '90s', '10m' or '1h'")
        on_failure = item.get("on_failure", "stop")
        if on_failure not in ON_FAILURE:
            problem(where, f"step {index + 1}: on_failure must be 'stop' or 'continue'")
        if run.split()[0] in ("run", "schedule"):
            problem(where, f"step {index + 1}: a job cannot run {run.split()[0]!r}")
        steps.append(Step(run=run, timeout_seconds=timeout or 0.0, on_failure=on_failure))
    return tuple(steps)
