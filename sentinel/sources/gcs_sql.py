"""Normalization of GCS audit-log entries (LogEntry JSON, one per line) into ``access_events``.

Both GCS paths end here: Log Router sink exports are newline-delimited LogEntry JSON, and the API
path spools each window's entries in the same form. DuckDB reads every file as text and splits it
into lines, so a malformed line is quarantined on its own (with its 1-based line number as
``source_index``) while the rest of the file loads. Each valid line is parsed once, by one
multi-path ``json_extract_string`` call.
"""

from __future__ import annotations

from collections.abc import Sequence

from sentinel.actions import sql_case
from sentinel.ingest import InputFile
from sentinel.sources.gcs_actions import (
    BUCKET_PROTECTION_FIELDS,
    GCP_ACTIONS,
    OBJECT_RETENTION_FIELDS,
)

_PATHS: tuple[tuple[str, str], ...] = (
    ("log_name", "$.logName"),
    ("ts_text", "$.timestamp"),
    ("insert_id", "$.insertId"),
    ("method", "$.protoPayload.methodName"),
    ("service", "$.protoPayload.serviceName"),
    ("resource_type", "$.resource.type"),
    ("project", "$.resource.labels.project_id"),
    ("label_bucket", "$.resource.labels.bucket_name"),
    ("location", "$.resource.labels.location"),
    ("resource_name", "$.protoPayload.resourceName"),
    ("email", "$.protoPayload.authenticationInfo.principalEmail"),
    ("subject", "$.protoPayload.authenticationInfo.principalSubject"),
    ("status_code", "$.protoPayload.status.code"),
    ("caller_ip", "$.protoPayload.requestMetadata.callerIp"),
    ("user_agent_text", "$.protoPayload.requestMetadata.callerSuppliedUserAgent"),
    ("response_size", "$.protoPayload.response.size"),
    ("request_metadata", "$.protoPayload.request.metadata"),
    ("request_body", "$.protoPayload.request"),
    ("delegation", "$.protoPayload.authenticationInfo.serviceAccountDelegationInfo"),
)

# google.rpc.Code names: the audit log's status.code, as the error_code column.
RPC_CODES = {
    1: "CANCELLED", 2: "UNKNOWN", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED",
    5: "NOT_FOUND", 6: "ALREADY_EXISTS", 7: "PERMISSION_DENIED", 8: "RESOURCE_EXHAUSTED",
    9: "FAILED_PRECONDITION", 10: "ABORTED", 11: "OUT_OF_RANGE", 12: "UNIMPLEMENTED",
    13: "INTERNAL", 14: "UNAVAILABLE", 15: "DATA_LOSS", 16: "UNAUTHENTICATED",
}  # fmt: skip
_WRITES_WITH_SIZE = ("storage.objects.create", "storage.objects.compose",
                     "storage.objects.rewrite", "storage.objects.copy")  # fmt: skip


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _list(values: Sequence[str]) -> str:
    return "[" + ", ".join(_quote(v) for v in values) + "]"


class GcsAuditFormat:
    """``RecordFormat`` for GCS audit LogEntry lines. ``buckets`` (if any) keeps only entries of
    those buckets; entries of other services or resources are skipped, not quarantined."""

    provider = "gcp"

    def __init__(self, buckets: Sequence[str] = ()) -> None:
        self.buckets = tuple(buckets)

    def stage_query(self, files_view: str, files: Sequence[InputFile]) -> str:
        paths = ", ".join(_quote(str(f.path)) for f in files)
        # A part of a split file numbers its lines from the part's first line in the original.
        offsets = ", ".join(
            f"({_quote(str(f.path))}, {int(f.meta.get('line_offset', '0'))})" for f in files
        )
        fields = ",\n    ".join(f"v[{i + 1}] AS {alias}" for i, (alias, _) in enumerate(_PATHS))
        path_list = _list([p for _, p in _PATHS])
        codes = " ".join(f"WHEN '{code}' THEN '{name}'" for code, name in RPC_CODES.items())
        retention_request = _list(("overrideUnlockedRetention", *OBJECT_RETENTION_FIELDS))
        watched = (
            f"AND bucket IN ({', '.join(_quote(b) for b in self.buckets)})" if self.buckets else ""
        )
        return f"""
WITH texts AS (SELECT filename, string_split(content, chr(10)) AS lines FROM read_text([{paths}])),
offsets(filename, line_offset) AS (VALUES {offsets}),
split AS (
  SELECT filename, rtrim(unnest(lines), chr(13)) AS line,
         generate_subscripts(lines, 1) AS line_no
  FROM texts
),
numbered AS (
  SELECT s.filename, s.line, s.line_no + coalesce(o.line_offset, 0) AS source_index
  FROM split s LEFT JOIN offsets o ON o.filename = s.filename
),
x AS (
  SELECT b.uri AS source_uri, n.line AS record, n.source_index, json_valid(n.line) AS valid,
         CASE WHEN json_valid(n.line) AND json_type(n.line) = 'OBJECT'
              THEN json_extract_string(n.line, {path_list}) END AS v
  FROM numbered n JOIN {files_view} b ON b.path = n.filename
  WHERE trim(n.line) <> ''
),
y AS (
  SELECT source_uri, record, source_index, valid, v IS NOT NULL AS is_object,
    {fields}
  FROM x
),
z AS (
  SELECT *,
    timezone('UTC', TRY_CAST(ts_text AS TIMESTAMPTZ)) AS event_time,
    coalesce(nullif(email, ''), nullif(subject, '')) AS actor,
    coalesce(nullif(label_bucket, ''),
             nullif(regexp_extract(resource_name, '^projects/[^/]+/buckets/([^/]+)', 1), ''))
      AS bucket,
    CASE WHEN strpos(resource_name, '/objects/') > 0
         THEN substr(resource_name, strpos(resource_name, '/objects/') + 9) END AS object_key,
    CASE WHEN json_type(request_metadata) = 'OBJECT'
         THEN json_keys(request_metadata) ELSE [] END AS metadata_keys,
    CASE WHEN json_type(request_body) = 'OBJECT'
         THEN json_keys(request_body) ELSE [] END AS request_keys,
    coalesce(service = 'storage.googleapis.com' OR resource_type = 'gcs_bucket', false) AS gcs
  FROM y
),
w AS (
  SELECT *,
    CASE
      WHEN method IN ('storage.buckets.update', 'storage.buckets.patch')
           AND list_has_any(metadata_keys, {_list(BUCKET_PROTECTION_FIELDS)}) THEN 'tamper'
      WHEN method IN ('storage.objects.update', 'storage.objects.patch')
           AND (list_has_any(metadata_keys, {_list(OBJECT_RETENTION_FIELDS)})
                OR list_has_any(request_keys, {retention_request}))
           THEN 'tamper'
      ELSE {sql_case("method", GCP_ACTIONS)}
    END AS action,
    CASE WHEN delegation IS NOT NULL AND json_type(delegation) = 'ARRAY' THEN
      array_to_string(list_append(
        list_transform(delegation::JSON[], lambda d: coalesce(
          json_extract_string(d, '$.firstPartyPrincipal.principalEmail'),
          json_extract_string(d, '$.principalSubject'),
          json_extract_string(d, '$.thirdPartyPrincipal.thirdPartyClaims.subject'), '?')),
        coalesce(actor, '?')), ' > ')
    END AS chain
  FROM z
)
SELECT
  'gcp' AS provider,
  log_name || '|' || ts_text || '|' || insert_id AS event_id,
  log_name || '|' || ts_text || '|' || insert_id AS logical_id,
  event_time,
  coalesce(nullif(project, ''), regexp_extract(log_name, '^projects/([^/]+)/logs/', 1)) AS account,
  nullif(location, '') AS region,
  actor,
  CASE
    WHEN actor IS NULL THEN 'redacted'
    WHEN actor LIKE '%.gserviceaccount.com' OR subject LIKE 'serviceAccount:%'
      THEN 'serviceAccount'
    WHEN subject LIKE 'principal://%' OR subject LIKE 'principalSet://%' THEN 'federated'
    WHEN subject LIKE '%:%' THEN split_part(subject, ':', 1)
    ELSE 'user'
  END AS actor_type,
  chain AS actor_session,
  nullif(regexp_extract(actor, '@([a-z0-9-]+)\\.iam\\.gserviceaccount\\.com$', 1), '')
    AS caller_account,
  NULL::VARCHAR AS invoked_by,
  method AS operation,
  action,
  false AS is_service_event,
  bucket,
  object_key,
  NULL::VARCHAR AS copy_source,
  CASE WHEN action = 'read' AND coalesce(status_code, '0') <> '0' THEN 0 END::BIGINT AS bytes_out,
  CASE WHEN method IN {tuple(_WRITES_WITH_SIZE)} AND coalesce(status_code, '0') = '0'
       THEN TRY_CAST(response_size AS BIGINT) END AS bytes_in,
  false AS bytes_estimated,
  CASE coalesce(status_code, '0') WHEN '0' THEN NULL {codes} ELSE 'code_' || status_code END
    AS error_code,
  nullif(caller_ip, '') AS src_ip,
  regexp_replace(user_agent_text, ',gzip\\(gfe\\)$', '') AS user_agent,
  NULL::VARCHAR AS vpce_id,
  source_uri,
  source_index::INTEGER AS source_index,
  record,
  CASE
    WHEN NOT valid THEN 'malformed_json'
    WHEN NOT is_object THEN 'not_an_object'
    WHEN log_name IS NULL OR log_name = '' THEN 'missing_field:logName'
    WHEN ts_text IS NULL OR ts_text = '' THEN 'missing_field:timestamp'
    WHEN event_time IS NULL THEN 'bad_value:timestamp'
    WHEN insert_id IS NULL OR insert_id = '' THEN 'missing_field:insertId'
    WHEN gcs AND (method IS NULL OR method = '') THEN 'missing_field:protoPayload.methodName'
  END AS bad_reason,
  coalesce(NOT (gcs {watched}), true) OR method IS NULL AS skip,
  true AS envelope_ok
FROM w
"""
