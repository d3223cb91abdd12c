"""Normalization of CloudTrail records into ``access_events`` rows, in DuckDB SQL.

DuckDB reads each file's ``Records`` array as JSON values and extracts every field we need with
one multi-path ``json_extract_string`` call per record, so a record is parsed once. The original
record stays available as JSON for the raw-keeping policy and for quarantine excerpts.
"""

from __future__ import annotations

from collections.abc import Sequence

from sentinel.actions import AWS_ACTIONS, sql_case
from sentinel.ingest import InputFile

# (alias, JSON path); the order is the index into the extracted list.
_PATHS: tuple[tuple[str, str], ...] = (
    ("event_id", "$.eventID"),
    ("event_time_text", "$.eventTime"),
    ("operation", "$.eventName"),
    ("event_source", "$.eventSource"),
    ("event_version", "$.eventVersion"),
    ("event_type", "$.eventType"),
    ("region", "$.awsRegion"),
    ("recipient", "$.recipientAccountId"),
    ("shared_id", "$.sharedEventID"),
    ("ui_type", "$.userIdentity.type"),
    ("ui_arn", "$.userIdentity.arn"),
    ("ui_account", "$.userIdentity.accountId"),
    ("invoked_by", "$.userIdentity.invokedBy"),
    ("issuer_arn", "$.userIdentity.sessionContext.sessionIssuer.arn"),
    ("rp_bucket", "$.requestParameters.bucketName"),
    ("rp_key", "$.requestParameters.key"),
    ("rp_copy", '$.requestParameters."x-amz-copy-source"'),
    ("bytes_out_text", "$.additionalEventData.bytesTransferredOut"),
    ("bytes_in_text", "$.additionalEventData.bytesTransferredIn"),
    ("error_code", "$.errorCode"),
    ("src_ip", "$.sourceIPAddress"),
    ("user_agent_text", "$.userAgent"),
    ("vpce_id", "$.vpcEndpointId"),
    ("resource_arn", "$.resources[0].ARN"),
    ("resource_prefix", "$.resources[0].ARNPrefix"),
)
_S3_SOURCES = "('s3.amazonaws.com', 's3express.amazonaws.com')"
_MIN_OBJECT_BYTES = 16 * 1024**2


class CloudTrailFormat:
    provider = "aws"

    def stage_query(self, files_view: str, files: Sequence[InputFile]) -> str:
        reads = []
        for compression in ("gzip", "none"):
            paths = [str(f.path) for f in files if f.compression == compression]
            if paths:
                reads.append(_read(paths, compression, _max_object_size(files)))
        records = " UNION ALL ".join(reads)
        fields = ",\n    ".join(f"v[{i + 1}] AS {alias}" for i, (alias, _) in enumerate(_PATHS))
        path_list = ", ".join("'" + p.replace("'", "''") + "'" for _, p in _PATHS)
        return f"""
WITH files AS ({records}),
recs AS (
  SELECT f.filename, f.records IS NOT NULL AS envelope_ok,
         unnest(coalesce(f.records, [NULL::JSON])) AS record,
         generate_subscripts(coalesce(f.records, [NULL::JSON]), 1) - 1 AS source_index
  FROM files f
),
x AS (
  SELECT b.uri AS source_uri, b.account AS file_account, recs.envelope_ok, recs.record,
         recs.source_index,
         json_extract_string(recs.record, [{path_list}]) AS v
  FROM recs JOIN {files_view} b ON b.path = recs.filename
),
y AS (
  SELECT source_uri, file_account, envelope_ok, record, source_index,
    {fields}
  FROM x
),
z AS (
  SELECT *,
    TRY_CAST(event_time_text AS TIMESTAMP) AS event_time,
    CASE WHEN ui_account = 'ANONYMOUS_PRINCIPAL' THEN 'ANONYMOUS_PRINCIPAL'
         ELSE coalesce(nullif(issuer_arn, ''), nullif(ui_arn, ''), nullif(invoked_by, ''),
                       'account:' || nullif(ui_account, ''))
    END AS actor,
    coalesce(nullif(rp_bucket, ''),
             nullif(split_part(replace(coalesce(resource_arn, resource_prefix),
                                       'arn:aws:s3:::', ''), '/', 1), '')) AS bucket,
    {sql_case("operation", AWS_ACTIONS)} AS action
  FROM y
)
SELECT
  'aws' AS provider,
  event_id,
  coalesce(shared_id, event_id) AS logical_id,
  event_time,
  coalesce(recipient, file_account) AS account,
  region,
  actor,
  CASE WHEN ui_account = 'ANONYMOUS_PRINCIPAL' THEN 'Anonymous' ELSE ui_type END AS actor_type,
  CASE WHEN ui_arn IS DISTINCT FROM actor THEN ui_arn END AS actor_session,
  ui_account AS caller_account,
  invoked_by,
  operation,
  action,
  coalesce(event_type = 'AwsServiceEvent', false) AS is_service_event,
  bucket,
  rp_key AS object_key,
  CASE WHEN rp_copy IS NOT NULL THEN
    url_decode(regexp_replace(ltrim(rp_copy, '/'), '\\?versionId=[^&]*$', ''))
  END AS copy_source,
  CASE WHEN error_code IS NULL THEN TRY_CAST(TRY_CAST(bytes_out_text AS DOUBLE) AS BIGINT)
       ELSE 0 END AS bytes_out,
  TRY_CAST(TRY_CAST(bytes_in_text AS DOUBLE) AS BIGINT) AS bytes_in,
  false AS bytes_estimated,
  error_code,
  src_ip,
  regexp_replace(user_agent_text, '^\\[(.*)\\]$', '\\1') AS user_agent,
  vpce_id,
  source_uri,
  source_index::INTEGER AS source_index,
  record,
  CASE
    WHEN NOT envelope_ok THEN NULL
    WHEN record IS NULL THEN 'not_an_object'
    WHEN event_id IS NULL OR event_id = '' THEN
      CASE WHEN left(ltrim(record::VARCHAR), 1) <> '{{' THEN 'not_an_object'
           ELSE 'missing_field:eventID' END
    WHEN operation IS NULL OR operation = '' THEN 'missing_field:eventName'
    WHEN event_source IS NULL THEN 'missing_field:eventSource'
    WHEN event_time_text IS NULL THEN 'missing_field:eventTime'
    WHEN event_time IS NULL THEN 'bad_value:eventTime'
    WHEN event_version IS NULL THEN 'missing_field:eventVersion'
    WHEN split_part(event_version, '.', 1) <> '1'
      THEN 'unknown_event_version:' || event_version
  END AS bad_reason,
  coalesce(event_source NOT IN {_S3_SOURCES}, true) AS skip,
  envelope_ok
FROM z
"""


def _max_object_size(files: Sequence[InputFile]) -> int:
    """A CloudTrail file is ONE JSON object, and DuckDB refuses objects over
    ``maximum_object_size`` (16 MiB by default). DuckDB also allocates buffers of that size, so
    size it from the largest file's uncompressed length rather than a blanket 1 GiB."""
    largest = max((uncompressed_size(f) for f in files), default=0)
    return max(_MIN_OBJECT_BYTES, 1 << (largest + 1).bit_length())


def uncompressed_size(f: InputFile) -> int:
    if f.compression == "none":
        return f.size
    # gzip's trailer holds the uncompressed length modulo 2**32 (ISIZE, RFC 1952 section 2.3.1).
    try:
        with f.path.open("rb") as handle:
            handle.seek(-4, 2)
            isize = int.from_bytes(handle.read(4), "little")
    except OSError:
        return f.size * 20
    return max(isize, f.size)


def _read(paths: list[str], compression: str, max_object_size: int) -> str:
    listed = ", ".join("'" + p.replace("'", "''") + "'" for p in paths)
    return (
        f"SELECT filename, Records AS records FROM read_json([{listed}], format='unstructured',"
        f" records=true, columns={{'Records': 'JSON[]'}}, filename=true,"
        f" compression='{compression}', maximum_object_size={max_object_size})"
    )
