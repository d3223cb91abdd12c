"""``sentinel demo``: the whole pipeline on generated data, on this machine."""

from __future__ import annotations

from pathlib import Path

import click

from sentinel import demo
from sentinel.cli.app import (
    AppContext,
    emit,
    emit_records,
    exit_code,
    output_options,
    pass_app,
    root,
)
from sentinel.output import Format


@root.command("demo")
@click.option(
    "--dir",
    "directory",
    default="demo",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where the demo writes its trail copy, config and database (recreated).",
)
@click.option("--days", default=21, show_default=True, help="Days of history to generate.")
@click.option("--seed", default=7, show_default=True, help="Random seed (same seed, same data).")
@output_options
@pass_app
def demo_command(app: AppContext, directory: str, days: int, seed: int, fmt: Format) -> int:
    """Generate realistic weight-bucket traffic with planted incidents, load it, and show it.

    The generated data models hydrators loading model shards, a trainer writing checkpoints,
    a promoter copying releases, tenant teams, humans, and other services sharing the trail,
    delivered as CloudTrail files (5-minute files, late deliveries, digests). Afterwards, explore
    with the printed `sentinel sql` commands.

    \b
    Example:
      sentinel demo --dir /tmp/sentinel-demo --days 28
    """
    result = demo.run(Path(directory), days=days, seed=seed)
    s = result.summary
    if fmt != "table":
        emit_records(
            [
                {
                    "directory": str(result.directory),
                    **result.generated,
                    "ingest": [r.as_dict() for r in result.ingest],
                    **s,
                }
            ],
            fmt,
        )
        return exit_code(partial=result.partial)
    g = result.generated
    click.echo(
        f"Generated {g['records']:,} CloudTrail records in {g['files']:,} files and "
        f"{g['gcs_entries']:,} GCS audit entries in {g['gcs_files']:,} sink files "
        f"under {result.directory}"
    )
    for r in result.ingest:
        click.echo(
            f"Loaded {r.events_loaded:,} events from {r.source} "
            f"({r.records_skipped:,} records of other services skipped, "
            f"{r.files_quarantined + r.records_quarantined} quarantined) in {r.seconds:.1f}s"
        )
    by_provider = ", ".join(f"{k} {v:,}" for k, v in s["events_by_provider"].items())
    click.echo(f"Events from {s['first_event']} to {s['last_event']} UTC: {by_provider}")
    counts = ", ".join(f"{v} {k}" for k, v in s["findings_by_severity"].items())
    click.echo(
        f"\nFindings: {counts} ({s['suppressed']} suppressed by config). Open, above info:\n"
    )
    emit(
        ["severity", "rule_id", "title"],
        [[f["severity"], f["rule_id"], f["title"]] for f in s["findings"]],
        "table",
    )
    db = result.db_path
    click.echo(f"\nDatabase: {db}\nConfig:   {result.config_path}\nNext:")
    click.echo(f"  sentinel --config {result.config_path} findings --severity critical")
    click.echo(
        f'  sentinel --db {db} sql "SELECT * FROM v_bytes_by_actor_hour'
        ' ORDER BY bytes DESC LIMIT 10"'
    )
    click.echo(f"  sentinel --config {result.config_path} rules list")
    return exit_code(partial=result.partial)
