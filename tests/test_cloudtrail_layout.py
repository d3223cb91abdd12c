"""Only CloudTrail event files are loaded; everything else in a trail bucket is named and skipped."""

from __future__ import annotations

import datetime as dt

import pytest

from sentinel.sources.cloudtrail_layout import EventKey, classify

EVENT = "AWSLogs/111122223333/CloudTrail/us-east-1/2025/03/01/111122223333_CloudTrail_us-east-1_20250301T1535Z_a1B2c3D4e5F6g7H8.json.gz"
ORG = "trail/AWSLogs/o-exampleorgid/111122223333/CloudTrail/eu-west-1/2025/03/02/111122223333_CloudTrail_eu-west-1_20250302T0005Z_ZZZZZZZZZZZZZZZZ.json.gz"


def test_account_trail_key() -> None:
    key = classify(EVENT)
    assert key == EventKey(EVENT, "111122223333", "us-east-1", dt.date(2025, 3, 1), None)


def test_org_trail_key_with_prefix() -> None:
    key = classify(ORG)
    assert isinstance(key, EventKey)
    assert (key.account, key.region, key.org_id, key.day) == (
        "111122223333", "eu-west-1", "o-exampleorgid", dt.date(2025, 3, 2))  # fmt: skip


def test_plain_json_event_file_is_accepted() -> None:
    assert isinstance(classify(EVENT.removesuffix(".gz")), EventKey)


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("AWSLogs/111122223333/CloudTrail-Digest/us-east-1/2025/03/01/111122223333_CloudTrail-Digest_us-east-1_t_us-east-1_20250301T000000Z.json.gz", "digest"),
        ("AWSLogs/111122223333/CloudTrail-Digest/us-east-1/2025/03/01/111122223333_CloudTrail-Digest_us-east-1_t_us-east-1_20250301T000000Z_backfill.json.gz", "digest"),
        ("AWSLogs/111122223333/CloudTrail-Insight/us-east-1/2025/03/01/x.json.gz", "insight"),
        ("AWSLogs/111122223333/CloudTrail-NetworkActivity/us-east-1/2025/03/01/x.json.gz", "network_activity"),
        ("AWSLogs/111122223333/CloudTrail-Aggregated/us-east-1/2025/03/01/x.json.gz", "aggregated"),
        ("AWSLogs/111122223333/", "folder_placeholder"),
        ("AWSLogs/111122223333/Config/ConfigWritabilityCheckFile", "not_cloudtrail"),
        ("AWSLogs/111122223333/elasticloadbalancing/us-east-1/2025/03/01/lb.log.gz", "not_cloudtrail"),
        ("AWSLogs/111122223333/CloudTrail/us-east-1/2025/03/01/notes.txt", "not_cloudtrail"),
        # The account in the name must match the folder's account.
        (EVENT.replace("/111122223333_CloudTrail", "/999999999999_CloudTrail"), "not_cloudtrail"),
        ("AWSLogs/111122223333/CloudTrail/us-east-1/2025/02/30/111122223333_CloudTrail_us-east-1_20250230T1535Z_a1B2c3D4e5F6g7H8.json.gz", "not_cloudtrail"),
    ],
)  # fmt: skip
def test_non_event_objects(key: str, reason: str) -> None:
    assert classify(key) == reason
