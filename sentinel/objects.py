"""Object sizes, and the bytes they let us attribute to GCS reads.

GCS audit logs carry no bytes: a ``storage.objects.get`` entry says who read which object, never
how much. Sentinel therefore keeps the latest known size of every object in ``objects`` (from
``storage.objects.create`` responses, S3 Inventory, GCS inventory reports, or a manifest) and
estimates a read's ``bytes_out`` from it:

* Reads are grouped by (actor, bucket, object) within fixed ``ESTIMATE_WINDOW`` buckets of event
  time. The first read of a group carries the object's size, the others 0, all with
  ``bytes_estimated`` true. Ranged and parallel GETs of one shard (one download = dozens of
  entries) and metadata GETs (indistinguishable from media GETs in audit logs) therefore count
  the object once per window, and a group's sum never depends on load order.
* A read whose object size is unknown keeps ``bytes_out`` NULL (never 0) and is counted as
  unknown. When the size arrives later (a create event or an inventory load), those reads are
  filled in.

Fixed 15-minute buckets rather than gap-based sessions: a hydrator fetching a 70B model's shards
in parallel finishes a shard in seconds to minutes, so 15 minutes collapses its ranged GETs; a
bucket boundary can split one download into two counts at most (an over-estimate, never an
under-count of distinct downloads); and fixed buckets are deterministic, so re-estimating after a
late entry changes only which row carries the size, not the sum. Whole-model re-downloads more
often than every 15 minutes are under-counted; the report says so.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from sentinel import logs
from sentinel.errors import InputError, UsageError
from sentinel.store import Store

log = logs.get(__name__)

ESTIMATE_WINDOW = "15 minutes"
InventoryKind = Literal["auto", "s3-inventory", "gcs-inventory", "manifest"]
_READS = "provider = 'gcp' AND action = 'read' AND error_code IS NULL"


@dataclass
class EstimateReport:
    reads_estimated: int = 0
    reads_unknown_size: int = 0
    objects_unknown_size: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "reads_estimated": self.reads_estimated,
            "reads_unknown_size": self.reads_unknown_size,
            "objects_unknown_size": self.objects_unknown_size,
        }


@dataclass
class ObjectsReport:
    source: str
    kind: str
    files: int = 0
    rows_read: int = 0
    objects_upserted: int = 0
    rows_without_size: int = 0
    estimate: EstimateReport = field(default_factory=EstimateReport)

    def as_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "kind": self.kind,
            "files": self.files,
            "rows_read": self.rows_read,
            "objects_upserted": self.objects_upserted,
            "rows_without_size": self.rows_without_size,
            **self.estimate.as_dict(),
        }


# -- sizes ------------------------------------------------------------------------------------
def upsert_sizes(store: Store, select_sql: str, params: list[object] | None = None) -> None:
    """Upsert rows of ``select_sql`` (provider, bucket, object_key, size, version, source,
    seen_at) into ``objects``; the newest ``seen_at`` per object wins."""
    store.execute(
        "INSERT INTO objects SELECT * FROM ("
        f" SELECT provider, bucket, object_key, size, version, source, seen_at FROM ({select_sql})"
        " WHERE bucket IS NOT NULL AND object_key IS NOT NULL"
        " QUALIFY row_number() OVER (PARTITION BY provider, bucket, object_key"
        "                            ORDER BY seen_at DESC, size DESC NULLS LAST) = 1)"
        " ON CONFLICT (provider, bucket, object_key) DO UPDATE SET size = excluded.size,"
        " version = excluded.version, source = excluded.source, seen_at = excluded.seen_at"
        " WHERE excluded.seen_at >= objects.seen_at",
        params,
    )


def sizes_from_events(store: Store, load_id: int) -> int:
    """Object sizes from the successful GCS creates (``response.size``) of one load; returns
    how many creates carried a size."""
    where = (
        " FROM access_events WHERE load_id = ? AND provider = 'gcp' AND error_code IS NULL"
        " AND bytes_in IS NOT NULL AND object_key IS NOT NULL"
    )
    found = int(store.scalar("SELECT count(*)" + where, [load_id]))
    if found:
        upsert_sizes(
            store,
            "SELECT 'gcp' AS provider, bucket, object_key, bytes_in AS size,"
            " json_extract_string(raw, '$.protoPayload.response.generation') AS version,"
            " 'audit:' || operation AS source, event_time AS seen_at" + where,
            [load_id],
        )
    return found


# -- estimation -------------------------------------------------------------------------------
def estimate_bytes(store: Store, since_load_id: int, *, refill_unknown: bool) -> EstimateReport:
    """(Re)estimate ``bytes_out`` of the GCS reads loaded after ``since_load_id`` (with their
    whole (actor, object, window) groups) and, with ``refill_unknown``, of every read whose size
    was unknown. Idempotent: running it again, or after a crash, gives the same rows."""
    pick = "load_id > ?" + (" OR bytes_out IS NULL" if refill_unknown else "")
    window = f"time_bucket(INTERVAL '{ESTIMATE_WINDOW}', event_time)"
    lo, hi = store.columns_and_rows(
        f"SELECT min({window}), max({window}) FROM access_events WHERE {_READS} AND ({pick})",
        [since_load_id],
    )[1][0]
    report = EstimateReport()
    if lo is not None:
        # Zone maps prune the member scan to the time span of the affected groups.
        changed = store.columns_and_rows(
            f"""
UPDATE access_events AS e SET bytes_out = c.bytes, bytes_estimated = c.bytes IS NOT NULL
FROM (
  WITH groups AS (
    SELECT DISTINCT actor, bucket, object_key, {window} AS w
    FROM access_events WHERE {_READS} AND ({pick})
  ),
  members AS (
    SELECT a.event_id, a.event_time, a.actor, a.bucket, a.object_key, g.w
    FROM (SELECT * FROM access_events WHERE {_READS}
          AND event_time >= ? AND event_time < ? + INTERVAL '{ESTIMATE_WINDOW}') a
    JOIN groups g
      ON a.actor IS NOT DISTINCT FROM g.actor AND a.bucket = g.bucket
     AND a.object_key IS NOT DISTINCT FROM g.object_key
     AND time_bucket(INTERVAL '{ESTIMATE_WINDOW}', a.event_time) = g.w
  )
  SELECT m.event_id,
         CASE WHEN row_number() OVER (PARTITION BY m.actor, m.bucket, m.object_key, m.w
                                      ORDER BY m.event_time, m.event_id) = 1
              THEN o.size ELSE o.size * 0 END AS bytes
  FROM members m LEFT JOIN objects o
    ON o.provider = 'gcp' AND o.bucket = m.bucket AND o.object_key = m.object_key
) c
WHERE e.provider = 'gcp' AND e.event_id = c.event_id
  AND e.event_time >= ? AND e.event_time < ? + INTERVAL '{ESTIMATE_WINDOW}'
  AND (e.bytes_out IS DISTINCT FROM c.bytes OR e.bytes_estimated <> (c.bytes IS NOT NULL))
""",
            [since_load_id, lo, hi, lo, hi],
        )[1]
        report.reads_estimated = int(changed[0][0]) if changed else 0
    report.reads_unknown_size, report.objects_unknown_size = unknown_sizes(store)
    return report


_CURSOR = ("objects", "estimated_through_load")


def estimate_pending(store: Store, *, sizes_changed: bool = False) -> EstimateReport:
    """Estimate every load not estimated yet (a cursor in ``cursors`` records the newest load
    done, committed with the estimates), and refill reads of unknown size when object sizes
    may have changed since: ``sizes_changed``, or a pending load carried create sizes. Call it
    after each ingest run; a crash before it leaves the work for the next call."""
    with store.transaction():
        since = int(store.columns_and_rows(
            "SELECT coalesce(max(value::BIGINT), 0) FROM cursors WHERE source = ? AND key = ?",
            list(_CURSOR),
        )[1][0][0])  # fmt: skip
        newest = int(store.columns_and_rows("SELECT coalesce(max(load_id), 0) FROM loads")[1][0][0])
        if not sizes_changed:
            sizes_changed = bool(store.columns_and_rows(
                "SELECT count(*) FROM access_events WHERE load_id > ? AND provider = 'gcp'"
                " AND bytes_in IS NOT NULL", [since],
            )[1][0][0])  # fmt: skip
        report = estimate_bytes(store, since, refill_unknown=sizes_changed)
        store.execute(
            "INSERT INTO cursors VALUES (?, ?, ?, now()::TIMESTAMP) ON CONFLICT (source, key)"
            " DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            [*_CURSOR, str(newest)],
        )
    return report


def unknown_sizes(store: Store) -> tuple[int, int]:
    """Successful GCS reads without a byte count, and the distinct objects they read."""
    row = store.columns_and_rows(
        "SELECT count(*), count(DISTINCT (bucket, object_key)) FROM access_events"
        f" WHERE {_READS} AND bytes_out IS NULL"
    )[1][0]
    return int(row[0]), int(row[1])


# -- inventories and manifests ----------------------------------------------------------------
def load_inventory(
    store: Store,
    path: Path,
    *,
    kind: InventoryKind = "auto",
    provider: str | None = None,
    as_of: dt.datetime | None = None,
) -> ObjectsReport:
    """Load object sizes from an S3 Inventory (its ``manifest.json``), a GCS inventory report
    (CSV or Parquet), or a manifest (CSV/JSON/NDJSON/Parquet of bucket, key, size), then fill in
    the GCS reads whose size was unknown. One transaction."""
    if not path.is_file():
        raise UsageError(f"no such file: {path}", hint="pass --path FILE")
    seen_at = (as_of or dt.datetime.now(dt.UTC)).replace(tzinfo=None)
    if kind == "auto":
        kind = "s3-inventory" if path.name == "manifest.json" else "manifest"
    report = ObjectsReport(source=str(path), kind=kind)
    if kind == "s3-inventory":
        select, files = _s3_inventory(store, path)
        default_provider = "aws"
    else:
        files = [path]
        select = _table_select(store, path)
        default_provider = "gcp"
    report.files = len(files)
    stage = (
        f"SELECT coalesce(provider, ?) AS provider, bucket, object_key,"
        f" TRY_CAST(TRY_CAST(size AS DOUBLE) AS BIGINT) AS size, version, ? AS source,"
        f" ?::TIMESTAMP AS seen_at FROM ({select})"
    )
    params: list[object] = [provider or default_provider, f"{kind}:{path.name}", seen_at]
    with store.transaction():
        store.execute("CREATE OR REPLACE TEMP TABLE _inventory AS " + stage, params)
        report.rows_read = int(store.scalar("SELECT count(*) FROM _inventory"))
        report.rows_without_size = int(
            store.scalar("SELECT count(*) FROM _inventory WHERE size IS NULL")
        )
        report.objects_upserted = _count_upserts(store)
        report.estimate = estimate_pending(store, sizes_changed=True)
        store.execute("DROP TABLE _inventory")
    log.info("objects.loaded", **report.as_dict())
    return report


def _count_upserts(store: Store) -> int:
    changed = int(
        store.scalar(
            "SELECT count(*) FROM _inventory i LEFT JOIN objects o USING (provider, bucket,"
            " object_key) WHERE i.size IS NOT NULL AND (o.size IS NULL"
            " OR (o.size IS DISTINCT FROM i.size AND i.seen_at >= o.seen_at))"
        )
    )
    upsert_sizes(store, "SELECT * FROM _inventory WHERE size IS NOT NULL")
    return changed


def _columns(store: Store, reader: str) -> dict[str, str]:
    cols, _ = store.columns_and_rows(f"SELECT * FROM {reader} LIMIT 0")
    return {c.lower().replace("_", "").replace(" ", ""): c for c in cols}


def _reader(path: Path) -> str:
    quoted = "'" + str(path).replace("'", "''") + "'"
    name = path.name.lower()
    if name.endswith(".parquet"):
        return f"read_parquet({quoted})"
    if name.endswith((".json", ".jsonl", ".ndjson", ".json.gz", ".jsonl.gz")):
        return f"read_json({quoted}, format='auto')"
    return f"read_csv({quoted}, header=true, all_varchar=true)"


def _table_select(store: Store, path: Path) -> str:
    """A manifest or GCS inventory report: columns found by name, case-insensitively."""
    reader = _reader(path)
    cols = _columns(store, reader)
    bucket = cols.get("bucket") or cols.get("bucketname")
    key = cols.get("key") or cols.get("name") or cols.get("objectkey") or cols.get("object")
    size = cols.get("size") or cols.get("bytes") or cols.get("sizebytes")
    if not (bucket and key and size):
        raise InputError(
            "missing_columns",
            f"{path}: needs columns bucket, key (or name) and size; found {sorted(cols.values())}",
        )
    version = cols.get("version") or cols.get("generation") or cols.get("versionid")
    prov = cols.get("provider")
    prov_expr = f'"{prov}"' if prov else "NULL"
    version_expr = f'"{version}"' if version else "NULL"
    return (
        f"SELECT {prov_expr}::VARCHAR AS provider,"
        f' "{bucket}"::VARCHAR AS bucket, "{key}"::VARCHAR AS object_key, "{size}" AS size,'
        f" {version_expr}::VARCHAR AS version FROM {reader}"
    )


def _s3_inventory(store: Store, manifest: Path) -> tuple[str, list[Path]]:
    """S3 Inventory: ``manifest.json`` names the data files and (for CSV) their column order.
    Locally the layout is ``<config>/<timestamp>/manifest.json`` beside ``<config>/data/``."""
    try:
        doc = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError("malformed_manifest", f"{manifest}: {exc}") from exc
    fmt = str(doc.get("fileFormat", "CSV")).upper()
    data_dir = manifest.parent.parent / "data"
    files = []
    for entry in doc.get("files", []):
        name = Path(str(entry.get("key", ""))).name
        candidate = data_dir / name
        files.append(candidate if candidate.exists() else manifest.parent / name)
    missing = [str(f) for f in files if not f.exists()]
    if missing or not files:
        raise InputError("missing_data_files", f"{manifest}: data files not found: {missing}")
    listed = "[" + ", ".join("'" + str(f).replace("'", "''") + "'" for f in files) + "]"
    if fmt == "PARQUET":
        reader = f"read_parquet({listed})"
        cols = _columns(store, reader)
        key_expr = f'"{cols["key"]}"'
    elif fmt == "CSV":
        schema = [c.strip() for c in str(doc.get("fileSchema", "")).split(",") if c.strip()]
        if not schema:
            raise InputError("malformed_manifest", f"{manifest}: no fileSchema")
        names = ", ".join(f"'{c}': 'VARCHAR'" for c in schema)
        reader = f"read_csv({listed}, header=false, columns={{{names}}})"
        cols = {c.lower(): c for c in schema}
        # S3 Inventory CSV URL-encodes object keys.
        key_expr = f'url_decode("{cols["key"]}")'
    else:
        raise InputError("unsupported_format", f"{manifest}: fileFormat {fmt} (use CSV/Parquet)")
    cols = {k.lower().replace("_", ""): v for k, v in cols.items()}
    latest = ""
    if "islatest" in cols:
        latest = f" WHERE lower(\"{cols['islatest']}\"::VARCHAR) = 'true'"
    version = f'"{cols["versionid"]}"' if "versionid" in cols else "NULL"
    select = (
        f'SELECT NULL::VARCHAR AS provider, "{cols["bucket"]}"::VARCHAR AS bucket,'
        f' {key_expr}::VARCHAR AS object_key, "{cols["size"]}" AS size,'
        f" {version}::VARCHAR AS version FROM {reader}{latest}"
    )
    return select, files
