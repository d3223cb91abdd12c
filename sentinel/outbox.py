"""The durable delivery queue: one row per finding change per destination.

``enqueue`` is called by ``sentinel.findings`` inside the transaction that changes the finding,
so a change and its deliveries commit together. ``sentinel.deliver`` reads what is ``due``,
sends it, and records the outcome per item: delivered after a 2xx only; a retryable failure
moves ``next_attempt_at`` by capped exponential backoff with jitter (or ``Retry-After``); too many
attempts, too old, or a non-retryable answer makes it a dead letter.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import json
import uuid
from dataclasses import dataclass
from typing import Any

from sentinel.config import SEVERITIES, Config, Webhook
from sentinel.http import Backoff
from sentinel.output import dumps
from sentinel.store import Store

RESPONSE_KEEP = 2000


@dataclass(frozen=True)
class Item:
    delivery_id: str
    destination: str
    finding_id: str
    change: str
    snapshot: dict[str, Any]
    attempts: int
    created_at: dt.datetime


def routes(cfg: Config, rule_id: str, severity: str) -> list[Webhook]:
    """Destinations that want this finding: severity at least ``min_severity``, rule glob match."""
    rank = SEVERITIES.index(severity)
    return [
        hook
        for hook in cfg.alerts.webhook
        if rank >= SEVERITIES.index(hook.min_severity)
        and any(fnmatch.fnmatchcase(rule_id, glob) for glob in hook.rules)
    ]


def enqueue(
    store: Store, cfg: Config, snapshot: dict[str, Any], change: str, now: dt.datetime
) -> int:
    """Queue one delivery per matching destination; call inside the finding's transaction."""
    body = dumps(snapshot)
    hooks = routes(cfg, snapshot["rule_id"], snapshot["severity"])
    for hook in hooks:
        store.execute(
            "INSERT INTO outbox (delivery_id, destination, finding_id, change, snapshot,"
            " created_at, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [new_delivery_id(), hook.label, snapshot["finding_id"], change, body, now, now],
        )
    return len(hooks)


def new_delivery_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


def due(store: Store, destination: str, now: dt.datetime, limit: int) -> list[Item]:
    rows = store.query(
        "SELECT delivery_id, destination, finding_id, change, snapshot, attempts, created_at"
        " FROM outbox WHERE state = 'pending' AND destination = ? AND next_attempt_at <= ?"
        " ORDER BY next_attempt_at, created_at, delivery_id LIMIT ?",
        [destination, now, limit],
    )
    return [Item(**{**r, "snapshot": json.loads(r["snapshot"])}) for r in rows]


def delivered(store: Store, ids: list[str], now: dt.datetime, status: int) -> None:
    with store.transaction():
        for delivery_id in ids:
            store.execute(
                "UPDATE outbox SET state = 'delivered', attempts = attempts + 1,"
                " last_attempt_at = ?, delivered_at = ?, last_status = ?, last_error = NULL"
                " WHERE delivery_id = ?",
                [now, now, status, delivery_id],
            )


def failed(
    store: Store,
    items: list[Item],
    hook: Webhook,
    now: dt.datetime,
    *,
    retryable: bool,
    status: int | None,
    error: str,
    response: str = "",
    retry_after: float | None = None,
) -> str:
    """Record a failed attempt for ``items``; returns 'retry' or 'dead' (for the batch)."""
    attempts = max(i.attempts for i in items) + 1
    oldest = min(i.created_at for i in items)
    too_old = now - oldest > dt.timedelta(hours=hook.max_age_hours)
    dead = not retryable or attempts >= hook.max_attempts or too_old
    backoff = Backoff(base=hook.backoff_base_seconds, cap=hook.backoff_cap_seconds)
    # Retry-After is honoured even beyond our cap; max_age_hours still bounds the wait.
    delay = retry_after if retry_after is not None else backoff.delay(attempts)
    next_at = now + dt.timedelta(seconds=delay)
    if dead and retryable:
        error = f"gave up after {attempts} attempts{' (too old)' if too_old else ''}: {error}"
    with store.transaction():
        for item in items:
            store.execute(
                "UPDATE outbox SET state = ?, attempts = attempts + 1, last_attempt_at = ?,"
                " next_attempt_at = ?, last_status = ?, last_error = ?, response = ?"
                " WHERE delivery_id = ?",
                [
                    "dead" if dead else "pending",
                    now,
                    next_at,
                    status,
                    error,
                    response[:RESPONSE_KEEP],
                    item.delivery_id,
                ],
            )
    return "dead" if dead else "retry"


def bury_orphans(store: Store, cfg: Config, now: dt.datetime) -> int:
    """Dead-letter pending items whose destination is no longer configured."""
    labels = [h.label for h in cfg.alerts.webhook]
    where = "state = 'pending'"
    if labels:
        where += f" AND destination NOT IN ({', '.join('?' for _ in labels)})"
    count = int(store.scalar(f"SELECT count(*) FROM outbox WHERE {where}", labels) or 0)
    if count:
        store.execute(
            "UPDATE outbox SET state = 'dead', last_attempt_at = ?,"
            f" last_error = 'destination is not configured' WHERE {where}",
            [now, *labels],
        )
    return count


def enqueue_refreshes(store: Store, cfg: Config, now: dt.datetime) -> int:
    """Alertmanager forgets firing alerts: re-queue open findings before their endsAt passes."""
    total = 0
    for hook in cfg.alerts.webhook:
        if hook.format != "alertmanager":
            continue
        stale = now - dt.timedelta(minutes=hook.alert_ttl_minutes / 2)
        rows = store.query(
            "SELECT f.finding_id, f.rule_id, f.severity FROM findings f"
            " WHERE f.status IN ('open', 'acknowledged')"
            " AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.finding_id = f.finding_id"
            "   AND o.destination = ? AND o.state = 'pending')"
            " AND (SELECT max(delivered_at) FROM outbox o WHERE o.finding_id = f.finding_id"
            "   AND o.destination = ? AND o.state = 'delivered') < ?",
            [hook.label, hook.label, stale],
        )
        for row in rows:
            if hook not in routes(cfg, row["rule_id"], row["severity"]):
                continue
            from sentinel import findings  # findings imports this module

            snapshot = findings.get(store, row["finding_id"])
            store.execute(
                "INSERT INTO outbox (delivery_id, destination, finding_id, change, snapshot,"
                " created_at, next_attempt_at) VALUES (?, ?, ?, 'refresh', ?, ?, ?)",
                [new_delivery_id(), hook.label, row["finding_id"], dumps(snapshot), now, now],
            )
            total += 1
    return total


def status(store: Store, now: dt.datetime) -> list[dict[str, Any]]:
    """Per destination: queue depth, oldest undelivered age in seconds, delivered, dead."""
    rows = store.query("SELECT * FROM v_outbox_status")
    for row in rows:
        oldest = row.pop("oldest_pending")
        row["oldest_pending_age_s"] = (
            None if oldest is None else round((now - oldest).total_seconds(), 1)
        )
    return rows


def retry_dead(store: Store, now: dt.datetime, destination: str | None = None) -> int:
    """Requeue dead letters (all, or one destination's) for an immediate attempt."""
    where = "state = 'dead'" + (" AND destination = ?" if destination else "")
    params: list[Any] = [destination] if destination else []
    with store.transaction():
        count = int(store.scalar(f"SELECT count(*) FROM outbox WHERE {where}", params) or 0)
        store.execute(
            "UPDATE outbox SET state = 'pending', attempts = 0, next_attempt_at = ?,"
            f" created_at = ? WHERE {where}",
            [now, now, *params],
        )
    return count
