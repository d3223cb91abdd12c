"""Sentinel's own metrics, named by Prometheus conventions, and the ways out of a one-shot run.

Two families:

* **Job metrics** (label ``sentinel_job``) from a ``RunReport``: last success / completion
  timestamps, outcome, durations per step, rows ingested and inputs quarantined by the run.
* **State metrics** read from the database at the end of a run: findings by rule, severity and
  status, stored events, quarantine, per-source and per-bucket newest event time, outbox depth,
  oldest undelivered and dead letters, Loki scan watermarks. Tables a stage has not created yet
  are skipped (checked in ``information_schema``).

One-shot runs write a node-exporter textfile (temp file + rename, so the collector never reads
half a file) and/or push to a Pushgateway: PUT on success (replace the group), POST on failure
(replace only the metrics pushed), so a failed run never erases the last success.
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.exposition import push_to_gateway, pushadd_to_gateway
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

from sentinel import http, logs
from sentinel.config import MetricsConfig
from sentinel.errors import StoreError
from sentinel.runner import RunReport
from sentinel.store import Store
from sentinel.timeutil import utcnow

log = logs.get(__name__)

JOB_LABEL = "sentinel_job"
PUSH_JOB = "sentinel"
STATE_PUSH_JOB = "sentinel_state"
LAST_SUCCESS = "sentinel_job_last_success_timestamp_seconds"


# -- job metrics ---------------------------------------------------------------------------------
class JobMetrics:
    """Gauges for job runs; one registry per one-shot run, or one long-lived in ``schedule``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()

        def gauge(name: str, doc: str, *labels: str) -> Gauge:
            return Gauge(name, doc, [JOB_LABEL, *labels], registry=self.registry)

        self.last_success = gauge(LAST_SUCCESS, "When the job last finished ok or partial.")
        self.last_completion = gauge(
            "sentinel_job_last_completion_timestamp_seconds", "When the job last finished."
        )
        self.last_run_success = gauge(
            "sentinel_job_last_run_success", "1 if the last run was ok or partial, else 0."
        )
        self.last_exit_code = gauge("sentinel_job_last_run_exit_code", "Exit code of the last run.")
        self.duration = gauge("sentinel_job_duration_seconds", "Duration of the last run.")
        self.step_duration = gauge(
            "sentinel_job_step_duration_seconds", "Duration of each step of the last run.", "step"
        )
        self.step_exit_code = gauge(
            "sentinel_job_step_exit_code", "Exit code of each step of the last run.", "step"
        )
        self.rows = gauge("sentinel_job_rows_ingested", "Events ingested by the last run.")
        self.quarantined = gauge(
            "sentinel_job_inputs_quarantined", "Inputs quarantined by the last run."
        )
        self.period = gauge(
            "sentinel_job_period_seconds", "Longest gap between scheduled runs (for alerts)."
        )

    def record(self, report: RunReport, *, period_seconds: float, with_success: bool) -> None:
        """Set the gauges from a run. ``with_success`` False leaves last_success untouched."""
        job = report.job
        finished = report.finished_at or report.started_at
        if with_success and report.last_success_at is not None:
            self.last_success.labels(job).set(_unix(report.last_success_at))
        self.last_completion.labels(job).set(_unix(finished))
        self.last_run_success.labels(job).set(1 if report.succeeded else 0)
        self.last_exit_code.labels(job).set(report.exit_code)
        self.duration.labels(job).set(report.duration_seconds)
        for step in report.steps:
            self.step_duration.labels(job, step.command).set(step.duration_seconds)
            self.step_exit_code.labels(job, step.command).set(step.exit_code)
        self.rows.labels(job).set(report.rows_ingested)
        self.quarantined.labels(job).set(report.files_quarantined)
        self.period.labels(job).set(period_seconds)


# -- state metrics -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


STATE_HELP = {
    "sentinel_findings": "Findings by rule, severity and status.",
    "sentinel_access_events": "Access events stored, by provider.",
    "sentinel_quarantined_inputs": "Quarantined files and records, by provider and source.",
    "sentinel_source_newest_event_timestamp_seconds": "Newest event time per ingest source.",
    "sentinel_bucket_newest_event_timestamp_seconds": "Newest event time per bucket.",
    "sentinel_outbox_pending": "Findings waiting in the delivery outbox.",
    "sentinel_outbox_oldest_pending_timestamp_seconds": "Creation time of the oldest pending.",
    "sentinel_outbox_dead_letters": "Deliveries given up on (dead letters).",
    "sentinel_loki_scan_watermark_timestamp_seconds": "End of the last fully scanned window.",
    "sentinel_state_collected_timestamp_seconds": "When these state metrics were read.",
}


def collect_state(store: Store, now: dt.datetime | None = None) -> list[Sample]:
    """Read the state metrics with read-only queries."""
    samples: list[Sample] = []
    for query in (_findings, _events, _quarantine, _freshness, _outbox, _watermarks):
        samples.extend(query(store))
    collected = now or utcnow()
    samples.append(Sample("sentinel_state_collected_timestamp_seconds", {}, _unix(collected)))
    return samples


def _findings(store: Store) -> Iterator[Sample]:
    for row in store.query(
        "SELECT rule_id, severity, status, count(*) AS n FROM findings GROUP BY ALL ORDER BY ALL"
    ):
        labels = {k: str(row[k]) for k in ("rule_id", "severity", "status")}
        yield Sample("sentinel_findings", labels, row["n"])


def _events(store: Store) -> Iterator[Sample]:
    for row in store.query("SELECT provider, count(*) AS n FROM access_events GROUP BY ALL"):
        yield Sample("sentinel_access_events", {"provider": row["provider"]}, row["n"])


def _quarantine(store: Store) -> Iterator[Sample]:
    for row in store.query("SELECT provider, source, count(*) AS n FROM quarantine GROUP BY ALL"):
        labels = {"provider": row["provider"], "source": row["source"]}
        yield Sample("sentinel_quarantined_inputs", labels, row["n"])


def _freshness(store: Store) -> Iterator[Sample]:
    for row in store.query(
        "SELECT l.provider, l.source, epoch(max(e.event_time)) AS t"
        " FROM access_events e JOIN loads l USING (load_id) GROUP BY ALL"
    ):
        labels = {"provider": row["provider"], "source": row["source"]}
        yield Sample("sentinel_source_newest_event_timestamp_seconds", labels, row["t"])
    for row in store.query(
        "SELECT provider, coalesce(bucket, '') AS bucket, epoch(max(event_time)) AS t"
        " FROM access_events GROUP BY ALL"
    ):
        labels = {"provider": row["provider"], "bucket": row["bucket"]}
        yield Sample("sentinel_bucket_newest_event_timestamp_seconds", labels, row["t"])


def _outbox(store: Store) -> Iterator[Sample]:
    row = store.query(
        "SELECT count(*) FILTER (WHERE state = 'pending') AS pending,"
        " epoch(min(created_at) FILTER (WHERE state = 'pending')) AS oldest,"
        " count(*) FILTER (WHERE state = 'dead') AS dead FROM outbox"
    )[0]
    yield Sample("sentinel_outbox_pending", {}, row["pending"])
    yield Sample("sentinel_outbox_dead_letters", {}, row["dead"])
    if row["oldest"] is not None:
        yield Sample("sentinel_outbox_oldest_pending_timestamp_seconds", {}, row["oldest"])


def _watermarks(store: Store) -> Iterator[Sample]:
    for row in store.query("SELECT source, epoch(scanned_until) AS t FROM loki_watermarks"):
        name = "sentinel_loki_scan_watermark_timestamp_seconds"
        yield Sample(name, {"source": str(row["source"])}, row["t"])


class StateCollector:
    """Exposes a list of samples (from this process or a child run) as gauge families."""

    def __init__(self, samples: list[Sample] | None = None) -> None:
        self.samples = samples or []

    def collect(self) -> Iterator[Metric]:
        families: dict[str, GaugeMetricFamily] = {}
        for sample in self.samples:
            family = families.get(sample.name)
            if family is None:
                family = GaugeMetricFamily(
                    sample.name,
                    STATE_HELP.get(sample.name, sample.name),
                    labels=list(sample.labels),
                )
                families[sample.name] = family
            family.add_metric(list(sample.labels.values()), float(sample.value))
        yield from families.values()


def state_registry(samples: list[Sample]) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(StateCollector(samples))
    return registry


# -- ways out of a one-shot run -----------------------------------------------------------------
def write_textfile(directory: Path, name: str, registry: CollectorRegistry) -> Path:
    """Write ``<directory>/<name>.prom`` atomically (same-directory temp file, then rename)."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{name}.prom"
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(generate_latest(registry))
            handle.flush()
            os.fsync(handle.fileno())
        Path(tmp).chmod(0o644)
        Path(tmp).replace(target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def read_state(db_path: str) -> list[Sample]:
    """``collect_state`` on a read-only connection; an unreadable database gives no samples."""
    try:
        with Store.open(db_path, read_only=True) as store:
            return collect_state(store)
    except StoreError as exc:
        log.error("metrics.state_unreadable", error=exc.message)
        return []


def export_run(
    report: RunReport, state: list[Sample], cfg: MetricsConfig, *, period_seconds: float
) -> None:
    """Write the textfiles and/or push, as configured. A failed push is logged, never raised:
    the missing success is what the staleness alert is for."""
    if cfg.textfile_dir:
        directory = Path(cfg.textfile_dir)
        name = f"sentinel_job_{report.job}"
        job_metrics = JobMetrics()
        job_metrics.record(report, period_seconds=period_seconds, with_success=True)
        if report.last_success_at is None:
            kept = previous_last_success(directory / f"{name}.prom", report.job)
            if kept is not None:
                job_metrics.last_success.labels(report.job).set(kept)
        write_textfile(directory, name, job_metrics.registry)
        if state:
            write_textfile(directory, "sentinel_state", state_registry(state))
    if cfg.pushgateway:
        job_metrics = JobMetrics()
        job_metrics.record(report, period_seconds=period_seconds, with_success=report.succeeded)
        try:
            push(cfg.pushgateway, job_metrics.registry, report)
            if state:
                push_state(cfg.pushgateway, state_registry(state))
        except OSError as exc:
            log.error("job.push_failed", pushgateway=cfg.pushgateway, error=str(exc))


def previous_last_success(path: Path, job: str) -> float | None:
    """The last-success value an earlier run left in a textfile (kept when this run failed)."""
    if not path.exists():
        return None
    for family in text_string_to_metric_families(path.read_text(encoding="utf-8")):
        for sample in family.samples:
            if sample.name == LAST_SUCCESS and sample.labels.get(JOB_LABEL) == job:
                return float(sample.value)
    return None


def push(gateway: str, job_registry: CollectorRegistry, report: RunReport) -> None:
    """PUT the job group on success, POST on failure; the state group is always replaced."""
    grouping = {JOB_LABEL: report.job}
    send = push_to_gateway if report.succeeded else pushadd_to_gateway
    send(gateway, job=PUSH_JOB, registry=job_registry, grouping_key=grouping, handler=_handler)


def push_state(gateway: str, registry: CollectorRegistry) -> None:
    push_to_gateway(gateway, job=STATE_PUSH_JOB, registry=registry, handler=_handler)


def _handler(
    url: str, method: str, timeout: float | None, headers: list[tuple[str, str]], data: bytes
) -> Callable[[], None]:
    """prometheus_client's push handler, through Sentinel's one HTTP door."""

    def send() -> None:
        try:
            with http.client(timeout=timeout or 30.0) as client:
                response = client.request(method, url, headers=dict(headers), content=data)
        except httpx.HTTPError as exc:
            raise OSError(f"pushgateway {method} {url}: {exc}") from exc
        if response.status_code >= 400:
            raise OSError(f"pushgateway {method} {url}: {response.status_code} {response.text}")

    return send


def _unix(value: dt.datetime) -> float:
    aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    return aware.timestamp()


def as_jsonable(samples: list[Sample]) -> list[dict[str, Any]]:
    return [{"name": s.name, "labels": s.labels, "value": s.value} for s in samples]


def from_jsonable(raw: list[dict[str, Any]]) -> list[Sample]:
    return [Sample(r["name"], dict(r["labels"]), float(r["value"])) for r in raw]
