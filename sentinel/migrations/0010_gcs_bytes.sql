-- GCS byte attribution: audit logs carry no bytes, so reads are sized from `objects`
-- (sentinel/objects.py). These views show how much of that attribution is known.

CREATE VIEW v_read_size_coverage AS
SELECT provider, bucket,
       count(*) AS reads,
       count(*) FILTER (WHERE bytes_out IS NOT NULL) AS reads_with_bytes,
       count(*) FILTER (WHERE bytes_out IS NULL) AS reads_unknown_size,
       count(DISTINCT object_key) FILTER (WHERE bytes_out IS NULL) AS objects_unknown_size,
       bool_or(bytes_estimated) AS bytes_estimated,
       sum(bytes_out) AS bytes_known
FROM access_events
WHERE action = 'read' AND error_code IS NULL AND NOT is_service_event
GROUP BY ALL;
COMMENT ON VIEW v_read_size_coverage IS 'Per provider and bucket: successful reads with and without a byte count. On GCS bytes are estimated from object sizes; reads_unknown_size lists objects to add with `sentinel ingest objects`.';

CREATE VIEW v_objects_unknown_size AS
SELECT provider, bucket, object_key, count(*) AS reads, min(event_time) AS first_read,
       max(event_time) AS last_read
FROM access_events
WHERE action = 'read' AND error_code IS NULL AND bytes_out IS NULL AND NOT is_service_event
GROUP BY ALL;
COMMENT ON VIEW v_objects_unknown_size IS 'Objects read whose size is unknown (their reads count no bytes yet): load an inventory or manifest to fill them in.';
