"""The real google-cloud-logging client (HTTP transport) against a local ``entries:list`` server."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sentinel.config import GcsAuditSource
from sentinel.errors import AccessDeniedError, SourceError
from sentinel.http import Backoff
from sentinel.sources import gcs_api
from sentinel.store import Store
from tests.gcs_fixtures import (  # noqa: F401  (fresh_logs is an autouse fixture)
    BUCKET,
    PROJECT,
    LoggingServer,
    entry,
    fresh_logs,
    start_logging_server,
)

NOW = dt.datetime(2025, 3, 1, 13, 7, tzinfo=dt.UTC)
FAST = Backoff(base=0.001, cap=0.01, max_attempts=4)


@pytest.fixture
def server() -> Iterator[LoggingServer]:
    yield from start_logging_server()


def _source(server: LoggingServer, **kw: object) -> GcsAuditSource:
    base: dict[str, object] = {
        "projects": (PROJECT,),
        "buckets": (BUCKET,),
        "api_endpoint": server.url,
        "credentials": "anonymous",
        "requests_per_minute": 0,
        "window_minutes": 60,
        "start": "2025-03-01T10:00:00Z",
    }
    base.update(kw)
    return GcsAuditSource(**base)  # type: ignore[arg-type]


def _at(hour: int, minute: int, second: int = 0) -> dt.datetime:
    return dt.datetime(2025, 3, 1, hour, minute, second, 500000)


def _run(store: Store, server: LoggingServer, now: dt.datetime = NOW, **kw: object):  # type: ignore[no-untyped-def]
    source = _source(server)
    return gcs_api.run_api(
        store,
        source,
        keep_raw="all",
        buckets=(BUCKET,),
        now=now,
        client=gcs_api.make_client(source),
        backoff=FAST,
        **kw,
    )  # type: ignore[arg-type]


def test_windows_pages_empty_pages_and_retries(store, server):  # type: ignore[no-untyped-def]
    server.state.entries = [entry("storage.objects.get", _at(10, m), f"r{m}") for m in range(7)]
    server.state.entries += [
        entry("storage.objects.get", _at(11, 30), "later"),
        entry("storage.objects.get", _at(12, 59, 59), "edge"),
        entry("storage.objects.get", _at(13, 1), "not-closed-yet"),
    ]
    server.state.max_page = 3
    server.state.empty_pages = 1
    server.state.faults = [429, 503, 500]
    report = _run(store, server, part_bytes=3000)  # a window's spool loads in several parts
    # now 13:07, lag 5 min: closed windows 10-11, 11-12, 12-13; 13:01 waits for the next run.
    assert report.windows == 3 and report.events_loaded == 9
    assert report.api_retries == 3
    assert not server.state.problems
    filters = server.filters()
    assert all('timestamp>="2025-03-01T' in f and 'timestamp<"2025-03-01T' in f for f in filters)
    assert any(
        'timestamp>="2025-03-01T10:00:00Z" AND timestamp<"2025-03-01T11:00:00Z"' in f
        for f in filters
    )
    first = server.state.requests[0]["body"]
    assert first["resourceNames"] == [f"projects/{PROJECT}"]
    assert (first["orderBy"], first["pageSize"]) == ("timestamp asc", 1000)
    assert f'"projects/{PROJECT}/logs/cloudaudit.googleapis.com%2Fdata_access"' in first["filter"]
    assert "cloudaudit.googleapis.com%2Factivity" in first["filter"]
    assert f'resource.labels.bucket_name=("{BUCKET}")' in first["filter"]
    assert 'resource.type="gcs_bucket"' in first["filter"]
    # Pagination (3 per page) and the empty page with a token were both followed.
    assert any(r["body"].get("pageToken") == "e:1" for r in server.state.requests)
    assert any(r["body"].get("pageToken") == "o:6" for r in server.state.requests)
    ids = {r["event_id"] for r in store.query("SELECT event_id FROM access_events")}
    assert (
        f"projects/{PROJECT}/logs/cloudaudit.googleapis.com%2Fdata_access|"
        f"2025-03-01T10:00:00.500000123Z|r0" in ids
    )
    cursor = store.scalar("SELECT max(value) FROM cursors WHERE key = 'window_end'")
    assert cursor == "2025-03-01T13:00:00Z"
    parts = store.query("SELECT uri FROM source_files WHERE uri LIKE '%#part=%'")
    assert parts and all(p["uri"].startswith("logging-api://acme-ml-prod/") for p in parts)
    assert report.files_loaded == 3  # windows, not parts


def test_next_run_rereads_previous_window_for_late_entries(store, server):  # type: ignore[no-untyped-def]
    server.state.entries = [entry("storage.objects.get", _at(12, 10), "a")]
    _run(store, server)
    server.state.requests.clear()
    # A late entry for 12:xx arrives after the first run, and the next hour closes.
    server.state.entries += [
        entry("storage.objects.get", _at(12, 40), "late"),
        entry("storage.objects.get", _at(13, 20), "b"),
    ]
    report = _run(store, server, now=NOW + dt.timedelta(hours=1))
    assert report.windows == 2  # 12-13 again, then 13-14
    assert (report.events_loaded, report.events_duplicate) == (2, 1)
    assert 'timestamp>="2025-03-01T12:00:00Z"' in server.filters()[0]
    assert store.scalar("SELECT max(value) FROM cursors WHERE key = 'window_end'") == (
        "2025-03-01T14:00:00Z"
    )


def test_backfill_reads_its_range_and_leaves_the_cursor(store, server):  # type: ignore[no-untyped-def]
    server.state.entries = [entry("storage.objects.get", _at(9, 15), "old")]
    report = _run(
        store,
        server,
        since=dt.datetime(2025, 3, 1, 9, tzinfo=dt.UTC),
        until=dt.datetime(2025, 3, 1, 9, 30, tzinfo=dt.UTC),
    )
    assert (report.windows, report.events_loaded) == (1, 1)
    assert 'timestamp<"2025-03-01T09:30:00Z"' in server.filters()[0]
    assert store.scalar("SELECT count(*) FROM cursors WHERE source <> 'objects'") == 0


def test_a_failing_window_keeps_what_committed_before_it(store, server):  # type: ignore[no-untyped-def]
    server.state.entries = [entry("storage.objects.get", _at(10, 5), "a")]
    source = _source(server)
    client = gcs_api.make_client(source)
    calls = {"n": 0}

    def sleep(_: float) -> None:
        calls["n"] += 1

    # Window 10-11 succeeds, then the server throttles for good.
    gcs_api.run_api(
        store,
        source,
        keep_raw="all",
        now=_at(11, 6).replace(tzinfo=dt.UTC),
        client=client,
        backoff=FAST,
        sleep=sleep,
    )
    server.state.faults = [429] * 10
    with pytest.raises(SourceError) as caught:
        gcs_api.run_api(
            store, source, keep_raw="all", now=NOW, client=client, backoff=FAST, sleep=sleep
        )
    assert caught.value.transient
    assert calls["n"] == FAST.max_attempts - 1  # every retry waited
    assert store.scalar("SELECT count(*) FROM access_events") == 1
    assert store.scalar("SELECT max(value) FROM cursors WHERE key = 'window_end'") == (
        "2025-03-01T11:00:00Z"
    )


def test_permission_denied_is_an_access_error(store, server):  # type: ignore[no-untyped-def]
    server.state.faults = [403]
    with pytest.raises(AccessDeniedError) as caught:
        _run(store, server)
    assert "privateLogViewer" in (caught.value.hint or "")


def test_plan_windows_aligns_and_respects_lag() -> None:
    hour = dt.timedelta(hours=1)
    windows = gcs_api.plan_windows(
        cursor=None, start=None, now=NOW, lag=dt.timedelta(minutes=10), width=hour
    )
    assert windows[-1].end == dt.datetime(2025, 3, 1, 12, tzinfo=dt.UTC)
    assert all(w.start.minute == 0 for w in windows) and len(windows) == 24
    resumed = gcs_api.plan_windows(
        cursor=dt.datetime(2025, 3, 1, 11, tzinfo=dt.UTC),
        start=None,
        now=NOW,
        lag=dt.timedelta(minutes=5),
        width=hour,
    )
    assert [w.start.hour for w in resumed] == [10, 11, 12]


def test_cli_reads_the_api_with_config(cli, tmp_path: Path, server: LoggingServer) -> None:  # type: ignore[no-untyped-def]
    hour = dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0)
    start = hour - dt.timedelta(hours=3)
    recent = (start + dt.timedelta(minutes=5)).replace(tzinfo=None)
    server.state.entries = [entry("storage.objects.get", recent, "a")]
    config = tmp_path / "sentinel.toml"
    config.write_text(
        f'[store]\npath = "{tmp_path / "c.duckdb"}"\n'
        f'[watch]\nbuckets = ["{BUCKET}"]\n'
        f'[[sources.gcs_audit]]\nname = "prod"\nprojects = ["{PROJECT}"]\n'
        f'api_endpoint = "{server.url}"\ncredentials = "anonymous"\nrequests_per_minute = 0\n'
        f'start = "{start:%Y-%m-%dT%H:%M:%SZ}"\n'
    )
    result = cli("--config", str(config), "ingest", "gcs", "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)[0]
    assert report["source"] == "prod" and report["events_loaded"] == 1
    assert report["reads_unknown_size"] == 1
    assert f'resource.labels.bucket_name=("{BUCKET}")' in server.filters()[0]


def test_unreachable_endpoint_is_a_transient_source_error(store) -> None:  # type: ignore[no-untyped-def]
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    source = GcsAuditSource(
        projects=(PROJECT,),
        api_endpoint=f"http://127.0.0.1:{port}",
        credentials="anonymous",
        requests_per_minute=0,
        start="2025-03-01T10:00:00Z",
    )
    waits: list[float] = []
    with pytest.raises(SourceError) as caught:
        gcs_api.run_api(store, source, keep_raw="all", now=NOW, backoff=FAST, sleep=waits.append)
    assert caught.value.transient and len(waits) == FAST.max_attempts - 1
    assert store.scalar("SELECT count(*) FROM cursors WHERE source <> 'objects'") == 0
