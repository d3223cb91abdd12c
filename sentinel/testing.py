"""The rule test harness, shipped as API: ``run_rule`` serves ``sentinel rules test`` and pytest.

Events are minimal dicts naming only what a rule reads; ``event_rows`` fills the rest of an
``access_events`` row with harmless defaults (and ``repeat``/``every`` expand one dict into a
series, for baselines). Each case runs in a fresh in-memory database through the real engine.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentinel import config as config_mod
from sentinel import ingest
from sentinel.actions import aws_action
from sentinel.config import Config
from sentinel.detect import run_detect
from sentinel.output import to_jsonable
from sentinel.rules import Case, Rule
from sentinel.sources.gcs_actions import GCP_ACTIONS
from sentinel.store import Store
from sentinel.timeutil import parse_duration, parse_time

CASES_CONFIG = "_cases.toml"


# Every access_events column but the raw record, which rules never read.
EVENT_COLUMNS = [c for c in ingest.EVENT_COLUMNS if c != "raw"]
_HELPER_KEYS = {"repeat", "every"}


def _schema() -> dict[str, Any]:
    import polars as pl

    kinds = {
        "event_time": pl.Datetime("us"),
        "is_service_event": pl.Boolean,
        "bytes_estimated": pl.Boolean,
        "bytes_out": pl.Int64,
        "bytes_in": pl.Int64,
        "load_id": pl.Int64,
        "source_index": pl.Int32,
    }
    return {c: kinds.get(c, pl.Utf8) for c in EVENT_COLUMNS}


def event_rows(events: Iterable[Mapping[str, Any]], *, load_id: int = 1) -> list[dict[str, Any]]:
    """Full ``access_events`` rows from minimal dicts (``repeat``/``every`` make a series)."""
    rows: list[dict[str, Any]] = []
    for spec in events:
        unknown = set(spec) - set(EVENT_COLUMNS) - _HELPER_KEYS
        if unknown:
            raise ValueError(f"unknown event field(s): {sorted(unknown)}")
        step = parse_duration(str(spec.get("every", "1h")))
        start = _time(spec["event_time"])
        for n in range(int(spec.get("repeat", 1))):
            rows.append(_row(spec, start + n * step, len(rows), load_id))
    return rows


def _row(spec: Mapping[str, Any], when: dt.datetime, index: int, load_id: int) -> dict[str, Any]:
    provider = spec.get("provider", "aws")
    operation = spec.get("operation", "GetObject" if provider == "aws" else "storage.objects.get")
    default_action = (
        aws_action(operation) if provider == "aws" else GCP_ACTIONS.get(operation, "other")
    )
    event_id = f"{spec.get('event_id', 'ev')}-{load_id}-{index}"
    row: dict[str, Any] = {
        "provider": provider,
        "event_id": event_id,
        "logical_id": spec.get("logical_id", event_id),
        "event_time": when,
        "account": "111122223333" if provider == "aws" else "acme-ml-prod",
        "operation": operation,
        "action": default_action,
        "is_service_event": False,
        "bytes_estimated": provider == "gcp",
        "vpce_id": "vpce-0abc" if provider == "aws" else None,
        "src_ip": "10.1.2.3" if provider == "aws" else "gce-internal-ip",
        "source_uri": "test://case",
        "load_id": load_id,
        "source_index": index,
    }
    # TOML has no null: an empty string stands for NULL.
    row.update(
        {
            k: (None if v == "" else v)
            for k, v in spec.items()
            if k not in _HELPER_KEYS | {"event_id"}
        }
    )
    row["event_time"] = when
    return row


def insert_events(store: Store, events: Iterable[Mapping[str, Any]], *, load_id: int = 1) -> int:
    rows = event_rows(events, load_id=load_id)
    store.execute(
        "INSERT INTO loads VALUES (?, 'test', 'test', now()::TIMESTAMP, 1, ?, 0)"
        " ON CONFLICT DO NOTHING",
        [load_id, len(rows)],
    )
    if rows:
        import polars as pl

        frame = pl.DataFrame(
            [{c: row.get(c) for c in EVENT_COLUMNS} for row in rows],
            schema=_schema(),
        )
        store.register("_new_events", frame)
        try:
            store.execute("INSERT INTO access_events BY NAME SELECT * FROM _new_events")
        finally:
            store.unregister("_new_events")
    return len(rows)


def insert_objects(store: Store, objects: Iterable[Mapping[str, Any]]) -> None:
    for item in objects:
        store.execute(
            "INSERT OR REPLACE INTO objects VALUES (?, ?, ?, ?, NULL, 'test', ?)",
            [
                item.get("provider", "aws"),
                item["bucket"],
                item["object_key"],
                item.get("size"),
                _time(item.get("seen_at", "2026-01-01T00:00:00")),
            ],
        )


def run_rule(
    rule: Rule,
    events: Iterable[Mapping[str, Any]],
    *,
    config: Config | None = None,
    objects: Iterable[Mapping[str, Any]] = (),
    now: dt.datetime | None = None,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
) -> list[dict[str, Any]]:
    """Run one rule over ``events`` in a fresh in-memory database; return its findings
    (evidence parsed from JSON), ordered by first_seen and title."""
    rows = event_rows(events)
    latest = max((r["event_time"] for r in rows), default=dt.datetime(2026, 1, 1))
    with Store.open(":memory:") as store:
        insert_objects(store, objects)
        insert_events(store, events)
        result = run_detect(
            store,
            config or Config(),
            rules=[rule],
            rule_ids=[rule.id],
            since=since,
            until=until,
            now=now or latest + dt.timedelta(hours=1),
        )
        if result.failed:
            raise AssertionError(f"{rule.id} failed: {result.failed[0].error}")
        found = store.query(
            "SELECT * FROM findings WHERE rule_id = ? ORDER BY first_seen, title", [rule.id]
        )
    for item in found:
        item["evidence"] = json.loads(item["evidence"]) if item["evidence"] else {}
        item["dedupe_key"] = item["evidence"].get("dedupe_key")
    return found


def case_config(rule: Rule, case: Case) -> Config:
    base = Path(rule.path).parent / CASES_CONFIG
    text = base.read_text(encoding="utf-8") if base.exists() else ""
    return config_mod.loads(_merge_toml(text, case.config), origin=str(base))


def _merge_toml(base: str, extra: str) -> str:
    """Case config overrides whole tables of the shared one (a table named in ``extra``
    replaces the same table in ``base``)."""
    if not extra.strip():
        return base
    import tomllib

    replaced = {line.strip() for line in extra.splitlines() if line.strip().startswith("[")}
    kept, skipping = [], False
    for line in base.splitlines():
        if line.strip().startswith("["):
            skipping = line.strip() in replaced
        if not skipping:
            kept.append(line)
    merged = "\n".join(kept) + "\n" + extra
    tomllib.loads(merged)
    return merged


@dataclass
class CaseResult:
    rule_id: str
    case: str
    passed: bool
    failures: list[str] = field(default_factory=list)


def run_case(rule: Rule, case: Case) -> CaseResult:
    """Run one case and compare every stated field of every expected finding."""
    try:
        found = run_rule(
            rule,
            case.events,
            config=case_config(rule, case),
            objects=case.objects,
            now=_time(case.now) if case.now else None,
            since=_time(case.since) if case.since else None,
            until=_time(case.until) if case.until else None,
        )
    except Exception as exc:  # a case must report, not crash the whole test run
        return CaseResult(rule.id, case.name, False, [f"error: {type(exc).__name__}: {exc}"])
    failures = compare_findings(case.findings, found)
    return CaseResult(rule.id, case.name, not failures, failures)


def compare_findings(
    expected: Iterable[Mapping[str, Any]], found: list[dict[str, Any]]
) -> list[str]:
    wanted = list(expected)
    failures = []
    if len(wanted) != len(found):
        titles = [f["title"] for f in found]
        failures.append(f"expected {len(wanted)} finding(s), got {len(found)}: {titles}")
        return failures
    for number, (want, got) in enumerate(zip(wanted, found, strict=True), start=1):
        for key, value in want.items():
            if key == "evidence":
                for ekey, evalue in value.items():
                    actual = to_jsonable(got["evidence"].get(ekey))
                    if actual != to_jsonable(evalue):
                        failures.append(
                            f"finding {number} evidence.{ekey}: want {evalue!r}, got {actual!r}"
                        )
                continue
            actual = got.get(key)
            if isinstance(actual, dt.datetime):
                actual = actual.isoformat()
            if actual != value:
                failures.append(f"finding {number} {key}: want {value!r}, got {actual!r}")
    return failures


def _time(value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None) if value.tzinfo is None else parse_time(value.isoformat())
    return parse_time(str(value))
