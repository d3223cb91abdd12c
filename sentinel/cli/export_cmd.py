"""``sentinel export``: Parquet for other engines."""

from __future__ import annotations

from pathlib import Path

import click

from sentinel import export as export_mod
from sentinel.cli.app import AppContext, emit_records, exit_code, output_options, pass_app, root
from sentinel.output import Format
from sentinel.timeutil import parse_time


@root.command("export")
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(file_okay=False),
    help="Directory to write (created); partitions it covers are rewritten.",
)
@click.option("--since", metavar="TIME", help="Only rows from this time on (ISO-8601 or e.g. 7d).")
@click.option("--with-raw", is_flag=True, help="Include access_events.raw (large).")
@output_options
@pass_app
def export_command(
    app: AppContext, out: str, since: str | None, with_raw: bool, fmt: Format
) -> int:
    """Write events and findings as hive-partitioned Parquet (provider/date, date).

    Athena, Trino, Spark or any DuckDB client can query the result directly, which is how the
    same SQL scales past one machine. The database is only read.

    \\b
    Examples:
      sentinel export --out /data/sentinel-parquet
      sentinel export --out ./last-week --since 7d --json
      duckdb -c "SELECT provider, date, count(*) FROM
        read_parquet('last-week/access_events/*/*/*.parquet', hive_partitioning=true) GROUP BY ALL"
    """
    when = parse_time(since) if since else None
    with app.open_store(read_only=True) as store:
        results = export_mod.export(store, Path(out), since=when, with_raw=with_raw)
    emit_records([{"table": r.table, "rows": r.rows, "path": r.path} for r in results], fmt)
    return exit_code(partial=False)
