"""The detection engine: run rules over new events (plus a lookback) and upsert findings.

Each rule keeps a cursor in ``cursors`` (source ``detect``, key = rule id): the last ``load_id``
it judged and the newest event time it has seen (its watermark). A run judges the fixed windows
touched by events loaded since the cursor, as long as they are no older than the watermark minus
``detect.lookback_hours``; older ("too late") events are counted and logged with the replay
command that judges them. A window is always re-aggregated from *all* its events, so reruns,
replays and late data update a finding (same id) instead of duplicating it.

``--since/--until`` (``since=``/``until=``) replays a time range and leaves cursors alone. A
failing rule rolls back alone; the others still run. All writes to ``findings`` go through
``_upsert_finding`` and ``set_status``, both through ``sentinel.findings`` so every change is
delivered.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentinel import baseline, findings, logs
from sentinel.config import Config, Suppression
from sentinel.errors import SentinelError, UsageError
from sentinel.labels import TitleFormatter, actor_label, human_bytes
from sentinel.matchers import active_suppressions, suppression_for
from sentinel.output import to_jsonable
from sentinel.rules import FINDING_COLUMNS, Rule, RuleError, default_rules_dir, load_dir
from sentinel.store import Store
from sentinel.timeutil import floor_to, utcnow

log = logs.get(__name__)

CURSOR_SOURCE = "detect"
HOUR = dt.timedelta(hours=1)
EPOCH = dt.datetime(1970, 1, 1)
# Rules whose window is set in [detect] rather than in the rule file.
_WINDOW_KEYS = {
    "weights.full_model_copy": "full_copy_window_hours",
    "weights.denied_read": "denied_window_hours",
}


@dataclass
class RuleOutcome:
    rule_id: str
    status: str  # 'ok' | 'failed' | 'idle'
    findings: int = 0
    new: int = 0
    scope_start: dt.datetime | None = None
    scope_end: dt.datetime | None = None
    late_skipped: int = 0
    seconds: float = 0.0
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "rule_id": self.rule_id,
            "status": self.status,
            "findings": self.findings,
            "new": self.new,
            "scope_start": self.scope_start,
            "scope_end": self.scope_end,
            "late_skipped": self.late_skipped,
            "seconds": round(self.seconds, 3),
            "error": self.error,
        }


@dataclass
class DetectResult:
    outcomes: list[RuleOutcome] = field(default_factory=list)
    replay: bool = False

    @property
    def failed(self) -> list[RuleOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]


@dataclass(frozen=True)
class Scope:
    start: dt.datetime
    end: dt.datetime
    max_load_id: int
    state_start: dt.datetime | None = None  # hours whose state (baselines, seen-set) to refresh
    state_end: dt.datetime | None = None
    late_skipped: int = 0
    oldest_late: str = ""
    first_run: bool = False
    from_load: int = 0  # state that follows loads (freshness) refreshes loads after this one
    cursor: dict[str, Any] | None = None  # the cursor to store after success (None: replay)


def load_rules(cfg: Config, rules_dir: str | Path | None = None) -> list[Rule]:
    directory = Path(rules_dir or cfg.detect.rules_dir or default_rules_dir())
    rules, problems = load_dir(directory)
    if problems and not rules:
        raise RuleError(problems)
    for problem in problems:
        log.error("detect.rule_invalid", problem=str(problem))
    return rules


def run_detect(
    store: Store,
    cfg: Config,
    *,
    rules: Iterable[Rule] | None = None,
    rule_ids: Iterable[str] = (),
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    now: dt.datetime | None = None,
) -> DetectResult:
    """Run enabled rules (or ``rule_ids``); with ``since`` replay a range without moving cursors."""
    now = now or utcnow()
    chosen = _choose(list(rules) if rules is not None else load_rules(cfg), cfg, rule_ids)
    result = DetectResult(replay=since is not None)
    if until is not None and since is None:
        raise UsageError("--until needs --since (a replay range)")
    install_context(store, cfg, now)
    max_load = int(store.scalar("SELECT coalesce(max(load_id), 0) FROM access_events"))
    suppressions = active_suppressions(cfg, now)
    for rule in chosen:
        outcome = RuleOutcome(rule.id, "ok")
        started = time.perf_counter()
        try:
            with store.transaction():
                _run_rule(
                    store,
                    cfg=cfg,
                    rule=rule,
                    outcome=outcome,
                    max_load=max_load,
                    since=since,
                    until=until,
                    now=now,
                    suppressions=suppressions,
                )
        except SentinelError as exc:
            outcome.status, outcome.error = "failed", exc.message
            log.error("detect.rule_failed", rule=rule.id, error=exc.message)
        except (KeyError, ValueError, TypeError, IndexError) as exc:  # a rule's template or row
            outcome.status, outcome.error = "failed", f"{type(exc).__name__}: {exc}"
            log.error("detect.rule_failed", rule=rule.id, error=outcome.error)
        outcome.seconds = time.perf_counter() - started
        result.outcomes.append(outcome)
        log.info("detect.rule_done", **to_jsonable(outcome.as_dict()))
    return result


def _choose(rules: list[Rule], cfg: Config, rule_ids: Iterable[str]) -> list[Rule]:
    wanted = list(rule_ids)
    if not wanted:
        return [r for r in rules if r.enabled and r.id not in cfg.detect.disabled_rules]
    known = {r.id: r for r in rules}
    missing = [w for w in wanted if w not in known]
    if missing:
        raise UsageError(
            f"unknown rule(s): {', '.join(missing)}", hint="sentinel rules list shows the ids"
        )
    return [known[w] for w in wanted]


def _run_rule(
    store: Store,
    *,
    cfg: Config,
    rule: Rule,
    outcome: RuleOutcome,
    max_load: int,
    since: dt.datetime | None,
    until: dt.datetime | None,
    now: dt.datetime,
    suppressions: list[Suppression],
) -> None:
    window = rule_window(rule, cfg)
    scope = _scope(
        store,
        cfg=cfg,
        rule=rule,
        window=window,
        max_load=max_load,
        since=since,
        until=until,
        now=now,
    )
    if scope is None:
        outcome.status = "idle"
        return
    if rule.scope != "always":
        outcome.scope_start, outcome.scope_end = scope.start, scope.end
    outcome.late_skipped = scope.late_skipped
    if scope.late_skipped:
        # On a rule's first run this is the backlog before the lookback, not lateness.
        (log.info if scope.first_run else log.warning)(
            "detect.late_events_skipped",
            rule=rule.id,
            events=scope.late_skipped,
            replay=f"sentinel detect --rule {rule.id} --since {scope.oldest_late}",
        )
    if scope.state_start is not None and scope.state_end is not None:
        _set_scope(store, scope.state_start, scope.state_end, max_load, window)
        store.execute(f"SET VARIABLE from_load = {int(scope.from_load)}::BIGINT")
        for name in rule.state:
            baseline.refresh(store, name)
    _set_scope(store, scope.start, scope.end, max_load, window)
    columns, rows = store.columns_and_rows(rule.sql)
    for row in rows:
        finding = build_finding(rule, dict(zip(columns, row, strict=True)), now)
        hit = suppression_for(suppressions, rule.id, finding["actor"], finding["bucket"])
        if hit is not None:
            finding["status"] = "suppressed"
            finding["evidence"]["suppression"] = {
                "reason": hit.reason,
                "expires": hit.expires or None,
                "rule": hit.rule,
                "actor": hit.actor,
                "bucket": hit.bucket,
            }
        outcome.new += _upsert_finding(store, cfg, finding, now)
        outcome.findings += 1
    if scope.cursor is not None:
        _save_cursor(store, rule.id, scope.cursor, now)


def rule_window(rule: Rule, cfg: Config) -> dt.timedelta | None:
    key = _WINDOW_KEYS.get(rule.id)
    if key is not None and rule.window is not None:
        return dt.timedelta(hours=int(getattr(cfg.detect, key)))
    return rule.window


def _scope(
    store: Store,
    *,
    cfg: Config,
    rule: Rule,
    window: dt.timedelta | None,
    max_load: int,
    since: dt.datetime | None,
    until: dt.datetime | None,
    now: dt.datetime,
) -> Scope | None:
    step = window or HOUR
    if since is not None:  # replay: judge the range, refresh its state, keep the cursor
        end = until or now
        start = floor_to(since, step)
        end = floor_to(end, step) + step if end > floor_to(end, step) else end
        return Scope(start, end, max_load, floor_to(since, HOUR), end)
    cursor = _load_cursor(store, rule.id)
    if rule.scope == "always":
        last = int(cursor.get("load_id", 0))
        return Scope(EPOCH, now, max_load, EPOCH, now, from_load=last, cursor={"load_id": max_load})
    last = int(cursor.get("load_id", 0))
    if max_load <= last:
        return None
    low, high = store.columns_and_rows(
        "SELECT min(event_time), max(event_time) FROM access_events"
        " WHERE load_id > ? AND load_id <= ?",
        [last, max_load],
    )[1][0]
    if low is None:
        return Scope(now, now, max_load, cursor={**cursor, "load_id": max_load})
    old_mark = cursor.get("watermark")
    mark = max(high, dt.datetime.fromisoformat(old_mark)) if old_mark else high
    judged_from = floor_to(mark - dt.timedelta(hours=cfg.detect.lookback_hours), step)
    start = max(floor_to(low, step), judged_from)
    late = 0
    if low < judged_from:
        late = int(
            store.scalar(
                "SELECT count(*) FROM access_events WHERE load_id > ? AND load_id <= ?"
                " AND event_time < ?",
                [last, max_load, judged_from],
            )
        )
    end = floor_to(high, step) + step
    new_cursor = {"load_id": max_load, "watermark": mark.isoformat()}
    state_end = floor_to(high, HOUR) + HOUR
    return Scope(
        start,
        end,
        max_load,
        floor_to(low, HOUR),
        state_end,
        late_skipped=late,
        first_run=not cursor,
        oldest_late=low.isoformat() + "Z" if late else "",
        cursor=new_cursor,
    )


def _set_scope(
    store: Store,
    start: dt.datetime,
    end: dt.datetime,
    max_load: int,
    window: dt.timedelta | None,
) -> None:
    store.execute("SET VARIABLE scope_start = ?::TIMESTAMP", [start])
    store.execute("SET VARIABLE scope_end = ?::TIMESTAMP", [end])
    store.execute(f"SET VARIABLE max_load_id = {int(max_load)}::BIGINT")
    seconds = int(window.total_seconds()) if window else 3600
    store.execute(
        "CREATE OR REPLACE TEMP MACRO window_start(ts) AS "
        f"time_bucket(INTERVAL '{seconds} seconds', ts, TIMESTAMP '1970-01-01')"
    )


def install_context(store: Store, cfg: Config, now: dt.datetime) -> None:
    """Temp macros, views and variables the rule SQL uses (see docs/detect.md)."""
    from sentinel.context import context_statements

    for statement in context_statements(cfg, now):
        store.execute(statement)
    _set_scope(store, EPOCH, EPOCH, 0, None)


# -- findings ----------------------------------------------------------------------------------


def build_finding(rule: Rule, row: dict[str, Any], now: dt.datetime) -> dict[str, Any]:
    """A findings row from one row of a rule's SQL: standard columns map to finding fields, the
    rest become evidence; title and dedupe key come from the rule's templates."""
    values = dict(row)
    bytes_h = human_bytes(values.get("bytes") or 0)
    values.update(
        rule_id=rule.id,
        actor_label=actor_label(values.get("actor")),
        bytes_h=("~" if values.get("bytes_estimated") else "") + bytes_h,
    )
    formatter = TitleFormatter()
    dedupe_key = formatter.format(rule.dedupe, **values)
    window_start = row.get("window_start")
    evidence = {k: v for k, v in row.items() if k not in FINDING_COLUMNS}
    evidence["dedupe_key"] = dedupe_key
    evidence["window_start"] = window_start
    return {
        "finding_id": findings.finding_id(rule.id, dedupe_key, window_start),
        "rule_id": rule.id,
        "severity": row.get("severity") or rule.severity,
        "title": formatter.format(rule.title, **values),
        "summary": row.get("summary") or rule.description.split("\n\n")[0].replace("\n", " "),
        "provider": row.get("provider"),
        "account": row.get("account"),
        "actor": row.get("actor"),
        "bucket": row.get("bucket"),
        "object_key": row.get("object_key"),
        "model": row.get("model"),
        "tenant": row.get("tenant"),
        "first_seen": row.get("first_seen"),
        "last_seen": row.get("last_seen"),
        "event_count": int(row.get("event_count") or 0),
        "bytes": int(row.get("bytes") or 0),
        "evidence": evidence,
        "status": "open",
        "created_at": now,
        "updated_at": now,
    }


def _upsert_finding(store: Store, cfg: Config, finding: dict[str, Any], now: dt.datetime) -> int:
    """Record a finding through ``sentinel.findings`` (which also queues its deliveries in the
    same transaction). A rule re-aggregates its whole window, so its figures replace the old
    ones; status and created_at are kept. Returns 1 when the finding is new."""
    fields = {k: v for k, v in finding.items() if k not in ("created_at", "updated_at")}
    outcome = findings.upsert(store, cfg, findings.Finding(**fields), now=now)
    return 1 if outcome.action == "created" else 0


def set_status(
    store: Store,
    cfg: Config,
    finding_ids: list[str],
    status: str,
    *,
    reason: str,
    by: str,
    now: dt.datetime | None = None,
) -> list[dict[str, Any]]:
    """Acknowledge, suppress, resolve (or reopen) findings; who, when and why go to
    ``finding_history`` and the change is delivered like any other."""
    if status not in findings.STATUSES:
        raise UsageError(f"status must be one of {', '.join(findings.STATUSES)}")
    if not reason.strip():
        raise UsageError("a --reason is required: say why, for the next analyst")
    now = now or utcnow()
    changed = []
    with store.transaction():
        for fid in finding_ids:
            before = findings.get(store, fid)
            if before is None:
                raise UsageError(f"no finding {fid}", hint="sentinel findings lists the ids")
            findings.set_status(store, cfg, fid, status, reason=reason, who=by, now=now)
            changed.append(
                {
                    "finding_id": fid,
                    "from": before["status"],
                    "to": status,
                    "by": by,
                    "at": now,
                    "reason": reason,
                }
            )
    return changed


# -- cursors -----------------------------------------------------------------------------------


def _load_cursor(store: Store, rule_id: str) -> dict[str, Any]:
    value = store.scalar(
        "SELECT value FROM cursors WHERE source = ? AND key = ?", [CURSOR_SOURCE, rule_id]
    )
    return dict(json.loads(value)) if value else {}


def _save_cursor(store: Store, rule_id: str, cursor: dict[str, Any], now: dt.datetime) -> None:
    store.execute(
        "INSERT INTO cursors VALUES (?, ?, ?, ?) ON CONFLICT (source, key)"
        " DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        [CURSOR_SOURCE, rule_id, json.dumps(cursor), now],
    )
