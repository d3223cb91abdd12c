-- Detection state: per-(actor, bucket) hourly read sums (the baseline), the first-seen reader
-- set. Rule cursors live in `cursors`
-- (source = 'detect', key = rule id).

CREATE TABLE read_hourly (
    provider  VARCHAR NOT NULL,
    actor     VARCHAR NOT NULL,
    bucket    VARCHAR NOT NULL,
    hour      TIMESTAMP NOT NULL,
    reads     BIGINT NOT NULL,
    objects   BIGINT NOT NULL,
    bytes     BIGINT NOT NULL,
    PRIMARY KEY (provider, actor, bucket, hour)
);
COMMENT ON TABLE read_hourly IS 'Bytes read per actor, watched bucket and UTC hour (event time), kept incrementally by detect: hours touched by new events are recomputed. Hours absent here read nothing (zero). Redacted actors are stored as an empty string.';

CREATE TABLE seen_readers (
    provider        VARCHAR NOT NULL,
    actor           VARCHAR NOT NULL,
    bucket          VARCHAR NOT NULL,
    first_seen      TIMESTAMP NOT NULL,
    first_event_id  VARCHAR NOT NULL,
    last_seen       TIMESTAMP NOT NULL,
    PRIMARY KEY (provider, actor, bucket)
);
COMMENT ON TABLE seen_readers IS 'Every (actor, watched bucket) pair that ever read successfully, with its first read by event time. Updated in the same transaction as the findings it produces; unlimited history.';

CREATE VIEW v_read_baselines AS
WITH pairs AS (
    SELECT provider, actor, bucket, min(hour) AS first_hour, max(hour) AS last_hour
    FROM read_hourly GROUP BY ALL
), recent AS (
    SELECT h.provider, h.actor, h.bucket, h.bytes
    FROM read_hourly h JOIN pairs p USING (provider, actor, bucket)
    WHERE h.hour > p.last_hour - INTERVAL 28 DAY
)
SELECT p.provider, NULLIF(p.actor, '') AS actor, p.bucket, p.first_hour, p.last_hour,
       date_diff('hour', greatest(p.first_hour, p.last_hour - INTERVAL 28 DAY), p.last_hour) + 1
           AS hours_in_window,
       count(r.bytes) AS active_hours, sum(r.bytes) AS bytes_in_window, max(r.bytes) AS peak_hour_bytes
FROM pairs p LEFT JOIN recent r USING (provider, actor, bucket)
GROUP BY ALL;
COMMENT ON VIEW v_read_baselines IS 'Per (actor, bucket): history span and the last 28 days of hourly reads behind weights.bytes_read_anomaly (hours without reads count as zero).';
