"""Generic JSON webhook: one finding per POST, its columns plus ``schema_version``,
``delivery_id`` (= ``webhook-id``) and ``change`` (new | severity | status | count | refresh)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from sentinel.config import Webhook
from sentinel.output import dumps
from sentinel.payloads import Record, finding_fields

CONTENT_TYPE = "application/json"


def batch_size(hook: Webhook) -> int:
    return 1


def render(records: Sequence[Record], hook: Webhook, now: dt.datetime) -> bytes:
    (record,) = records
    return dumps(finding_fields(record)).encode()
