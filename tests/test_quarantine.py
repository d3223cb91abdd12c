"""Bad input is quarantined with a reason, the rest of the batch lands, and the CLI exits 3."""

from __future__ import annotations

import datetime as dt
import gzip
import json
from pathlib import Path

from sentinel.config import CloudTrailSource
from sentinel.sources import cloudtrail
from sentinel.store import Store
from tests.cloudtrail_files import body, key_for, record, sample_records, write

DAY = dt.date(2025, 3, 1)


def _trail(tmp_path: Path) -> Path:
    root = tmp_path / "trail"
    write(root, key_for(DAY, 0, unique="GoodFileAAAAAAAA"), body(sample_records()))
    good_gz = body([record(key="k/after")])
    write(
        root,
        key_for(DAY, 5, unique="CorruptGzipBBBBB"),
        good_gz[:20] + b"\x00garbage" + good_gz[28:],
    )
    truncated = json.dumps({"Records": [record()]}).encode()[:-40]
    write(root, key_for(DAY, 10, unique="TruncatedJsonCCC"), gzip.compress(truncated))
    write(
        root,
        key_for(DAY, 15, unique="NoEnvelopeDDDDDD"),
        gzip.compress(b'{"awsAccountId": "1", "logFiles": []}'),
    )
    missing = record(key="k/missing")
    del missing["eventID"]
    future = record(key="k/future")
    future["eventVersion"] = "2.0"
    bad_time = record(key="k/time", time="yesterday")
    fine = record(key="k/fine")
    write(
        root,
        key_for(DAY, 20, unique="BadRecordsEEEEEE"),
        body([missing, future, bad_time, fine, "not an object"]),
    )  # type: ignore[list-item]
    return root


def test_each_kind_of_bad_input_is_quarantined_and_the_rest_lands(
    tmp_path: Path, store: Store
) -> None:
    report = cloudtrail.run(
        store, CloudTrailSource(path=str(_trail(tmp_path)), batch_files=8), keep_raw="none"
    )
    assert report.partial
    assert report.events_loaded == 13 + 1  # the sample file plus the one good record
    assert report.files_quarantined == 3
    assert report.records_quarantined == 4
    reasons = store.query(
        "SELECT reason, detail, record_index, uri FROM quarantine ORDER BY uri, record_index"
    )
    by_file = {(r["uri"].rsplit("_", 1)[-1][:16], r["reason"]) for r in reasons}
    assert ("CorruptGzipBBBBB", "corrupt_compression") in by_file
    assert ("TruncatedJsonCCC", "malformed_json") in by_file
    assert ("NoEnvelopeDDDDDD", "no_records_envelope") in by_file
    record_reasons = sorted(r["detail"] for r in reasons if r["record_index"] is not None)
    assert record_reasons == ["bad_value:eventTime", "missing_field:eventID", "not_an_object",
                              "unknown_event_version:2.0"]  # fmt: skip
    outcomes = dict(
        store.columns_and_rows("SELECT outcome, count(*) FROM source_files GROUP BY 1")[1]
    )
    assert outcomes == {"loaded": 2, "quarantined": 3}


def test_quarantined_files_are_not_retried_and_rerun_is_clean(tmp_path: Path, store: Store) -> None:
    source = CloudTrailSource(path=str(_trail(tmp_path)))
    cloudtrail.run(store, source, keep_raw="none")
    again = cloudtrail.run(store, source, keep_raw="none")
    assert (again.files_new, again.events_loaded, again.partial) == (0, 0, False)
    assert store.scalar("SELECT count(*) FROM quarantine") == 7


def test_cli_exits_3_and_lists_quarantine(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    trail = _trail(tmp_path)
    result = cli(
        "--db", str(tmp_path / "s.duckdb"), "ingest", "cloudtrail", "--path", str(trail), "--json"
    )
    assert result.exit_code == 3
    summary = json.loads(result.stdout)[0]
    assert summary["files_quarantined"] == 3 and summary["records_quarantined"] == 4
    listed = cli("--db", str(tmp_path / "s.duckdb"), "quarantine", "--format", "ndjson")
    assert listed.exit_code == 0
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert len(rows) == 7
    assert {r["reason"] for r in rows} == {
        "corrupt_compression", "malformed_json", "no_records_envelope", "missing_field",
        "unknown_event_version", "bad_value", "not_an_object"}  # fmt: skip
    sql = cli(
        "--db",
        str(tmp_path / "s.duckdb"),
        "sql",
        "SELECT count(*) AS n FROM v_quarantine",
        "--json",
    )
    assert json.loads(sql.stdout) == [{"n": 7}]
