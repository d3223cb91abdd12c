"""Shared fixtures: real DuckDB files in tmp_path and the CLI run in-process or as a process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sentinel.cli import main
from sentinel.store import Store

REPO = Path(__file__).resolve().parent.parent


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "sentinel.duckdb"


@pytest.fixture
def store(db_path: Path) -> Iterator[Store]:
    with Store.open(db_path) as s:
        yield s


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """Run ``sentinel ARGS`` in-process from tmp_path with no SENTINEL_* variables set."""
    monkeypatch.chdir(tmp_path)
    for name in ("SENTINEL_CONFIG", "SENTINEL_DB"):
        monkeypatch.delenv(name, raising=False)

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run


def sentinel_process_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for running ``python -m sentinel`` as a real subprocess from this checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


def run_sentinel(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sentinel", *args],
        cwd=cwd,
        env=sentinel_process_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
