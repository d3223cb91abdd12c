"""Purge leaked lines from Loki: prepare delete requests from findings, file them, track them.

A request names the exact stream (all its labels) and a window of a few milliseconds around the
leaking lines; it never carries the secret (Loki logs and lists delete queries). Lines that share
the stream and millisecond are deleted with it: that is the price of not naming the secret.
Filing is idempotent: Loki gives every POST a new id, so before each POST we look for the same
query and window in Loki's list and adopt it instead of filing a second request.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sentinel import logs
from sentinel.errors import SourceError
from sentinel.loki import DeletionUnavailableError, LokiClient, stream_selector
from sentinel.store import Store

log = logs.get(__name__)

ClientFactory = Callable[[str], LokiClient | None]


@dataclass(frozen=True)
class Request:
    finding_id: str
    start_ms: int
    end_ms: int
    source: str
    tenant: str | None
    query: str


def plan(store: Store) -> list[Request]:
    """One request per finding (per distinct millisecond when its lines are spread out)."""
    rows = store.query(
        "SELECT o.finding_id, o.source, any_value(o.tenant) AS tenant,"
        " any_value(o.stream_labels)::VARCHAR AS labels, o.ts_ns // 1000000 AS ms"
        " FROM leak_occurrences o JOIN findings f USING (finding_id)"
        " WHERE f.status IN ('open', 'acknowledged') AND o.stream NOT LIKE 'file:%'"
        " GROUP BY ALL ORDER BY o.finding_id, ms"
    )
    return [
        Request(
            r["finding_id"],
            int(r["ms"]),
            int(r["ms"]) + 1,
            r["source"],
            r["tenant"],
            stream_selector(json.loads(r["labels"])),
        )
        for r in rows
    ]


def prepare(store: Store, *, now: dt.datetime) -> int:
    """Record planned requests not seen before as ``prepared``; returns how many are new."""
    new = 0
    with store.transaction():
        for req in plan(store):
            exists = store.scalar(
                "SELECT count(*) FROM purge_requests WHERE finding_id = ? AND start_ms = ?",
                [req.finding_id, req.start_ms],
            )
            if exists:
                continue
            store.execute(
                "INSERT INTO purge_requests (finding_id, start_ms, end_ms, source, tenant, query,"
                " status, attempts, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, 'prepared', 0, ?, ?)",
                [
                    req.finding_id,
                    req.start_ms,
                    req.end_ms,
                    req.source,
                    req.tenant,
                    req.query,
                    now,
                    now,
                ],
            )
            new += 1
    return new


def _matches(item: dict[str, Any], row: dict[str, Any]) -> bool:
    start, end = float(item.get("start_time", -1)), float(item.get("end_time", -1))
    return bool(
        item.get("query") == row["query"]
        and round(start * 1000) == row["start_ms"]
        and round(end * 1000) == row["end_ms"]
    )


def execute(store: Store, clients: ClientFactory, *, now: dt.datetime) -> list[dict[str, Any]]:
    """File every prepared (or previously failed) request; returns the rows touched."""
    rows = store.query(
        "SELECT * FROM purge_requests WHERE status IN ('prepared', 'failed')"
        " ORDER BY source, finding_id, start_ms"
    )
    listed: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        client = clients(row["source"])
        if client is None:
            _update(store, row, "failed", detail="source not in config", now=now)
            continue
        try:
            if row["source"] not in listed:
                listed[row["source"]] = client.delete_requests()
            existing = next((i for i in listed[row["source"]] if _matches(i, row)), None)
            if existing:
                request_id = existing.get("request_id")
                _update(
                    store,
                    row,
                    "filed",
                    request_id=request_id,
                    loki_status=existing.get("status"),
                    http=200,
                    now=now,
                )
                continue
            request_id = client.delete(row["query"], row["start_ms"], row["end_ms"])
            if request_id is None:  # Loki < 3.6: find our request in the list
                listed[row["source"]] = client.delete_requests()
                found = next((i for i in listed[row["source"]] if _matches(i, row)), None)
                request_id = found.get("request_id") if found else None
            _update(
                store,
                row,
                "filed",
                request_id=request_id,
                loki_status="received",
                http=204,
                now=now,
            )
        except DeletionUnavailableError as exc:
            _update(
                store,
                row,
                "unavailable",
                http=exc.code,
                detail=f"{exc.message}. {exc.hint}",
                now=now,
            )
        except SourceError as exc:
            _update(store, row, "failed", detail=exc.message, now=now)
            log.warning("purge.failed", finding_id=row["finding_id"], error=exc.message)
    return status(store)


def refresh(store: Store, clients: ClientFactory, *, now: dt.datetime) -> None:
    """Copy Loki's status (received, processed, NN% Complete) onto filed requests."""
    rows = store.query("SELECT * FROM purge_requests WHERE status = 'filed'")
    by_source: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_source.setdefault(row["source"], []).append(row)
    for source, group in by_source.items():
        client = clients(source)
        if client is None:
            continue
        items = client.delete_requests()
        for row in group:
            item = next((i for i in items if i.get("request_id") == row["request_id"]), None)
            item = item or next((i for i in items if _matches(i, row)), None)
            loki_status = item.get("status") if item else "not listed (cancelled?)"
            store.execute(
                "UPDATE purge_requests SET loki_status = ?, updated_at = ?"
                " WHERE finding_id = ? AND start_ms = ?",
                [loki_status, now, row["finding_id"], row["start_ms"]],
            )


def _update(
    store: Store,
    row: dict[str, Any],
    status_: str,
    *,
    now: dt.datetime,
    request_id: str | None = None,
    loki_status: str | None = None,
    http: int | None = None,
    detail: str | None = None,
) -> None:
    store.execute(
        "UPDATE purge_requests SET status = ?, request_id = coalesce(?, request_id),"
        " loki_status = coalesce(?, loki_status), http_status = coalesce(?, http_status),"
        " detail = ?, attempts = attempts + 1, updated_at = ?"
        " WHERE finding_id = ? AND start_ms = ?",
        [status_, request_id, loki_status, http, detail, now, row["finding_id"], row["start_ms"]],
    )


def status(store: Store, finding_ids: Sequence[str] = ()) -> list[dict[str, Any]]:
    where = "WHERE list_contains(?, finding_id)" if finding_ids else ""
    params = [list(finding_ids)] if finding_ids else None
    return store.query(
        "SELECT finding_id, source, tenant, query,"
        " make_timestamp(start_ms * 1000) AS start, make_timestamp(end_ms * 1000) AS end,"
        " status, request_id, loki_status, http_status, attempts, detail"
        f" FROM purge_requests {where}"
        " ORDER BY source, finding_id, start_ms",
        params,
    )
