"""Command line entry point: ``main`` runs the ``sentinel`` group and maps errors to exit codes."""

from __future__ import annotations

import itertools
import sys

import click

# Each import registers its commands on the root group.
from sentinel.cli import (
    config_cmd,  # noqa: F401
    deliver,  # noqa: F401
    demo_cmd,  # noqa: F401
    detect,  # noqa: F401
    event,  # noqa: F401
    export_cmd,  # noqa: F401
    ingest,  # noqa: F401
    ingest_gcs,  # noqa: F401
    jobs,  # noqa: F401
    report_cmd,  # noqa: F401
    scan,  # noqa: F401
    sql,  # noqa: F401
)
from sentinel.cli.app import root
from sentinel.errors import EXIT_ERROR, EXIT_USAGE, SentinelError
from sentinel.output import dumps


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns (and, as a console script, exits with) a documented exit code."""
    args = sys.argv[1:] if argv is None else argv
    try:
        result = root.main(args=args, prog_name="sentinel", standalone_mode=False)
    except SentinelError as exc:
        _report(exc, args)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.UsageError as exc:
        exc.show()
        return EXIT_USAGE
    except click.Abort:
        click.echo("aborted", err=True)
        return EXIT_ERROR
    except click.ClickException as exc:
        exc.show()
        return EXIT_ERROR
    return int(result) if isinstance(result, int) else 0


def _report(exc: SentinelError, args: list[str]) -> None:
    json_formats = ("json", "ndjson")
    wants_json = (
        "--json" in args
        or any(a in ("--format=json", "--format=ndjson") for a in args)
        or any(a == "--format" and b in json_formats for a, b in itertools.pairwise(args))
    )
    if wants_json:
        click.echo(dumps(exc.as_dict()), err=True)
        return
    click.echo(f"error: {exc.message}", err=True)
    if exc.hint:
        click.echo(f"hint: {exc.hint}", err=True)


def run() -> None:
    sys.exit(main())
