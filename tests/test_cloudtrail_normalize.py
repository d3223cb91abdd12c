"""Each kind of S3 event in the sample file lands in access_events the way design section 3 says."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from sentinel.config import CloudTrailSource
from sentinel.sources import cloudtrail
from sentinel.store import Store
from tests.cloudtrail_files import body, key_for, sample_records, write

DAY = dt.date(2025, 3, 1)


@pytest.fixture
def loaded(tmp_path: Path, store: Store) -> dict[str, dict[str, Any]]:
    write(tmp_path / "trail", key_for(DAY, 935), body(sample_records()))
    report = cloudtrail.run(
        store, CloudTrailSource(path=str(tmp_path / "trail")), keep_raw="non_read"
    )
    assert report.events_loaded == 13 and not report.partial
    rows = store.query("SELECT * FROM access_events")
    return {r["event_id"][:8]: r for r in rows}


def test_stable_identity_keeps_the_role_path_across_sessions(
    loaded: dict[str, dict[str, Any]],
) -> None:
    hydrator_reads = [r for r in loaded.values() if r["operation"] == "GetObject"
                      and "weights-hydrator" in (r["actor"] or "")]  # fmt: skip
    assert len(hydrator_reads) == 2
    assert {r["actor"] for r in hydrator_reads} == {
        "arn:aws:iam::111122223333:role/ml/serving/weights-hydrator"
    }
    sessions = {r["actor_session"] for r in hydrator_reads}
    assert len(sessions) == 2 and all(s.startswith("arn:aws:sts::") for s in sessions)
    assert sorted(r["bytes_out"] for r in hydrator_reads) == [67_108_864, 4_984_292_344]
    full = next(r for r in hydrator_reads if r["bytes_out"] == 4_984_292_344)
    assert full["vpce_id"] and full["vpce_id"].startswith("vpce-")


def test_denied_read_has_error_and_no_bytes(loaded: dict[str, dict[str, Any]]) -> None:
    denied = [r for r in loaded.values() if r["error_code"]]
    assert len(denied) == 1
    row = denied[0]
    assert (row["action"], row["error_code"], row["bytes_out"]) == ("read", "AccessDenied", 0)
    assert row["actor"] == "arn:aws:iam::111122223333:role/ds-notebook-runner"
    assert row["raw"] is not None  # a denied read is not a successful read: kept by default


def test_actions_are_classified(loaded: dict[str, dict[str, Any]]) -> None:
    pairs = {(r["operation"], r["action"]) for r in loaded.values()}
    assert pairs == {
        ("GetObject", "read"), ("HeadObject", "metadata"), ("PutObject", "write"),
        ("CopyObject", "write"), ("DeleteObject", "delete"), ("DeleteObjects", "delete"),
        ("PutBucketLifecycle", "tamper"),
    }  # fmt: skip


def test_copy_source_is_parsed(loaded: dict[str, dict[str, Any]]) -> None:
    copy = next(r for r in loaded.values() if r["operation"] == "CopyObject")
    assert copy["copy_source"] == (
        "acme-model-weights-staging/llm-70b/run-4412/step-120000/model-00001-of-00030.safetensors"
    )
    assert copy["bucket"] == "acme-model-weights-prod"


def test_delete_objects_parent_and_child(loaded: dict[str, dict[str, Any]]) -> None:
    parent = next(r for r in loaded.values() if r["operation"] == "DeleteObjects")
    child = next(r for r in loaded.values() if r["is_service_event"])
    assert parent["object_key"] is None and not parent["is_service_event"]
    assert child["operation"] == "DeleteObject" and child["action"] == "delete"
    assert child["object_key"] == "llm-70b/v3.2/model-00007-of-00030.safetensors"
    assert (
        child["actor"] == parent["actor"] == "arn:aws:iam::111122223333:role/ops/artifact-janitor"
    )


def test_iam_user_and_console_and_service_callers(loaded: dict[str, dict[str, Any]]) -> None:
    delete = next(
        r for r in loaded.values() if r["operation"] == "DeleteObject" and not r["is_service_event"]
    )
    assert delete["actor"] == "arn:aws:iam::111122223333:user/bob.ops"
    assert delete["actor_type"] == "IAMUser" and delete["actor_session"] is None
    console = next(r for r in loaded.values() if r["invoked_by"] == "signin.amazonaws.com")
    assert console["actor"] == "arn:aws:iam::111122223333:user/dave.research"
    athena = next(r for r in loaded.values() if r["invoked_by"] == "athena.amazonaws.com")
    assert athena["actor"] == "arn:aws:iam::111122223333:role/analytics-athena-user"
    assert athena["user_agent"] == "athena.amazonaws.com"


def test_cross_account_read_uses_shared_event_id(loaded: dict[str, dict[str, Any]]) -> None:
    partner = next(r for r in loaded.values() if r["caller_account"] == "444455556666")
    assert partner["account"] == "111122223333"  # the recipient (bucket owner)
    assert partner["logical_id"] != partner["event_id"]
    assert partner["actor"] == "arn:aws:iam::444455556666:role/partner-eval-reader"


def test_tamper_event_and_user_agent_unwrapped(loaded: dict[str, dict[str, Any]]) -> None:
    tamper = next(r for r in loaded.values() if r["action"] == "tamper")
    assert tamper["operation"] == "PutBucketLifecycle"
    assert tamper["bucket"] == "acme-model-weights-prod"
    raw = json.loads(tamper["raw"])
    assert raw["eventCategory"] == "Management"
    assert not any(r["user_agent"] and r["user_agent"].startswith("[") for r in loaded.values())


def test_default_raw_policy_skips_successful_reads_and_metadata(
    loaded: dict[str, dict[str, Any]],
) -> None:
    for row in loaded.values():
        routine = row["action"] in ("read", "metadata", "list") and row["error_code"] is None
        assert (row["raw"] is None) == routine, row["operation"]


@pytest.mark.parametrize(("policy", "expected"), [("all", 13), ("none", 0)])
def test_raw_policies(tmp_path: Path, store: Store, policy: str, expected: int) -> None:
    write(tmp_path / "t", key_for(DAY, 935), body(sample_records()))
    cloudtrail.run(store, CloudTrailSource(path=str(tmp_path / "t")), keep_raw=policy)  # type: ignore[arg-type]
    assert store.scalar("SELECT count(raw) FROM access_events") == expected


def test_raw_is_the_original_record(tmp_path: Path, store: Store) -> None:
    write(tmp_path / "t", key_for(DAY, 935), body(sample_records()))
    cloudtrail.run(store, CloudTrailSource(path=str(tmp_path / "t")), keep_raw="all")
    originals = {r["eventID"]: r for r in sample_records()}
    for event_id, raw in store.columns_and_rows("SELECT event_id, raw FROM access_events")[1]:
        assert json.loads(raw) == originals[event_id]


def test_plain_json_files_are_read_too(tmp_path: Path, store: Store) -> None:
    key = key_for(DAY, 935).removesuffix(".gz")
    write(tmp_path / "t", key, body(sample_records(), gz=False))
    report = cloudtrail.run(store, CloudTrailSource(path=str(tmp_path / "t")), keep_raw="none")
    assert report.events_loaded == 13


def test_other_services_records_are_skipped_not_loaded(tmp_path: Path, store: Store) -> None:
    ec2 = dict(sample_records()[0], eventSource="ec2.amazonaws.com", eventID="ec2-event-1",
               eventName="DescribeInstances")  # fmt: skip
    write(tmp_path / "t", key_for(DAY, 935), body([*sample_records(), ec2]))
    report = cloudtrail.run(store, CloudTrailSource(path=str(tmp_path / "t")), keep_raw="none")
    assert (report.events_loaded, report.records_skipped) == (13, 1)
    assert store.scalar("SELECT count(*) FROM access_events WHERE event_id = 'ec2-event-1'") == 0
    assert store.columns_and_rows("SELECT events, skipped FROM source_files")[1] == [(13, 1)]


def test_a_bad_record_sends_its_batch_down_the_staged_path_with_the_same_counts(
    tmp_path: Path, store: Store
) -> None:
    # Clean batches go straight into access_events; a batch holding a record to quarantine is
    # loaded through the staging table instead. Both count the same way.
    ec2 = dict(sample_records()[0], eventSource="ec2.amazonaws.com", eventID="ec2-event-1",
               eventName="DescribeInstances")  # fmt: skip
    broken = dict(sample_records()[0], eventID="broken-1", eventTime="not a time")
    write(
        tmp_path / "t", key_for(DAY, 935, unique="CleanAAAAAAAAAAA"), body([*sample_records(), ec2])
    )
    write(tmp_path / "t", key_for(DAY, 940, unique="BrokenBBBBBBBBBB"), body([broken, ec2]))
    report = cloudtrail.run(store, CloudTrailSource(path=str(tmp_path / "t")), keep_raw="none")
    assert (report.events_loaded, report.records_skipped, report.records_quarantined) == (13, 2, 1)
    rows = store.columns_and_rows(
        "SELECT events, skipped, quarantined FROM source_files ORDER BY uri"
    )[1]
    assert rows == [(13, 1, 0), (0, 1, 1)]
