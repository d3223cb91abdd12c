"""The engine: idempotent, replayable, late-data aware, suppressions as code, and a scenario on
both clouds with one planted incident per rule and nothing on normal traffic."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from sentinel import config
from sentinel.detect import run_detect, set_status
from sentinel.errors import UsageError
from sentinel.rules import CONTRACT_RULE_IDS
from sentinel.store import Store
from sentinel.testing import insert_events, insert_objects
from tests.detect_fixtures import (
    CONFIG,
    DR_CONFIG,
    INCIDENT_DAY,
    NOW,
    fresh_logs,  # noqa: F401  (autouse)
    incidents,
    normal_traffic,
    objects,
)

NOTEBOOK = "arn:aws:iam::111122223333:role/ds-notebook"
CFG = config.loads(CONFIG + "\n[detect]\nfirst_seen_learning_days = 0.0\n")


def _read(when: dt.datetime, key: str = "models/team-a/m/a.bin", size: int = 100) -> dict[str, Any]:
    return {
        "actor": NOTEBOOK,
        "bucket": "acme-weights-prod",
        "object_key": key,
        "bytes_out": size,
        "event_time": when,
    }


def _findings(store: Store, rule: str | None = None) -> list[dict[str, Any]]:
    rows = store.query(
        "SELECT * FROM findings WHERE rule_id = coalesce(?, rule_id) ORDER BY finding_id", [rule]
    )
    for row in rows:
        row["evidence"] = json.loads(row["evidence"])
    return rows


def _snapshot(store: Store) -> list[tuple[Any, ...]]:
    return [
        (f["finding_id"], f["rule_id"], f["title"], f["event_count"], f["bytes"], f["status"])
        for f in _findings(store)
    ]


def _rules_run(store: Store, **kwargs: Any) -> Any:
    result = run_detect(store, CFG, now=kwargs.pop("now", NOW), **kwargs)
    assert not result.failed, [o.error for o in result.failed]
    return result


def test_detect_twice_equals_once_and_replay_gives_the_same_ids(store: Store) -> None:
    insert_objects(store, objects())
    insert_events(store, normal_traffic(start=INCIDENT_DAY - dt.timedelta(days=9)), load_id=1)
    insert_events(store, incidents(), load_id=2)
    _rules_run(store)
    once = _snapshot(store)
    assert len(once) > 5
    _rules_run(store)
    assert _snapshot(store) == once
    store.execute("DELETE FROM findings")
    _rules_run(store, since=INCIDENT_DAY - dt.timedelta(days=9), until=NOW)
    assert {row[0] for row in _snapshot(store)} >= {
        row[0] for row in once if row[1] != "weights.full_model_copy"
    }
    assert [row for row in _snapshot(store) if row[0] in {o[0] for o in once}] == once


def test_new_events_in_a_window_update_its_finding(store: Store) -> None:
    insert_events(store, [_read(dt.datetime(2026, 5, 4, 10, 5))], load_id=1)
    _rules_run(store, rule_ids=["weights.non_hydrator_read"])
    first = _findings(store, "weights.non_hydrator_read")
    insert_events(
        store, [_read(dt.datetime(2026, 5, 4, 10, 50), "models/team-a/m/b.bin")], load_id=2
    )
    _rules_run(store, rule_ids=["weights.non_hydrator_read"])
    second = _findings(store, "weights.non_hydrator_read")
    assert len(first) == len(second) == 1
    assert second[0]["finding_id"] == first[0]["finding_id"]
    assert (second[0]["event_count"], second[0]["bytes"]) == (2, 200)
    assert second[0]["last_seen"] == dt.datetime(2026, 5, 4, 10, 50)
    assert second[0]["first_seen"] == first[0]["first_seen"]
    assert second[0]["created_at"] == first[0]["created_at"]


def test_late_events_inside_the_lookback_are_judged_outside_are_reported(store: Store) -> None:
    insert_events(store, [_read(dt.datetime(2026, 5, 10, 12), "models/x")], load_id=1)
    _rules_run(store, rule_ids=["weights.non_hydrator_read"])
    # 30 h late: inside the 48 h lookback
    insert_events(store, [_read(dt.datetime(2026, 5, 9, 6), "models/late")], load_id=2)
    result = _rules_run(store, rule_ids=["weights.non_hydrator_read"])
    assert result.outcomes[0].late_skipped == 0
    assert len(_findings(store)) == 2
    # 5 days late: outside; counted and left for a replay
    insert_events(store, [_read(dt.datetime(2026, 5, 5, 6), "models/very-late")], load_id=3)
    result = _rules_run(store, rule_ids=["weights.non_hydrator_read"])
    assert result.outcomes[0].late_skipped == 1
    assert len(_findings(store)) == 2
    cursor = store.scalar("SELECT value FROM cursors WHERE key = 'weights.non_hydrator_read'")
    _rules_run(
        store,
        rule_ids=["weights.non_hydrator_read"],
        since=dt.datetime(2026, 5, 5),
        now=dt.datetime(2026, 5, 11),
    )
    assert len(_findings(store)) == 3
    assert (
        store.scalar("SELECT value FROM cursors WHERE key = 'weights.non_hydrator_read'") == cursor
    )


def test_first_seen_is_replay_safe_and_moves_earlier_with_late_data(store: Store) -> None:
    insert_events(store, [_read(dt.datetime(2026, 5, 4, 10))], load_id=1)
    _rules_run(store, rule_ids=["weights.first_seen_reader"])
    _rules_run(store, rule_ids=["weights.first_seen_reader"], since=dt.datetime(2026, 5, 1))
    (finding,) = _findings(store)
    assert finding["first_seen"] == dt.datetime(2026, 5, 4, 10)
    insert_events(store, [_read(dt.datetime(2026, 5, 4, 8))], load_id=2)
    _rules_run(store, rule_ids=["weights.first_seen_reader"])
    (updated,) = _findings(store)
    assert updated["finding_id"] == finding["finding_id"]
    assert updated["first_seen"] == dt.datetime(2026, 5, 4, 8)
    assert updated["evidence"]["first_event_id"] == "ev-2-0"
    assert store.scalar("SELECT count(*) FROM seen_readers") == 1


def test_suppressions_mark_findings_until_they_expire(store: Store) -> None:
    cfg = config.loads(
        CONFIG
        + """
[[suppressions]]
rule = "weights.non_hydrator_read"
actor = "*ds-notebook"
bucket = "acme-weights-*"
reason = "notebook migration, ticket SEC-42"
expires = "2026-05-05T00:00:00Z"
"""
    )
    insert_events(store, [_read(dt.datetime(2026, 5, 4, 10))], load_id=1)
    run_detect(store, cfg, rule_ids=["weights.non_hydrator_read"], now=dt.datetime(2026, 5, 4, 11))
    (kept,) = _findings(store)
    assert kept["status"] == "suppressed"
    assert kept["evidence"]["suppression"]["reason"] == "notebook migration, ticket SEC-42"
    insert_events(store, [_read(dt.datetime(2026, 5, 5, 10))], load_id=2)
    run_detect(store, cfg, rule_ids=["weights.non_hydrator_read"], now=dt.datetime(2026, 5, 5, 11))
    statuses = {f["first_seen"].day: f["status"] for f in _findings(store)}
    assert statuses == {4: "suppressed", 5: "open"}


def test_analyst_status_survives_reruns_and_is_audited(store: Store) -> None:
    insert_events(store, [_read(dt.datetime(2026, 5, 4, 10))], load_id=1)
    _rules_run(store, rule_ids=["weights.non_hydrator_read"])
    (finding,) = _findings(store)
    set_status(
        store,
        config.loads(CONFIG),
        [finding["finding_id"]],
        "acknowledged",
        reason="known job",
        by="ana",
    )
    insert_events(store, [_read(dt.datetime(2026, 5, 4, 10, 30))], load_id=2)
    _rules_run(store, rule_ids=["weights.non_hydrator_read"])
    (after,) = _findings(store)
    assert (after["status"], after["event_count"]) == ("acknowledged", 2)
    audit = store.query(
        "SELECT change, old_value, new_value, reason, who FROM finding_history WHERE change = 'status'"
    )
    assert audit == [
        {"change": "status", "old_value": "open", "new_value": "acknowledged",
         "reason": "known job", "who": "ana"}
    ]  # fmt: skip
    with pytest.raises(UsageError, match="reason"):
        set_status(
            store, config.loads(CONFIG), [finding["finding_id"]], "resolved", reason=" ", by="ana"
        )


def test_scenario_both_clouds_one_finding_per_incident_nothing_on_normal_traffic(
    store: Store,
) -> None:
    insert_objects(store, objects())
    insert_events(store, normal_traffic(), load_id=1)
    result = run_detect(store, config.loads(CONFIG), now=NOW)
    assert not result.failed
    normal = [f for f in _findings(store) if f["severity"] != "info"]
    assert [f["title"] for f in normal] == []
    assert {f["rule_id"] for f in _findings(store)} == {"weights.full_model_copy"}

    insert_events(store, incidents(), load_id=2)
    run_detect(store, config.loads(DR_CONFIG), now=NOW)
    alerts = {
        (f["rule_id"], f["severity"], f["provider"], f["title"])
        for f in _findings(store)
        if f["severity"] != "info"
    }
    by_rule = {rule for rule, *_ in alerts}
    assert by_rule == CONTRACT_RULE_IDS
    assert (
        "weights.hydrator_off_platform",
        "high",
        "gcp",
        "Hydrator service account weights-hydrator read acme-weights-gcs from outside its "
        "networks (198.51.100.7)",
    ) in alerts
    assert (
        "weights.bytes_read_anomaly",
        "high",
        "aws",
        "role weights-hydrator-us read 400.0 GiB from acme-weights-prod in one hour, above its "
        "baseline threshold of 40.0 GiB (hour_of_week)",
    ) in alerts
    assert (
        "weights.full_model_copy",
        "critical",
        "aws",
        "role data-mover read 100% of model acme-weights-prod/models/team-b/mixtral/ "
        "(4/4 objects, 40.0 GiB)",
    ) in alerts
    hourly = [f for f in _findings(store) if f["rule_id"] == "weights.non_hydrator_read"]
    assert len(hourly) == 6  # data-mover in four separate hours, notebook, team-a trainer


def test_a_failing_rule_is_reported_and_the_others_still_run(store: Store, tmp_path: Any) -> None:
    from sentinel.rules import default_rules_dir, load_dir

    good = (default_rules_dir() / "weights.denied_read.toml").read_text(encoding="utf-8")
    (tmp_path / "weights.denied_read.toml").write_text(good, encoding="utf-8")
    broken = good.replace(
        "FROM scope_events", "FROM scope_events WHERE 'x'::INTEGER = 1 AND true", 1
    )
    broken = broken.replace("WHERE is_watched", "AND is_watched", 1)
    broken = broken.replace('id = "weights.denied_read"', 'id = "weights.zz_broken"')
    (tmp_path / "weights.zz_broken.toml").write_text(broken, encoding="utf-8")
    rules, problems = load_dir(tmp_path)
    assert problems == []
    insert_events(
        store,
        [{**_read(dt.datetime(2026, 5, 4, 10)), "error_code": "AccessDenied"}],
        load_id=1,
    )
    result = run_detect(store, CFG, rules=rules, now=NOW)
    assert [o.rule_id for o in result.failed] == ["weights.zz_broken"]
    assert "Conversion Error" in result.failed[0].error
    assert [f["rule_id"] for f in _findings(store)] == ["weights.denied_read"]
    assert store.scalar("SELECT count(*) FROM cursors WHERE key = 'weights.zz_broken'") == 0


def test_analyst_views_over_baselines_and_triage(store: Store) -> None:
    insert_events(
        store,
        [{**_read(dt.datetime(2026, 5, 1, 10), size=7), "repeat": 3, "every": "1d"}],
        load_id=1,
    )
    _rules_run(store, rule_ids=["weights.bytes_read_anomaly", "weights.non_hydrator_read"])
    (baseline,) = store.query("SELECT * FROM v_read_baselines")
    assert baseline["actor"] == NOTEBOOK
    assert (baseline["hours_in_window"], baseline["active_hours"]) == (49, 3)
    assert (baseline["bytes_in_window"], baseline["peak_hour_bytes"]) == (21, 7)
    fid = _findings(store)[0]["finding_id"]
    set_status(store, config.loads(CONFIG), [fid], "resolved", reason="rotated the role", by="ana")
    (row,) = store.query("SELECT * FROM v_findings_triage WHERE finding_id = ?", [fid])
    assert (row["status"], row["last_action_by"], row["last_action_reason"]) == (
        "resolved",
        "ana",
        "rotated the role",
    )
