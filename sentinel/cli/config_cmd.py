"""``sentinel config check``: validate the configuration and say what it will do."""

from __future__ import annotations

import click

from sentinel.cli.app import AppContext, emit_records, output_options, pass_app, root
from sentinel.errors import EXIT_OK
from sentinel.output import Format


@root.group("config")
def config_group() -> None:
    """Inspect and validate sentinel.toml."""


@config_group.command("check")
@output_options
@pass_app
def check(app: AppContext, fmt: Format) -> int:
    """Validate the config file: unknown keys, wrong types and literal secrets are all reported
    at once with file and line. Exits 1 when anything is wrong.

    \b
    Example:
      sentinel --config sentinel.toml config check
    """
    cfg = app.config
    sources = cfg.sources
    summary = {
        "config": cfg.origin or "(built-in defaults)",
        "database": app.db_path,
        "cloudtrail_sources": len(sources.cloudtrail),
        "gcs_sources": len(sources.gcs_audit),
        "loki_sources": len(sources.loki),
        "watched_buckets": len(cfg.watch.buckets),
        "hydrator_globs": len(cfg.hydrators.actors),
        "tenants": len(cfg.tenants),
        "destinations": len(cfg.alerts.webhook),
        "status": "ok",
    }
    if fmt == "table":
        for key, value in summary.items():
            click.echo(f"{key:20} {value}")
    else:
        emit_records([summary], fmt)
    return EXIT_OK
