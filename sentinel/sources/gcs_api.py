"""GCS audit logs through the Cloud Logging API (``entries.list``) with google-cloud-logging.

Each run reads closed time windows ``[start, end)`` up to ``now - lag``, beginning one window
before the cursor so entries that arrived late are picked up (duplicates collapse on the event
key). Every request carries an explicit ``timestamp`` range: the client otherwise silently adds
``timestamp >= now-24h``. A window's entries are spooled as LogEntry JSON lines and loaded like a
sink export file; the cursor (end of the newest window) commits in the same transaction.

Pages are requested through the client's own HTTP connection rather than ``list_entries``: that
generator parses ``timestamp`` into a microsecond ``datetime`` (the event key needs the original
nanosecond string) and hides page tokens (needed to resume a window after a 429).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentinel import logs
from sentinel.config import GcsAuditSource
from sentinel.errors import AccessDeniedError, SourceError, UsageError
from sentinel.http import RETRYABLE_STATUS, Backoff, retry_after_seconds
from sentinel.ingest import InputFile, KeepRaw
from sentinel.sources.gcs import (
    LOGS,
    PART_BYTES,
    GcsIngestReport,
    finish,
    input_batches,
    local_inputs,
    make_loader,
)
from sentinel.store import Store

log = logs.get(__name__)

PAGE_SIZE = 1000  # the API maximum
MAX_RESOURCE_NAMES = 100  # per entries.list request
MAX_FILTER_CHARS = 20_000
DEFAULT_BACKOFF = Backoff(base=2.0, cap=64.0, max_attempts=8)


@dataclass(frozen=True)
class Window:
    start: dt.datetime
    end: dt.datetime

    @property
    def label(self) -> str:
        return f"{rfc3339(self.start)}/{rfc3339(self.end)}"


def rfc3339(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str) -> dt.datetime:
    """An ISO date or timestamp (UTC when no offset is given)."""
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise UsageError(f"not a timestamp: {value!r}", hint="use 2025-03-01T10:00:00Z") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def build_filter(
    projects: Sequence[str], buckets: Sequence[str], window: Window, logs_: Sequence[str] = LOGS
) -> str:
    names = " OR ".join(
        f'"projects/{p}/logs/cloudaudit.googleapis.com%2F{name}"'
        for p in projects
        for name in logs_
    )
    parts = [f"logName=({names})", 'resource.type="gcs_bucket"']
    if buckets:
        parts.append("resource.labels.bucket_name=(" + " OR ".join(f'"{b}"' for b in buckets) + ")")
    parts.append(f'timestamp>="{rfc3339(window.start)}" AND timestamp<"{rfc3339(window.end)}"')
    return " AND ".join(parts)


def plan_windows(
    *,
    cursor: dt.datetime | None,
    start: dt.datetime | None,
    now: dt.datetime,
    lag: dt.timedelta,
    width: dt.timedelta,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
) -> list[Window]:
    """Closed windows to read. A regular run starts one window before the cursor (late
    entries); a backfill (``since``/``until``) reads exactly its range."""
    limit = now - lag
    if since or until:
        first = since or (limit - dt.timedelta(days=1))
        last = min(until or limit, limit)
    else:
        if cursor is not None:
            first = cursor - width
        else:
            first = start or _align(limit - dt.timedelta(days=1), width)
        last = _align(limit, width)
    windows = []
    t = first
    while t + width <= last:
        windows.append(Window(t, t + width))
        t += width
    if (since or until) and t < last:
        windows.append(Window(t, last))
    return windows


def _align(when: dt.datetime, width: dt.timedelta) -> dt.datetime:
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return epoch + ((when - epoch) // width) * width


def make_client(source: GcsAuditSource) -> Any:
    """google-cloud-logging client on the HTTP transport; default credentials unless the source
    says ``credentials = "anonymous"`` (emulators and tests)."""
    from google.auth.exceptions import DefaultCredentialsError
    from google.cloud import logging as gcl

    kwargs: dict[str, Any] = {"project": source.projects[0], "_use_grpc": False}
    if source.api_endpoint:
        kwargs["client_options"] = {"api_endpoint": source.api_endpoint}
    if source.credentials == "anonymous":
        from google.auth.credentials import AnonymousCredentials

        kwargs["credentials"] = AnonymousCredentials()  # type: ignore[no-untyped-call]
    try:
        return gcl.Client(**kwargs)  # type: ignore[no-untyped-call]
    except DefaultCredentialsError as exc:
        raise SourceError(
            f"no Google credentials for {source.label}: {exc}",
            hint="run `gcloud auth application-default login` or set "
            "GOOGLE_APPLICATION_CREDENTIALS; the identity needs roles/logging.privateLogViewer",
        ) from exc


class _Pager:
    """POSTs ``entries:list`` pages with backoff on 429/5xx and network errors, and paces
    requests under the per-project quota (60 per minute by default)."""

    def __init__(
        self,
        client: Any,
        report: GcsIngestReport,
        backoff: Backoff,
        requests_per_minute: int,
        sleep: Callable[[float], None],
    ) -> None:
        self.client = client
        self.report = report
        self.backoff = backoff
        self.interval = 60.0 / requests_per_minute if requests_per_minute > 0 else 0.0
        self.sleep = sleep
        self.last_request = -1e9

    def entries(self, names: list[str], filter_: str) -> Iterator[dict[str, Any]]:
        token = ""
        while True:
            body: dict[str, Any] = {"resourceNames": names, "filter": filter_,
                                    "orderBy": "timestamp asc", "pageSize": PAGE_SIZE}  # fmt: skip
            if token:
                body["pageToken"] = token
            page = self._call(body)
            yield from page.get("entries", [])
            token = page.get("nextPageToken", "")
            if not token:  # an empty page WITH a token means "still searching": keep going
                return

    def _call(self, body: dict[str, Any]) -> dict[str, Any]:
        import requests
        from google.api_core import exceptions as gexc

        attempt = 0
        while True:
            attempt += 1
            wait = self.last_request + self.interval - time.monotonic()
            if wait > 0:
                self.sleep(wait)
            self.last_request = time.monotonic()
            self.report.api_requests += 1
            try:
                result: dict[str, Any] = self.client._connection.api_request(
                    method="POST", path="/entries:list", data=body
                )
                return result
            except gexc.GoogleAPICallError as exc:
                status = int(exc.code or 0)
                if status in (401, 403):
                    raise AccessDeniedError(
                        f"Cloud Logging refused entries.list ({status}): {exc.message}",
                        hint="grant roles/logging.privateLogViewer (Data Access logs need it) on "
                        + ", ".join(body["resourceNames"][:3]),
                    ) from exc
                if status not in RETRYABLE_STATUS or attempt >= self.backoff.max_attempts:
                    raise SourceError(f"Cloud Logging entries.list failed: {exc}",
                                      transient=status in RETRYABLE_STATUS) from exc  # fmt: skip
                retry_after = retry_after_seconds(_header(exc, "Retry-After"))
            except requests.RequestException as exc:
                if attempt >= self.backoff.max_attempts:
                    raise SourceError(f"Cloud Logging unreachable: {exc}", transient=True) from exc
                status, retry_after = 0, None
            delay = self.backoff.delay(attempt, retry_after)
            self.report.api_retries += 1
            log.warning("ingest.gcs_api_retry", status=status, attempt=attempt, delay=delay)
            self.sleep(delay)


def _header(exc: Any, name: str) -> str | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    value = headers.get(name)
    return str(value) if value else None


def run_api(
    store: Store,
    source: GcsAuditSource,
    *,
    keep_raw: KeepRaw,
    buckets: tuple[str, ...] = (),
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    now: dt.datetime | None = None,
    client: Any = None,
    backoff: Backoff = DEFAULT_BACKOFF,
    sleep: Callable[[float], None] = time.sleep,
    progress: Callable[[int, int], None] | None = None,
    part_bytes: int = PART_BYTES,
) -> GcsIngestReport:
    """Read closed windows of one ``[[sources.gcs_audit]]`` from the API; returns the report."""
    if not source.projects:
        raise UsageError(
            f"GCS source {source.label!r} has neither projects nor path",
            hint="set projects = [...] (Cloud Logging API) or path = DIR (sink export)",
        )
    label = source.label
    report = GcsIngestReport(source=label)
    cursor_key = f"gcs-api:{label}"
    # columns_and_rows, not scalar: a half-fetched result blocks the loader's register().
    cursor_text = store.columns_and_rows(
        "SELECT max(value) FROM cursors WHERE source = ? AND key = 'window_end'", [cursor_key]
    )[1][0][0]
    backfill = since is not None or until is not None
    windows = plan_windows(
        cursor=parse_time(cursor_text) if cursor_text else None,
        start=parse_time(source.start) if source.start else None,
        now=now or dt.datetime.now(dt.UTC),
        lag=dt.timedelta(minutes=source.lag_minutes),
        width=dt.timedelta(minutes=max(1, source.window_minutes)),
        since=since,
        until=until,
    )
    pager = _Pager(client or make_client(source), report, backoff, source.requests_per_minute,
                   sleep)  # fmt: skip
    committed: dict[str, str] = {}

    def commit_cursor(db: Store, files: list[InputFile]) -> None:
        if backfill:
            return
        for f in files:
            if "#part=" in f.uri:
                continue  # the window is loaded once its last part is
            db.execute(
                "INSERT INTO cursors VALUES (?, 'window_end', ?, now()::TIMESTAMP) ON CONFLICT"
                " (source, key) DO UPDATE SET value = greatest(cursors.value, excluded.value),"
                " updated_at = excluded.updated_at",
                [cursor_key, f.meta["window_end"]],
            )
            committed["window_end"] = f.meta["window_end"]

    loader = make_loader(store, label, buckets, keep_raw, report, commit_cursor)
    try:
        with tempfile.TemporaryDirectory(prefix="sentinel-gcs-api-") as spool:
            for i, window in enumerate(windows, start=1):
                spooled = _fetch_window(pager, source.projects, buckets, window, Path(spool),
                                        label)  # fmt: skip
                # A busy window can spool gigabytes: load it in line-aligned parts.
                parts = local_inputs(store, spooled.path, spooled.meta, Path(spool),
                                     part_bytes, uri=spooled.uri)  # fmt: skip
                for batch in input_batches(parts):
                    loader.load(batch)
                    report.files_loaded -= sum(1 for f in batch if "#part=" in f.uri)
                    for f in batch:
                        f.path.unlink(missing_ok=True)
                report.windows += 1
                if progress:
                    progress(i, len(windows))
    except BaseException:
        with contextlib.suppress(Exception):  # keep what committed estimated; re-raise the cause
            finish(store, report)
        raise
    finish(store, report)
    report.files_listed = report.files_new = len(windows)
    log.info("ingest.done", cursor=committed.get("window_end"), **report.as_dict())
    return report


def _fetch_window(
    pager: _Pager,
    projects: Sequence[str],
    buckets: Sequence[str],
    window: Window,
    spool: Path,
    label: str,
) -> InputFile:
    fetched = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    target = spool / f"{window.start:%Y%m%dT%H%M%S}-{fetched}.ndjson"
    count = 0
    with target.open("w", encoding="utf-8") as out:
        for chunk in _chunks(list(projects), buckets, window):
            names = [f"projects/{p}" for p in chunk]
            for entry in pager.entries(names, build_filter(chunk, buckets, window)):
                out.write(json.dumps(entry, separators=(",", ":"), ensure_ascii=False) + "\n")
                count += 1
    log.debug("ingest.gcs_window_fetched", window=window.label, entries=count)
    return InputFile(
        uri=f"logging-api://{label}/{window.label}#fetched={fetched}",
        path=target,
        size=target.stat().st_size,
        compression="none",
        meta={"window_end": rfc3339(window.end)},
    )


def _chunks(projects: list[str], buckets: Sequence[str], window: Window) -> Iterator[list[str]]:
    """Up to 100 projects per request, fewer if the filter would pass 20,000 characters."""
    size = MAX_RESOURCE_NAMES
    while size > 1 and len(build_filter(projects[:size], buckets, window)) > MAX_FILTER_CHARS:
        size //= 2
    for i in range(0, len(projects), size):
        yield projects[i : i + size]
