"""``sentinel detect``, ``sentinel findings`` (and ack/suppress/resolve), ``sentinel rules``."""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import Any

import click

from sentinel import detect as engine
from sentinel import findings as findings_lib
from sentinel.cli.app import AppContext, emit_records, exit_code, output_options, pass_app, root
from sentinel.config import SEVERITIES
from sentinel.errors import EXIT_ERROR, EXIT_OK
from sentinel.output import Format
from sentinel.rules import default_rules_dir, lint, load_dir
from sentinel.timeutil import parse_time

_rules_dir_option = click.option(
    "--rules-dir",
    metavar="DIR",
    help="Rule files (default: detect.rules_dir, then rules/ of this checkout).",
)


def _rules_dir(app: AppContext, option: str | None) -> Path:
    return Path(option or app.config.detect.rules_dir or default_rules_dir())


@root.command()
@click.option(
    "--rule", "rule_ids", multiple=True, metavar="ID", help="Run only this rule (repeatable)."
)
@click.option("--since", metavar="T", help="Replay from T (ISO-8601 or 24h, 7d); cursors stay.")
@click.option("--until", metavar="T", help="End of the replay (default: now).")
@_rules_dir_option
@output_options
@pass_app
def detect(
    app: AppContext,
    *,
    rule_ids: tuple[str, ...],
    since: str | None,
    until: str | None,
    rules_dir: str | None,
    fmt: Format,
) -> int:
    """Run detection rules over events loaded since each rule's cursor (plus a lookback for late
    events) and upsert findings. Finding ids are deterministic, so reruns update, never duplicate.
    A failing rule is reported and the others still run (exit 3).

    \b
    Examples:
      sentinel detect                                  # incremental, every enabled rule
      sentinel detect --rule weights.non_hydrator_read
      sentinel detect --since 2026-05-01 --until 2026-05-03   # replay; cursors do not move
      sentinel detect --since 7d --json
    """
    rules, problems = load_dir(_rules_dir(app, rules_dir))
    for problem in problems:
        click.echo(f"invalid rule: {problem}", err=True)
    with app.open_store() as store:
        result = engine.run_detect(
            store,
            app.config,
            rules=rules,
            rule_ids=rule_ids,
            since=parse_time(since) if since else None,
            until=parse_time(until) if until else None,
        )
    rows = [o.as_dict() for o in result.outcomes]
    emit_records(rows, fmt)
    return exit_code(partial=bool(result.failed or problems))


@root.group(invoke_without_command=True)
@click.option("--rule", "rule_id", metavar="ID", help="Only this rule id (glob allowed).")
@click.option("--severity", type=click.Choice(SEVERITIES), help="At least this severity.")
@click.option("--status", type=click.Choice(findings_lib.STATUSES), help="Only this status.")
@click.option("--since", metavar="T", help="Last seen at or after T (ISO-8601 or 24h, 7d).")
@click.option("--until", metavar="T", help="Last seen before T.")
@click.option("--actor", metavar="GLOB", help="Only findings whose actor matches.")
@click.option("--bucket", metavar="GLOB", help="Only findings whose bucket matches.")
@click.option("--limit", type=int, default=200, show_default=True)
@output_options
@pass_app
@click.pass_context
def findings(
    ctx: click.Context,
    app: AppContext,
    *,
    rule_id: str | None,
    severity: str | None,
    status: str | None,
    since: str | None,
    until: str | None,
    actor: str | None,
    bucket: str | None,
    limit: int,
    fmt: Format,
) -> int:
    """List findings, most severe and most recent first; or change their status with
    ack | suppress | resolve (who, when and why are recorded in finding_history).

    \b
    Examples:
      sentinel findings --status open --severity high
      sentinel findings --rule 'weights.*' --since 24h --json
      sentinel findings ack 3f2a... --reason "expected migration, ticket SEC-42"
    """
    if ctx.invoked_subcommand:
        return EXIT_OK
    where: list[str] = ["true"]
    params: list[Any] = []
    for column, pattern in (("rule_id", rule_id), ("actor", actor), ("bucket", bucket)):
        if pattern:
            where.append(f"{column} GLOB ?")
            params.append(pattern)
    if severity:
        where.append("list_position(?, severity) >= ?")
        params += [list(SEVERITIES), SEVERITIES.index(severity) + 1]
    if status:
        where.append("status = ?")
        params.append(status)
    if since:
        where.append("last_seen >= ?")
        params.append(parse_time(since))
    if until:
        where.append("last_seen < ?")
        params.append(parse_time(until))
    sql = (
        "SELECT finding_id, severity, status, rule_id, title, first_seen, last_seen,"
        " event_count, bytes"
        + (", actor, bucket, model, tenant, evidence" if fmt != "table" else "")
        + f" FROM findings WHERE {' AND '.join(where)}"
        " ORDER BY list_position(['critical','high','medium','low','info'], severity),"
        f" last_seen DESC LIMIT {int(limit)}"
    )
    with app.open_store(read_only=True) as store:
        rows = store.query(sql, params)
    for row in rows:
        if isinstance(row.get("evidence"), str):
            row["evidence"] = json.loads(row["evidence"])
    emit_records(rows, fmt)
    return EXIT_OK


def _status_command(name: str, status: str, verb: str) -> None:
    help_text = (
        f"{verb} findings by id, recording who, when and why in finding_history; the change is"
        " delivered to the SIEM like any other.\n\n\b\nExample:\n"
        f"  sentinel findings {name} f_0c9925f7a1b2c3d4e5f60718 --reason 'ticket SEC-42'"
    )

    @findings.command(name, help=help_text)
    @click.argument("finding_ids", nargs=-1, required=True, metavar="ID...")
    @click.option("--reason", required=True, help="Why (kept in finding_history).")
    @click.option("--by", default=None, help="Who (default: the current user).")
    @output_options
    @pass_app
    def command(
        app: AppContext, finding_ids: tuple[str, ...], reason: str, by: str | None, fmt: Format
    ) -> int:
        with app.open_store() as store:
            changed = engine.set_status(
                store,
                app.config,
                _expand(store, finding_ids),
                status,
                reason=reason,
                by=by or _user(),
            )
        emit_records(changed, fmt)
        return EXIT_OK


def _expand(store: Any, ids: tuple[str, ...]) -> list[str]:
    """Accept unambiguous id prefixes (as printed in tables)."""
    full = []
    for prefix in ids:
        rows = store.query(
            "SELECT finding_id FROM findings WHERE starts_with(finding_id, ?)", [prefix]
        )
        full.append(rows[0]["finding_id"] if len(rows) == 1 else prefix)
    return full


def _window_text(window: Any) -> str:
    return f"{int(window.total_seconds() // 3600)}h" if window else "none"


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry in some containers
        return "unknown"


_status_command("ack", "acknowledged", "Acknowledge")
_status_command("suppress", "suppressed", "Suppress")
_status_command("resolve", "resolved", "Resolve")
_status_command("reopen", "open", "Reopen")


@root.group()
def rules() -> None:
    """List, lint and test the detection rules in rules/."""


@rules.command("list")
@_rules_dir_option
@output_options
@pass_app
def rules_list(app: AppContext, rules_dir: str | None, fmt: Format) -> int:
    """List rules with severity, window, MITRE ids and whether they are enabled.

    \b
    Example:
      sentinel rules list
    """
    found, problems = load_dir(_rules_dir(app, rules_dir))
    disabled = set(app.config.detect.disabled_rules)
    rows = [
        {
            "rule_id": r.id,
            "severity": r.severity,
            "window": _window_text(engine.rule_window(r, app.config)),
            "mitre": ",".join(r.mitre),
            "enabled": r.enabled and r.id not in disabled,
            "cases": len(r.cases),
        }
        for r in found
    ]
    emit_records(rows, fmt)
    for problem in problems:
        click.echo(f"invalid rule: {problem}", err=True)
    return exit_code(partial=bool(problems))


@rules.command("lint")
@_rules_dir_option
@pass_app
def rules_lint(app: AppContext, rules_dir: str | None) -> int:
    """Check every rule file and report every problem with file and line (exit 1 if any).

    \b
    Example:
      sentinel rules lint
    """
    found, problems = lint(_rules_dir(app, rules_dir), app.config)
    for problem in problems:
        click.echo(str(problem))
    click.echo(f"{len(found)} rule(s), {len(problems)} problem(s)", err=True)
    return EXIT_ERROR if problems else EXIT_OK


@rules.command("test")
@click.option("--rule", "rule_ids", multiple=True, metavar="ID", help="Only this rule.")
@_rules_dir_option
@output_options
@pass_app
def rules_test(
    app: AppContext, rule_ids: tuple[str, ...], rules_dir: str | None, fmt: Format
) -> int:
    """Run every rule's positive and negative cases through the real engine and compare the
    whole findings (severity, title, dedupe key, counts, bytes...). Exit 1 on any failure.

    \b
    Examples:
      sentinel rules test
      sentinel rules test --rule weights.bytes_read_anomaly
    """
    from sentinel.testing import run_case

    found, problems = load_dir(_rules_dir(app, rules_dir))
    results = [
        run_case(rule, case)
        for rule in found
        if not rule_ids or rule.id in rule_ids
        for case in rule.cases
    ]
    rows = [
        {
            "rule_id": r.rule_id,
            "case": r.case,
            "result": "pass" if r.passed else "FAIL",
            "failures": "; ".join(r.failures),
        }
        for r in results
    ]
    emit_records(rows, fmt)
    for problem in problems:
        click.echo(f"invalid rule: {problem}", err=True)
    failed = sum(not r.passed for r in results)
    click.echo(f"{len(results) - failed} passed, {failed} failed", err=True)
    return EXIT_ERROR if failed or problems else EXIT_OK
