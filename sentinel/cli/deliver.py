"""``sentinel deliver``: flush the outbox to the configured destinations."""

from __future__ import annotations

from dataclasses import asdict

import click

from sentinel import deliver as deliver_lib
from sentinel import outbox
from sentinel.cli.app import AppContext, emit_records, exit_code, output_options, pass_app, root
from sentinel.errors import EXIT_OK, UsageError
from sentinel.output import Format
from sentinel.timeutil import utcnow


@root.command()
@click.option(
    "--dry-run", is_flag=True, help="Render what is due (bodies and headers); send nothing."
)
@click.option(
    "--status",
    "show_status",
    is_flag=True,
    help="Show queue depth, oldest undelivered age and dead letters.",
)
@click.option("--retry-dead", is_flag=True, help="Requeue dead letters for an immediate attempt.")
@click.option("--destination", metavar="NAME", help="Only this destination (its name, or its url).")
@click.option(
    "--limit", default=1000, show_default=True, help="At most this many items per destination."
)
@output_options
@pass_app
def deliver(
    app: AppContext,
    *,
    dry_run: bool,
    show_status: bool,
    retry_dead: bool,
    destination: str | None,
    limit: int,
    fmt: Format,
) -> int:
    """Send due findings to the SIEM destinations in [[alerts.webhook]], then return.

    Each new finding, or material change to one, was queued per destination when it happened.
    This sends what is due now: signed (webhook-id / webhook-timestamp / webhook-signature),
    at least once, with the same delivery id on every retry. Failures back off exponentially
    (honouring Retry-After) and are retried by a later run; after max_attempts or max_age_hours,
    or on a non-retryable 4xx, an item becomes a dead letter (see v_dead_letters).

    \b
    Examples:
      sentinel deliver                      send what is due (exit 3 if something failed)
      sentinel deliver --dry-run --json     show the payloads without sending
      sentinel deliver --status             queue depth, oldest undelivered age, dead letters
      sentinel deliver --retry-dead         requeue dead letters after fixing the receiver
      sentinel sql "SELECT * FROM v_dead_letters"
    """
    if sum((dry_run, show_status, retry_dead)) > 1:
        raise UsageError("use one of --dry-run, --status, --retry-dead")
    now = utcnow()
    if show_status:
        with app.open_store(read_only=True) as store:
            emit_records(outbox.status(store, now), fmt)
        return EXIT_OK
    with app.open_store(read_only=dry_run) as store:
        if retry_dead:
            count = outbox.retry_dead(store, now, destination)
            emit_records([{"requeued": count}], fmt)
            return EXIT_OK
        report = deliver_lib.run(
            store, app.config, now=now, dry_run=dry_run, destination=destination, limit=limit
        )
    if dry_run:
        emit_records([asdict(r) for r in report.rendered], fmt)
        return EXIT_OK
    emit_records([asdict(t) for t in report.tallies], fmt)
    return exit_code(partial=report.failed)
