"""Delivery against a real local receiver that verifies signatures and simulates failures."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from sentinel import config, deliver, findings, outbox
from sentinel.errors import ConfigError
from sentinel.store import Store
from tests.deliver.receiver import Receiver, json_hook, make_config, make_finding

NOW = dt.datetime(2026, 11, 2, 12, 0)


def pending(store: Store) -> int:
    return int(store.scalar("SELECT count(*) FROM outbox WHERE state = 'pending'"))


def test_delivers_signed_json_once_and_marks_delivered(store: Store, receiver: Receiver) -> None:
    cfg = make_config(json_hook(receiver.url))
    ids = [findings.upsert(store, cfg, make_finding(n), now=NOW).finding_id for n in range(3)]
    report = deliver.run(store, cfg, now=NOW)
    assert [(t.sent, t.retrying, t.dead) for t in report.tallies] == [(3, 0, 0)]
    assert not report.failed
    assert receiver.rejected == 0
    bodies = receiver.delivered
    assert sorted(b["finding_id"] for b in bodies) == sorted(ids)
    assert {b["schema_version"] for b in bodies} == {"1"}
    assert {b["change"] for b in bodies} == {"new"}
    for request in receiver.requests:  # the webhook-id is the delivery id in the body
        assert json.loads(request.body)["delivery_id"] == request.webhook_id
    assert store.scalar("SELECT count(*) FROM outbox WHERE state = 'delivered'") == 3
    assert deliver.run(store, cfg, now=NOW).tallies[0].sent == 0  # nothing left to send


def test_every_failure_mode_then_recovery_delivers_each_finding(
    store: Store, receiver: Receiver
) -> None:
    cfg = make_config(json_hook(receiver.url))
    for n in range(4):
        findings.upsert(store, cfg, make_finding(n), now=NOW)
    receiver.script = ["500", "429:300", "timeout", "drop"]
    now, runs, failed_runs = NOW, 0, 0
    while pending(store) and runs < 20:
        report = deliver.run(store, cfg, now=now)
        failed_runs += report.failed
        if runs == 1:  # the 429: Retry-After (300 s, above the 60 s cap) is honoured exactly
            row = store.query("SELECT next_attempt_at FROM outbox WHERE last_status = 429")
            assert row == [{"next_attempt_at": now + dt.timedelta(seconds=300)}]
        now += dt.timedelta(minutes=10)
        runs += 1
    assert failed_runs == 4
    assert pending(store) == 0
    assert store.scalar("SELECT count(*) FROM outbox WHERE state = 'dead'") == 0
    expected = {r["delivery_id"] for r in store.query("SELECT delivery_id FROM outbox")}
    assert set(receiver.seen_ids) == expected  # every delivery id arrived ...
    assert len(receiver.delivered) == 4  # ... and after dedupe on webhook-id, each exactly once
    # only the timed-out request was processed twice by the receiver, under the same id
    receiver.wait_for(5)
    assert sorted(receiver.seen_ids.values()) == [1, 1, 1, 2]


def test_long_outage_loses_nothing_and_duplicates_nothing(store: Store, receiver: Receiver) -> None:
    cfg = make_config(json_hook(receiver.url))
    for n in range(25):
        findings.upsert(store, cfg, make_finding(n), now=NOW)
    receiver.down = True
    now = NOW
    for _ in range(18):  # six hours of runs every twenty minutes against a 503
        report = deliver.run(store, cfg, now=now)
        assert report.failed
        assert report.tallies[0].sent == 0
        now += dt.timedelta(minutes=20)
    assert pending(store) == 25
    status = outbox.status(store, now)[0]
    assert status["pending"] == 25
    assert status["oldest_pending_age_s"] == 6 * 3600
    receiver.down = False
    for _ in range(5):
        deliver.run(store, cfg, now=now)
        now += dt.timedelta(hours=1)
    assert pending(store) == 0
    assert len(receiver.delivered) == 25
    assert set(receiver.seen_ids.values()) == {1}
    assert len({b["finding_id"] for b in receiver.delivered}) == 25


def test_other_4xx_dead_letters_at_once_and_retry_dead_requeues(
    store: Store, receiver: Receiver
) -> None:
    cfg = make_config(json_hook(receiver.url))
    findings.upsert(store, cfg, make_finding(), now=NOW)
    receiver.script = ["422"]
    report = deliver.run(store, cfg, now=NOW)
    assert report.failed
    assert report.tallies[0].dead == 1
    (dead,) = store.query("SELECT * FROM v_dead_letters")
    assert (dead["last_status"], dead["attempts"]) == (422, 1)
    assert "simulated 422" in dead["response"]
    assert outbox.status(store, NOW)[0]["dead"] == 1
    assert outbox.retry_dead(store, NOW) == 1
    assert not deliver.run(store, cfg, now=NOW).failed
    assert len(receiver.delivered) == 1
    assert receiver.delivered[0]["delivery_id"] == dead["delivery_id"]  # same id after requeue


def test_gives_up_after_max_attempts_or_max_age(store: Store, receiver: Receiver) -> None:
    cfg = make_config(
        json_hook(receiver.url, "few", more="max_attempts = 2"),
        json_hook(receiver.url, "young", more="max_age_hours = 1.0"),
    )
    findings.upsert(store, cfg, make_finding(), now=NOW)
    receiver.down = True
    deliver.run(store, cfg, now=NOW)
    assert pending(store) == 2
    deliver.run(store, cfg, now=NOW + dt.timedelta(minutes=30))
    rows = store.query("SELECT destination, state, last_error FROM outbox ORDER BY destination")
    assert [(r["destination"], r["state"]) for r in rows] == [("few", "dead"), ("young", "pending")]
    assert rows[0]["last_error"].startswith("gave up after 2 attempts")
    deliver.run(store, cfg, now=NOW + dt.timedelta(hours=2))
    (young,) = store.query("SELECT state, last_error FROM outbox WHERE destination = 'young'")
    assert young["state"] == "dead"
    assert "(too old)" in young["last_error"]


def test_payload_cap_trims_evidence_then_dead_letters(store: Store, receiver: Receiver) -> None:
    cfg = make_config(
        json_hook(receiver.url, "trim", more="max_payload_bytes = 1500"),
        json_hook(receiver.url, "tiny", more="max_payload_bytes = 100"),
    )
    big = make_finding(evidence={"event_ids": [f"event-{i:05d}" for i in range(400)]})
    findings.upsert(store, cfg, big, now=NOW)
    report = deliver.run(store, cfg, now=NOW)
    assert {t.destination: (t.sent, t.dead) for t in report.tallies} == {
        "trim": (1, 0),
        "tiny": (0, 1),
    }
    assert receiver.delivered[0]["evidence"] == {"truncated": True}
    (dead,) = store.query("SELECT last_error FROM v_dead_letters")
    assert "max_payload_bytes" in dead["last_error"]


def test_unconfigured_destination_items_become_dead_letters(
    store: Store, receiver: Receiver
) -> None:
    old = make_config(json_hook(receiver.url, "retired"))
    findings.upsert(store, old, make_finding(), now=NOW)
    report = deliver.run(store, make_config(json_hook(receiver.url, "current")), now=NOW)
    assert report.orphaned == 1
    assert report.failed
    assert store.scalar("SELECT last_error FROM v_dead_letters") == "destination is not configured"


def test_dry_run_renders_without_sending_or_changing_state(
    store: Store, receiver: Receiver
) -> None:
    cfg = make_config(json_hook(receiver.url))
    findings.upsert(store, cfg, make_finding(), now=NOW)
    report = deliver.run(store, cfg, now=NOW, dry_run=True)
    (shown,) = report.rendered
    assert shown.url == receiver.url + "/hook"
    assert json.loads(shown.body)["delivery_id"] == shown.delivery_ids[0]
    assert shown.headers["webhook-id"] == shown.delivery_ids[0]
    assert receiver.requests == []
    assert pending(store) == 1


def test_https_is_required_except_loopback_or_allow_insecure() -> None:
    with pytest.raises(ConfigError, match="must use https"):
        make_config(json_hook("http://siem.example"))
    assert make_config(json_hook("http://siem.example", more="allow_insecure = true"))
    assert make_config(json_hook("https://siem.example"))
    with pytest.raises(ConfigError, match="must be signed"):
        config.loads('[[alerts.webhook]]\nurl = "https://siem.example"\nformat = "ocsf"\n')
    hook = config.Webhook(url="http://10.0.0.5/hook")  # built in code: checked again at send time
    with pytest.raises(ConfigError, match="https"):
        deliver.check_url(hook)
