-- Newest event time per watched bucket and per source (loads.source), kept incrementally from
-- the loads detect has not yet seen, so pipeline.source_silent never scans all events.

CREATE TABLE event_freshness (
    kind          VARCHAR NOT NULL,
    name          VARCHAR NOT NULL,
    newest_event  TIMESTAMP NOT NULL,
    PRIMARY KEY (kind, name)
);
COMMENT ON TABLE event_freshness IS 'Newest event time per bucket (kind = bucket) and per ingest source label (kind = source); maintained by detect.';
