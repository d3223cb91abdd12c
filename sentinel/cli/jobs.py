"""``sentinel run JOB``, ``sentinel schedule`` and ``sentinel jobs list|check|render-k8s``."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import click

from sentinel import jobs as jobs_mod
from sentinel import k8s, logs, metrics, runner
from sentinel.cli.app import AppContext, emit, output_options, pass_app, root
from sentinel.errors import EXIT_ERROR, EXIT_OK, ConfigError, Problem, UsageError
from sentinel.k8s import Settings
from sentinel.output import Format, dumps, to_jsonable

log = logs.get(__name__)

jobs_dir_option = click.option(
    "--jobs-dir",
    metavar="DIR",
    help="Directory of job files (default: metrics.jobs_dir, relative to the config file).",
)


def resolve_jobs_dir(app: AppContext, override: str | None) -> Path:
    if override:
        return Path(override)
    configured = Path(app.config.metrics.jobs_dir)
    if configured.is_absolute() or not app.config.origin:
        return configured
    return Path(app.config.origin).parent / configured


def global_args(app: AppContext) -> list[str]:
    """What every step inherits: the same config, database and log level as this process."""
    args = ["--db", app.db_path, "--log-level", app.log_level]
    return ["--config", app.config_path, *args] if app.config_path else args


def command_problems(job: jobs_mod.Job) -> list[Problem]:
    """Steps whose command line click cannot resolve to a real command with valid options."""
    problems = []
    for number, step in enumerate(job.steps, start=1):
        message = _resolve(step.args)
        if message:
            problems.append(Problem(job.path, None, f"step {number} ({step.run!r}): {message}"))
    return problems


def _resolve(args: list[str]) -> str | None:
    ctx = click.Context(root, info_name="sentinel")
    command: click.Command = root
    rest = list(args)
    while isinstance(command, click.Group):
        if not rest or rest[0].startswith("-"):
            return f"{ctx.command_path!r} needs a subcommand"
        sub = command.get_command(ctx, rest[0])
        if sub is None:
            return f"no such command {rest[0]!r} under {ctx.command_path!r}"
        command = sub
        ctx = click.Context(sub, info_name=rest.pop(0), parent=ctx)
    try:
        command.make_context(ctx.info_name, rest, parent=ctx.parent)
    except click.exceptions.Exit:
        return None
    except click.UsageError as exc:
        return exc.format_message()
    return None


def load_valid_jobs(app: AppContext, override: str | None) -> tuple[jobs_mod.Job, ...]:
    return jobs_mod.load_jobs(resolve_jobs_dir(app, override))


@root.group("jobs")
def jobs_group() -> None:
    """Job definitions in jobs/*.toml: list them, check them, render their Kubernetes CronJobs."""


@jobs_group.command("list")
@jobs_dir_option
@output_options
@pass_app
def list_jobs(app: AppContext, jobs_dir: str | None, fmt: Format) -> int:
    """List jobs with their schedule, next run (UTC) and steps.

    \b
    Example:
      sentinel jobs list
      sentinel jobs list --json | jq '.[].next_run'
    """
    now = dt.datetime.now(dt.UTC)
    rows = []
    for job in load_valid_jobs(app, jobs_dir):
        nxt = job.next_runs(now, 1)
        rows.append(
            (
                job.name,
                job.schedule,
                nxt[0].astimezone(dt.UTC).replace(tzinfo=None) if nxt else None,
                " -> ".join(step.run for step in job.steps),
            )
        )
    emit(["job", "schedule", "next_run", "steps"], rows, fmt)
    return EXIT_OK


@jobs_group.command("check")
@jobs_dir_option
@pass_app
def check_jobs(app: AppContext, jobs_dir: str | None) -> int:
    """Validate every job file and check that every step names a real sentinel command.

    \b
    Example:
      sentinel jobs check --jobs-dir jobs/
    """
    found = load_valid_jobs(app, jobs_dir)
    problems = [p for job in found for p in command_problems(job)]
    if problems:
        raise ConfigError(problems, hint="`sentinel --help` lists the commands a step can run")
    click.echo(f"{len(found)} job(s) ok: {', '.join(job.name for job in found)}")
    return EXIT_OK


@root.command("run")
@click.argument("job_name", metavar="JOB")
@jobs_dir_option
@click.option(
    "--lock-wait",
    type=float,
    metavar="SECONDS",
    help="How long to wait for a running job to finish (default: metrics.lock_wait_seconds).",
)
@click.option(
    "--no-export",
    is_flag=True,
    help="Do not write the metrics textfile or push to the Pushgateway (the scheduler uses this).",
)
@output_options
@pass_app
def run_cmd(
    app: AppContext,
    *,
    job_name: str,
    jobs_dir: str | None,
    lock_wait: float | None,
    no_export: bool,
    fmt: Format,
) -> int:
    """Run one job from jobs/: its steps in order, in this process. What a CronJob calls.

    A lock beside the database keeps two runs from writing at once: a second run waits up to
    --lock-wait seconds, then exits 4. A failed step stops the job unless the step says
    on_failure = "continue" (then the job ends partial, exit 3). SIGTERM lets the running step
    finish and skips the rest (exit 1). Metrics go to metrics.textfile_dir and/or
    metrics.pushgateway.

    \b
    Examples:
      sentinel run weights
      sentinel --config /etc/sentinel/sentinel.toml run logs --json
    """
    job = jobs_mod.find_job(load_valid_jobs(app, jobs_dir), job_name)
    if job is None:
        raise UsageError(f"no job named {job_name!r}", hint="`sentinel jobs list` shows them")
    unknown = command_problems(job)
    if unknown:
        raise ConfigError(unknown, hint="`sentinel jobs check` validates every job")
    from sentinel.cli import main

    cfg = app.config.metrics
    wait = cfg.lock_wait_seconds if lock_wait is None else lock_wait
    lock = runner.JobLock(runner.lock_path(app.db_path), owner=f"job {job.name} pid {os.getpid()}")
    with lock.held(wait):
        report = runner.run_job(job, main, app.db_path, global_args=global_args(app))
        state = metrics.read_state(app.db_path)
    if not no_export:
        metrics.export_run(report, state, app.config.metrics, period_seconds=job.period_seconds())
    _render(report, state, fmt)
    return report.exit_code


def _render(report: runner.RunReport, state: list[metrics.Sample], fmt: Format) -> None:
    if fmt in ("json", "ndjson"):
        data = report.as_dict()
        data["state"] = metrics.as_jsonable(state)
        click.echo(dumps(to_jsonable(data), indent=2 if fmt == "json" else None))
        return
    rows: list[tuple[object, ...]] = [
        (s.command, s.outcome, s.exit_code, round(s.duration_seconds, 3)) for s in report.steps
    ]
    rows += [(command, "skipped", None, None) for command in report.skipped]
    emit(["step", "outcome", "exit_code", "seconds"], rows, fmt)
    if fmt == "table":
        click.echo(
            f"job {report.job}: {report.outcome} (exit {report.exit_code}) "
            f"in {report.duration_seconds:.1f}s"
        )


@root.command("schedule")
@jobs_dir_option
@click.option("--listen", metavar="HOST:PORT", help="Serve /healthz, /metrics, /sd here "
              "(default: metrics.listen).")  # fmt: skip
@click.option("--run-now", is_flag=True, help="Run every job once at start, then on schedule.")
@pass_app
def schedule_cmd(
    app: AppContext, *, jobs_dir: str | None, listen: str | None, run_now: bool
) -> int:
    """Run every job in jobs/ on its cron schedule until SIGTERM; serve metrics over HTTP.

    Each run is a child `sentinel run JOB` (same lock, timeouts and history as a CronJob). Runs
    never overlap; missed runs coalesce into one when within metrics.misfire_grace_seconds.
    SIGTERM lets the running step finish and commit, then exits 0. Endpoints: /healthz,
    /metrics, and /sd, the scheduler's own target in Prometheus http_sd_configs format (bearer
    token required when metrics.sd_token is set).

    \b
    Examples:
      sentinel schedule
      sentinel --config /etc/sentinel/sentinel.toml schedule --listen 0.0.0.0:9464
    """
    from sentinel.httpserver import MetricsServer, advertise_address
    from sentinel.scheduler import Scheduler, serve

    cfg = app.config.metrics
    found = load_valid_jobs(app, jobs_dir)
    problems = [p for job in found for p in command_problems(job)]
    if problems:
        raise ConfigError(problems, hint="`sentinel jobs check` validates every job")
    resolved_dir = str(resolve_jobs_dir(app, jobs_dir).resolve())
    scheduler = Scheduler(
        found,
        child_args=global_args(app),
        run_args=["--jobs-dir", resolved_dir, "--lock-wait", str(cfg.lock_wait_seconds)],
        db_path=app.db_path,
        misfire_grace_seconds=cfg.misfire_grace_seconds,
    )
    address = listen or cfg.listen
    token = app.config.secret(cfg.sd_token) if cfg.sd_token else None
    advertise = cfg.advertise or advertise_address(address)
    server = MetricsServer(
        address,
        scheduler.registry,
        health=scheduler.health,
        targets=lambda: [{"targets": [advertise], "labels": {"sentinel_role": "scheduler"}}],
        sd_token=token,
    )
    serve(scheduler, server, run_now=run_now)
    return EXIT_OK


@jobs_group.command("render-k8s")
@jobs_dir_option
@click.option("--out", "out_dir", default="infra/k8s", show_default=True, metavar="DIR",
              help="Where to write common.yaml, cronjobs.yaml and scheduler.yaml.")  # fmt: skip
@click.option("--image", default=Settings.image, show_default=True, help="Container image.")
@click.option("--namespace", default=Settings.namespace, show_default=True)
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if the files are out of date.")
@pass_app
def render_k8s(
    app: AppContext, *, jobs_dir: str | None, out_dir: str, image: str, namespace: str, check: bool
) -> int:
    """Render Kubernetes manifests from jobs/: one CronJob per job (concurrencyPolicy Forbid),
    the scheduler Deployment and Service, and the shared PVC, ServiceAccount and NetworkPolicy.

    Apply common.yaml plus EITHER cronjobs.yaml OR scheduler.yaml.

    \b
    Examples:
      sentinel jobs render-k8s --out infra/k8s
      sentinel jobs render-k8s --check          # in CI: are the committed manifests current?
    """
    files = k8s.render(load_valid_jobs(app, jobs_dir), Settings(image=image, namespace=namespace))
    out = Path(out_dir)
    stale = [name for name, text in files.items() if _read(out / name) != text]
    if check:
        if stale:
            click.echo(
                f"out of date: {', '.join(stale)} (run `sentinel jobs render-k8s`)", err=True
            )
            return EXIT_ERROR
        click.echo(f"{len(files)} manifest file(s) up to date in {out}")
        return EXIT_OK
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
    click.echo(f"wrote {len(files)} file(s) to {out} ({len(stale)} changed)")
    return EXIT_OK


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.exists() else None
