"""The command line: help that teaches, output formats, exit codes, read-only SQL."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import click
import pytest

from sentinel.cli.app import root
from tests.cloudtrail_files import body, key_for, sample_records, write


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, command in group.commands.items():
        path = (*prefix, name)
        out.append(path)
        if isinstance(command, click.Group):
            out.extend(_commands(command, path))
    return out


@pytest.mark.parametrize("path", _commands(root), ids=" ".join)
def test_every_command_has_help_that_teaches(cli, path: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    result = cli(*path, "--help")
    assert result.exit_code == 0
    assert len(result.stdout.strip().splitlines()) >= 3
    command = root
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    if not isinstance(command, click.Group):
        assert "Example" in result.stdout, f"`sentinel {' '.join(path)} --help` shows no example"


def test_root_help_documents_exit_codes(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli("--help")
    for code in ("0  success", "2  usage error", "3  partial success"):
        assert code in result.stdout


@pytest.fixture
def db(tmp_path: Path, cli) -> str:  # type: ignore[no-untyped-def]
    write(
        tmp_path / "trail",
        key_for(__import__("datetime").date(2025, 3, 1), 1),
        body(sample_records()),
    )
    path = str(tmp_path / "s.duckdb")
    assert (
        cli("--db", path, "ingest", "cloudtrail", "--path", str(tmp_path / "trail")).exit_code == 0
    )
    return path


def test_sql_formats(cli, db: str) -> None:  # type: ignore[no-untyped-def]
    query = "SELECT action, count(*) AS n FROM access_events GROUP BY 1 ORDER BY 1"
    as_json = json.loads(cli("--db", db, "sql", query, "--json").stdout)
    assert {"action": "delete", "n": 3} in as_json
    ndjson = [
        json.loads(line)
        for line in cli("--db", db, "sql", query, "--format", "ndjson").stdout.splitlines()
    ]
    assert ndjson == as_json
    rows = list(
        csv.DictReader(io.StringIO(cli("--db", db, "sql", query, "--format", "csv").stdout))
    )
    assert [(r["action"], int(r["n"])) for r in rows] == [(r["action"], r["n"]) for r in as_json]
    table = cli("--db", db, "sql", query).stdout
    assert table.splitlines()[0].split() == ["action", "n"] and "(5 rows)" in table


def test_sql_from_file_and_stdin_views(cli, db: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sql_file = tmp_path / "q.sql"
    sql_file.write_text("SELECT count(*) AS n FROM v_reads")
    result = cli("--db", db, "sql", "-f", str(sql_file), "--json")
    assert json.loads(result.stdout) == [{"n": 6}]  # 5 successful GetObjects + 1 copy source


def test_sql_is_read_only(cli, db: str) -> None:  # type: ignore[no-untyped-def]
    result = cli("--db", db, "sql", "DELETE FROM access_events")
    assert result.exit_code == 1
    assert "read-only" in result.stderr.lower()
    assert json.loads(
        cli("--db", db, "sql", "SELECT count(*) AS n FROM access_events", "--json").stdout
    ) == [{"n": 13}]


def test_usage_errors_exit_2(cli, db: str) -> None:  # type: ignore[no-untyped-def]
    assert cli("--db", db, "sql").exit_code == 2
    assert cli("--db", db, "sql", "--format", "yaml", "SELECT 1").exit_code == 2
    assert cli("no-such-command").exit_code == 2
    assert (
        cli("--db", db, "ingest", "cloudtrail", "--since", "yesterday-ish", "--path", ".").exit_code
        == 2
    )


def test_errors_as_json_when_asked(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = cli("--db", str(tmp_path / "none.duckdb"), "sql", "SELECT 1", "--json")
    assert result.exit_code == 1
    error = json.loads(result.stderr.strip().splitlines()[-1])
    assert error["error"] == "StoreError" and "no database" in error["message"]


def test_config_check(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    good = tmp_path / "good.toml"
    good.write_text('[watch]\nbuckets = ["a"]\n')
    ok = cli("--config", str(good), "config", "check", "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)[0]["watched_buckets"] == 1
    bad = tmp_path / "bad.toml"
    bad.write_text('[watch]\nbucket = ["a"]\n[store]\nthreads = "two"\n')
    result = cli("--config", str(bad), "config", "check")
    assert result.exit_code == 1
    assert f"{bad}:2: watch.bucket: unknown key (did you mean 'buckets'?)" in result.stderr
    assert f"{bad}:4: store.threads: expected int, got str" in result.stderr


def test_missing_source_is_a_usage_error_with_a_hint(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = cli("--db", str(tmp_path / "x.duckdb"), "ingest", "cloudtrail")
    assert result.exit_code == 2
    assert "no CloudTrail source configured" in result.stderr and "hint:" in result.stderr


def test_event_show_from_database_and_from_file(cli, db: str) -> None:  # type: ignore[no-untyped-def]
    records = {r["eventID"]: r for r in sample_records()}
    delete_id = next(i for i, r in records.items() if r["eventName"] == "DeleteObjects")
    read_id = next(i for i, r in records.items() if r["eventName"] == "HeadObject")
    kept = json.loads(cli("--db", db, "event", "show", delete_id).stdout)
    assert kept["from"] == "database" and kept["record"] == records[delete_id]
    fetched = json.loads(cli("--db", db, "event", "show", read_id).stdout)
    assert fetched["from"].endswith(".json.gz") and fetched["record"] == records[read_id]
    assert cli("--db", db, "event", "show", "nope").exit_code == 2
