-- Delivery outbox and finding history (design sections 3 and 7). A finding change and its
-- outbox rows are written in one transaction, so a crash can never lose a delivery.

CREATE TABLE finding_history (
    finding_id  VARCHAR NOT NULL,
    changed_at  TIMESTAMP NOT NULL,
    change      VARCHAR NOT NULL,
    old_value   VARCHAR,
    new_value   VARCHAR,
    reason      VARCHAR,
    who         VARCHAR
);
COMMENT ON TABLE finding_history IS 'Who changed a finding, when and why: created, severity, status and count-step changes.';

CREATE TABLE outbox (
    delivery_id      VARCHAR PRIMARY KEY,
    destination      VARCHAR NOT NULL,
    finding_id       VARCHAR NOT NULL,
    change           VARCHAR NOT NULL,
    snapshot         JSON NOT NULL,
    state            VARCHAR NOT NULL DEFAULT 'pending',
    attempts         INTEGER NOT NULL DEFAULT 0,
    created_at       TIMESTAMP NOT NULL,
    next_attempt_at  TIMESTAMP NOT NULL,
    last_attempt_at  TIMESTAMP,
    delivered_at     TIMESTAMP,
    last_status      INTEGER,
    last_error       VARCHAR,
    response         VARCHAR
);
COMMENT ON TABLE outbox IS 'One row per finding change per destination. delivery_id is the webhook-id, stable across retries. state: pending | delivered | dead.';
COMMENT ON COLUMN outbox.snapshot IS 'The finding as it was at the change (sanitised); every retry sends the same content.';
COMMENT ON COLUMN outbox.change IS 'new | severity | status | count | refresh (Alertmanager re-send of an open finding)';
COMMENT ON COLUMN outbox.response IS 'Start of the last response body, kept for dead letters';

CREATE VIEW v_dead_letters AS
SELECT delivery_id, destination, finding_id, change, attempts, created_at, last_attempt_at,
       last_status, last_error, response
FROM outbox WHERE state = 'dead' ORDER BY last_attempt_at DESC;
COMMENT ON VIEW v_dead_letters IS 'Deliveries given up on, with the last response; `sentinel deliver --retry-dead` requeues them.';

CREATE VIEW v_outbox_status AS
SELECT destination,
       count(*) FILTER (WHERE state = 'pending') AS pending,
       count(*) FILTER (WHERE state = 'delivered') AS delivered,
       count(*) FILTER (WHERE state = 'dead') AS dead,
       min(created_at) FILTER (WHERE state = 'pending') AS oldest_pending
FROM outbox GROUP BY destination ORDER BY destination;
COMMENT ON VIEW v_outbox_status IS 'Queue depth, dead letters and the oldest undelivered item per destination.';
