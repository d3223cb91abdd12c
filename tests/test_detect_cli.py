"""The detect, findings and rules commands end to end on a real database file."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from sentinel.rules import default_rules_dir
from sentinel.store import Store
from sentinel.testing import insert_events
from sentinel.timeutil import utcnow
from tests.detect_fixtures import (
    CONFIG,
    fresh_logs,  # noqa: F401  (autouse)
)

NOTEBOOK = "arn:aws:iam::111122223333:role/ds-notebook"


def _setup(tmp_path: Path) -> None:
    one_bucket = CONFIG.replace('"acme-ckpt-prod", "acme-weights-gcs"', "")
    (tmp_path / "sentinel.toml").write_text(
        one_bucket + "\n[detect]\nfirst_seen_learning_days = 0.0\n", encoding="utf-8"
    )
    hour = utcnow().replace(minute=0, second=0, microsecond=0)
    with Store.open(tmp_path / "sentinel.duckdb") as store:
        insert_events(
            store,
            [
                {"actor": NOTEBOOK, "bucket": "acme-weights-prod", "object_key": "models/a",
                 "bytes_out": 5, "event_time": hour - dt.timedelta(hours=2)},
                {"actor": NOTEBOOK, "bucket": "acme-weights-prod", "object_key": "models/b",
                 "error_code": "AccessDenied", "event_time": hour - dt.timedelta(hours=1)},
            ],
        )  # fmt: skip


def test_detect_then_list_filter_and_triage(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _setup(tmp_path)
    run = cli("detect", "--json")
    assert run.exit_code == 0, run.stderr
    outcomes = {o["rule_id"]: o for o in json.loads(run.stdout)}
    assert outcomes["weights.non_hydrator_read"]["new"] == 1
    assert outcomes["weights.denied_read"]["findings"] == 1
    again = {o["rule_id"]: o for o in json.loads(cli("detect", "--json").stdout)}
    assert again["weights.non_hydrator_read"]["status"] == "idle"

    listed = json.loads(cli("findings", "--severity", "high", "--json").stdout)
    assert [f["rule_id"] for f in listed] == ["weights.non_hydrator_read"]
    assert (
        listed[0]["title"]
        == "Non-hydrator role ds-notebook read 5 B from acme-weights-prod (1 objects)"
    )
    assert listed[0]["evidence"]["sample_keys"] == ["models/a"]
    everything = json.loads(cli("findings", "--rule", "weights.*", "--json").stdout)
    assert {f["severity"] for f in everything} == {"high", "medium"}
    by_actor = json.loads(cli("findings", "--actor", "*ds-notebook", "--json").stdout)
    assert len(by_actor) == len(everything)
    assert json.loads(cli("findings", "--bucket", "other-*", "--json").stdout) == []

    fid = listed[0]["finding_id"]
    acked = cli(
        "findings", "ack", fid[:12], "--reason", "expected eval job", "--by", "ana", "--json"
    )
    assert acked.exit_code == 0, acked.stderr
    assert json.loads(acked.stdout)[0]["to"] == "acknowledged"
    assert json.loads(cli("findings", "--status", "open", "--json").stdout)[0]["rule_id"] != (
        "weights.non_hydrator_read"
    )
    missing_reason = cli("findings", "resolve", fid)
    assert missing_reason.exit_code == 2
    table = cli("findings", "--status", "acknowledged")
    assert "Non-hydrator role ds-notebook" in table.stdout
    assert "(1 row)" in table.stdout


def test_replay_window_and_single_rule(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _setup(tmp_path)
    run = cli(
        "detect", "--rule", "weights.denied_read", "--since", "1d", "--json",
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    (outcome,) = json.loads(run.stdout)
    start = (utcnow() - dt.timedelta(days=1)).replace(minute=0, second=0, microsecond=0)
    assert outcome["scope_start"] == start.isoformat() + "Z"
    assert outcome["findings"] == 1
    unknown = cli("detect", "--rule", "weights.nope")
    assert unknown.exit_code == 2
    assert "unknown rule" in unknown.stderr


def test_a_broken_rule_gives_exit_3_and_the_rest_runs(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _setup(tmp_path)
    rules = tmp_path / "rules"
    rules.mkdir()
    good = (default_rules_dir() / "weights.denied_read.toml").read_text(encoding="utf-8")
    (rules / "weights.denied_read.toml").write_text(good, encoding="utf-8")
    (rules / "weights.broken.toml").write_text(
        good.replace("FROM scope_events", "FROM no_such_table", 1).replace(
            'id = "weights.denied_read"', 'id = "weights.broken"'
        ),
        encoding="utf-8",
    )
    run = cli("detect", "--rules-dir", str(rules), "--json")
    assert run.exit_code == 3
    status = {o["rule_id"]: o["status"] for o in json.loads(run.stdout)}
    assert status == {"weights.broken": "failed", "weights.denied_read": "ok"}


def test_rules_commands(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    listed = json.loads(cli("rules", "list", "--json").stdout)
    assert len(listed) == 10
    assert {"rule_id": "weights.full_model_copy", "severity": "critical", "window": "24h",
            "mitre": "T1530,T1537", "enabled": True, "cases": 2} in listed  # fmt: skip
    lint = cli("rules", "lint")
    assert lint.exit_code == 0
    assert "10 rule(s), 0 problem(s)" in lint.stderr
    tested = cli("rules", "test", "--rule", "weights.denied_read", "--json")
    assert tested.exit_code == 0
    assert [r["result"] for r in json.loads(tested.stdout)] == ["pass", "pass", "pass"]


def test_help_teaches(cli) -> None:  # type: ignore[no-untyped-def]
    for args in (["detect"], ["findings"], ["findings", "ack"], ["rules", "test"]):
        out = cli(*args, "--help")
        assert out.exit_code == 0
        assert "sentinel" in out.stdout or "who, when" in out.stdout
