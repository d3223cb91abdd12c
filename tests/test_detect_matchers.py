from __future__ import annotations

import datetime as dt
import re

import pytest

from sentinel import config
from sentinel.labels import actor_label, human_bytes
from sentinel.matchers import (
    Network,
    active_suppressions,
    literal_prefix,
    model_regex,
    suppression_for,
)


@pytest.mark.parametrize(
    ("actor", "label"),
    [
        (
            "arn:aws:iam::111122223333:role/ml/serving/weights-hydrator-eu",
            "role weights-hydrator-eu",
        ),
        ("arn:aws:sts::111122223333:assumed-role/ds-notebook/alice", "role ds-notebook"),
        ("arn:aws:iam::111122223333:user/mallory", "user mallory"),
        ("hydrator@p.iam.gserviceaccount.com", "service account hydrator"),
        ("eve@acme.example", "principal eve@acme.example"),
        (None, "redacted principal"),
    ],
)
def test_actor_label(actor: str | None, label: str) -> None:
    assert actor_label(actor) == label


def test_human_bytes() -> None:
    assert [human_bytes(v) for v in (0, 1023, 1024, 43_164_000_000, None)] == [
        "0 B", "1023 B", "1.0 KiB", "40.2 GiB", "? B",
    ]  # fmt: skip


def test_networks() -> None:
    cidr, vpce, literal = (Network.parse(t) for t in ("10.0.0.0/8", "vpce-0abc", "gce-internal-ip"))
    assert cidr.allows(None, "10.200.1.1") and not cidr.allows(None, "11.0.0.1")
    assert not cidr.allows(None, "not-an-ip")
    assert vpce.allows("vpce-0abc", "203.0.113.1") and not vpce.allows("vpce-other", None)
    assert literal.allows(None, "gce-internal-ip")
    assert Network.parse("2001:db8::/32").allows(None, "2001:db8::1")


def test_model_patterns() -> None:
    regex = model_regex("models/*/*")
    assert re.match(regex, "models/team-a/llama/shard-1").group(0) == "models/team-a/llama/"  # type: ignore[union-attr]
    assert re.match(regex, "models/team-a") is None
    assert literal_prefix("bucket/models/team-a/**") == "bucket/models/team-a/"


def test_suppressions_match_by_rule_actor_bucket_and_expire() -> None:
    cfg = config.loads(
        """
[[suppressions]]
rule = "weights.*"
actor = "*role/eval-*"
reason = "eval jobs"
expires = "2026-06-01"
"""
    )
    live = active_suppressions(cfg, dt.datetime(2026, 5, 1))
    assert suppression_for(live, "weights.non_hydrator_read", "arn:x:role/eval-1", "b") is not None
    assert suppression_for(live, "pipeline.source_silent", "arn:x:role/eval-1", "b") is None
    assert suppression_for(live, "weights.non_hydrator_read", "arn:x:role/other", "b") is None
    assert active_suppressions(cfg, dt.datetime(2026, 6, 2)) == []
