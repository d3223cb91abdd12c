"""The SQL vocabulary rules are written in, generated from ``sentinel.toml``.

Macros (``is_watched(bucket)``, ``is_hydrator(actor)``, ``is_promoted(bucket, key)``,
``allowed_network(vpce_id, src_ip)``, ``model_of(bucket, key)``...), config tables
(``cfg_tenant_actors``, ``cfg_tenant_models``, ``cfg_sources``, ``cfg_watched_buckets``),
variables (``getvariable('now')`` and every numeric ``[detect]`` key) and the scoped views
``scope_events`` and ``watched_reads``. Config values are quoted here, never pasted raw.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence

from sentinel.config import Config
from sentinel.matchers import Network, literal_prefix, model_regex, networks, split_bucket

_DEFAULT_MODEL = r"^[^/]+/[^/]+/"


def q(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def _any(expressions: list[str]) -> str:
    return "(" + " OR ".join(expressions) + ")" if expressions else "false"


def _values(rows: Sequence[tuple[str, ...]], columns: str) -> str:
    names = columns.split(", ")
    if not rows:
        nulls = ", ".join(f"NULL::VARCHAR AS {n}" for n in names)
        return f"SELECT {nulls} WHERE false"
    body = ", ".join("(" + ", ".join(q(v) for v in row) + ")" for row in rows)
    return f"SELECT * FROM (VALUES {body}) AS t({columns})"


def _network_condition(net: Network) -> str:
    if net.kind == "vpce":
        return f"vpce = {q(net.value)}"
    if net.kind == "literal":
        return f"ip = {q(net.value)}"
    if net.version == 4:
        return f"ip4_num(ip) BETWEEN {net.low} AND {net.high}"
    return "false"  # IPv6 ranges are not matched in SQL yet (documented limitation)


def context_statements(cfg: Config, now: dt.datetime) -> list[str]:
    watched = list(cfg.watch.buckets)
    promoted = list(cfg.promoted.patterns)
    nets = networks(cfg)
    model_arms = []
    for pattern in cfg.watch.models:
        bucket, key_glob = split_bucket(pattern)
        regex = model_regex(key_glob)
        model_arms.append(
            f"WHEN b GLOB {q(bucket)} AND regexp_matches(k, {q(regex)}) "
            f"THEN b || '/' || regexp_extract(k, {q(regex)}, 0)"
        )
    default_model = (
        f"b || '/' || coalesce(nullif(regexp_extract(k, {q(_DEFAULT_MODEL)}, 0), ''), "
        "regexp_extract(k, '^.*/', 0))"
    )
    model_case = (
        f"CASE {' '.join(model_arms)} ELSE {default_model} END" if model_arms else default_model
    )
    tenant_actor_rows = [(t.name, p) for t in cfg.tenants for p in t.actors]
    tenant_model_rows = [
        (t.name, p, literal_prefix(p).rstrip("/")) for t in cfg.tenants for p in t.models
    ]
    source_rows = [("cloudtrail", s.label) for s in cfg.sources.cloudtrail]
    source_rows += [("gcs_audit", s.label) for s in cfg.sources.gcs_audit]
    statements = [
        "CREATE OR REPLACE TEMP MACRO is_watched(b) AS "
        + _any([f"coalesce(b, '') GLOB {q(p)}" for p in watched]),
        "CREATE OR REPLACE TEMP MACRO is_hydrator(a) AS "
        + _any([f"coalesce(a, '') GLOB {q(p)}" for p in cfg.hydrators.actors]),
        "CREATE OR REPLACE TEMP MACRO is_promoted(b, k) AS "
        + _any([f"(coalesce(b, '') || '/' || coalesce(k, '')) GLOB {q(p)}" for p in promoted]),
        "CREATE OR REPLACE TEMP MACRO has_promoted(b) AS "
        + _any([f"coalesce(b, '') GLOB {q(split_bucket(p)[0])}" for p in promoted]),
        "CREATE OR REPLACE TEMP MACRO ip4_num(ip) AS CASE WHEN regexp_full_match(coalesce(ip, ''),"
        r" '\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}') THEN"
        " (split_part(ip, '.', 1)::BIGINT << 24) + (split_part(ip, '.', 2)::BIGINT << 16)"
        " + (split_part(ip, '.', 3)::BIGINT << 8) + split_part(ip, '.', 4)::BIGINT END",
        "CREATE OR REPLACE TEMP MACRO allowed_network(vpce, ip) AS "
        + _any([_network_condition(n) for n in nets]),
        f"CREATE OR REPLACE TEMP MACRO has_networks() AS {'true' if nets else 'false'}",
        f"CREATE OR REPLACE TEMP MACRO model_of(b, k) AS {model_case}",
        "CREATE OR REPLACE TEMP TABLE cfg_tenant_actors AS "
        + _values(tenant_actor_rows, "tenant, pattern"),
        "CREATE OR REPLACE TEMP TABLE cfg_tenant_models AS "
        + _values(tenant_model_rows, "tenant, pattern, prefix"),
        "CREATE OR REPLACE TEMP TABLE cfg_sources AS " + _values(source_rows, "kind, name"),
        "CREATE OR REPLACE TEMP TABLE cfg_watched_buckets AS "
        + _values([(b,) for b in watched if not any(c in b for c in "*?[")], "bucket"),
        f"SET VARIABLE now = TIMESTAMP '{now.isoformat(sep=' ')}'",
    ]
    for item in dataclasses.fields(cfg.detect):
        value = getattr(cfg.detect, item.name)
        if isinstance(value, bool):
            statements.append(f"SET VARIABLE {item.name} = {str(value).lower()}")
        elif isinstance(value, int | float):
            statements.append(f"SET VARIABLE {item.name} = {float(value)!r}::DOUBLE")
    statements += [_SCOPE_EVENTS, _WATCHED_READS]
    return statements


_SCOPE_EVENTS = """
CREATE OR REPLACE TEMP VIEW scope_events AS
SELECT * FROM access_events
WHERE event_time >= getvariable('scope_start') AND event_time < getvariable('scope_end')
  AND load_id <= getvariable('max_load_id')
"""

# Successful reads on watched buckets, plus the source side of server-side copies (bytes from
# `objects`), each logical call once: only rows whose logical_id differs from their event_id
# (copies delivered to several accounts) can be duplicates, so only those pay for dedupe.
_WATCHED_READS = """
CREATE OR REPLACE TEMP VIEW watched_reads AS
WITH base AS (
    SELECT provider, event_id, logical_id, event_time, account, actor, actor_type, bucket,
           object_key, bytes_out AS bytes, bytes_estimated, src_ip, vpce_id, user_agent,
           false AS via_copy
    FROM scope_events
    WHERE action = 'read' AND error_code IS NULL AND NOT is_service_event AND is_watched(bucket)
    UNION ALL
    SELECT e.provider, e.event_id, e.logical_id, e.event_time, e.account, e.actor, e.actor_type,
           split_part(e.copy_source, '/', 1) AS bucket,
           substr(e.copy_source, length(split_part(e.copy_source, '/', 1)) + 2) AS object_key,
           o.size AS bytes, o.size IS NOT NULL AS bytes_estimated, e.src_ip, e.vpce_id,
           e.user_agent, true AS via_copy
    FROM scope_events e
    LEFT JOIN objects o ON o.provider = e.provider
        AND o.bucket = split_part(e.copy_source, '/', 1)
        AND o.object_key = substr(e.copy_source, length(split_part(e.copy_source, '/', 1)) + 2)
    WHERE e.copy_source IS NOT NULL AND e.error_code IS NULL
      AND is_watched(split_part(e.copy_source, '/', 1))
), unique_calls AS (
    SELECT * FROM base WHERE logical_id = event_id
    UNION ALL
    SELECT * FROM base WHERE logical_id <> event_id
    QUALIFY row_number() OVER (PARTITION BY provider, logical_id, via_copy ORDER BY event_id) = 1
)
SELECT *, is_hydrator(actor) AS hydrator FROM unique_calls
"""
