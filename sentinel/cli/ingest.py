"""``sentinel ingest …``: load access logs into the database."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable
from pathlib import Path

import click

from sentinel.cli.app import AppContext, emit_records, exit_code, output_options, pass_app, root
from sentinel.config import CloudTrailSource
from sentinel.errors import UsageError
from sentinel.ingest import IngestReport
from sentinel.output import Format


@root.group()
def ingest() -> None:
    """Load access logs into the database (incremental: files already loaded are skipped)."""


def parse_day(value: str | None) -> dt.date | None:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value[:10])
    except ValueError as exc:
        raise UsageError(f"not a date: {value!r}", hint="use YYYY-MM-DD") from exc


def progress_printer(label: str) -> Callable[[int, int], None] | None:
    """A one-line progress counter on stderr, only when a person is watching."""
    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        end = "\n" if done >= total else ""
        click.echo(f"\r{label}: {done}/{total} files", err=True, nl=False)
        if end:
            click.echo("", err=True)

    return show


def emit_reports(reports: list[IngestReport], fmt: Format) -> int:
    rows = [r.as_dict() for r in reports]
    if fmt == "table":
        for row in rows:
            ignored = row.pop("files_ignored_by_reason")
            click.echo(
                f"{row['source']}: {row['events_loaded']} events from {row['files_loaded']} files"
                f" ({row['events_duplicate']} duplicates,"
                f" {row['records_skipped']} records of other services skipped,"
                f" {row['records_quarantined']} records and {row['files_quarantined']} files"
                f" quarantined, {row['files_ignored']} files ignored"
                + (f": {ignored}" if ignored else "")
                + f") in {row['seconds']}s"
            )
    else:
        emit_records(rows, fmt)
    return exit_code(partial=any(r.partial for r in reports))


@ingest.command("cloudtrail")
@click.option(
    "--path",
    "path",
    type=click.Path(file_okay=False),
    help="Read a local directory "
    "laid out like a CloudTrail bucket (AWSLogs/…), plain or gzipped, instead of S3.",
)
@click.option(
    "--since", metavar="YYYY-MM-DD", help="Backfill from this delivery day (cursor untouched)."
)
@click.option("--until", metavar="YYYY-MM-DD", help="Backfill up to this delivery day, inclusive.")
@output_options
@pass_app
def cloudtrail(
    app: AppContext, path: str | None, since: str | None, until: str | None, fmt: Format
) -> int:
    """Load CloudTrail S3 data and management events from every [[sources.cloudtrail]].

    Only CloudTrail event files are read; digests, Insights and other objects are counted and
    skipped. Each run re-lists the last `lookback_days` delivery-day folders, because files
    arrive late; files already loaded are never read twice. Unreadable files and malformed
    records are quarantined (see `sentinel quarantine`) and the command exits 3.

    \b
    Examples:
      sentinel ingest cloudtrail                       # configured S3 sources
      sentinel ingest cloudtrail --path ./trail-copy   # a local copy of a trail bucket
      sentinel ingest cloudtrail --since 2025-03-01 --until 2025-03-07 --json
    """
    from sentinel.sources import cloudtrail as ct

    cfg = app.config
    sources = list(cfg.sources.cloudtrail)
    if path:
        sources = [CloudTrailSource(name=str(Path(path).resolve()), path=path)]
    if not sources:
        raise UsageError(
            "no CloudTrail source configured",
            hint="add [[sources.cloudtrail]] to sentinel.toml, or pass --path DIR",
        )
    reports = []
    with app.open_store() as store:
        for source in sources:
            reports.append(
                ct.run(
                    store,
                    source,
                    keep_raw=cfg.store.keep_raw,
                    since=parse_day(since),
                    until=parse_day(until),
                    progress=progress_printer(f"ingest {source.label}"),
                )
            )
    return emit_reports(reports, fmt)
