"""``sentinel scan loki|file`` and ``sentinel purge loki|status``: leak detection and cleanup."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import click

from sentinel import purge as purge_mod
from sentinel import scan as scan_mod
from sentinel.cli.app import AppContext, emit_records, exit_code, output_options, pass_app, root
from sentinel.config import Config, LokiSource
from sentinel.errors import EXIT_ERROR, EXIT_OK, ConfigError, Problem, SentinelError, UsageError
from sentinel.loki import LokiClient
from sentinel.output import Format
from sentinel.timeutil import utcnow


def fingerprint_key(config: Config) -> bytes:
    ref = config.scan.fingerprint_key
    if ref is None:
        raise ConfigError(
            [Problem(config.origin or "sentinel.toml", None, "scan.fingerprint_key is not set")],
            hint='add [scan] fingerprint_key = { env = "SENTINEL_FINGERPRINT_KEY" } and export '
            "a random value (python -c 'import secrets; print(secrets.token_hex(32))')",
        )
    return config.secret(ref).encode()


def loki_client(config: Config, src: LokiSource) -> LokiClient:
    return LokiClient(
        src.url,
        tenant=src.tenant,
        token=config.secret(src.token) if src.token else None,
        username=src.username,
        password=config.secret(src.password) if src.password else None,
        delete_url=src.delete_url,
        timeout=src.timeout_seconds,
    )


def _sources(config: Config, names: tuple[str, ...]) -> list[LokiSource]:
    sources = [s for s in config.sources.loki if not names or s.label in names or s.name in names]
    if not sources:
        raise UsageError(
            "no matching [[sources.loki]] in the configuration"
            + (f" (asked for {', '.join(names)})" if names else "")
        )
    return sources


@root.group()
def scan() -> None:
    """Find leaked secrets and LLM prompts in logs (Loki streams or files).

    Findings carry a masked preview and a keyed fingerprint, never what leaked; log lines are
    never written to disk. Requires scan.fingerprint_key in sentinel.toml.

    \b
    Examples:
      sentinel scan loki                       every [[sources.loki]], from its watermark
      sentinel scan file app.log --format ndjson
      sentinel sql "SELECT * FROM v_leaks LIMIT 20"
    """


@scan.command("loki")
@click.option("--source", "names", multiple=True, help="Only this source (name); repeatable.")
@click.option("--since", help="Replay from this time (ISO 8601 or 6h/2d ago); keeps watermarks.")
@click.option("--until", help="Replay up to this time; keeps watermarks.")
@output_options
@pass_app
def scan_loki(
    app: AppContext, names: tuple[str, ...], since: str | None, until: str | None, fmt: Format
) -> int:
    """Scan every [[sources.loki]] from its watermark (minus the overlap) to now minus the lag.

    \b
    Examples:
      sentinel scan loki
      sentinel scan loki --source gateway --since 2026-11-28T00:00:00Z --until 6h
      sentinel sql "SELECT * FROM v_leak_fingerprints WHERE streams > 1"
    """
    config = app.config
    settings = scan_mod.Settings.from_config(config.scan, fingerprint_key(config))
    now_ns = time.time_ns()
    since_ns = scan_mod.parse_time(since, now_ns) if since else None
    until_ns = scan_mod.parse_time(until, now_ns) if until else None
    results = []
    with app.open_store() as store:
        for src in _sources(config, names):
            client = loki_client(config, src)
            try:
                result = scan_mod.scan_loki(
                    store,
                    config,
                    src,
                    client,
                    settings,
                    now_ns=now_ns,
                    since_ns=since_ns,
                    until_ns=until_ns,
                )
            except SentinelError as exc:
                result = scan_mod.SourceResult(src.label, error=exc.message)
            finally:
                client.close()
            results.append(result)
    emit_records([vars(r) for r in results], fmt)
    if all(r.error for r in results):
        return EXIT_ERROR
    return exit_code(partial=any(r.error for r in results))


@scan.command("file")
@click.argument("path", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--canary", "canaries", multiple=True, help="Extra canary string; repeatable.")
@click.option("--no-prompts", is_flag=True, help="Only secrets, no prompt-leak detectors.")
@output_options
@pass_app
def scan_file(
    app: AppContext, path: str, canaries: tuple[str, ...], no_prompts: bool, fmt: Format
) -> int:
    """Scan a plain or JSON-lines log file ('-' for stdin) with the same detectors.

    Rows carry line (1-based), rule_id, detector, severity, confidence, preview (masked) and
    fingerprint. Nothing is stored.

    \b
    Examples:
      sentinel scan file /var/log/gateway.log
      kubectl logs deploy/vllm | sentinel scan file - --format ndjson
    """
    config = app.config
    settings = scan_mod.Settings.from_config(
        config.scan, fingerprint_key(config), prompts=not no_prompts
    )
    if canaries:
        settings = dataclasses.replace(settings, canaries=settings.canaries + canaries)
    if path == "-":
        rows = list(scan_mod.scan_file(sys.stdin.buffer, settings))
    else:
        try:
            with Path(path).open("rb") as stream:
                rows = list(scan_mod.scan_file(stream, settings))
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror}") from exc
    if rows or fmt != "table":
        emit_records(rows, fmt)
    else:
        click.echo("no leaks found")
    return EXIT_OK


@root.group()
def purge() -> None:
    """Delete leaked lines from Loki (prepare, then --execute), and follow the requests.

    \b
    Examples:
      sentinel purge loki --execute
      sentinel purge status --refresh
    """


@purge.command("loki")
@click.option("--execute", is_flag=True, help="File the prepared requests with Loki.")
@output_options
@pass_app
def purge_loki(app: AppContext, execute: bool, fmt: Format) -> int:
    """Prepare one delete request per leak finding; --execute files them.

    Each request names the exact stream and a millisecond window around the leaking lines,
    never the secret. Filing checks Loki's list first, so a retry never files twice. Loki hides
    matching lines within minutes and removes them after delete_request_cancel_period (24h).

    \b
    Examples:
      sentinel purge loki              # prepare and show
      sentinel purge loki --execute    # file with Loki
      sentinel purge status --refresh
    """
    config = app.config
    now = utcnow()
    with app.open_store() as store:
        purge_mod.prepare(store, now=now)
        if execute:
            with _Clients(config) as clients:
                rows = purge_mod.execute(store, clients, now=now)
        else:
            rows = purge_mod.status(store)
    emit_records(rows, fmt)
    problems = any(r["status"] in ("failed", "unavailable") for r in rows) if execute else False
    return exit_code(partial=problems)


@purge.command("status")
@click.option("--refresh", is_flag=True, help="Ask Loki for the current status first.")
@output_options
@pass_app
def purge_status(app: AppContext, refresh: bool, fmt: Format) -> int:
    """Show purge requests: prepared, filed (with Loki's id and status), unavailable, failed.

    With --refresh, Loki's delete-request list is read first, so filed requests show whether
    Loki has processed them yet.

    \b
    Examples:
      sentinel purge status
      sentinel purge status --refresh --json
    """
    now = utcnow()
    with app.open_store(read_only=not refresh) as store:
        if refresh:
            with _Clients(app.config) as clients:
                purge_mod.refresh(store, clients, now=now)
        rows = purge_mod.status(store)
    emit_records(rows, fmt)
    return EXIT_OK


class _Clients:
    """Loki clients per source label, made on first use and closed together."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.by_label = {s.label: s for s in config.sources.loki}
        self.cache: dict[str, LokiClient] = {}

    def __call__(self, label: str) -> LokiClient | None:
        if label not in self.by_label:
            return None
        if label not in self.cache:
            self.cache[label] = loki_client(self.config, self.by_label[label])
        return self.cache[label]

    def __enter__(self) -> _Clients:
        return self

    def __exit__(self, *exc: object) -> None:
        for client in self.cache.values():
            client.close()
