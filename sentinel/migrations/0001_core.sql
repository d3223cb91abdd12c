-- Core schema: events, object sizes, findings, and the ingest state that travels with them.
-- Table and column names are contract (design section 3); change them only with a migration
-- and a CHANGELOG note.

CREATE SEQUENCE load_seq START 1;

CREATE TABLE loads (
    load_id      BIGINT PRIMARY KEY,
    provider     VARCHAR NOT NULL,
    source       VARCHAR NOT NULL,
    started_at   TIMESTAMP NOT NULL,
    files        INTEGER NOT NULL DEFAULT 0,
    events       BIGINT NOT NULL DEFAULT 0,
    quarantined  INTEGER NOT NULL DEFAULT 0
);
COMMENT ON TABLE loads IS 'One row per committed ingest batch; access_events.load_id points here and grows monotonically, so it doubles as the detection cursor.';

CREATE TABLE access_events (
    provider          VARCHAR NOT NULL,
    event_id          VARCHAR NOT NULL,
    logical_id        VARCHAR NOT NULL,
    event_time        TIMESTAMP NOT NULL,
    account           VARCHAR,
    region            VARCHAR,
    actor             VARCHAR,
    actor_type        VARCHAR,
    actor_session     VARCHAR,
    caller_account    VARCHAR,
    invoked_by        VARCHAR,
    operation         VARCHAR NOT NULL,
    action            VARCHAR NOT NULL,
    is_service_event  BOOLEAN NOT NULL DEFAULT false,
    bucket            VARCHAR,
    object_key        VARCHAR,
    copy_source       VARCHAR,
    bytes_out         BIGINT,
    bytes_in          BIGINT,
    bytes_estimated   BOOLEAN NOT NULL DEFAULT false,
    error_code        VARCHAR,
    src_ip            VARCHAR,
    user_agent        VARCHAR,
    vpce_id           VARCHAR,
    source_uri        VARCHAR NOT NULL,
    load_id           BIGINT NOT NULL,
    source_index      INTEGER NOT NULL,
    raw               JSON USING COMPRESSION zstd
);
COMMENT ON TABLE access_events IS 'One row per object-storage access on either cloud. Natural key (provider, event_id). event_time is UTC. Sum bytes over DISTINCT logical_id: cross-account copies of one AWS call share it.';
COMMENT ON COLUMN access_events.action IS 'read | metadata | list | write | delete | tamper | other';
COMMENT ON COLUMN access_events.is_service_event IS 'CloudTrail AwsServiceEvent, e.g. the per-key children of DeleteObjects; not an API call by the actor';
COMMENT ON COLUMN access_events.raw IS 'Original record, kept by store.keep_raw; source_uri + source_index always locate it';

CREATE TABLE objects (
    provider    VARCHAR NOT NULL,
    bucket      VARCHAR NOT NULL,
    object_key  VARCHAR NOT NULL,
    size        BIGINT,
    version     VARCHAR,
    source      VARCHAR NOT NULL,
    seen_at     TIMESTAMP NOT NULL,
    PRIMARY KEY (provider, bucket, object_key)
);
COMMENT ON TABLE objects IS 'Latest known size per object, for byte attribution and model coverage.';

CREATE TABLE findings (
    finding_id   VARCHAR PRIMARY KEY,
    rule_id      VARCHAR NOT NULL,
    severity     VARCHAR NOT NULL,
    title        VARCHAR NOT NULL,
    summary      VARCHAR,
    provider     VARCHAR,
    account      VARCHAR,
    actor        VARCHAR,
    bucket       VARCHAR,
    object_key   VARCHAR,
    model        VARCHAR,
    tenant       VARCHAR,
    first_seen   TIMESTAMP,
    last_seen    TIMESTAMP,
    event_count  BIGINT,
    bytes        BIGINT,
    evidence     JSON,
    status       VARCHAR NOT NULL DEFAULT 'open',
    created_at   TIMESTAMP NOT NULL,
    updated_at   TIMESTAMP NOT NULL
);
COMMENT ON TABLE findings IS 'Detections. finding_id is a hash of rule, dedupe key and window: a rerun updates a finding, never duplicates it. evidence never holds a found secret or prompt.';

CREATE TABLE source_files (
    provider     VARCHAR NOT NULL,
    source       VARCHAR NOT NULL,
    uri          VARCHAR PRIMARY KEY,
    size         BIGINT,
    outcome      VARCHAR NOT NULL,
    events       BIGINT NOT NULL DEFAULT 0,
    skipped      BIGINT NOT NULL DEFAULT 0,
    quarantined  BIGINT NOT NULL DEFAULT 0,
    load_id      BIGINT,
    loaded_at    TIMESTAMP NOT NULL
);
COMMENT ON TABLE source_files IS 'Every input file seen, with its outcome (loaded | quarantined). A file listed here is never read again.';

CREATE SEQUENCE quarantine_seq START 1;
CREATE TABLE quarantine (
    quarantine_id   BIGINT PRIMARY KEY,
    provider        VARCHAR NOT NULL,
    source          VARCHAR NOT NULL,
    uri             VARCHAR NOT NULL,
    record_index    INTEGER,
    reason          VARCHAR NOT NULL,
    detail          VARCHAR,
    excerpt         VARCHAR,
    load_id         BIGINT,
    quarantined_at  TIMESTAMP NOT NULL
);
COMMENT ON TABLE quarantine IS 'Input that could not be loaded: whole files (record_index NULL) or single records, with a reason.';

CREATE TABLE cursors (
    source      VARCHAR NOT NULL,
    key         VARCHAR NOT NULL,
    value       VARCHAR NOT NULL,
    updated_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (source, key)
);
COMMENT ON TABLE cursors IS 'Incremental positions per source (e.g. the last fully listed day per account/region).';

CREATE VIEW v_reads AS
SELECT provider, event_id, logical_id, event_time, account, actor, actor_type, bucket,
       object_key, bytes_out, bytes_estimated, src_ip, vpce_id, user_agent, false AS via_copy
FROM access_events
WHERE action = 'read' AND error_code IS NULL AND NOT is_service_event
UNION ALL
SELECT provider, event_id, logical_id, event_time, account, actor, actor_type,
       split_part(copy_source, '/', 1) AS bucket,
       substr(copy_source, length(split_part(copy_source, '/', 1)) + 2) AS object_key,
       NULL::BIGINT AS bytes_out, false AS bytes_estimated, src_ip, vpce_id, user_agent,
       true AS via_copy
FROM access_events
WHERE copy_source IS NOT NULL AND error_code IS NULL;
COMMENT ON VIEW v_reads IS 'Successful object reads, including the source side of server-side copies (via_copy, bucket/key of the source).';

CREATE VIEW v_bytes_by_actor_hour AS
SELECT provider, actor, bucket, date_trunc('hour', event_time) AS hour,
       count(*) AS reads, count(DISTINCT object_key) AS objects,
       sum(bytes_out) AS bytes, bool_or(bytes_estimated) AS bytes_estimated
FROM (SELECT DISTINCT ON (provider, logical_id) * FROM v_reads WHERE NOT via_copy)
GROUP BY ALL;
COMMENT ON VIEW v_bytes_by_actor_hour IS 'Bytes read per actor, bucket and UTC hour, cross-account duplicates counted once.';

CREATE VIEW v_open_findings AS
SELECT * FROM findings WHERE status = 'open'
ORDER BY CASE severity WHEN 'critical' THEN 0 WHEN 'high' THEN 1 WHEN 'medium' THEN 2
                       WHEN 'low' THEN 3 ELSE 4 END, last_seen DESC;
COMMENT ON VIEW v_open_findings IS 'Open findings, most severe and most recent first.';

CREATE VIEW v_quarantine AS
SELECT quarantined_at, provider, source, uri, record_index, reason, detail
FROM quarantine ORDER BY quarantined_at DESC;
COMMENT ON VIEW v_quarantine IS 'What could not be loaded and why.';

CREATE VIEW v_source_freshness AS
SELECT provider, account, bucket, max(event_time) AS newest_event, count(*) AS events
FROM access_events GROUP BY ALL;
COMMENT ON VIEW v_source_freshness IS 'Newest event per provider, account and bucket: a silent source shows here first.';
