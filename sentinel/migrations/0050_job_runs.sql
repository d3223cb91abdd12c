-- Job run history written by `sentinel run`: one row per run and one per finished step, each
-- committed as soon as it is known, so a killed run leaves what it completed (and a run row
-- stuck at outcome 'running').

CREATE TABLE job_runs (
    run_id             VARCHAR PRIMARY KEY,
    job                VARCHAR NOT NULL,
    started_at         TIMESTAMP NOT NULL,
    finished_at        TIMESTAMP,
    outcome            VARCHAR NOT NULL,
    exit_code          INTEGER,
    rows_ingested      BIGINT,
    files_quarantined  BIGINT,
    pid                INTEGER,
    host               VARCHAR
);
COMMENT ON TABLE job_runs IS 'One row per `sentinel run JOB`. outcome: running | ok | partial | failed | interrupted. A row left at running means the process died.';

CREATE TABLE job_steps (
    run_id       VARCHAR NOT NULL,
    step_index   INTEGER NOT NULL,
    command      VARCHAR NOT NULL,
    started_at   TIMESTAMP NOT NULL,
    finished_at  TIMESTAMP NOT NULL,
    exit_code    INTEGER NOT NULL,
    outcome      VARCHAR NOT NULL,
    PRIMARY KEY (run_id, step_index)
);
COMMENT ON TABLE job_steps IS 'Each finished step of a job run. outcome: ok | partial | failed | timeout (skipped steps have no row).';

CREATE VIEW v_job_runs AS
SELECT r.job, r.run_id, r.started_at, r.finished_at, r.outcome, r.exit_code,
       date_diff('millisecond', r.started_at, r.finished_at) / 1000.0 AS duration_seconds,
       r.rows_ingested, r.files_quarantined
FROM job_runs r ORDER BY r.started_at DESC;
COMMENT ON VIEW v_job_runs IS 'Job runs, newest first, with their duration.';
