"""``sentinel ingest gcs`` and ``sentinel ingest objects``."""

from __future__ import annotations

from pathlib import Path

import click

from sentinel.cli.app import AppContext, emit_records, exit_code, output_options, pass_app
from sentinel.cli.ingest import emit_reports, ingest, parse_day, progress_printer
from sentinel.config import GcsAuditSource
from sentinel.errors import UsageError
from sentinel.ingest import IngestReport
from sentinel.output import Format


@ingest.command("gcs")
@click.option(
    "--path",
    "path",
    type=click.Path(exists=True),
    help="Read a Log Router sink export (directory with cloudaudit.googleapis.com/…) or one "
    "NDJSON file of LogEntry JSON, instead of the Cloud Logging API.",
)
@click.option(
    "--since",
    metavar="TIME",
    help="Backfill from this time (API) or day folder (export); the cursor is untouched.",
)
@click.option("--until", metavar="TIME", help="Backfill up to this time (exclusive) or day.")
@output_options
@pass_app
def gcs(app: AppContext, path: str | None, since: str | None, until: str | None,
        fmt: Format) -> int:  # fmt: skip
    """Load GCS audit logs (Data Access and Admin Activity) from every [[sources.gcs_audit]].

    With `projects`, reads closed time windows from the Cloud Logging API (entries.list, 60
    requests/minute per project: prefer a sink for busy buckets), re-reading the previous window
    for late entries. With `path` or --path, reads sink-export files once each. Reads get
    estimated bytes from known object sizes (see `sentinel ingest objects`); reads of objects of
    unknown size are counted as `reads_unknown_size`, never as 0 bytes. Malformed lines are
    quarantined and the command exits 3.

    \b
    Examples:
      sentinel ingest gcs                                  # configured projects / exports
      sentinel ingest gcs --path ./audit-sink              # a copy of a sink bucket
      sentinel ingest gcs --path entries.jsonl --json
      sentinel ingest gcs --since 2025-03-01T00:00:00Z --until 2025-03-02T00:00:00Z
    """
    from sentinel.sources import gcs as gcs_source
    from sentinel.sources import gcs_api

    cfg = app.config
    sources = list(cfg.sources.gcs_audit)
    if path:
        sources = [GcsAuditSource(name=str(Path(path).resolve()), path=path)]
    if not sources:
        raise UsageError(
            "no GCS audit source configured",
            hint="add [[sources.gcs_audit]] to sentinel.toml, or pass --path FILE_OR_DIR",
        )
    reports: list[IngestReport] = []
    with app.open_store() as store:
        for source in sources:
            buckets = gcs_source.watched_buckets(source, cfg.watch.buckets)
            progress = progress_printer(f"ingest {source.label}")
            if source.path:
                reports.append(gcs_source.run_export(
                    store, source, Path(source.path), keep_raw=cfg.store.keep_raw,
                    buckets=buckets, since=parse_day(since), until=parse_day(until),
                    progress=progress,
                ))  # fmt: skip
            else:
                reports.append(gcs_api.run_api(
                    store, source, keep_raw=cfg.store.keep_raw, buckets=buckets,
                    since=gcs_api.parse_time(since) if since else None,
                    until=gcs_api.parse_time(until) if until else None, progress=progress,
                ))  # fmt: skip
    code = emit_reports(reports, fmt)
    if fmt == "table":
        for report in reports:
            row = report.as_dict()
            click.echo(
                f"  bytes: {row['reads_estimated']} reads estimated from object sizes,"
                f" {row['reads_unknown_size']} reads of {row['objects_unknown_size']} objects"
                " of unknown size (add them with `sentinel ingest objects`)"
            )
    return code


@ingest.command("objects")
@click.option(
    "--path",
    "path",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="An S3 Inventory manifest.json, a GCS inventory report (CSV/Parquet), or a manifest "
    "(CSV, JSON, NDJSON or Parquet with bucket, key or name, size).",
)
@click.option(
    "--kind",
    type=click.Choice(["auto", "s3-inventory", "gcs-inventory", "manifest"]),
    default="auto",
    show_default=True,
    help="auto: manifest.json is an S3 Inventory, anything else a table with named columns.",
)
@click.option(
    "--provider",
    type=click.Choice(["aws", "gcp"]),
    help="Provider of the objects (default: aws for S3 Inventory, else gcp).",
)
@output_options
@pass_app
def objects(app: AppContext, path: str, kind: str, provider: str | None, fmt: Format) -> int:
    """Load object sizes, so GCS reads (whose audit logs carry no bytes) get estimated bytes.

    Newer sizes replace older ones per object; reads whose size was unknown are filled in.

    \b
    Examples:
      sentinel ingest objects --path sizes.csv             # bucket,key,size
      sentinel ingest objects --path inventory.parquet --kind gcs-inventory
      sentinel ingest objects --path inv/weights/cfg/2025-03-01T01-00Z/manifest.json
    """
    from sentinel import objects as objects_mod

    with app.open_store() as store:
        report = objects_mod.load_inventory(
            store,
            Path(path),
            kind=kind,  # type: ignore[arg-type]
            provider=provider,
        )
    row = report.as_dict()
    if fmt == "table":
        click.echo(
            f"{row['source']}: {row['objects_upserted']} object sizes updated from"
            f" {row['rows_read']} rows ({row['rows_without_size']} without size);"
            f" {row['reads_estimated']} reads newly estimated, {row['reads_unknown_size']} reads"
            f" of {row['objects_unknown_size']} objects still of unknown size"
        )
    else:
        emit_records([row], fmt)
    return exit_code(partial=False)
