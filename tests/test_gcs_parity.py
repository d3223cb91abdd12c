"""One scenario on both clouds gives the same actors, actions and buckets in ``access_events``."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path
from typing import Any

from sentinel.config import CloudTrailSource, GcsAuditSource
from sentinel.sources import cloudtrail
from sentinel.sources.gcs import run_export
from sentinel.store import Store
from tests.gcs_fixtures import entry, fresh_logs, write_ndjson  # noqa: F401  (autouse fixture)

ACCOUNT = "111122223333"
PROJECT = "acme-ml-prod"
T0 = dt.datetime(2025, 3, 1, 10, 0, 0)

# (actor, what, bucket, key, denied)
SCENARIO: list[tuple[str, str, str, str | None, bool]] = [
    ("weights-hydrator", "get", "weights-prod", "llm/model-00001.safetensors", False),
    ("weights-hydrator", "get", "weights-prod", "llm/model-00002.safetensors", False),
    ("weights-hydrator", "list", "weights-prod", None, False),
    ("trainer", "put", "ckpt-prod", "run-7/step-1000.pt", False),
    ("notebook-runner", "get", "weights-prod", "llm/model-00001.safetensors", True),
    ("ops-admin", "delete", "ckpt-prod", "promoted/step-900.pt", False),
    ("ops-admin", "versioning_off", "ckpt-prod", None, False),
    ("ops-admin", "grant_read", "weights-prod", None, False),
]
_AWS_NAMES = {
    "get": "GetObject",
    "list": "ListObjects",
    "put": "PutObject",
    "delete": "DeleteObject",
    "versioning_off": "PutBucketVersioning",
    "grant_read": "PutBucketPolicy",
}
_GCP_NAMES = {
    "get": "storage.objects.get",
    "list": "storage.objects.list",
    "put": "storage.objects.create",
    "delete": "storage.objects.delete",
    "versioning_off": "storage.buckets.update",
    "grant_read": "storage.setIamPermissions",
}


def _cloudtrail_record(
    i: int, actor: str, what: str, bucket: str, key: str | None, denied: bool
) -> dict[str, Any]:
    params: dict[str, Any] = {"bucketName": bucket, "Host": f"{bucket}.s3.amazonaws.com"}
    if key:
        params["key"] = key
    record: dict[str, Any] = {
        "eventVersion": "1.11",
        "userIdentity": {
            "type": "AssumedRole",
            "arn": f"arn:aws:sts::{ACCOUNT}:assumed-role/{actor}/session-{i}",
            "accountId": ACCOUNT,
            "sessionContext": {
                "sessionIssuer": {
                    "type": "Role",
                    "arn": f"arn:aws:iam::{ACCOUNT}:role/{actor}",
                    "accountId": ACCOUNT,
                    "userName": actor,
                }
            },
        },
        "eventTime": (T0 + dt.timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "eventSource": "s3.amazonaws.com",
        "eventName": _AWS_NAMES[what],
        "awsRegion": "us-east-1",
        "sourceIPAddress": "10.0.0.1",
        "userAgent": "[test]",
        "requestParameters": params,
        "eventID": str(uuid.UUID(int=i + 1)),
        "eventType": "AwsApiCall",
        "recipientAccountId": ACCOUNT,
    }
    if denied:
        record["errorCode"] = "AccessDenied"
    return record


def _gcs_entry(
    i: int, actor: str, what: str, bucket: str, key: str | None, denied: bool
) -> dict[str, Any]:
    request = {"metadata": {"versioning": {}}} if what == "versioning_off" else None
    return entry(
        _GCP_NAMES[what],
        T0 + dt.timedelta(minutes=i),
        f"id{i}",
        # A service account of the resource's own org keeps its identity even when denied.
        actor=f"{actor}@{PROJECT}.iam.gserviceaccount.com",
        bucket=bucket,
        key=key,
        log="activity" if what in ("versioning_off", "grant_read") else "data_access",
        status={"code": 7, "message": "PERMISSION_DENIED"} if denied else None,
        size=1234 if what == "put" else None,
        request=request,
    )


def _normalized(store: Store) -> list[tuple[Any, ...]]:
    rows = store.query(
        "SELECT actor, action, bucket, object_key, error_code IS NOT NULL AS denied"
        " FROM access_events ORDER BY event_time"
    )
    out = []
    for r in rows:
        actor = r["actor"]
        short = actor.rsplit("/", 1)[1] if actor.startswith("arn:") else actor.split("@")[0]
        out.append((short, r["action"], r["bucket"], r["object_key"], r["denied"]))
    return out


def test_same_scenario_same_rows_on_both_clouds(tmp_path: Path) -> None:
    day = (
        tmp_path / "trail" / "AWSLogs" / ACCOUNT / "CloudTrail" / "us-east-1" / "2025" / "03" / "01"
    )
    day.mkdir(parents=True)
    records = [_cloudtrail_record(i, *s) for i, s in enumerate(SCENARIO)]
    name = f"{ACCOUNT}_CloudTrail_us-east-1_20250301T1015Z_abcdefghABCDEFGH.json"
    (day / name).write_text(json.dumps({"Records": records}))
    sink = write_ndjson(tmp_path / "gcs.jsonl", [_gcs_entry(i, *s) for i, s in enumerate(SCENARIO)])
    with Store.open(tmp_path / "aws.duckdb") as aws, Store.open(tmp_path / "gcp.duckdb") as gcp:
        cloudtrail.run(
            aws,
            CloudTrailSource(path=str(tmp_path / "trail")),
            keep_raw="none",
            since=dt.date(2025, 3, 1),
            until=dt.date(2025, 3, 1),
        )
        run_export(gcp, GcsAuditSource(), sink, keep_raw="none")
        aws_rows, gcp_rows = _normalized(aws), _normalized(gcp)
    assert len(aws_rows) == len(SCENARIO)
    assert aws_rows == gcp_rows
    actions = [r[1] for r in gcp_rows]
    assert actions == ["read", "read", "list", "write", "read", "delete", "tamper", "tamper"]
