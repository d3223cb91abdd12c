"""``sentinel report``: a self-contained HTML report."""

from __future__ import annotations

from pathlib import Path

import click

from sentinel import report
from sentinel.cli.app import AppContext, pass_app, root
from sentinel.errors import EXIT_OK


@root.command("report")
@click.option(
    "--out", "out", required=True, type=click.Path(dir_okay=False), help="HTML file to write."
)
@click.option("--days", default=30, show_default=True, help="Period the charts cover.")
@pass_app
def report_command(app: AppContext, out: str, days: int) -> int:
    """Write a self-contained HTML report: open findings, GiB read per day by the top readers,
    findings per rule, and the newest event per bucket. No scripts or external assets: it opens
    offline and can be attached to a ticket.

    \\b
    Example:
      sentinel report --out weekly.html --days 7
    """
    with app.open_store(read_only=True) as store:
        text = report.render(store, days=days)
    Path(out).write_text(text, encoding="utf-8")
    click.echo(f"wrote {out} ({len(text):,} bytes)")
    return EXIT_OK
