-- Leak scanning (sentinel scan / sentinel purge): where each leak was seen, how far each Loki
-- source has been scanned, and the delete requests that purge leaked lines. No table here holds
-- a log line, a secret or a prompt: only keyed fingerprints, masked previews and positions.

CREATE TABLE leak_occurrences (
    occurrence_id  VARCHAR PRIMARY KEY,
    finding_id     VARCHAR NOT NULL,
    source         VARCHAR NOT NULL,
    tenant         VARCHAR,
    stream         VARCHAR NOT NULL,
    stream_labels  JSON,
    ts             TIMESTAMP NOT NULL,
    ts_ns          BIGINT NOT NULL,
    rule_id        VARCHAR NOT NULL,
    detector       VARCHAR NOT NULL,
    severity       VARCHAR NOT NULL,
    confidence     VARCHAR NOT NULL,
    fingerprint    VARCHAR NOT NULL,
    preview        VARCHAR NOT NULL,
    char_offset    INTEGER,
    length         INTEGER,
    scanned_at     TIMESTAMP NOT NULL
);
COMMENT ON TABLE leak_occurrences IS 'One row per leak per log line (natural key: source, stream, ns timestamp, detector, fingerprint, offset), so re-scanning an overlap never double counts. fingerprint = HMAC-SHA256 of the leaked value under scan.fingerprint_key; the value itself is never stored.';
COMMENT ON COLUMN leak_occurrences.stream IS 'Canonical Loki stream selector {k="v",...} (or file:PATH for scanned files)';
COMMENT ON COLUMN leak_occurrences.preview IS 'Masked: type prefix, last few characters and length; never the secret or prompt';

CREATE TABLE loki_watermarks (
    source            VARCHAR PRIMARY KEY,
    url               VARCHAR NOT NULL,
    tenant            VARCHAR,
    selector          VARCHAR NOT NULL,
    scanned_until_ns  BIGINT NOT NULL,
    scanned_until     TIMESTAMP NOT NULL,
    lines             BIGINT NOT NULL DEFAULT 0,
    bytes             BIGINT NOT NULL DEFAULT 0,
    updated_at        TIMESTAMP NOT NULL
);
COMMENT ON TABLE loki_watermarks IS 'End (exclusive) of the fully scanned window per Loki source; committed with the findings of that window. Each run re-scans an overlap before it to catch late lines.';

CREATE TABLE purge_requests (
    finding_id    VARCHAR NOT NULL,
    start_ms      BIGINT NOT NULL,
    end_ms        BIGINT NOT NULL,
    source        VARCHAR NOT NULL,
    tenant        VARCHAR,
    query         VARCHAR NOT NULL,
    status        VARCHAR NOT NULL,
    request_id    VARCHAR,
    loki_status   VARCHAR,
    http_status   INTEGER,
    detail        VARCHAR,
    attempts      INTEGER NOT NULL DEFAULT 0,
    created_at    TIMESTAMP NOT NULL,
    updated_at    TIMESTAMP NOT NULL,
    PRIMARY KEY (finding_id, start_ms)
);
COMMENT ON TABLE purge_requests IS 'Loki delete requests for leaked lines: status prepared | filed | unavailable | failed. query is an exact stream selector and the window a few milliseconds around the lines; it never contains the secret.';

CREATE VIEW v_leak_fingerprints AS
SELECT fingerprint, rule_id, any_value(detector) AS detector, any_value(preview) AS preview,
       count(DISTINCT stream) AS streams, count(DISTINCT source) AS sources,
       count(*) AS occurrences, min(ts) AS first_seen, max(ts) AS last_seen,
       list(DISTINCT stream ORDER BY stream) AS stream_list
FROM leak_occurrences GROUP BY fingerprint, rule_id;
COMMENT ON VIEW v_leak_fingerprints IS 'Each leaked value (by keyed fingerprint) with how many streams and sources it appeared in: the same secret across services shows as streams > 1.';

CREATE VIEW v_leaks AS
SELECT o.ts, o.source, o.tenant, o.stream, o.rule_id, o.detector, o.severity, o.confidence,
       o.preview, o.fingerprint, o.finding_id, f.status AS finding_status,
       p.status AS purge_status, p.request_id AS purge_request_id
FROM leak_occurrences o
LEFT JOIN findings f USING (finding_id)
LEFT JOIN (SELECT finding_id, min(status) AS status, min(request_id) AS request_id
           FROM purge_requests GROUP BY finding_id) p USING (finding_id)
ORDER BY o.ts DESC;
COMMENT ON VIEW v_leaks IS 'Every leak occurrence with its finding status and purge state, newest first.';
