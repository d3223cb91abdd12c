"""Object sizes and estimated GCS read bytes: ranged reads, unknown sizes, late sizes."""

from __future__ import annotations

import datetime as dt
import gzip
import json
from pathlib import Path
from typing import Any

import polars as pl

from sentinel.config import GcsAuditSource
from sentinel.objects import estimate_bytes, load_inventory
from sentinel.sources.gcs import run_export
from sentinel.store import Store
from tests.gcs_fixtures import (  # noqa: F401  (fresh_logs is an autouse fixture)
    BUCKET,
    HYDRATOR,
    entry,
    fresh_logs,
    write_ndjson,
)

T0 = dt.datetime(2025, 3, 1, 10, 0, 1)
SHARD = "llm-70b/v3.2/model-00001-of-00030.safetensors"
OTHER = "llm-70b/v3.2/model-00002-of-00030.safetensors"
GB5 = 4_984_292_344
ANALYST = "carol@acme.example"


def _load(store: Store, tmp_path: Path, name: str, entries: list[dict[str, Any]]):  # type: ignore[no-untyped-def]
    path = write_ndjson(tmp_path / name, entries)
    return run_export(store, GcsAuditSource(), path, keep_raw="non_read")


def _bytes(store: Store) -> dict[str, Any]:
    rows = store.query(
        "SELECT actor, sum(bytes_out) AS bytes, count(bytes_out) AS known, count(*) AS reads,"
        " bool_and(bytes_estimated) AS estimated FROM access_events"
        " WHERE action = 'read' AND error_code IS NULL GROUP BY actor"
    )
    return {r["actor"]: r for r in rows}


def _reads(key: str, start: dt.datetime, count: int, prefix: str, actor: str = HYDRATOR):  # type: ignore[no-untyped-def]
    """``count`` ranged GETs of one object, a few seconds apart (one parallel download)."""
    return [
        entry(
            "storage.objects.get",
            start + dt.timedelta(seconds=3 * i),
            f"{prefix}{i}",
            key=key,
            actor=actor,
        )
        for i in range(count)
    ]


def test_ranged_reads_count_the_object_once_per_actor_and_window(store, tmp_path):  # type: ignore[no-untyped-def]
    store.execute(
        "INSERT INTO objects VALUES ('gcp', ?, ?, ?, NULL, 'test', TIMESTAMP '2025-01-01')",
        [BUCKET, SHARD, GB5],
    )
    entries = _reads(SHARD, T0, 40, "h")  # 40 ranged GETs of one 5 GB shard
    entries += _reads(SHARD, T0 + dt.timedelta(minutes=1), 3, "c", actor=ANALYST)
    entries += _reads(SHARD, T0 + dt.timedelta(hours=2), 2, "again")  # a later re-download
    report = _load(store, tmp_path, "a.jsonl", entries)
    got = _bytes(store)
    assert got[HYDRATOR]["bytes"] == 2 * GB5 and got[HYDRATOR]["reads"] == 42
    assert got[ANALYST]["bytes"] == GB5
    assert got[HYDRATOR]["estimated"] and got[ANALYST]["estimated"]
    assert report.estimate.reads_estimated == 45 and report.estimate.reads_unknown_size == 0
    # The hourly view sums the estimate: one object, once, per actor and window.
    hourly = store.query(
        "SELECT actor, hour, bytes, bytes_estimated FROM v_bytes_by_actor_hour"
        " WHERE actor = ? ORDER BY hour",
        [HYDRATOR],
    )
    assert [h["bytes"] for h in hourly] == [GB5, GB5] and hourly[0]["bytes_estimated"]
    # Estimating again (e.g. after a crash between load and estimate) changes nothing.
    estimate_bytes(store, 0, refill_unknown=True)
    assert _bytes(store)[HYDRATOR]["bytes"] == 2 * GB5


def test_unknown_sizes_stay_null_and_late_sizes_fill_them_in(store, tmp_path, cli):  # type: ignore[no-untyped-def]
    report = _load(
        store, tmp_path, "r.jsonl", _reads(SHARD, T0, 5, "h") + _reads(OTHER, T0, 2, "o")
    )
    assert report.estimate.reads_unknown_size == 7 and report.estimate.objects_unknown_size == 2
    got = _bytes(store)[HYDRATOR]
    assert got["bytes"] is None and got["known"] == 0  # unknown, never 0
    coverage = store.query("SELECT * FROM v_read_size_coverage")
    assert coverage[0]["reads_unknown_size"] == 7 and coverage[0]["objects_unknown_size"] == 2
    # A later load carries the create of SHARD (its response.size): earlier reads fill in.
    create = entry(
        "storage.objects.create",
        T0 - dt.timedelta(days=1),
        "cr",
        key=SHARD,
        size=GB5,
        actor="trainer@acme-ml-prod.iam.gserviceaccount.com",
    )
    late = _load(store, tmp_path, "c.jsonl", [create])
    assert late.object_sizes_from_events == 1
    assert late.estimate.reads_unknown_size == 2 and late.estimate.objects_unknown_size == 1
    assert _bytes(store)[HYDRATOR]["bytes"] == GB5
    # A manifest supplies the last size.
    manifest = tmp_path / "sizes.csv"
    manifest.write_text(f"bucket,key,size\n{BUCKET},{OTHER},1000\n")
    inventory = load_inventory(store, manifest)
    assert (inventory.objects_upserted, inventory.estimate.reads_estimated) == (1, 2)
    assert inventory.estimate.reads_unknown_size == 0
    assert _bytes(store)[HYDRATOR]["bytes"] == GB5 + 1000


def test_late_read_earlier_in_the_window_moves_the_size_not_the_sum(store, tmp_path):  # type: ignore[no-untyped-def]
    store.execute(
        "INSERT INTO objects VALUES ('gcp', ?, ?, 100, NULL, 'test', TIMESTAMP '2025-01-01')",
        [BUCKET, SHARD],
    )
    _load(store, tmp_path, "1.jsonl", _reads(SHARD, T0 + dt.timedelta(minutes=5), 3, "a"))
    _load(store, tmp_path, "2.jsonl", _reads(SHARD, T0, 1, "early"))
    rows = store.query("SELECT event_id, bytes_out FROM access_events ORDER BY event_time")
    assert [r["bytes_out"] for r in rows] == [100, 0, 0, 0]
    assert rows[0]["event_id"].endswith("|early0")


def test_inventory_formats(store, tmp_path):  # type: ignore[no-untyped-def]
    # S3 Inventory: manifest.json names gzipped, header-less CSV files with URL-encoded keys.
    config = tmp_path / "inv" / "weights" / "daily"
    (config / "data").mkdir(parents=True)
    (config / "2025-03-01T01-00Z").mkdir()
    csv_rows = (
        '"acme-weights-prod","models%2Fa%20b.bin","v1","true","false","123"\n'
        '"acme-weights-prod","models%2Fa%20b.bin","v0","false","false","99"\n'
        '"acme-weights-prod","models%2Fdel.bin","v2","true","true",""\n'
    )
    (config / "data" / "part1.csv.gz").write_bytes(gzip.compress(csv_rows.encode()))
    manifest = config / "2025-03-01T01-00Z" / "manifest.json"
    manifest.write_text(
        json.dumps(
            {
                "sourceBucket": "acme-weights-prod",
                "fileFormat": "CSV",
                "fileSchema": "Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size",
                "files": [{"key": "weights/daily/data/part1.csv.gz", "size": 100}],
            }
        )
    )
    s3 = load_inventory(store, manifest)
    assert (s3.kind, s3.rows_read, s3.rows_without_size, s3.objects_upserted) == (
        "s3-inventory",
        2,
        1,
        1,
    )
    # GCS inventory report (Parquet), with name/generation columns.
    parquet = tmp_path / "gcs-inventory.parquet"
    pl.DataFrame(
        {"project": ["p"], "bucket": [BUCKET], "name": [SHARD], "size": [GB5], "generation": ["17"]}
    ).write_parquet(parquet)
    gcs = load_inventory(store, parquet, kind="gcs-inventory")
    assert gcs.objects_upserted == 1
    # A plain JSON manifest.
    listing = tmp_path / "manifest.json.list.json"
    listing.write_text(json.dumps([{"bucket": BUCKET, "key": OTHER, "size": 7}]))
    assert load_inventory(store, listing).objects_upserted == 1
    objects = store.query(
        "SELECT provider, bucket, object_key, size, version FROM objects ORDER BY object_key"
    )
    assert objects == [
        {"provider": "gcp", "bucket": BUCKET, "object_key": SHARD, "size": GB5, "version": "17"},
        {"provider": "gcp", "bucket": BUCKET, "object_key": OTHER, "size": 7, "version": None},
        {
            "provider": "aws",
            "bucket": "acme-weights-prod",
            "object_key": "models/a b.bin",
            "size": 123,
            "version": "v1",
        },
    ]


def test_ingest_objects_cli(cli, tmp_path):  # type: ignore[no-untyped-def]
    sizes = tmp_path / "sizes.csv"
    sizes.write_text(f"Bucket,Name,Size\n{BUCKET},{SHARD},42\n{BUCKET},x.bin,\n")
    db = tmp_path / "o.duckdb"
    result = cli("--db", str(db), "ingest", "objects", "--path", str(sizes), "--json")
    assert result.exit_code == 0, result.stderr
    row = json.loads(result.stdout)[0]
    assert (row["rows_read"], row["objects_upserted"], row["rows_without_size"]) == (2, 1, 1)
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    failed = cli("--db", str(db), "ingest", "objects", "--path", str(bad))
    assert failed.exit_code == 1 and "needs columns bucket" in failed.stderr


def test_estimates_missed_by_a_crash_are_made_by_the_next_run(store, tmp_path):  # type: ignore[no-untyped-def]
    store.execute(
        "INSERT INTO objects VALUES ('gcp', ?, ?, 100, NULL, 'test', TIMESTAMP '2025-01-01')",
        [BUCKET, SHARD],
    )
    _load(store, tmp_path, "1.jsonl", _reads(SHARD, T0, 3, "a"))
    # The state a crash between the load's commit and the estimate leaves behind.
    store.execute("UPDATE access_events SET bytes_out = NULL, bytes_estimated = false")
    store.execute("DELETE FROM cursors WHERE source = 'objects'")
    report = _load(store, tmp_path, "2.jsonl", _reads(OTHER, T0, 1, "b"))
    assert report.estimate.reads_estimated == 3  # the missed group; OTHER's size is unknown
    assert _bytes(store)[HYDRATOR]["bytes"] == 100
    assert store.scalar("SELECT max(value) FROM cursors WHERE source = 'objects'") == str(
        store.scalar("SELECT max(load_id) FROM loads")
    )
