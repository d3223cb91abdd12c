"""End to end against moto's S3 server: real gzipped files under real trail layouts."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from sentinel.config import CloudTrailSource
from sentinel.errors import SourceError
from sentinel.sources import cloudtrail
from sentinel.store import Store
from tests.cloudtrail_files import body, key_for, record, sample_records
from tests.moto_server import FaultProxy, moto_s3

TODAY = dt.date(2025, 3, 3)
BUCKET = "org-trail-logs"


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_ACCESS_KEY_ID", "testing")
        mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
        with moto_s3() as endpoint:
            yield endpoint


@pytest.fixture
def bucket(s3_endpoint: str) -> Iterator[Any]:
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
    client.create_bucket(Bucket=BUCKET)
    yield client
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for obj in page.get("Contents", []):
            client.delete_object(Bucket=BUCKET, Key=obj["Key"])
    client.delete_bucket(Bucket=BUCKET)


def put(client: Any, key: str, data: bytes) -> None:
    # Trail objects carry gzip metadata; botocore must not (and does not) decompress them.
    client.put_object(
        Bucket=BUCKET, Key=key, Body=data, ContentEncoding="gzip", ContentType="application/json"
    )


def source(endpoint: str, **kw: Any) -> CloudTrailSource:
    return CloudTrailSource(bucket=BUCKET, prefix="trail", endpoint_url=endpoint, **kw)


def test_real_layouts_digests_folders_and_late_files(
    bucket: Any, s3_endpoint: str, store: Store
) -> None:
    d1, d2 = TODAY - dt.timedelta(days=1), TODAY
    put(bucket, key_for(d1, 100, prefix="trail/"), body(sample_records()))
    put(bucket, key_for(d2, 5, prefix="trail/", org="o-aa11bb22cc", account="555566667777"),
        body([record(time="2025-03-03T00:01:00Z")]))  # fmt: skip
    put(
        bucket,
        key_for(d2, 10, prefix="trail/", region="eu-west-1"),
        body([record(time="2025-03-03T00:02:00Z")]),
    )
    put(bucket, "trail/AWSLogs/111122223333/CloudTrail-Digest/us-east-1/2025/03/03/"
        "111122223333_CloudTrail-Digest_us-east-1_t_us-east-1_20250303T000000Z.json.gz",
        body([]))  # fmt: skip
    put(bucket, "trail/AWSLogs/111122223333/CloudTrail/us-east-1/2025/03/03/", b"")
    put(bucket, "trail/AWSLogs/111122223333/Config/ConfigWritabilityCheckFile", b"x")
    first = cloudtrail.run(store, source(s3_endpoint), keep_raw="non_read", today=TODAY)
    assert (first.events_loaded, first.files_loaded, first.partial) == (15, 3, False)
    assert first.files_ignored == {"folder_placeholder": 1}  # digest and Config are never listed
    org_files = "SELECT count(*) FROM source_files WHERE uri LIKE '%/o-aa11bb22cc/555566667777/%'"
    assert store.scalar(org_files) == 1
    uris = {r[0] for r in store.columns_and_rows("SELECT uri FROM source_files")[1]}
    assert all(u.startswith(f"s3://{BUCKET}/trail/AWSLogs/") for u in uris)

    # A file delivered late into an earlier day folder is found on the next run; nothing repeats.
    put(bucket, key_for(d1, 1300, prefix="trail/", unique="LateLateLateLate"),
        body([record(time="2025-03-02T21:00:00Z", key="late/object")]))  # fmt: skip
    second = cloudtrail.run(store, source(s3_endpoint), keep_raw="non_read", today=TODAY)
    assert (second.files_new, second.events_loaded) == (1, 1)
    third = cloudtrail.run(store, source(s3_endpoint), keep_raw="non_read", today=TODAY)
    assert (third.files_new, third.events_loaded) == (0, 0)
    assert store.scalar("SELECT count(*) FROM access_events") == 16
    cursor = dict(store.columns_and_rows("SELECT key, value FROM cursors")[1])
    assert cursor["111122223333/us-east-1"] == "2025-03-02"


def test_downloads_and_split_copies_leave_the_spool_batch_by_batch(
    bucket: Any, s3_endpoint: str, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setenv("SENTINEL_SPOOL_DIR", str(spool))
    for minute in range(0, 40, 5):
        put(bucket, key_for(TODAY, minute, prefix="trail/", unique=f"Spool{minute:011d}"),
            body([record(time="2025-03-03T00:00:00Z", key=f"k/{minute}")]))  # fmt: skip
    seen: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        seen.append((total - done, sum(1 for p in spool.rglob("*") if p.is_file())))

    report = cloudtrail.run(
        store, source(s3_endpoint, batch_files=2), keep_raw="none", today=TODAY, progress=progress
    )
    assert report.events_loaded == 8
    assert [left for left, _ in seen] == [6, 4, 2, 0]
    # Each unfinished file has at most its download and its split copy on disk.
    assert all(files <= 2 * left for left, files in seen)
    assert list(spool.iterdir()) == []


def test_account_and_region_filters(bucket: Any, s3_endpoint: str, store: Store) -> None:
    put(bucket, key_for(TODAY, 1, prefix="trail/"), body([record(time="2025-03-03T00:00:01Z")]))
    put(
        bucket,
        key_for(TODAY, 2, prefix="trail/", region="eu-west-1"),
        body([record(time="2025-03-03T00:00:02Z")]),
    )
    put(
        bucket,
        key_for(TODAY, 3, prefix="trail/", account="999988887777"),
        body([record(time="2025-03-03T00:00:03Z")]),
    )
    report = cloudtrail.run(store, source(s3_endpoint, accounts=("111122223333",), regions=("us-east-1",)),
                            keep_raw="none", today=TODAY)  # fmt: skip
    assert report.events_loaded == 1


def test_backfill_window_does_not_move_the_cursor(
    bucket: Any, s3_endpoint: str, store: Store
) -> None:
    old = dt.date(2025, 2, 1)
    put(bucket, key_for(old, 1, prefix="trail/"), body([record(time="2025-02-01T00:00:01Z")]))
    regular = cloudtrail.run(store, source(s3_endpoint), keep_raw="none", today=TODAY)
    assert regular.events_loaded == 0  # outside the lookback window
    backfill = cloudtrail.run(store, source(s3_endpoint), keep_raw="none", today=TODAY,
                              since=old, until=old)  # fmt: skip
    assert backfill.events_loaded == 1
    assert store.scalar("SELECT count(*) FROM cursors") == 0


def test_throttling_is_retried(bucket: Any, s3_endpoint: str, store: Store) -> None:
    put(bucket, key_for(TODAY, 1, prefix="trail/"), body(sample_records()))
    with FaultProxy(s3_endpoint, fail=3, status=503, code="SlowDown") as proxy:
        report = cloudtrail.run(store, source(proxy.url), keep_raw="none", today=TODAY)
    assert proxy.failed == 3
    assert report.events_loaded == 13


def test_access_denied_names_bucket_and_prefix(bucket: Any, s3_endpoint: str, store: Store) -> None:
    with FaultProxy(s3_endpoint, fail=0) as proxy:
        proxy.remaining = 10**6
        proxy.status, proxy.code = 403, "AccessDenied"
        put(bucket, key_for(TODAY, 1, prefix="trail/"), body([record()]))
        with pytest.raises(SourceError) as info:
            cloudtrail.run(store, source(proxy.url), keep_raw="none", today=TODAY)
    assert (
        "access denied" in info.value.message
        and f"s3://{BUCKET}/trail/AWSLogs/" in info.value.message
    )
    assert info.value.hint and "s3:GetObject" in info.value.hint


def test_missing_bucket_is_a_clear_error(s3_endpoint: str, store: Store) -> None:
    with pytest.raises(SourceError, match="bucket no-such-trail does not exist"):
        cloudtrail.run(store, CloudTrailSource(bucket="no-such-trail", endpoint_url=s3_endpoint),
                       keep_raw="none", today=TODAY)  # fmt: skip


def test_cli_with_config_and_event_show_from_s3(
    bucket: Any, s3_endpoint: str, tmp_path: Path, cli
) -> None:  # type: ignore[no-untyped-def]
    put(bucket, key_for(dt.datetime.now(dt.UTC).date(), 1, prefix="trail/"), body(sample_records()))
    config = tmp_path / "sentinel.toml"
    config.write_text(
        f'[store]\npath = "{tmp_path / "s.duckdb"}"\n'
        f'[[sources.cloudtrail]]\nbucket = "{BUCKET}"\nprefix = "trail/"\nendpoint_url = "{s3_endpoint}"\n'
    )
    result = cli("--config", str(config), "ingest", "cloudtrail", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)[0]["events_loaded"] == 13
    # A successful read's raw is not kept by default: `event show` fetches it from S3.
    full_id = next(r["eventID"] for r in sample_records()
                   if r["eventName"] == "GetObject" and r.get("errorCode") is None)  # fmt: skip
    shown = cli("--config", str(config), "event", "show", full_id)
    assert shown.exit_code == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["from"].startswith(f"s3://{BUCKET}/") and data["record"]["eventID"] == full_id
