"""Normalization of CloudTrail records into ``access_events`` rows, in DuckDB SQL.

Files arrive split one record per line (``cloudtrail_records``): ``<index>\x01<record text>``.
DuckDB's CSV reader splits the lines in parallel; every field we need comes from one multi-path
``json_extract_string`` call per record, so a record is parsed once. The text itself, byte for
byte as CloudTrail wrote it, is what the raw-keeping policy stores and quarantine excerpts show.
"""

from __future__ import annotations

from collections.abc import Sequence

from sentinel.actions import AWS_ACTIONS, sql_case
from sentinel.ingest import InputFile
from sentinel.sources.cloudtrail_records import FIELD_SEPARATOR

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
_DEFAULT_MAX_LINE = 2 * 1024**2


class CloudTrailFormat:
    provider = "aws"

    def stage_query(self, files_view: str, files: Sequence[InputFile]) -> str:
        fields = ",\n    ".join(f"v[{i + 1}] AS {alias}" for i, (alias, _) in enumerate(_PATHS))
        path_list = ", ".join("'" + p.replace("'", "''") + "'" for _, p in _PATHS)
        return f"""
WITH x AS (
  SELECT b.uri AS source_uri, b.account AS file_account, true AS envelope_ok, r.record,
         r.source_index,
         json_extract_string(r.record, [{path_list}]) AS v
  FROM {_read(files)} r JOIN {files_view} b ON b.path = r.filename
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


def _read(files: Sequence[InputFile]) -> str:
    """The split lines (``cloudtrail_records``) as (source_index, record, filename); no quoting
    or escaping, since the separator cannot occur in a record."""
    listed = ", ".join("'" + str(f.path).replace("'", "''") + "'" for f in files)
    longest = max((int(f.meta.get("longest_record", "0")) for f in files), default=0)
    # The reader refuses lines over max_line_size (2 MB by default) and sizes its buffers from it.
    max_line = max(_DEFAULT_MAX_LINE, 1 << (longest + 32).bit_length())
    return (
        f"read_csv([{listed}], columns={{'source_index': 'INTEGER', 'record': 'VARCHAR'}},"
        f" delim=chr({FIELD_SEPARATOR[0]}), quote='', escape='', new_line='\\n', header=false,"
        " auto_detect=false,"
        f" filename=true, max_line_size={max_line}, buffer_size={4 * max_line})"
    )
