"""Property: however events are split into loads, and in whatever order the loads arrive
(within the lookback), incremental runs end with the same findings as one run over all."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sentinel import config
from sentinel.detect import run_detect
from sentinel.store import Store
from sentinel.testing import insert_events
from tests.detect_fixtures import (
    CONFIG,
    fresh_logs,  # noqa: F401  (autouse)
)

CFG = config.loads(CONFIG + "\n[detect]\nfirst_seen_learning_days = 0.0\n")
RULES = ["weights.non_hydrator_read", "weights.denied_read", "weights.first_seen_reader"]
BASE = dt.datetime(2026, 5, 4)

event = st.fixed_dictionaries(
    {
        "actor": st.sampled_from(["arn:aws:iam::1:role/a", "arn:aws:iam::1:role/b"]),
        "bucket": st.sampled_from(["acme-weights-prod", "acme-ckpt-prod", "elsewhere"]),
        "object_key": st.sampled_from(["models/x", "models/y"]),
        "bytes_out": st.integers(0, 1000),
        "error_code": st.sampled_from(["", "", "AccessDenied"]),
        "event_time": st.integers(0, 36 * 60).map(lambda m: BASE + dt.timedelta(minutes=m)),
    }
)


def _final(batches: list[list[dict[str, Any]]]) -> list[tuple[Any, ...]]:
    with Store.open(":memory:") as store:
        for number, batch in enumerate(batches, start=1):
            if batch:
                insert_events(
                    store, [{**e, "event_id": f"b{number}"} for e in batch], load_id=number
                )
            run_detect(store, CFG, rule_ids=RULES, now=BASE + dt.timedelta(days=2))
        _, rows = store.columns_and_rows(
            "SELECT finding_id, title, event_count, bytes, first_seen, last_seen"
            " FROM findings ORDER BY finding_id"
        )
        return rows


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(event, min_size=1, max_size=12), cuts=st.lists(st.integers(0, 12), max_size=3)
)
def test_incremental_equals_one_run(events: list[dict[str, Any]], cuts: list[int]) -> None:
    bounds = sorted({0, len(events), *(c % (len(events) + 1) for c in cuts)})
    batches = [events[a:b] for a, b in itertools.pairwise(bounds)]
    assert _final(batches) == _final([events])
    assert _final(list(reversed(batches))) == _final([events])
