"""findings.upsert / set_status: one transaction for the finding, its history and its outbox."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from sentinel import findings
from sentinel.store import Store
from tests.deliver.receiver import T0, json_hook, make_config, make_finding

URL = "http://127.0.0.1:9"


def outbox_rows(store: Store) -> list[dict[str, object]]:
    return store.query("SELECT destination, finding_id, change, state FROM outbox ORDER BY all")


def test_finding_id_is_deterministic_and_window_scoped() -> None:
    a = findings.finding_id("weights.denied_read", ("arn:x", "b"), T0)
    assert a == findings.finding_id("weights.denied_read", ("arn:x", "b"), T0)
    assert a == findings.finding_id("weights.denied_read", "arn:x\x1fb", T0)
    assert a != findings.finding_id("weights.denied_read", ("arn:x", "b"), T0 + dt.timedelta(1))
    assert a != findings.finding_id("weights.first_seen_reader", ("arn:x", "b"), T0)
    assert a.startswith("f_")
    assert len(a) == 26


def test_new_finding_enqueues_per_matching_destination(store: Store) -> None:
    cfg = make_config(
        json_hook(URL, "all"),
        json_hook(URL, "critical-only", more='min_severity = "critical"'),
        json_hook(URL, "leaks", more='rules = ["logs.*"]'),
        json_hook(URL, "weights", more='rules = ["weights.*"]\nmin_severity = "medium"'),
    )
    outcome = findings.upsert(store, cfg, make_finding())
    assert outcome == findings.Outcome(make_finding().finding_id, "created", ("new",), 2)
    assert [r["destination"] for r in outbox_rows(store)] == ["all", "weights"]
    stored = findings.get(store, outcome.finding_id)
    assert stored is not None
    assert stored["status"] == "open"
    assert stored["evidence"] == {"event_ids": ["ev-0-1", "ev-0-2"]}


def test_rerun_is_unchanged_and_material_changes_enqueue(store: Store) -> None:
    cfg = make_config(json_hook(URL))
    f = make_finding()
    findings.upsert(store, cfg, f)
    assert findings.upsert(store, cfg, f).action == "unchanged"
    # more events below the next step (10): updated, nothing sent
    quiet = findings.upsert(store, cfg, dataclasses.replace(f, event_count=9))
    assert (quiet.action, quiet.changes, quiet.enqueued) == ("updated", (), 0)
    # crossing the step of 10 events
    assert findings.upsert(store, cfg, dataclasses.replace(f, event_count=12)).changes == ("count",)
    # severity up (and bytes crossing 10 GiB at the same time): one delivery, both in history
    louder = dataclasses.replace(f, event_count=12, severity="critical", bytes=11 * 2**30)
    assert findings.upsert(store, cfg, louder).changes == ("severity", "count")
    # severity down is stored but not sent
    assert findings.upsert(store, cfg, dataclasses.replace(louder, severity="low")).enqueued == 0
    assert [r["change"] for r in outbox_rows(store)] == ["count", "new", "severity"]
    assert [h["change"] for h in findings.history(store, f.finding_id)] == [
        "created", "count", "count", "severity",
    ]  # fmt: skip


def test_merge_widens_the_seen_window_and_keeps_status(store: Store) -> None:
    cfg = make_config(json_hook(URL))
    f = make_finding()
    findings.upsert(store, cfg, f)
    findings.set_status(store, cfg, f.finding_id, "acknowledged", reason="on it", who="alice")
    later = dataclasses.replace(
        f, first_seen=T0 + dt.timedelta(minutes=5), last_seen=T0 + dt.timedelta(hours=2)
    )
    findings.upsert(store, cfg, later)
    row = findings.get(store, f.finding_id)
    assert row is not None
    assert (row["first_seen"], row["last_seen"]) == (T0, T0 + dt.timedelta(hours=2))
    assert row["status"] == "acknowledged"


def test_set_status_records_who_when_why_and_enqueues(store: Store) -> None:
    cfg = make_config(json_hook(URL))
    f = make_finding()
    when = dt.datetime(2026, 11, 3, 12, 0, tzinfo=dt.UTC)
    findings.upsert(store, cfg, f, now=when - dt.timedelta(hours=1))
    out = findings.set_status(
        store, cfg, f.finding_id, "resolved", reason="approved job", who="bob", now=when
    )
    assert (out.action, out.enqueued) == ("updated", 1)
    last = findings.history(store, f.finding_id)[-1]
    assert {k: last[k] for k in ("change", "old_value", "new_value", "reason", "who")} == {
        "change": "status", "old_value": "open", "new_value": "resolved",
        "reason": "approved job", "who": "bob",
    }  # fmt: skip
    assert last["changed_at"] == dt.datetime(2026, 11, 3, 12, 0)
    again = findings.set_status(store, cfg, f.finding_id, "resolved", reason="x", who="bob")
    assert again.action == "unchanged"
    with pytest.raises(findings.UsageError, match="no finding"):
        findings.set_status(store, cfg, "f_missing", "resolved", reason="x", who="bob")


def test_finding_and_outbox_commit_together_or_not_at_all(store: Store) -> None:
    cfg = make_config(json_hook(URL))
    with pytest.raises(RuntimeError), store.transaction():
        findings.upsert(store, cfg, make_finding())
        raise RuntimeError("the detector crashed before its cursor committed")
    assert store.scalar("SELECT count(*) FROM findings") == 0
    assert store.scalar("SELECT count(*) FROM outbox") == 0


def test_raw_content_and_credentials_never_reach_the_table(store: Store) -> None:
    key = "AKIA" + "QWERTYUIOPASDFGH"
    prompt = "Summarise our confidential merger plan " + "for Q3"
    f = make_finding(
        title=f"key {key} in logs",
        evidence={"line": f"token={key}", "prompt": prompt, "preview": "AKIA…DFGH", "n": 1},
    )
    findings.upsert(store, make_config(json_hook(URL)), f)
    dump = str(store.query("SELECT * FROM findings")) + str(store.query("SELECT * FROM outbox"))
    assert key not in dump
    assert prompt not in dump
    assert "AKIA…DFGH" in dump
