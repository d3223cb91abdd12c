"""GCS sink exports and LogEntry normalization, through the real CLI and a real DuckDB file."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import shutil
from pathlib import Path
from typing import Any

from sentinel.config import GcsAuditSource
from sentinel.sources.gcs import run_export
from sentinel.store import Store
from tests.gcs_fixtures import (  # noqa: F401  (fresh_logs is an autouse fixture)
    BUCKET,
    HYDRATOR,
    entry,
    export_path,
    fresh_logs,
    write_ndjson,
)

SAMPLE = Path(__file__).parent / "data" / "gcs-data-access.jsonl"
T0 = dt.datetime(2025, 3, 1, 10, 0, 0, 250000)


def _events(db: Path, where: str = "true") -> list[dict[str, Any]]:
    with Store.open(db) as s:
        return s.query(f"SELECT * FROM access_events WHERE {where} ORDER BY event_time, event_id")


def test_sample_file_normalizes_every_scenario_and_collapses_the_duplicate(cli, tmp_path):  # type: ignore[no-untyped-def]
    db = tmp_path / "s.duckdb"
    first = cli("--db", str(db), "ingest", "gcs", "--path", str(SAMPLE), "--json")
    assert first.exit_code == 0, first.stderr
    report = json.loads(first.stdout)[0]
    assert (report["events_loaded"], report["events_duplicate"]) == (9, 1)
    assert report["records_quarantined"] == 0
    rows = {r["event_id"].rsplit("|", 1)[1]: r for r in _events(db)}
    get = rows["ujzde8gxd6nc"]
    assert get["event_id"] == (
        "projects/acme-ml-prod/logs/cloudaudit.googleapis.com%2Fdata_access"
        "|2025-03-01T10:02:41.118204513Z|ujzde8gxd6nc"
    )
    assert get["event_time"] == dt.datetime(2025, 3, 1, 10, 2, 41, 118204)
    assert (get["provider"], get["account"], get["region"]) == (
        "gcp",
        "acme-ml-prod",
        "us-central1",
    )
    assert (get["actor"], get["actor_type"], get["action"]) == (HYDRATOR, "serviceAccount", "read")
    assert (get["bucket"], get["object_key"]) == (
        BUCKET,
        "llm-70b/v3.2/model-00001-of-00030.safetensors",
    )
    assert get["src_ip"] == "10.128.0.42"
    assert not get["user_agent"].endswith("gzip(gfe)")
    assert get["source_index"] == 1 and get["source_uri"] == str(SAMPLE)
    impersonated = rows["f10epf91dhod"]
    assert impersonated["actor"] == "eval-runner@acme-ml-prod.iam.gserviceaccount.com"
    assert impersonated["actor_session"] == f"erin@acme.example > {impersonated['actor']}"
    denied = rows["zdoc9is0j8ht"]
    assert denied["actor"] is None and denied["actor_type"] == "redacted"
    assert denied["error_code"] == "PERMISSION_DENIED" and denied["bytes_out"] == 0
    assert rows["9lgmxg9edn58"]["action"] == "list" and rows["9lgmxg9edn58"]["object_key"] is None
    create = rows["1u33xtplpft7"]
    assert (create["action"], create["bytes_in"]) == ("write", 4984292344)
    assert rows["5v2seh60kvj5"]["action"] == "delete"
    assert rows["0ce9uvw53efr"]["caller_account"] == "partner-proj-123"
    assert rows["4edt2sywb3wk"]["action"] == "tamper"  # setIamPermissions
    assert rows["h5dnsipzz5fk"]["action"] == "tamper"  # lifecycle rule + retention removed
    # The create's response.size became a known object size.
    with Store.open(db) as s:
        sizes = s.query("SELECT object_key, size, version, source FROM objects")
    assert sizes == [
        {
            "object_key": "llm-70b/v3.3/model-00001-of-00030.safetensors",
            "size": 4984292344,
            "version": "1740823917288512",
            "source": "audit:storage.objects.create",
        }
    ]
    again = cli("--db", str(db), "ingest", "gcs", "--path", str(SAMPLE), "--json")
    assert json.loads(again.stdout)[0]["files_new"] == 0
    assert len(_events(db)) == 9


def _write_export(root: Path) -> None:
    hour = dt.datetime(2025, 3, 1, 10)
    write_ndjson(
        export_path(root, "data_access", hour),
        [entry("storage.objects.get", T0 + dt.timedelta(seconds=i), f"get{i}") for i in range(5)],
        extra_lines=('{"protoPayload": {"methodName": "storage.objects.get"', "[1, 2]"),
    )
    write_ndjson(
        export_path(root, "activity", hour),
        [
            entry(
                "storage.setIamPermissions",
                T0,
                "iam1",
                actor="carol@acme.example",
                key=None,
                log="activity",
            )
        ],
    )
    gz = export_path(root, "data_access", hour + dt.timedelta(hours=1))
    gz = gz.with_name(gz.name + ".gz")
    gz.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps(entry("storage.objects.get", T0 + dt.timedelta(hours=1), "gz1")),
        json.dumps(entry("storage.objects.get", T0, "get0")),
    ]  # duplicate of the first file
    gz.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    broken = export_path(root, "data_access", hour + dt.timedelta(hours=2))
    broken = broken.with_name(broken.name + ".gz")
    broken.write_bytes(gzip.compress(b'{"a": 1}\n' * 50)[:20])
    write_ndjson(export_path(root, "system_event", hour), [entry("x", T0, "sys")])
    (root / "README.txt").write_text("not a log\n")


def test_sink_export_loads_once_and_quarantines_bad_lines_and_files(cli, tmp_path):  # type: ignore[no-untyped-def]
    root = tmp_path / "sink"
    _write_export(root)
    db = tmp_path / "e.duckdb"
    result = cli("--db", str(db), "ingest", "gcs", "--path", str(root), "--json")
    assert result.exit_code == 3, result.stderr  # partial: quarantine happened
    report = json.loads(result.stdout)[0]
    assert report["files_listed"] == 6
    assert report["files_ignored_by_reason"] == {"log_system_event": 1, "not_audit_export": 1}
    assert (report["events_loaded"], report["events_duplicate"]) == (7, 1)
    assert (report["records_quarantined"], report["files_quarantined"]) == (2, 1)
    with Store.open(db) as s:
        quarantined = s.query(
            "SELECT uri, record_index, reason FROM quarantine ORDER BY uri, record_index"
        )
        cursors = s.query("SELECT key, value FROM cursors WHERE source LIKE 'gcs:%' ORDER BY key")
    bad_lines = [q for q in quarantined if q["record_index"] is not None]
    assert [(q["record_index"], q["reason"]) for q in bad_lines] == [
        (6, "malformed_json"),
        (7, "not_an_object"),
    ]
    assert bad_lines[0]["uri"].endswith("10:00:00_10:59:59_S0.json")
    whole = [q for q in quarantined if q["record_index"] is None]
    assert len(whole) == 1 and whole[0]["uri"].endswith("12:00:00_12:59:59_S0.json.gz")
    assert cursors == [
        {"key": "activity", "value": "2025-03-01"},
        {"key": "data_access", "value": "2025-03-01"},
    ]
    # A second run reads nothing; a new hourly file (with a re-delivered entry) loads only news.
    assert (
        json.loads(cli("--db", str(db), "ingest", "gcs", "--path", str(root), "--json").stdout)[0][
            "files_new"
        ]
        == 0
    )
    write_ndjson(
        export_path(root, "data_access", dt.datetime(2025, 3, 2, 0)),
        [
            entry("storage.objects.get", T0 + dt.timedelta(seconds=1), "get1"),
            entry(
                "storage.objects.delete",
                T0 + dt.timedelta(days=1),
                "del1",
                actor="bob@acme.example",
            ),
        ],
    )
    third = json.loads(cli("--db", str(db), "ingest", "gcs", "--path", str(root), "--json").stdout)
    assert (third[0]["files_new"], third[0]["events_loaded"], third[0]["events_duplicate"]) == (
        1,
        1,
        1,
    )
    assert len(_events(db)) == 8


def test_backfill_by_day_folder_leaves_the_cursor_alone(store, tmp_path):  # type: ignore[no-untyped-def]
    root = tmp_path / "sink"
    for day in (1, 2, 3):
        write_ndjson(
            export_path(root, "data_access", dt.datetime(2025, 3, day, 5)),
            [entry("storage.objects.get", dt.datetime(2025, 3, day, 5), f"g{day}")],
        )
    report = run_export(
        store,
        GcsAuditSource(),
        root,
        keep_raw="all",
        since=dt.date(2025, 3, 2),
        until=dt.date(2025, 3, 2),
    )
    assert report.events_loaded == 1 and report.files_ignored == {"outside_window": 2}
    assert store.scalar("SELECT count(*) FROM cursors WHERE source <> 'objects'") == 0


def test_actions_resource_split_and_watched_buckets(store, tmp_path):  # type: ignore[no-untyped-def]
    tricky = "runs/objects/7/objects/weights.bin"  # "/objects/" inside the object name
    entries = [
        entry("storage.objects.get", T0, "a1", key=tricky),
        entry(
            "storage.buckets.update",
            T0,
            "a2",
            key=None,
            log="activity",
            request={"metadata": {"versioning": {}}},
        ),
        entry(
            "storage.buckets.update",
            T0,
            "a3",
            key=None,
            log="activity",
            request={"metadata": {"labels": {"team": "ml"}}},
        ),
        entry(
            "storage.buckets.update",
            T0,
            "a4",
            key=None,
            log="activity",
            request={"metadata": {"softDeletePolicy": {"retentionDurationSeconds": "0"}}},
        ),
        entry("storage.objects.patch", T0, "a5", request={"metadata": {"contentType": "x"}}),
        entry(
            "storage.objects.update",
            T0,
            "a6",
            request={"metadata": {"retention": {"mode": "Unlocked"}}},
        ),
        entry("storage.objects.update", T0, "a7", request={"overrideUnlockedRetention": True}),
        entry("storage.buckets.delete", T0, "a8", key=None, log="activity"),
        entry("storage.objects.get", T0, "a9", bucket="some-other-bucket"),
        entry(
            "storage.objects.get",
            T0,
            "a10",
            actor=None,
            status={"code": 7, "message": "PERMISSION_DENIED"},
        ),
        entry("storage.hmacKeys.create", T0, "a11", key=None),
    ]
    no_bucket = entry("storage.buckets.list", T0, "a12", key=None)
    del no_bucket["resource"]["labels"]["bucket_name"]
    del no_bucket["protoPayload"]["resourceName"]
    path = write_ndjson(tmp_path / "entries.jsonl", [*entries, no_bucket])
    report = run_export(store, GcsAuditSource(), path, keep_raw="non_read", buckets=(BUCKET,))
    assert report.records_skipped == 2  # the unwatched bucket, and no bucket at all
    assert report.events_loaded + report.records_skipped == len(entries) + 1
    got = {r["event_id"].rsplit("|", 1)[1]: r for r in store.query("SELECT * FROM access_events")}
    assert got["a1"]["object_key"] == tricky and got["a1"]["bucket"] == BUCKET
    actions = {k: v["action"] for k, v in got.items()}
    assert actions == {
        "a1": "read",
        "a2": "tamper",
        "a3": "write",
        "a4": "tamper",
        "a5": "write",
        "a6": "tamper",
        "a7": "tamper",
        "a8": "tamper",
        "a10": "read",
        "a11": "other",
    }
    # keep_raw = non_read: successful reads drop their raw JSON, everything else keeps it.
    assert got["a1"]["raw"] is None and got["a10"]["raw"] is not None
    assert json.loads(got["a2"]["raw"])["insertId"] == "a2"


def test_missing_fields_and_bad_timestamps_are_quarantined_per_line(store, tmp_path):  # type: ignore[no-untyped-def]
    good = entry("storage.objects.get", T0, "ok")
    no_insert = {k: v for k, v in entry("storage.objects.get", T0, "x").items() if k != "insertId"}
    bad_time = entry("storage.objects.get", T0, "bt") | {"timestamp": "yesterday"}
    not_storage = entry("x", T0, "n") | {"resource": {"type": "gce_instance"}}
    not_storage["protoPayload"]["serviceName"] = "compute.googleapis.com"
    path = write_ndjson(tmp_path / "mixed.jsonl", [good, no_insert, bad_time, not_storage])
    shutil.copy(path, tmp_path / "copy.jsonl")
    report = run_export(store, GcsAuditSource(), path, keep_raw="all")
    assert (report.events_loaded, report.records_quarantined, report.records_skipped) == (1, 2, 1)
    reasons = store.query("SELECT record_index, reason FROM quarantine ORDER BY record_index")
    assert reasons == [
        {"record_index": 2, "reason": "missing_field"},
        {"record_index": 3, "reason": "bad_value"},
    ]
    details = store.query("SELECT detail FROM quarantine ORDER BY record_index")
    assert details[0]["detail"] == "missing_field:insertId"


def test_big_files_load_in_parts_with_original_line_numbers(store, tmp_path):  # type: ignore[no-untyped-def]
    entries = [
        entry("storage.objects.get", T0 + dt.timedelta(seconds=i), f"p{i}") for i in range(40)
    ]
    root = tmp_path / "sink"
    path = export_path(root, "data_access", dt.datetime(2025, 3, 1, 10))
    write_ndjson(path, entries[:30], extra_lines=("{broken",))
    with path.open("a") as handle:
        handle.writelines(json.dumps(e) + "\n" for e in entries[30:])
    gz = export_path(root, "data_access", dt.datetime(2025, 3, 1, 11))
    gz = gz.with_name(gz.name + ".gz")
    gz.write_bytes(gzip.compress(path.read_bytes()))
    part_bytes = 4 * len(json.dumps(entries[0]))  # about 4 lines per part
    report = run_export(store, GcsAuditSource(), root, keep_raw="none", part_bytes=part_bytes)
    assert (report.events_loaded, report.events_duplicate) == (40, 40)
    assert (report.records_quarantined, report.files_loaded) == (2, 2)
    lines = store.query("SELECT DISTINCT uri, record_index FROM quarantine ORDER BY uri")
    assert [(q["uri"].split("#")[0], q["record_index"]) for q in lines] == [
        (str(path), 31),
        (str(gz), 31),
    ]
    rows = store.query(
        "SELECT source_uri, source_index FROM access_events WHERE event_id LIKE '%|p35'"
    )
    assert rows[0]["source_index"] == 37 and "#part=" in rows[0]["source_uri"]
    registered = {r["uri"] for r in store.query("SELECT uri FROM source_files")}
    assert {str(path), str(gz)} <= registered
    assert (
        run_export(store, GcsAuditSource(), root, keep_raw="none", part_bytes=part_bytes).files_new
        == 0
    )
    # A crash before the last part committed: only the missing part is read again.
    store.execute("DELETE FROM access_events WHERE source_uri = ?", [str(path)])
    store.execute("DELETE FROM source_files WHERE uri = ?", [str(path)])
    again = run_export(store, GcsAuditSource(), path, keep_raw="none", part_bytes=part_bytes)
    assert (again.files_loaded, again.events_duplicate) == (1, 0) and again.events_loaded > 0
    assert store.scalar("SELECT count(*) FROM access_events") == 40
