"""State that rules read, kept incrementally and derived only from events, so recomputing it
for any range is harmless: hourly read sums per (actor, bucket) for
``weights.bytes_read_anomaly`` and the first-seen reader set for ``weights.first_seen_reader``.

``refresh`` works on the hours between the variables ``scope_start`` and ``scope_end`` (set by
the engine to the hours touched by new events, or to a replay range) and runs inside the rule's
transaction, so state and findings commit together. ``event_freshness`` (newest event per
bucket and per source, for ``pipeline.source_silent``) works on the loads after the rule's cursor.
"""

from __future__ import annotations

from sentinel.errors import StoreError
from sentinel.store import Store

_READ_HOURLY = (
    "DELETE FROM read_hourly"
    " WHERE hour >= getvariable('scope_start') AND hour < getvariable('scope_end')",
    """
    INSERT INTO read_hourly
    SELECT provider, coalesce(actor, '') AS actor, bucket, date_trunc('hour', event_time) AS hour,
           count(*) AS reads, count(DISTINCT object_key) AS objects,
           coalesce(sum(bytes), 0) AS bytes
    FROM watched_reads
    GROUP BY ALL
    """,
)

# A pair's first read only ever moves earlier (late data) and its event id moves with it, so
# applying the same events again, or in any order, gives the same set.
_SEEN_READERS = (
    """
    INSERT INTO seen_readers
    SELECT provider, coalesce(actor, '') AS actor, bucket, min(event_time) AS first_seen,
           arg_min(event_id, event_time) AS first_event_id, max(event_time) AS last_seen
    FROM watched_reads
    GROUP BY ALL
    ON CONFLICT (provider, actor, bucket) DO UPDATE SET
        first_seen = least(seen_readers.first_seen, excluded.first_seen),
        first_event_id = CASE WHEN excluded.first_seen < seen_readers.first_seen
                              THEN excluded.first_event_id ELSE seen_readers.first_event_id END,
        last_seen = greatest(seen_readers.last_seen, excluded.last_seen)
    """,
)

# Works on loads after the variable ``from_load`` (the rule's cursor), not on a time range.
_FRESHNESS = (
    """
    INSERT INTO event_freshness
    SELECT 'bucket', bucket, max(event_time) FROM access_events
    WHERE load_id > getvariable('from_load') AND load_id <= getvariable('max_load_id')
      AND bucket IS NOT NULL
    GROUP BY bucket
    ON CONFLICT (kind, name) DO UPDATE SET
        newest_event = greatest(event_freshness.newest_event, excluded.newest_event)
    """,
    """
    INSERT INTO event_freshness
    SELECT 'source', l.source, max(n.newest)
    FROM (SELECT load_id, max(event_time) AS newest FROM access_events
          WHERE load_id > getvariable('from_load') AND load_id <= getvariable('max_load_id')
          GROUP BY load_id) n
    JOIN loads l USING (load_id)
    GROUP BY l.source
    ON CONFLICT (kind, name) DO UPDATE SET
        newest_event = greatest(event_freshness.newest_event, excluded.newest_event)
    """,
)

STATES = {
    "read_hourly": _READ_HOURLY,
    "seen_readers": _SEEN_READERS,
    "event_freshness": _FRESHNESS,
}


def refresh(store: Store, name: str) -> None:
    if name not in STATES:
        raise StoreError(f"unknown detection state {name!r}")
    for statement in STATES[name]:
        store.execute(statement)
