"""Alertmanager API v2 (``POST /api/v2/alerts``): an array of alerts, one per finding.

Labels identify the alert (Alertmanager dedupes on them), annotations carry the detail. An open
or acknowledged finding is sent with ``endsAt`` = now + ``alert_ttl_minutes``, and
``sentinel deliver`` re-sends it before that passes; a resolved or suppressed one is sent with
``endsAt`` = the time of its status change, which resolves the alert.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sentinel.config import Webhook
from sentinel.output import dumps
from sentinel.payloads import Record, finding_fields, parse_time, rfc3339

CONTENT_TYPE = "application/json"
_LABELS = ("rule_id", "severity", "finding_id", "provider", "account", "bucket", "tenant", "model")


def batch_size(hook: Webhook) -> int:
    return hook.batch_size


def alertname(rule_id: str) -> str:
    """``weights.non_hydrator_read`` -> ``SentinelWeightsNonHydratorRead``."""
    words = rule_id.replace(".", "_").split("_")
    return "Sentinel" + "".join(w[:1].upper() + w[1:] for w in words if w)


def alert(record: Record, hook: Webhook, now: dt.datetime) -> dict[str, Any]:
    finding = finding_fields(record)
    labels = {"alertname": alertname(finding["rule_id"])}
    labels.update({k: str(finding[k]) for k in _LABELS if finding.get(k)})
    starts = parse_time(finding.get("first_seen")) or parse_time(finding.get("created_at")) or now
    if finding["status"] in ("resolved", "suppressed"):
        ends = parse_time(finding.get("updated_at")) or now
    else:
        ends = now + dt.timedelta(minutes=hook.alert_ttl_minutes)
    ends = max(ends, starts + dt.timedelta(seconds=1))  # Alertmanager rejects start >= end
    annotations = {
        "summary": finding["title"],
        "description": finding.get("summary") or "",
        "finding_id": finding["finding_id"],
        "status": finding["status"],
        "delivery_id": record.delivery_id,
    }
    result: dict[str, Any] = {
        "labels": labels,
        "annotations": {k: str(v) for k, v in annotations.items() if v},
        "startsAt": rfc3339(starts),
        "endsAt": rfc3339(ends),
    }
    if hook.finding_url:
        result["generatorURL"] = hook.finding_url.format(finding_id=finding["finding_id"])
    return result


def render(records: Sequence[Record], hook: Webhook, now: dt.datetime) -> bytes:
    return dumps([alert(r, hook, now) for r in records]).encode()
