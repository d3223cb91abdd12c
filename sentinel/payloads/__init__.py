"""Payload formats, one module per ``format`` value of ``[[alerts.webhook]]``.

Each module has the same shape:

    CONTENT_TYPE: str
    def batch_size(hook: Webhook) -> int            # findings per POST
    def render(records, hook, now) -> bytes          # the request body

A ``Record`` is one outbox item: the finding snapshot taken when it changed, the kind of change
and its delivery id. Rendering is a pure function of the records (plus ``now`` for
Alertmanager's ``endsAt``), so every retry of an item sends the same content.
"""

from __future__ import annotations

import datetime as dt
import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from sentinel import redact

SCHEMA_VERSION = "1"
FORMATS = ("json", "ocsf", "splunk_hec", "alertmanager")


@dataclass(frozen=True)
class Record:
    """One outbox item to render; ``queued_at`` (like every ``now``) is timezone-aware UTC."""

    delivery_id: str
    change: str
    finding: dict[str, Any]
    queued_at: dt.datetime


def module(fmt: str) -> ModuleType:
    if fmt not in FORMATS:
        raise ValueError(f"unknown payload format {fmt!r}")
    return importlib.import_module(f"sentinel.payloads.{fmt}")


def finding_fields(record: Record) -> dict[str, Any]:
    """The finding as it goes on the wire: scrubbed again (a second barrier), plus ids."""
    finding = redact.scrub(dict(record.finding))
    return {
        "schema_version": SCHEMA_VERSION,
        "delivery_id": record.delivery_id,
        "change": record.change,
        **finding,
    }


def parse_time(value: Any) -> dt.datetime | None:
    """Snapshot timestamps are ISO strings of naive UTC (``...Z``); returns aware UTC."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        parsed = value
    else:
        parsed = dt.datetime.fromisoformat(str(value).removesuffix("Z"))
    return parsed.replace(tzinfo=dt.UTC) if parsed.tzinfo is None else parsed.astimezone(dt.UTC)


def epoch_ms(value: Any) -> int | None:
    parsed = parse_time(value)
    return None if parsed is None else int(parsed.timestamp() * 1000)


def rfc3339(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def trimmed(record: Record) -> Record:
    """The same record with its evidence replaced by a marker (for the payload size cap)."""
    finding = {**record.finding, "evidence": {"truncated": True}}
    return Record(record.delivery_id, record.change, finding, record.queued_at)
