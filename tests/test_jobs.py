"""Job files: parsing, validation with file and line, schedules, and the shipped set."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from sentinel.cli.jobs import command_problems
from sentinel.errors import ConfigError
from sentinel.jobs import load_jobs, parse_duration
from tests.conftest import REPO
from tests.ops_fixtures import write_job


# Commands the shipped jobs name that other branches add (ingest, detect, scan, deliver, purge).
# Once they are merged nothing here is missing and the test below checks every step for real.
def test_shipped_jobs_cover_the_whole_pipeline() -> None:
    jobs = load_jobs(REPO / "jobs")
    commands = {step.run for job in jobs for step in job.steps}
    assert {"ingest cloudtrail", "ingest gcs", "detect", "scan loki", "deliver", "purge loki"} <= (
        commands
    )
    for job in jobs:
        assert Path(job.path).stem == job.name
        assert job.steps[-1].on_failure == "stop"
        assert job.period_seconds() >= 15 * 60, "jobs more frequent than 15 min should be daemons"


def test_every_shipped_step_names_a_real_command() -> None:
    problems = [p for job in load_jobs(REPO / "jobs") for p in command_problems(job)]
    assert not problems, [str(p) for p in problems]


def test_command_check_resolves_groups_and_options(tmp_path: Path) -> None:
    write_job(tmp_path, "good", [{"run": "config check"}, {"run": "sql 'SELECT 1' --json"}])
    write_job(tmp_path, "bad", [{"run": "config"}, {"run": "sql --bogus 'SELECT 1'"}])
    jobs = {job.name: job for job in load_jobs(tmp_path)}
    assert command_problems(jobs["good"]) == []
    messages = [p.message for p in command_problems(jobs["bad"])]
    assert "step 1 ('config'): 'sentinel config' needs a subcommand" in messages[0]
    assert "No such option '--bogus'" in messages[1]


def test_every_problem_is_reported_with_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "broken.toml").write_text(
        'name = "broken"\n'
        'schedule = "61 * * * *"\n'
        "colour = 3\n"
        "steps = [\n"
        '  { run = "detect", timeout = "soon" },\n'
        '  { run = "deliver", on_failure = "panic" },\n'
        "]\n",
        encoding="utf-8",
    )
    write_job(tmp_path, "other", [{"run": "run weights"}])
    with pytest.raises(ConfigError) as caught:
        load_jobs(tmp_path)
    text = [str(p) for p in caught.value.problems]
    broken = str(tmp_path / "broken.toml")
    assert any(t.startswith(f"{broken}:2: invalid schedule '61 * * * *'") for t in text)
    assert any(t.startswith(f"{broken}:3: unknown key 'colour'") for t in text)
    assert any("step 1: timeout must look like" in t for t in text)
    assert any("step 2: on_failure must be 'stop' or 'continue'" in t for t in text)
    assert any("a job cannot run 'run'" in t for t in text)


def test_name_must_match_file(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text(
        'name = "b"\nschedule = "* * * * *"\nsteps = [{ run = "detect" }]\n', encoding="utf-8"
    )
    with pytest.raises(ConfigError, match="must match the file name 'a'"):
        load_jobs(tmp_path)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("10m", 600),
        ("1h30m", 5400),
        ("2h", 7200),
        ("", None),
        ("5", None),
        ("m", None),
        ("1d", None),
    ],
)
def test_parse_duration(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


def test_schedule_next_runs_and_period(tmp_path: Path) -> None:
    write_job(tmp_path, "quarter", [{"run": "detect"}], schedule="*/15 * * * *")
    write_job(tmp_path, "daily", [{"run": "detect"}], schedule="30 6 * * *")
    jobs = {job.name: job for job in load_jobs(tmp_path)}
    now = dt.datetime(2026, 3, 1, 10, 7, tzinfo=dt.UTC)
    runs = jobs["quarter"].next_runs(now, 3)
    assert [r.strftime("%H:%M") for r in runs] == ["10:15", "10:30", "10:45"]
    assert jobs["quarter"].period_seconds(now) == 900
    assert jobs["daily"].period_seconds(now) == 86400
    assert jobs["daily"].steps[0].timeout_seconds == 1800  # the default


def test_jobs_list_shows_next_runs(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = cli("jobs", "list", "--jobs-dir", str(REPO / "jobs"), "--json")
    assert result.exit_code == 0, result.stderr
    rows = {row["job"]: row for row in json.loads(result.stdout)}
    assert set(rows) == {"weights", "logs", "purge"}
    assert rows["weights"]["steps"] == "ingest cloudtrail -> ingest gcs -> detect -> deliver"
    next_run = dt.datetime.fromisoformat(rows["weights"]["next_run"].rstrip("Z"))
    assert next_run.minute % 15 == 0
    assert (
        dt.timedelta(0)
        < next_run - dt.datetime.now(dt.UTC).replace(tzinfo=None)
        <= (dt.timedelta(minutes=15))
    )


def test_jobs_dir_is_relative_to_the_config_file(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    conf = tmp_path / "etc"
    write_job(conf / "myjobs", "hello", [{"run": "config check"}])
    (conf / "sentinel.toml").write_text('[metrics]\njobs_dir = "myjobs"\n', encoding="utf-8")
    result = cli("--config", str(conf / "sentinel.toml"), "jobs", "check")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "1 job(s) ok: hello"
    result = cli("jobs", "list", "--jobs-dir", str(tmp_path / "nowhere"))
    assert result.exit_code == 1
    assert "jobs directory not found" in result.stderr


def test_every_metrics_key_is_documented_and_the_example_parses() -> None:
    from dataclasses import fields

    from sentinel import config
    from sentinel.config import MetricsConfig

    example = (REPO / "sentinel.example.toml").read_text(encoding="utf-8")
    text = example[example.index("[metrics]") :]  # the last section of the example
    for f in fields(MetricsConfig):
        assert f"# {f.name} = " in text, f"metrics.{f.name} is not in sentinel.example.toml"
    uncommented = "\n".join(
        line[2:] if line.startswith("# ") and " = " in line.split("#")[1][:40] else line
        for line in text.splitlines()
    )
    cfg = config.loads(uncommented, environ={"SENTINEL_SD_TOKEN": "x"})
    assert cfg.metrics.pushgateway.startswith("http://")
    assert cfg.metrics.sd_token == config.SecretRef(env="SENTINEL_SD_TOKEN")
