"""Build CloudTrail files and bucket layouts for tests."""

from __future__ import annotations

import copy
import datetime as dt
import gzip
import json
import uuid
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
ACCOUNT = "111122223333"


def sample_records() -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = json.loads((DATA / "cloudtrail-sample.json").read_text())[
        "Records"
    ]
    return records


def by_event_id(event_id_prefix: str) -> dict[str, Any]:
    return next(r for r in sample_records() if r["eventID"].startswith(event_id_prefix))


def record(name: str = "GetObject", *, key: str = "models/m/shard-1", bucket: str = "acme-weights-prod",
           actor: str = "arn:aws:iam::111122223333:role/ml/serving/weights-hydrator",
           time: str = "2025-03-01T10:00:00Z", event_id: str | None = None,
           bytes_out: int = 100) -> dict[str, Any]:  # fmt: skip
    """A minimal but valid S3 data event."""
    base = copy.deepcopy(sample_records()[7])  # a successful hydrator GetObject
    base.update({"eventName": name, "eventTime": time, "eventID": event_id or str(uuid.uuid4())})
    base["requestParameters"] = {"bucketName": bucket, "key": key}
    base["userIdentity"]["sessionContext"]["sessionIssuer"]["arn"] = actor
    base["additionalEventData"]["bytesTransferredOut"] = bytes_out
    return base


def key_for(day: dt.date, minute: int = 0, *, account: str = ACCOUNT, region: str = "us-east-1",
            org: str | None = None, prefix: str = "", unique: str = "AbCdEfGhIjKlMnOp") -> str:  # fmt: skip
    org_part = f"{org}/" if org else ""
    stamp = f"{day:%Y%m%d}T{minute // 60:02d}{minute % 60:02d}Z"
    return (f"{prefix}AWSLogs/{org_part}{account}/CloudTrail/{region}/{day:%Y/%m/%d}/"
            f"{account}_CloudTrail_{region}_{stamp}_{unique}.json.gz")  # fmt: skip


def body(records: list[dict[str, Any]], *, gz: bool = True) -> bytes:
    raw = json.dumps({"Records": records}).encode()
    return gzip.compress(raw, mtime=0) if gz else raw


def write(root: Path, key: str, data: bytes) -> Path:
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
