"""Payload formats on the wire: OCSF against a JSON schema, Splunk HEC, Alertmanager, safety."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from sentinel import deliver, findings
from sentinel.store import Store
from tests.deliver.receiver import (
    SECRET_ENV,
    TOKEN_ENV,
    Receiver,
    environ,
    json_hook,
    make_config,
    make_finding,
)

NOW = dt.datetime(2026, 11, 2, 12, 0)
SCHEMA = json.loads(
    (Path(__file__).parent / "schemas" / "ocsf_1.6_detection_finding_2004.json").read_text()
)


def ocsf_events(store: Store, receiver: Receiver, *found: findings.Finding) -> list[dict[str, Any]]:
    cfg = make_config(json_hook(receiver.url, fmt="ocsf", more='min_severity = "info"'))
    for f in found:
        findings.upsert(store, cfg, f, now=NOW)
    findings.set_status(store, cfg, found[0].finding_id, "resolved", reason="ok", who="t", now=NOW)
    assert not deliver.run(store, cfg, now=NOW).failed
    return receiver.delivered


def test_ocsf_detection_findings_validate_against_the_class_2004_schema(
    store: Store, receiver: Receiver
) -> None:
    gcp = make_finding(1, provider="gcp", account="ml-prod", severity="medium")
    anomaly = make_finding(
        2,
        rule_id="weights.bytes_read_anomaly",
        finding_id="f_anomaly",
        severity="critical",
        bytes=40 * 2**30,
        evidence={"baseline": {"median": 0, "mad": 0, "floor": 2**30, "history_days": 28}},
    )
    bare = findings.Finding(finding_id="f_bare", rule_id="pipeline.source_silent",
                            severity="info", title="No events from trail-a for 7 h")  # fmt: skip
    events = ocsf_events(store, receiver, make_finding(0), gcp, anomaly, bare)
    assert len(events) == 5
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for event in events:
        errors = [e.message for e in validator.iter_errors(event)]
        assert errors == [], (event["finding_info"]["uid"], errors)
    by_activity = {(e["finding_info"]["uid"], e["activity_id"]): e for e in events}
    first = by_activity[(make_finding(0).finding_id, 1)]
    assert first["type_uid"] == 200401
    assert first["severity_id"] == 4
    assert first["cloud"] == {"provider": "AWS", "account": {"uid": "111122223333"}}
    assert first["resources"][0]["uid"] == "arn:aws:s3:::acme-w"
    assert first["evidences"][0]["databucket"]["type_id"] == 1
    assert first["finding_info"]["attacks"][0]["technique"]["uid"] == "T1530"
    assert first["finding_info"]["related_events_count"] == 5
    closed = by_activity[(make_finding(0).finding_id, 3)]
    assert (closed["type_uid"], closed["status_id"]) == (200403, 4)
    assert by_activity[(gcp.finding_id, 1)]["evidences"][0]["databucket"]["type_id"] == 3
    analysis = by_activity[("f_anomaly", 1)]["anomaly_analyses"][0]
    assert analysis["anomalies"][0]["observations"][0]["value"] == str(40 * 2**30)
    assert "median=0" in analysis["baselines"][0]["observed_pattern"]
    assert "anomaly_analyses" not in first


def test_the_schema_rejects_what_it_should() -> None:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    base = {
        "class_uid": 2004, "category_uid": 2, "activity_id": 1, "type_uid": 200401,
        "severity_id": 4, "time": 1, "finding_info": {"uid": "f"},
        "metadata": {"version": "1.6.0", "product": {"name": "sentinel"}, "profiles": ["cloud"]},
        "cloud": {"provider": "AWS"},
    }  # fmt: skip
    assert list(validator.iter_errors(base)) == []
    broken = [
        {**base, "type_uid": 200402},  # does not match activity 1
        {k: v for k, v in base.items() if k != "cloud"},  # cloud profile without cloud
        {**base, "severity_id": 7},
        {**base, "evidences": [{"note": "x"}]},  # none of the evidence attributes
        {**base, "findings_info": {}},  # a typo
    ]
    assert all(list(validator.iter_errors(doc)) for doc in broken)


def hec_hook(url: str, more: str = "") -> str:
    return (
        f'name = "splunk"\nurl = "{url}/services/collector/event"\nformat = "splunk_hec"\n'
        f'token = {{ env = "{TOKEN_ENV}" }}\nsecret = {{ env = "{SECRET_ENV}" }}\n'
        f'batch_size = 2\nsplunk_index = "security"\n{more}'
    )


def test_splunk_hec_batches_events_with_token_and_indexer_ack(
    store: Store, receiver: Receiver
) -> None:
    channel = "0b7d1f7e-6c8e-4c55-9a5e-3f1d2c4b5a69"
    cfg = make_config(hec_hook(receiver.url, f'splunk_ack_channel = "{channel}"'))
    for n in range(5):
        findings.upsert(store, cfg, make_finding(n), now=NOW)
    receiver.acks_after = 2  # the indexer takes a couple of polls
    report = deliver.run(store, cfg, now=NOW, sleep=lambda _: None)
    assert (report.tallies[0].sent, report.failed) == (5, False)
    posts = [r for r in receiver.requests if r.path == "/services/collector/event"]
    assert [len(r.body.splitlines()) for r in posts] == [2, 2, 1]
    token = environ()[TOKEN_ENV]
    assert {r.headers["authorization"] for r in posts} == {f"Splunk {token}"}
    assert {r.headers["x-splunk-request-channel"] for r in posts} == {channel}
    sent = {e["event"]["finding_id"] for e in receiver.delivered}
    assert sent == {make_finding(n).finding_id for n in range(5)}
    event = receiver.delivered[0]
    assert (event["index"], event["sourcetype"], event["source"]) == (
        "security", "sentinel:finding", "sentinel",
    )  # fmt: skip
    assert isinstance(event["time"], float)
    assert all(r.webhook_id and r.webhook_id.startswith("batch_") for r in posts[:2])


def test_splunk_hec_unacknowledged_batch_is_retried_not_lost(
    store: Store, receiver: Receiver
) -> None:
    more = 'splunk_ack_channel = "c-1"\nsplunk_ack_timeout_seconds = 0.3'
    cfg = make_config(hec_hook(receiver.url, more))
    findings.upsert(store, cfg, make_finding(), now=NOW)
    receiver.acks_after = 10**6
    report = deliver.run(store, cfg, now=NOW, sleep=lambda _: None)
    assert (report.tallies[0].retrying, report.failed) == (1, True)
    assert "not acknowledged" in store.scalar("SELECT last_error FROM outbox")
    receiver.acks_after = 0
    later = NOW + dt.timedelta(hours=1)
    assert deliver.run(store, cfg, now=later, sleep=lambda _: None).tallies[0].sent == 1


def am_hook(url: str) -> str:
    return (
        f'name = "am"\nurl = "{url}/api/v2/alerts"\nformat = "alertmanager"\n'
        f'secret = {{ env = "{SECRET_ENV}" }}\nalert_ttl_minutes = 60.0\n'
        'finding_url = "https://sentinel.example/findings/{finding_id}"'
    )


def test_alertmanager_open_findings_are_refreshed_and_resolved_ones_end(
    store: Store, receiver: Receiver
) -> None:
    cfg = make_config(am_hook(receiver.url))
    f = make_finding()
    findings.upsert(store, cfg, f, now=NOW)
    deliver.run(store, cfg, now=NOW)
    (alert,) = receiver.delivered[0:1]
    assert alert["labels"]["alertname"] == "SentinelWeightsNonHydratorRead"
    assert alert["labels"]["finding_id"] == f.finding_id
    assert (alert["labels"]["severity"], alert["labels"]["tenant"]) == ("high", "team-a")
    assert alert["startsAt"] == "2026-11-02T09:00:00Z"
    assert alert["endsAt"] == "2026-11-02T13:00:00Z"  # now + alert_ttl_minutes
    assert alert["generatorURL"] == f"https://sentinel.example/findings/{f.finding_id}"
    assert deliver.run(store, cfg, now=NOW + dt.timedelta(minutes=20)).refreshed == 0
    refresh = deliver.run(store, cfg, now=NOW + dt.timedelta(minutes=31))
    assert (refresh.refreshed, refresh.tallies[0].sent) == (1, 1)
    assert receiver.delivered[1]["endsAt"] == "2026-11-02T13:31:00Z"
    resolved_at = NOW + dt.timedelta(minutes=40)
    findings.set_status(store, cfg, f.finding_id, "resolved", reason="ok", who="t", now=resolved_at)
    deliver.run(store, cfg, now=resolved_at)
    assert receiver.delivered[2]["endsAt"] == "2026-11-02T12:40:00Z"
    assert deliver.run(store, cfg, now=NOW + dt.timedelta(hours=3)).refreshed == 0
    assert len(receiver.delivered) == 3


def planted() -> dict[str, str]:
    """Realistic secrets and prompt text, built from pieces at run time."""
    return {
        "aws": "AKIA" + "Z7QX" + "PLANTED" + "KEY12",
        "github": "ghp_" + "Pl4nt3d" * 5 + "x",
        "pem": "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEplanted\n-----END RSA PRIVATE KEY-----",
        "prompt": "You are a helpful assistant. " + "The patient's diagnosis is planted-7731",
        "completion": "Sure, here is the " + "confidential roadmap planted-4410",
    }


@pytest.mark.parametrize("fmt", ["json", "ocsf", "splunk_hec", "alertmanager"])
def test_no_payload_ever_contains_a_found_secret_or_prompt(
    store: Store, receiver: Receiver, fmt: str
) -> None:
    p = planted()
    leak = make_finding(
        rule_id="logs.secret_leak",
        severity="critical",
        title=f"AWS key {p['aws']} in llm-gateway logs",
        summary=f"line held {p['github']} and Bearer {p['github']}",
        evidence={
            "preview": "AKIA…KEY1",
            "fingerprint": "hmac-sha256:3f1c",
            "line": f"Authorization: {p['aws']} prompt={p['prompt']}",
            "prompt": p["prompt"],
            "messages": [{"role": "user", "content": p["prompt"]}],
            "nested": {"completion": p["completion"], "key": p["pem"], "body": p["completion"]},
            "samples": [f"x {p['aws']} y"],
        },
    )
    hook = hec_hook(receiver.url) if fmt == "splunk_hec" else json_hook(receiver.url, fmt=fmt)
    cfg = make_config(hook)
    findings.upsert(store, cfg, leak, now=NOW)
    dry = deliver.run(store, cfg, now=NOW, dry_run=True)
    assert not deliver.run(store, cfg, now=NOW).failed
    payloads = [r.body for r in receiver.requests] + [r.body.encode() for r in dry.rendered]
    assert len(payloads) == 2
    for body in payloads:
        for value in p.values():
            for needle in (value, json.dumps(value)[1:-1], value[:24]):
                assert needle.encode() not in body
        assert b"planted-" not in body
    if fmt != "alertmanager":  # the masked preview and fingerprint do travel
        assert "AKIA…KEY1".encode() in payloads[0]
        assert b"hmac-sha256:3f1c" in payloads[0]


def test_retries_resend_the_same_snapshot_even_after_the_finding_changes(
    store: Store, receiver: Receiver
) -> None:
    cfg = make_config(json_hook(receiver.url))
    f = make_finding()
    findings.upsert(store, cfg, f, now=NOW)
    receiver.script = ["503"]
    deliver.run(store, cfg, now=NOW)
    findings.upsert(store, cfg, dataclasses.replace(f, event_count=6), now=NOW)  # not material
    deliver.run(store, cfg, now=NOW + dt.timedelta(hours=1))
    first, second = receiver.requests
    assert first.webhook_id == second.webhook_id
    assert json.loads(first.body) == json.loads(second.body)
