"""``sentinel event show`` and ``sentinel quarantine``: look behind a row."""

from __future__ import annotations

import click

from sentinel import events
from sentinel.cli.app import AppContext, emit, output_options, pass_app, root
from sentinel.errors import EXIT_OK
from sentinel.output import Format, dumps


@root.group("event")
def event_group() -> None:
    """Inspect single events."""


@event_group.command("show")
@click.argument("event_id")
@pass_app
def show(app: AppContext, event_id: str) -> int:
    """Print the original log record of an event as JSON.

    The record comes from the database when it was kept (store.keep_raw), otherwise from its
    source file (local path or S3 object) at the recorded position.

    \b
    Example:
      sentinel event show d769764a-064f-4ff8-a1c9-b18b8e5d82a2
    """
    with app.open_store(read_only=True) as store:
        result = events.show(store, app.config, event_id)
    click.echo(dumps(result, indent=2))
    return EXIT_OK


@root.command("quarantine")
@click.option("--limit", default=100, show_default=True, help="Newest entries to show.")
@click.option("--reason", help="Only this reason (e.g. corrupt_compression, missing_field).")
@output_options
@pass_app
def quarantine(app: AppContext, limit: int, reason: str | None, fmt: Format) -> int:
    """List input that could not be loaded, newest first, with the reason.

    Whole files have no record_index; single records show their position in the file.
    The same rows are in SQL as the view v_quarantine.

    \b
    Example:
      sentinel quarantine --reason corrupt_compression --json
    """
    sql = (
        "SELECT quarantined_at, provider, source, uri, record_index, reason, detail"
        " FROM quarantine WHERE (? IS NULL OR reason = ?) ORDER BY quarantine_id DESC LIMIT ?"
    )
    with app.open_store(read_only=True) as store:
        columns, rows = store.columns_and_rows(sql, [reason, reason, limit])
    emit(columns, rows, fmt)
    return EXIT_OK
