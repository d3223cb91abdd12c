"""The demo: every rule finds its planted incident, and routine traffic raises nothing."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from sentinel import demo, synth
from sentinel.detectors import PROMPT_RULE, SECRET_RULE
from sentinel.rules import CONTRACT_RULE_IDS
from sentinel.sources import gcs_demo
from sentinel.store import Store

RULES = CONTRACT_RULE_IDS | {SECRET_RULE, PROMPT_RULE}
# Who the planted incidents involve; anything else in an open finding is a false positive.
INCIDENT_ACTORS = {
    synth.NOTEBOOK, synth.TEAM_B, synth.PARTNER, synth.HYDRATOR, synth.ADMIN,
    "arn:aws:iam::111122223333:role/ops/artifact-janitor", gcs_demo.PARTNER,
    gcs_demo.HUMANS[1], None,
}  # fmt: skip


def test_demo_finds_every_planted_incident_and_nothing_else(tmp_path: Path) -> None:
    result = demo.run(tmp_path / "demo", days=10, today=dt.date(2026, 3, 1))
    assert not result.partial and not result.summary["rules_failed"]
    with Store.open(result.db_path, read_only=True) as store:
        open_findings = store.query(
            "SELECT rule_id, actor, bucket, title FROM findings"
            " WHERE status = 'open' AND severity <> 'info'"
        )
        routine_info = store.query("SELECT DISTINCT rule_id FROM findings WHERE severity = 'info'")
    assert {f["rule_id"] for f in open_findings} == RULES
    false_positives = [f for f in open_findings if f["actor"] not in INCIDENT_ACTORS]
    assert not false_positives
    silent = [f for f in open_findings if f["rule_id"] == "pipeline.source_silent"]
    assert [f["bucket"] for f in silent] == [synth.STAGING]
    # Hydrators loading whole models is routine: recorded as information only.
    assert {r["rule_id"] for r in routine_info} <= {"weights.full_model_copy"}


def test_event_show_finds_originals_on_both_clouds(tmp_path: Path) -> None:
    from sentinel import config, events

    result = demo.run(tmp_path / "demo", days=8, today=dt.date(2026, 3, 1))
    cfg = config.load(result.config_path, {})
    with Store.open(result.db_path, read_only=True) as store:
        for provider in ("aws", "gcp"):
            event_id = store.scalar(
                "SELECT event_id FROM access_events WHERE provider = ? AND raw IS NULL"
                " ORDER BY event_id LIMIT 1",
                [provider],
            )
            shown = events.show(store, cfg, event_id)
            assert shown["from"] != "database"
            record = shown["record"]
            key = record.get("eventID") or "|".join(
                (record["logName"], record["timestamp"], record["insertId"])
            )
            assert key == event_id
