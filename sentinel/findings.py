"""Findings: the one way to create or change one, so the delivery outbox never misses a change.

Detection rules and leak scanners call exactly two functions::

    from sentinel import findings

    fid = findings.finding_id("weights.non_hydrator_read", (actor, bucket), window_start)
    outcome = findings.upsert(store, cfg, findings.Finding(
        finding_id=fid, rule_id="weights.non_hydrator_read", severity="high",
        title="Non-hydrator read of acme-weights-prod", actor=actor, bucket=bucket,
        first_seen=t0, last_seen=t1, event_count=412, bytes=40 * 2**30,
        evidence={"event_ids": [...], "baseline": {...}},
    ))
    findings.set_status(store, cfg, fid, "resolved", reason="expected job", who="alice")

``upsert`` inserts a new finding or merges a rerun into the existing one (first_seen is the
earliest; last_seen, counts, severity, title and evidence take the new values, since callers
re-aggregate the whole window; the
status is kept, so a rerun never reopens an acknowledged finding). In the SAME transaction it
writes ``finding_history`` and enqueues one outbox row per matching destination when the change
is material: a new finding, a severity increase, or event_count / bytes crossing a step of
``alerts.count_steps`` / ``alerts.bytes_steps``. ``set_status`` changes the status, records who,
when and why, and enqueues likewise. Both return an ``Outcome``. If you already hold a
``store.transaction()``, the calls join it.

Title, summary and evidence are scrubbed (``sentinel.redact``) before they are stored: evidence
keys holding raw content (``line``, ``secret``, ``prompt``, ...) are dropped and credential-shaped
strings are masked. Put masked previews and keyed fingerprints in evidence, never the secret.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from sentinel import outbox, redact
from sentinel.config import SEVERITIES, AlertsConfig, Config, Severity
from sentinel.errors import UsageError
from sentinel.output import to_jsonable
from sentinel.store import Store

Status = Literal["open", "acknowledged", "suppressed", "resolved"]
STATUSES: tuple[Status, ...] = ("open", "acknowledged", "suppressed", "resolved")

_COLUMNS = (
    *("finding_id", "rule_id", "severity", "title", "summary", "provider", "account", "actor"),
    *("bucket", "object_key", "model", "tenant", "first_seen", "last_seen", "event_count"),
    *("bytes", "evidence", "status"),
)


@dataclass(frozen=True)
class Finding:
    """One row of the ``findings`` table (created_at/updated_at are managed here)."""

    finding_id: str
    rule_id: str
    severity: Severity
    title: str
    summary: str | None = None
    provider: str | None = None
    account: str | None = None
    actor: str | None = None
    bucket: str | None = None
    object_key: str | None = None
    model: str | None = None
    tenant: str | None = None
    first_seen: dt.datetime | None = None
    last_seen: dt.datetime | None = None
    event_count: int | None = None
    bytes: int | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    status: Status = "open"


@dataclass(frozen=True)
class Outcome:
    finding_id: str
    action: Literal["created", "updated", "unchanged"]
    changes: tuple[str, ...] = ()
    enqueued: int = 0


def finding_id(
    rule_id: str, dedupe_key: str | Sequence[str | None], window_start: dt.datetime | str | None
) -> str:
    """Deterministic id: a rerun over the same rule, key and window updates, never duplicates."""
    key = dedupe_key if isinstance(dedupe_key, str) else "\x1f".join(k or "" for k in dedupe_key)
    window = utc_naive(window_start).isoformat() if isinstance(window_start, dt.datetime) else ""
    if isinstance(window_start, str):
        window = window_start
    digest = hashlib.sha256(f"{rule_id}\x1e{key}\x1e{window}".encode()).hexdigest()
    return f"f_{digest[:24]}"


def get(store: Store, fid: str) -> dict[str, Any] | None:
    """The stored finding as a dict (evidence parsed), or None."""
    rows = store.query("SELECT * FROM findings WHERE finding_id = ?", [fid])
    if not rows:
        return None
    row = rows[0]
    row["evidence"] = json.loads(row["evidence"]) if row["evidence"] else {}
    return row


def upsert(
    store: Store, cfg: Config, finding: Finding, *, now: dt.datetime | None = None
) -> Outcome:
    """Insert or merge ``finding`` and enqueue its deliveries, all in one transaction."""
    if finding.severity not in SEVERITIES:
        raise UsageError(f"unknown severity {finding.severity!r}")
    stamp = utc_naive(now or dt.datetime.now(dt.UTC))
    new = _clean(finding)
    with store.transaction():
        old = get(store, finding.finding_id)
        if old is None:
            _insert(store, new, stamp)
            _history(store, new["finding_id"], stamp, "created", old=None, new=new["severity"])
            enqueued = outbox.enqueue(store, cfg, _snapshot(store, new["finding_id"]), "new", stamp)
            return Outcome(new["finding_id"], "created", ("new",), enqueued)
        merged = _merge(old, new)
        if all(merged[c] == old[c] for c in _COLUMNS):
            return Outcome(new["finding_id"], "unchanged")
        changes = material_changes(old, merged, cfg.alerts)
        _update(store, merged, stamp)
        for change in changes:
            before, after = _change_values(change, old, merged)
            _history(store, new["finding_id"], stamp, change, old=before, new=after)
        enqueued = 0
        if changes:
            snapshot = _snapshot(store, new["finding_id"])
            enqueued = outbox.enqueue(store, cfg, snapshot, changes[0], stamp)
        return Outcome(new["finding_id"], "updated", changes, enqueued)


def set_status(
    store: Store,
    cfg: Config,
    fid: str,
    status: Status,
    *,
    reason: str,
    who: str,
    now: dt.datetime | None = None,
) -> Outcome:
    """Change a finding's status, record who/when/why, and enqueue its deliveries."""
    if status not in STATUSES:
        raise UsageError(f"unknown status {status!r}", hint=f"one of {', '.join(STATUSES)}")
    stamp = utc_naive(now or dt.datetime.now(dt.UTC))
    with store.transaction():
        old = get(store, fid)
        if old is None:
            raise UsageError(f"no finding {fid}", hint="list them with `sentinel findings`")
        if old["status"] == status:
            return Outcome(fid, "unchanged")
        store.execute(
            "UPDATE findings SET status = ?, updated_at = ? WHERE finding_id = ?",
            [status, stamp, fid],
        )
        _history(store, fid, stamp, "status", old=old["status"], new=status, reason=reason, who=who)
        enqueued = outbox.enqueue(store, cfg, _snapshot(store, fid), "status", stamp)
        return Outcome(fid, "updated", ("status",), enqueued)


def history(store: Store, fid: str) -> list[dict[str, Any]]:
    return store.query(
        "SELECT * FROM finding_history WHERE finding_id = ? ORDER BY changed_at, change", [fid]
    )


def material_changes(
    old: dict[str, Any], new: dict[str, Any], alerts: AlertsConfig
) -> tuple[str, ...]:
    """Which changes deserve a new delivery: severity up, or a count/bytes step crossed."""
    changes: list[str] = []
    if SEVERITIES.index(new["severity"]) > SEVERITIES.index(old["severity"]):
        changes.append("severity")
    if _crossed(old["event_count"], new["event_count"], alerts.count_steps) or _crossed(
        old["bytes"], new["bytes"], alerts.bytes_steps
    ):
        changes.append("count")
    return tuple(changes)


def utc_naive(value: dt.datetime) -> dt.datetime:
    """Timestamps are stored as naive UTC (TIMESTAMP columns)."""
    if value.tzinfo is None:
        return value
    return value.astimezone(dt.UTC).replace(tzinfo=None)


def _crossed(old: int | None, new: int | None, steps: tuple[int, ...]) -> bool:
    before, after = old or 0, new or 0
    return any(before < step <= after for step in steps)


def _clean(finding: Finding) -> dict[str, Any]:
    row = asdict(finding)
    for key in ("title", "summary"):
        if row[key] is not None:
            row[key] = redact.scrub_text(row[key])
    # Evidence is stored as JSON; normalise it now (datetimes become ISO strings) so a rerun with
    # the same figures compares equal to what is stored.
    row["evidence"] = json.loads(json.dumps(to_jsonable(redact.scrub(row["evidence"] or {}))))
    for key in ("first_seen", "last_seen"):
        if row[key] is not None:
            row[key] = utc_naive(row[key])
    return row


def _merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    merged = dict(new)
    merged["status"] = old["status"]
    # Callers re-aggregate a finding's whole window, so their last_seen is authoritative (a
    # late event may even move it earlier); first_seen only ever moves earlier.
    values = [v for v in (old["first_seen"], new["first_seen"]) if v is not None]
    merged["first_seen"] = min(values) if values else None
    if merged["last_seen"] is None:
        merged["last_seen"] = old["last_seen"]
    return merged


def _change_values(change: str, old: dict[str, Any], new: dict[str, Any]) -> tuple[str, str]:
    if change == "severity":
        return old["severity"], new["severity"]
    return (
        f"events={old['event_count']} bytes={old['bytes']}",
        f"events={new['event_count']} bytes={new['bytes']}",
    )


def _insert(store: Store, row: dict[str, Any], stamp: dt.datetime) -> None:
    names = ", ".join(_COLUMNS)
    marks = ", ".join("?" for _ in _COLUMNS)
    store.execute(
        f"INSERT INTO findings ({names}, created_at, updated_at) VALUES ({marks}, ?, ?)",
        [*_values(row), stamp, stamp],
    )


def _update(store: Store, row: dict[str, Any], stamp: dt.datetime) -> None:
    sets = ", ".join(f"{c} = ?" for c in _COLUMNS[1:])
    store.execute(
        f"UPDATE findings SET {sets}, updated_at = ? WHERE finding_id = ?",
        [*_values(row)[1:], stamp, row["finding_id"]],
    )


def _values(row: dict[str, Any]) -> list[Any]:
    return [json.dumps(row[c], sort_keys=True) if c == "evidence" else row[c] for c in _COLUMNS]


def _history(
    store: Store,
    fid: str,
    stamp: dt.datetime,
    change: str,
    *,
    old: str | None,
    new: str | None,
    reason: str | None = None,
    who: str | None = None,
) -> None:
    store.execute(
        "INSERT INTO finding_history VALUES (?, ?, ?, ?, ?, ?, ?)",
        [fid, stamp, change, old, new, reason, who],
    )


def _snapshot(store: Store, fid: str) -> dict[str, Any]:
    row = get(store, fid)
    assert row is not None  # noqa: S101  (written in this transaction)
    return row
