"""``sentinel export``: hive-partitioned Parquet of events and findings for engines beyond one
machine (Athena, Trino, Spark, DuckDB) — ``access_events/provider=aws/date=2025-03-01/*.parquet``.

The export reads the database read-only and rewrites the partitions it covers, so running it
again (or on a schedule) replaces what it wrote instead of duplicating it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from sentinel.errors import UsageError
from sentinel.store import Store

# (table, partition expression per row, partition columns)
_TABLES = (
    ("access_events", "strftime(event_time, '%Y-%m-%d')", ("provider", "date")),
    ("findings", "strftime(coalesce(last_seen, created_at), '%Y-%m-%d')", ("date",)),
)


@dataclass(frozen=True)
class Exported:
    table: str
    rows: int
    path: str


def export(
    store: Store, out: Path, *, since: dt.datetime | None = None, with_raw: bool = False
) -> list[Exported]:
    """Write each table under ``out/<table>/`` partitioned by date (and provider for events)."""
    if str(out).startswith(("s3://", "gs://")):
        raise UsageError(
            "export writes to a local directory",
            hint="export locally, then sync: aws s3 sync DIR s3://bucket/prefix",
        )
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for table, date_expr, partitions in _TABLES:
        time_column = "event_time" if table == "access_events" else "last_seen"
        where = f"WHERE {time_column} >= ?" if since else ""
        exclude = "" if with_raw or table != "access_events" else " EXCLUDE (raw)"
        target = out / table
        select = f"SELECT *{exclude}, {date_expr} AS date FROM {table} {where}"
        rows = int(store.scalar(f"SELECT count(*) FROM ({select})", [since] if since else None))
        if rows:
            store.execute(
                f"COPY ({select}) TO '{_quote(target)}' (FORMAT parquet, COMPRESSION zstd,"
                f" PARTITION_BY ({', '.join(partitions)}), OVERWRITE_OR_IGNORE true,"
                " FILENAME_PATTERN 'part-{i}')",
                [since] if since else None,
            )
        results.append(Exported(table, rows, str(target)))
    return results


def _quote(path: Path) -> str:
    return str(path.resolve()).replace("'", "''")
