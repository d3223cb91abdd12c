"""Find the original record behind an ``access_events`` row.

Raw records are kept only by policy (``store.keep_raw``); every row still carries ``source_uri``
and ``source_index``, so the original can be read back from the immutable source file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sentinel.config import Config
from sentinel.errors import SourceError, UsageError
from sentinel.store import Store


def show(store: Store, cfg: Config, event_id: str) -> dict[str, Any]:
    rows = store.query(
        "SELECT provider, event_id, source_uri, source_index, raw FROM access_events"
        " WHERE event_id = ? OR logical_id = ? ORDER BY provider, event_id",
        [event_id, event_id],
    )
    if not rows:
        raise UsageError(f"no event with id {event_id!r}", hint="ids are in access_events.event_id")
    row = rows[0]
    if row["raw"] is not None:
        return {"event_id": row["event_id"], "from": "database", "record": json.loads(row["raw"])}
    uri = row["source_uri"].split("#part=", 1)[0]
    if uri.startswith("logging-api://"):
        log_name, timestamp, insert_id = row["event_id"].split("|")
        raise SourceError(
            "this event came from the Cloud Logging API and its raw entry was not kept",
            hint=f'gcloud logging read \'logName="{log_name}" AND insertId="{insert_id}" AND '
            f'timestamp="{timestamp}"\' (or set store.keep_raw = "all")',
        )
    data = _read_source(cfg, uri)
    if (
        row["provider"] == "gcp"
    ):  # line-delimited LogEntry files: source_index is the line (1-based)
        record = _line_at(data, int(row["source_index"]) - 1)
    else:
        record = _record_at(data, int(row["source_index"]))
    return {"event_id": row["event_id"], "from": uri, "record": record}


def _read_source(cfg: Config, uri: str) -> bytes:
    from sentinel.sources.cloudtrail import gunzip_bytes

    if uri.startswith("s3://"):
        bucket, _, key = uri[5:].partition("/")
        return gunzip_bytes(_s3_get(cfg, bucket, key))
    path = Path(uri)
    if not path.exists():
        raise SourceError(
            f"source file {uri} is gone and the raw record was not kept",
            hint="set store.keep_raw = 'all' to keep every record in the database",
        )
    return gunzip_bytes(path.read_bytes())


def _s3_get(cfg: Config, bucket: str, key: str) -> bytes:
    from sentinel.sources.cloudtrail import make_s3_client

    source = next((s for s in cfg.sources.cloudtrail if s.bucket == bucket), None)
    if source is None:
        raise SourceError(f"no configured CloudTrail source reads bucket {bucket}")
    client = make_s3_client(source)
    body: bytes = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    return body


def _record_at(data: bytes, index: int) -> Any:
    try:
        return json.loads(data)["Records"][index]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise SourceError(f"record {index} not found in its source file") from exc


def _line_at(data: bytes, index: int) -> Any:
    lines = data.decode("utf-8").splitlines()
    if not 0 <= index < len(lines):
        raise SourceError(f"line {index + 1} not found in its source file")
    return json.loads(lines[index])
