"""``sentinel demo``: the whole pipeline on generated data, on this machine."""

from __future__ import annotations

from pathlib import Path

import click

from sentinel import demo
from sentinel.cli.app import AppContext, emit_records, exit_code, output_options, pass_app, root
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
                    **result.ingest.as_dict(),
                    **s,
                }
            ],
            fmt,
        )
        return exit_code(partial=result.ingest.partial)
    click.echo(
        f"Generated {result.generated['records']:,} CloudTrail records in "
        f"{result.generated['files']:,} files under {result.directory / 'trail'}"
    )
    r = result.ingest
    click.echo(
        f"Loaded {r.events_loaded:,} S3 events ({r.records_skipped:,} other-service records "
        f"skipped, {r.files_quarantined + r.records_quarantined} quarantined) in {r.seconds:.1f}s"
    )
    click.echo(
        f"Events from {s['first_event']} to {s['last_event']} UTC, by action: "
        + ", ".join(f"{k} {v:,}" for k, v in s["by_action"].items())
    )
    click.echo("\nTop readers by bytes:")
    for row in s["top_readers"]:
        click.echo(f"  {row['gib_read']:>10,.1f} GiB  {row['objects']:>6,} objects  {row['actor']}")
    db = result.db_path
    click.echo(f"\nDatabase: {db}\nConfig:   {result.config_path}\nTry:")
    click.echo(
        f'  sentinel --db {db} sql "SELECT * FROM v_bytes_by_actor_hour'
        ' ORDER BY bytes DESC LIMIT 10"'
    )
    click.echo(
        f'  sentinel --db {db} sql "SELECT operation, actor, bucket, object_key FROM access_events'
        " WHERE action IN ('delete', 'tamper')\""
    )
    return exit_code(partial=r.partial)
