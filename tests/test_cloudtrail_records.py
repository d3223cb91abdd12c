"""CloudTrail files are split into records before DuckDB reads them: the original text survives
byte for byte, odd but valid files load, unreadable ones are quarantined, and the spool is
cleaned up batch by batch."""

from __future__ import annotations

import datetime as dt
import gzip
import json
from pathlib import Path

import pytest

from sentinel.config import CloudTrailSource
from sentinel.errors import StoreError
from sentinel.ingest import InputFile
from sentinel.sources import cloudtrail
from sentinel.sources.cloudtrail_records import split, spool_root
from sentinel.store import Store
from tests.cloudtrail_files import body, key_for, record, write

DAY = dt.date(2025, 3, 1)


def _compact(rec: dict[str, object]) -> bytes:
    return json.dumps(rec, separators=(",", ":")).encode()


def test_raw_is_the_original_text_byte_for_byte(tmp_path: Path, store: Store) -> None:
    # Spacing, key order and escapes as CloudTrail wrote them; a re-serializer would change all
    # three ("\u00e9" would come back as a raw UTF-8 character).
    put = record("PutObject", key="models/caf\u00e9/shard-1")
    original = json.dumps(put, indent=None, separators=(", ", " : ")).encode()
    assert b"\\u00e9" in original
    trail = tmp_path / "trail"
    text = b'{ "Records" : [ ' + original + b" , " + _compact(record(key="a")) + b" ] }"
    write(trail, key_for(DAY, 0), gzip.compress(text))
    cloudtrail.run(store, CloudTrailSource(path=str(trail)), keep_raw="all")
    raw = store.scalar("SELECT raw::VARCHAR FROM access_events WHERE operation = 'PutObject'")
    assert raw.encode() == original
    assert store.scalar("SELECT object_key FROM access_events WHERE operation = 'PutObject'") == (
        "models/caf\u00e9/shard-1"
    )


def test_pretty_printed_plain_file_loads(tmp_path: Path, store: Store) -> None:
    trail = tmp_path / "trail"
    records = [record("PutObject", key="pretty/1"), record(key="pretty/2")]
    pretty = json.dumps({"Records": records}, indent=2).encode()
    write(trail, key_for(DAY, 0).removesuffix(".gz"), pretty)
    report = cloudtrail.run(store, CloudTrailSource(path=str(trail)), keep_raw="all")
    assert (report.events_loaded, report.partial) == (2, False)
    rows = store.query("SELECT object_key, raw, source_index FROM access_events ORDER BY 3")
    assert [r["object_key"] for r in rows] == ["pretty/1", "pretty/2"]
    # Newlines were whitespace: the kept record is the same JSON, on one line.
    assert json.loads(rows[0]["raw"]) == records[0]
    assert "\n" not in rows[0]["raw"]


def test_a_record_over_the_csv_readers_default_line_limit_loads(
    tmp_path: Path, store: Store
) -> None:
    trail = tmp_path / "trail"
    purge = record("DeleteObjects", key="")
    purge["requestParameters"]["delete"] = {
        "objects": [{"key": f"checkpoints/step-{i:08d}/model.safetensors"} for i in range(60_000)]
    }
    write(trail, key_for(DAY, 0), body([purge, record(key="after")]))
    report = cloudtrail.run(store, CloudTrailSource(path=str(trail)), keep_raw="all")
    assert (report.events_loaded, report.partial) == (2, False)
    longest = store.scalar("SELECT max(length(raw::VARCHAR)) FROM access_events")
    assert longest > 3 * 1024**2


def test_text_that_is_not_utf8_quarantines_its_file_only(tmp_path: Path, store: Store) -> None:
    trail = tmp_path / "trail"
    write(trail, key_for(DAY, 0, unique="GoodFileAAAAAAAA"), body([record(key="fine")]))
    latin1 = _compact({"Records": [record(key="PLACEHOLDER")]}).replace(b"PLACEHOLDER", b"caf\xe9")
    write(trail, key_for(DAY, 5, unique="Latin1BBBBBBBBBB"), gzip.compress(latin1))
    control = _compact({"Records": [record(key="PLACEHOLDER")]}).replace(b"PLACEHOLDER", b"a\x01b")
    write(trail, key_for(DAY, 9, unique="ControlCCCCCCCCC"), gzip.compress(control))
    report = cloudtrail.run(store, CloudTrailSource(path=str(trail)), keep_raw="none")
    assert (report.events_loaded, report.files_quarantined) == (1, 2)
    rows = store.query("SELECT uri, reason, detail FROM quarantine ORDER BY uri")
    assert [(r["uri"].rsplit("_", 1)[-1][:8], r["reason"]) for r in rows] == [
        ("Latin1BB", "malformed_json"),
        ("ControlC", "malformed_json"),
    ]
    assert "not UTF-8" in rows[0]["detail"]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (gzip.compress(b'{"Records": [{"a": 1}]}')[:-12], "corrupt_compression"),
        (b'{"Records": [{"a": 1}', "malformed_json"),
        (b'{"Records": {"a": 1}}', "no_records_envelope"),
        (b'{"Records": null}', "no_records_envelope"),
        (b"[]", "no_records_envelope"),
    ],
)
def test_split_names_what_is_wrong_with_a_file(tmp_path: Path, data: bytes, reason: str) -> None:
    path = tmp_path / "in.json"
    path.write_bytes(data)
    compression = "gzip" if data[:2] == b"\x1f\x8b" else "none"
    result = split(InputFile(str(path), path, len(data), compression), tmp_path / "out.txt")
    assert result.unreadable is not None and result.unreadable[0] == reason
    assert not (tmp_path / "out.txt").exists()


def test_empty_records_file_is_registered_as_loaded(tmp_path: Path, store: Store) -> None:
    trail = tmp_path / "trail"
    write(trail, key_for(DAY, 0, unique="EmptyAAAAAAAAAAA"), body([]))
    write(trail, key_for(DAY, 5), body([record()]))
    report = cloudtrail.run(store, CloudTrailSource(path=str(trail)), keep_raw="none")
    assert (report.files_loaded, report.events_loaded, report.partial) == (2, 1, False)
    outcome = store.scalar("SELECT outcome FROM source_files WHERE uri LIKE '%EmptyAAAA%'")
    assert outcome == "loaded"


def test_spool_holds_only_unfinished_batches(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setenv("SENTINEL_SPOOL_DIR", str(spool))
    assert spool_root() == spool
    trail = tmp_path / "trail"
    for minute in range(0, 60, 5):
        write(trail, key_for(DAY, minute, unique=f"File{minute:012d}"), body([record()]))
    seen: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        seen.append((total - done, sum(1 for p in spool.rglob("*") if p.is_file())))

    cloudtrail.run(
        store, CloudTrailSource(path=str(trail), batch_files=2), keep_raw="none", progress=progress
    )
    assert [left for left, _ in seen] == [10, 8, 6, 4, 2, 0]
    # Committed batches leave nothing behind; what remains was split ahead for later batches.
    assert all(files <= left for left, files in seen)
    assert list(spool.iterdir()) == []


def test_carriage_returns_byte_order_mark_and_empty_files(tmp_path: Path, store: Store) -> None:
    trail = tmp_path / "trail"
    crlf = json.dumps({"Records": [record(key="crlf")]}, indent=2).replace("\n", "\r\n")
    write(trail, key_for(DAY, 0, unique="CrlfAAAAAAAAAAAA"), gzip.compress(crlf.encode()))
    bom = b"\xef\xbb\xbf" + _compact({"Records": [record(key="bom")]})
    write(trail, key_for(DAY, 5, unique="BomBBBBBBBBBBBBB"), gzip.compress(bom))
    write(trail, key_for(DAY, 9, unique="EmptyCCCCCCCCCCC"), gzip.compress(b""))
    report = cloudtrail.run(store, CloudTrailSource(path=str(trail)), keep_raw="all")
    assert (report.events_loaded, report.files_quarantined) == (2, 1)
    keys = {r[0] for r in store.columns_and_rows("SELECT object_key FROM access_events")[1]}
    assert keys == {"crlf", "bom"}
    assert store.query("SELECT reason, detail FROM quarantine") == [
        {"reason": "no_records_envelope", "detail": "the file is empty"}
    ]


def test_unreadable_files_commit_with_their_batch(tmp_path: Path, store: Store) -> None:
    # One transaction for the whole batch: the cursor never moves past a file whose events did
    # not commit, even when a later file in the batch is quarantined before the load.
    trail = tmp_path / "trail"
    write(trail, key_for(DAY, 0, unique="GoodAAAAAAAAAAAA"), body([record(key="a")]))
    write(trail, key_for(DAY + dt.timedelta(days=3), 0, unique="CorruptBBBBBBBBB"), b"\x1f\x8bjunk")
    cloudtrail.run(store, CloudTrailSource(path=str(trail)), keep_raw="none")
    loads = store.columns_and_rows("SELECT files, events, quarantined FROM loads")[1]
    assert loads == [(2, 1, 1)]
    assert store.scalar("SELECT count(DISTINCT load_id) FROM source_files") == 1


def test_per_file_event_counts_exclude_duplicates_on_both_paths(
    tmp_path: Path, store: Store
) -> None:
    twice = record(key="twice", event_id="same-event")
    trail = tmp_path / "trail"
    write(trail, key_for(DAY, 0, unique="CleanAAAAAAAAAAA"), body([twice, twice, record()]))
    cloudtrail.run(store, CloudTrailSource(path=str(trail)), keep_raw="none")  # one pass
    broken = dict(record(key="broken"), eventTime="not a time")
    write(trail, key_for(DAY, 5, unique="DupesBBBBBBBBBBB"), body([twice, twice, record()]))
    write(trail, key_for(DAY, 9, unique="BrokenCCCCCCCCCC"), body([broken]))
    report = cloudtrail.run(store, CloudTrailSource(path=str(trail)), keep_raw="none")  # staged
    assert (report.events_loaded, report.events_duplicate, report.records_quarantined) == (1, 2, 1)
    counts = store.columns_and_rows("SELECT events FROM source_files ORDER BY uri")[1]
    assert counts == [(2,), (1,), (0,)]  # Clean, Dupes, Broken (sorted by time in the key)


def test_a_failed_run_stops_its_threads_and_removes_the_spool(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setenv("SENTINEL_SPOOL_DIR", str(spool))
    trail = tmp_path / "trail"
    for minute in range(0, 120, 2):
        write(trail, key_for(DAY, minute, unique=f"Many{minute:012d}"), body([record()] * 50))
    Store.open(db_path).close()  # a database the run may read but not write
    with Store.open(db_path, read_only=True) as readonly, pytest.raises(StoreError):
        cloudtrail.run(readonly, CloudTrailSource(path=str(trail), batch_files=2), keep_raw="none")
    assert list(spool.iterdir()) == []
