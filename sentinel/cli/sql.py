"""``sentinel sql``: read-only SQL for analysts."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sentinel.cli.app import AppContext, emit, output_options, pass_app, root
from sentinel.errors import EXIT_OK, UsageError
from sentinel.output import Format


@root.command()
@click.argument("query", required=False)
@click.option(
    "-f",
    "--file",
    "sql_file",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Read the query from a file ('-' for stdin).",
)
@output_options
@pass_app
def sql(app: AppContext, query: str | None, sql_file: str | None, fmt: Format) -> int:
    """Run read-only SQL over events, findings and views.

    The database is opened read-only, so nothing you run can change it. Useful views:
    v_reads, v_bytes_by_actor_hour, v_open_findings, v_quarantine, v_source_freshness
    (`sentinel sql "SELECT table_name, comment FROM duckdb_views() WHERE NOT internal"`).

    \b
    Examples:
      sentinel sql "SELECT actor, sum(bytes) FROM v_bytes_by_actor_hour GROUP BY 1 ORDER BY 2 DESC"
      sentinel sql -f hunts/new_readers.sql --format csv > readers.csv
    """
    if bool(query) == bool(sql_file):
        raise UsageError("give a QUERY or -f FILE (exactly one)")
    if sql_file:
        text = sys.stdin.read() if sql_file == "-" else Path(sql_file).read_text(encoding="utf-8")
    else:
        text = query or ""
    with app.open_store(read_only=True) as store:
        columns, rows = store.columns_and_rows(text)
    emit(columns, rows, fmt)
    return EXIT_OK
