"""The docs that describe the CLI and the quick start stay true."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_cli_reference_is_generated_from_help() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "docs" / "gen_cli_reference.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_readme_opens_with_the_two_commands() -> None:
    head = (REPO / "README.md").read_text().splitlines()[:12]
    assert any(line.startswith("make demo") for line in head)
    assert any(line.startswith("make test") for line in head)


def test_ci_runs_the_readme_test_command() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    assert "make test" in ci and "make lint" in ci
