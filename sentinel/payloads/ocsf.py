"""OCSF 1.6 Detection Finding (class 2004), one finding per POST.

A new finding is activity 1 (Create), a resolved or suppressed one 3 (Close), any other change 2
(Update); ``finding_info.uid`` is the finding id, so a SIEM updates rather than duplicates.
Baseline rules add ``anomaly_analyses`` from ``evidence.baseline``. Sentinel's own columns that
have no OCSF home travel in ``unmapped``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sentinel import __version__
from sentinel.config import Webhook
from sentinel.output import dumps
from sentinel.payloads import Record, epoch_ms, finding_fields

CONTENT_TYPE = "application/json"
OCSF_VERSION = "1.6.0"
CLASS_UID = 2004
SEVERITY_ID = {"info": 1, "low": 2, "medium": 3, "high": 4, "critical": 5}
SEVERITY_NAME = {1: "Informational", 2: "Low", 3: "Medium", 4: "High", 5: "Critical"}
STATUS = {"open": (1, "New"), "acknowledged": (2, "In Progress"),
          "suppressed": (3, "Suppressed"), "resolved": (4, "Resolved")}  # fmt: skip
ACTIVITY = {1: "Create", 2: "Update", 3: "Close"}
BASELINE_RULES = frozenset({"weights.bytes_read_anomaly"})

# MITRE ATT&CK per contract rule id: (tactic uid, tactic, technique uid, technique).
ATTACKS: dict[str, tuple[str, str, str, str]] = {
    "weights.non_hydrator_read": ("TA0009", "Collection", "T1530", "Data from Cloud Storage"),
    "weights.denied_read": ("TA0007", "Discovery", "T1619", "Cloud Storage Object Discovery"),
    "weights.bytes_read_anomaly": ("TA0010", "Exfiltration", "T1530", "Data from Cloud Storage"),
    "weights.first_seen_reader": ("TA0009", "Collection", "T1530", "Data from Cloud Storage"),
    "weights.cross_tenant_read": ("TA0009", "Collection", "T1530", "Data from Cloud Storage"),
    "weights.full_model_copy": (
        "TA0010",
        "Exfiltration",
        "T1537",
        "Transfer Data to Cloud Account",
    ),
    "weights.hydrator_off_platform": ("TA0001", "Initial Access", "T1078.004", "Cloud Accounts"),
    "weights.promoted_checkpoint_delete": ("TA0040", "Impact", "T1485", "Data Destruction"),
    "weights.protection_tampering": ("TA0005", "Defense Evasion", "T1562", "Impair Defenses"),
    "logs.secret_leak": ("TA0006", "Credential Access", "T1552", "Unsecured Credentials"),
    "logs.prompt_leak": ("TA0009", "Collection", "T1213", "Data from Information Repositories"),
}


def batch_size(hook: Webhook) -> int:
    return 1


def activity(record: Record) -> int:
    if record.change == "new":
        return 1
    return 3 if record.finding["status"] in ("resolved", "suppressed") else 2


def bucket_uid(provider: str | None, bucket: str) -> str:
    return f"arn:aws:s3:::{bucket}" if provider == "aws" else f"gs://{bucket}"


def event(record: Record) -> dict[str, Any]:
    f = finding_fields(record)
    activity_id = activity(record)
    severity_id = SEVERITY_ID[f["severity"]]
    status_id, status = STATUS.get(f["status"], (99, "Other"))
    doc: dict[str, Any] = {
        "class_uid": CLASS_UID,
        "class_name": "Detection Finding",
        "category_uid": 2,
        "category_name": "Findings",
        "activity_id": activity_id,
        "activity_name": ACTIVITY[activity_id],
        "type_uid": CLASS_UID * 100 + activity_id,
        "type_name": f"Detection Finding: {ACTIVITY[activity_id]}",
        "time": epoch_ms(f.get("updated_at")) or int(record.queued_at.timestamp() * 1000),
        "severity_id": severity_id,
        "severity": SEVERITY_NAME[severity_id],
        "status_id": status_id,
        "status": status,
        "is_alert": f["status"] == "open",
        "message": f["title"],
        "metadata": metadata(record, f),
        "finding_info": finding_info(f),
    }
    if f.get("provider") in ("aws", "gcp"):
        doc["cloud"] = cloud(f)
    if f.get("bucket"):
        doc["resources"] = [resource(f)]
    doc["evidences"] = [evidence(f)]
    if f["rule_id"] in BASELINE_RULES or isinstance(f["evidence"].get("baseline"), dict):
        doc["anomaly_analyses"] = [anomaly_analysis(f)]
    doc["unmapped"] = {"sentinel": {k: f[k] for k in ("change", "schema_version", "evidence")}}
    return doc


def metadata(record: Record, f: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "version": OCSF_VERSION,
        "product": {"name": "sentinel", "vendor_name": "sentinel", "version": __version__},
        "uid": record.delivery_id,
        "log_name": "sentinel.findings",
    }
    if f.get("provider") in ("aws", "gcp"):
        meta["profiles"] = ["cloud"]
    if f.get("tenant"):
        meta["tenant_uid"] = f["tenant"]
    return meta


def finding_info(f: dict[str, Any]) -> dict[str, Any]:
    info: dict[str, Any] = {
        "uid": f["finding_id"],
        "title": f["title"],
        "analytic": {"uid": f["rule_id"], "name": f["rule_id"], "type_id": 1, "type": "Rule"},
        "types": [f["rule_id"].split(".")[0]],
    }
    if f.get("summary"):
        info["desc"] = f["summary"]
    for key, column in (
        ("first_seen_time", "first_seen"),
        ("last_seen_time", "last_seen"),
        ("created_time", "created_at"),
        ("modified_time", "updated_at"),
    ):
        value = epoch_ms(f.get(column))
        if value is not None:
            info[key] = value
    if f.get("event_count") is not None:
        info["related_events_count"] = int(f["event_count"])
    if f["rule_id"] in ATTACKS:
        tactic_uid, tactic, technique_uid, technique = ATTACKS[f["rule_id"]]
        info["attacks"] = [
            {
                "tactic": {"uid": tactic_uid, "name": tactic},
                "technique": {"uid": technique_uid, "name": technique},
            }
        ]
    return info


def cloud(f: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"provider": "AWS" if f["provider"] == "aws" else "GCP"}
    if f.get("account"):
        result["account"] = {"uid": f["account"]}
    return result


def resource(f: dict[str, Any]) -> dict[str, Any]:
    labels = [f"{k}:{f[k]}" for k in ("tenant", "model") if f.get(k)]
    data = {k: f[k] for k in ("object_key", "model", "tenant", "bytes") if f.get(k) is not None}
    result: dict[str, Any] = {
        "uid": bucket_uid(f.get("provider"), f["bucket"]),
        "name": f["bucket"],
        "type": "AWS::S3::Bucket" if f.get("provider") == "aws" else "GCS Bucket",
    }
    if labels:
        result["labels"] = labels
    if data:
        result["data"] = data
    return result


def evidence(f: dict[str, Any]) -> dict[str, Any]:
    ev: dict[str, Any] = {}
    if f.get("actor"):
        ev["actor"] = {"user": {"uid": f["actor"], "name": f["actor"]}}
    if f.get("bucket"):
        aws = f.get("provider") == "aws"
        ev["databucket"] = {
            "uid": bucket_uid(f.get("provider"), f["bucket"]),
            "name": f["bucket"],
            "type_id": 1 if aws else 3,
            "type": "S3" if aws else "GCP Bucket",
        }
    if not ev:  # OCSF wants at least one of actor, api, databucket, ...
        ev["api"] = {"operation": f["rule_id"]}
    ev["data"] = {"evidence": f["evidence"]}
    return ev


def anomaly_analysis(f: dict[str, Any]) -> dict[str, Any]:
    baseline = f["evidence"].get("baseline") or {}
    parameter = f"bytes_read_per_hour[bucket={f.get('bucket') or '*'}]"
    start = epoch_ms(f.get("first_seen"))
    end = epoch_ms(f.get("last_seen"))
    observed: dict[str, Any] = {"value": str(f.get("bytes") or 0)}
    if f.get("event_count") is not None:
        observed["count"] = int(f["event_count"])
    if start is not None and end is not None:
        observed["timespan"] = {"start_time": start, "end_time": end}
    pattern = ", ".join(f"{k}={v}" for k, v in sorted(baseline.items())) or "no baseline figures"
    return {
        "analysis_targets": [{"name": f.get("actor") or "unknown", "type": "Principal"}],
        "baselines": [
            {
                "observation_parameter": parameter,
                "observation_type": "Volume Analysis",
                "observed_pattern": pattern,
            }
        ],
        "anomalies": [
            {
                "observation_parameter": parameter,
                "observation_type": "Volume Analysis",
                "observations": [observed],
            }
        ],
    }


def render(records: Sequence[Record], hook: Webhook, now: dt.datetime) -> bytes:
    (record,) = records
    return dumps(event(record)).encode()
