"""Splunk HTTP Event Collector: batched event envelopes, concatenated JSON objects (no array).

Each event is the generic JSON finding; ``time`` is the change time in epoch seconds. The
``Authorization: Splunk <token>`` header and indexer acknowledgement are handled by
``sentinel.deliver``.
"""

from __future__ import annotations

import datetime as dt
import socket
from collections.abc import Sequence
from typing import Any

from sentinel.config import Webhook
from sentinel.output import dumps
from sentinel.payloads import Record, finding_fields, parse_time

CONTENT_TYPE = "application/json"


def batch_size(hook: Webhook) -> int:
    return hook.batch_size


def envelope(record: Record, hook: Webhook) -> dict[str, Any]:
    when = parse_time(record.finding.get("updated_at")) or record.queued_at
    event: dict[str, Any] = {
        "time": round(when.timestamp(), 3),
        "host": socket.gethostname(),
        "source": hook.splunk_source,
        "sourcetype": hook.splunk_sourcetype,
        "event": finding_fields(record),
    }
    if hook.splunk_index:
        event["index"] = hook.splunk_index
    return event


def render(records: Sequence[Record], hook: Webhook, now: dt.datetime) -> bytes:
    return "\n".join(dumps(envelope(r, hook)) for r in records).encode()
