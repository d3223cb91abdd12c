"""The root ``sentinel`` command, its global options and what every command shares.

Command modules in this package attach themselves to ``root``; a command body parses its
arguments, calls the library and renders, and returns an exit code (``errors.EXIT_*``).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click

from sentinel import config as config_mod
from sentinel import logs
from sentinel.errors import EXIT_OK, EXIT_PARTIAL
from sentinel.output import FORMATS, Format, render, render_records
from sentinel.store import Store

F = TypeVar("F", bound=Callable[..., Any])

EXIT_CODES_HELP = """\b
Exit codes:
  0  success
  1  error (nothing, or only what was committed before it, was done)
  2  usage error (bad arguments or options)
  3  partial success (some input quarantined, a rule failed, or a delivery failed)
  4  another sentinel run holds the lock"""


@dataclass
class AppContext:
    config_path: str | None
    db_override: str | None
    log_level: str
    environ: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    _config: config_mod.Config | None = None

    @property
    def config(self) -> config_mod.Config:
        if self._config is None:
            path = config_mod.find_config_path(self.config_path, self.environ)
            self._config = config_mod.load(path, self.environ)
        return self._config

    @property
    def db_path(self) -> str:
        return self.db_override or self.environ.get("SENTINEL_DB") or self.config.store.path

    def open_store(self, *, read_only: bool = False) -> Store:
        store_cfg = self.config.store
        return Store.open(
            self.db_path,
            read_only=read_only,
            memory_limit=store_cfg.memory_limit,
            threads=store_cfg.threads,
        )


pass_app = click.make_pass_decorator(AppContext)


def output_options(func: F) -> F:
    """``--format table|json|ndjson|csv`` and ``--json`` for every command that prints data."""

    @click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help="Output format; json/ndjson/csv are for machines.",
    )
    @click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
    @functools.wraps(func)
    def wrapper(*args: Any, fmt: Format, as_json: bool, **kwargs: Any) -> Any:
        return func(*args, fmt="json" if as_json else fmt, **kwargs)

    return wrapper  # type: ignore[return-value]


def emit(columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: Format) -> None:
    render(columns, rows, fmt, sys.stdout)


def emit_records(records: Sequence[dict[str, Any]], fmt: Format) -> None:
    render_records(records, fmt, sys.stdout)


def exit_code(*, partial: bool) -> int:
    return EXIT_PARTIAL if partial else EXIT_OK


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EXIT_CODES_HELP,
)
@click.option(
    "--config",
    "config_path",
    metavar="PATH",
    help="Config file (default: $SENTINEL_CONFIG, then ./sentinel.toml, then built-in defaults).",
)
@click.option(
    "--db", "db", metavar="PATH", help="DuckDB file (default: $SENTINEL_DB, then store.path)."
)
@click.option(
    "--log-level",
    type=click.Choice(logs.LEVELS),
    default="info",
    show_default=True,
    help="Logs go to stderr as JSON lines (readable text on a terminal).",
)
@click.version_option(package_name="sentinel-weights", prog_name="sentinel")
@click.pass_context
def root(ctx: click.Context, config_path: str | None, db: str | None, log_level: str) -> None:
    """Sentinel: security analytics for the buckets that hold model weights.

    Sentinel loads object-access logs (AWS CloudTrail S3 data events, GCS audit logs) into one
    DuckDB file, runs detection rules over them, scans Loki for leaked secrets and prompts, and
    delivers findings to your SIEM.

    \b
    Start here:
      sentinel demo                          generate data, run the pipeline, show findings
      sentinel config check                  validate sentinel.toml
      sentinel ingest cloudtrail --path DIR  load CloudTrail files from a directory
      sentinel detect                        run the rules over what was loaded
      sentinel findings --severity high      what needs a look
      sentinel sql "SELECT * FROM v_bytes_by_actor_hour LIMIT 10"
      sentinel run weights                   one scheduled job (what a CronJob calls)
    """
    logs.configure(log_level)
    ctx.obj = AppContext(config_path=config_path, db_override=db, log_level=log_level)
