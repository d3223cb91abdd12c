"""`sentinel export`: hive-partitioned Parquet that other engines read, rewritten not duplicated."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from sentinel.store import Store
from tests.cloudtrail_files import body, key_for, record, sample_records, write


def test_export_partitions_by_provider_and_date_and_reruns_cleanly(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    trail = tmp_path / "trail"
    write(trail, key_for(dt.date(2025, 3, 1), 1), body(sample_records()))
    write(trail, key_for(dt.date(2025, 3, 2), 1), body([record(time="2025-03-02T08:00:00Z")]))
    db = str(tmp_path / "s.duckdb")
    assert cli("--db", db, "ingest", "cloudtrail", "--path", str(trail)).exit_code == 0
    out = tmp_path / "parquet"
    for _ in range(2):  # a second export rewrites the same partitions
        result = cli("--db", db, "export", "--out", str(out), "--json")
        assert result.exit_code == 0, result.stderr
    assert {r["table"]: r["rows"] for r in json.loads(result.stdout)} == {
        "access_events": 14, "findings": 0}  # fmt: skip
    dirs = sorted(p.relative_to(out).as_posix() for p in out.glob("access_events/*/*"))
    assert dirs == ["access_events/provider=aws/date=2025-03-01",
                    "access_events/provider=aws/date=2025-03-02"]  # fmt: skip
    with Store.open(":memory:") as store:
        source = f"read_parquet('{out}/access_events/*/*/*.parquet', hive_partitioning = true)"
        rows = store.query(
            f"SELECT provider, date, count(*) AS n FROM {source} GROUP BY ALL ORDER BY ALL"
        )
        columns, _ = store.columns_and_rows(f"SELECT * FROM {source} LIMIT 0")
    assert "raw" not in columns and "event_id" in columns  # raw only with --with-raw
    assert [(r["provider"], str(r["date"]), r["n"]) for r in rows] == [
        ("aws", "2025-03-01", 13), ("aws", "2025-03-02", 1)]  # fmt: skip
