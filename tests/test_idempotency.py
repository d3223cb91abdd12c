"""Property: loading the same input twice equals loading it once, however files split and repeat."""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sentinel.config import CloudTrailSource
from sentinel.sources import cloudtrail
from sentinel.store import Store
from tests.cloudtrail_files import body, key_for, record, write

DAY = dt.date(2025, 3, 1)

events = st.lists(
    st.tuples(
        st.integers(0, 40),
        st.sampled_from(["GetObject", "PutObject", "DeleteObject", "HeadObject"]),
    ),
    min_size=1,
    max_size=30,
)
# Each file holds a sample (with repeats) of the event pool: duplicates across and within files.
layouts = st.lists(st.lists(st.integers(0, 29), min_size=0, max_size=12), min_size=1, max_size=6)


def _table(store: Store) -> list[tuple[object, ...]]:
    return store.columns_and_rows(
        "SELECT * EXCLUDE (load_id, source_uri, source_index) FROM access_events ORDER BY event_id"
    )[1]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pool=events, files=layouts, batch=st.integers(1, 4))
def test_twice_equals_once(pool: list[tuple[int, str]], files: list[list[int]], batch: int) -> None:
    recs = [
        record(name, key=f"k/{n}", event_id=f"id-{n}-{name}", time=f"2025-03-01T10:{n:02d}:00Z")
        for n, name in pool
    ]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "trail"
        for i, picks in enumerate(files):
            chosen = [recs[p % len(recs)] for p in picks]
            write(root, key_for(DAY, i, unique=f"File{i:012d}"), body(chosen))
        source = CloudTrailSource(path=str(root), batch_files=batch)
        with Store.open(Path(tmp) / "once.duckdb") as once:
            cloudtrail.run(once, source, keep_raw="all")
            expected = _table(once)
        with Store.open(Path(tmp) / "twice.duckdb") as twice:
            cloudtrail.run(twice, source, keep_raw="all")
            cloudtrail.run(twice, source, keep_raw="all")
            assert _table(twice) == expected
        ids = [row[1] for row in expected]
        assert len(ids) == len(set(ids))
        used = {recs[p % len(recs)]["eventID"] for picks in files for p in picks}
        assert set(ids) == used
