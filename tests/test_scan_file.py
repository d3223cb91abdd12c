"""`sentinel scan file`: plain and JSON-lines files and stdin, same detectors, safe rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import sentinel_process_env
from tests.leak_corpus import CANARY, negatives, positives

KEY = "f" * 40


def _setup(tmp_path: Path) -> tuple[Path, list[tuple[str, str, str]]]:
    (tmp_path / "sentinel.toml").write_text(
        f'[scan]\nfingerprint_key = {{ env = "FP_KEY" }}\ncanaries = ["{CANARY}"]\n'
    )
    planted = list(positives(seed=9, per_detector=1))
    lines = list(negatives())[:40]
    for i, (_, _, line) in enumerate(planted):
        lines.insert(2 * i + 1, line)
    log = tmp_path / "app.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return log, planted


def test_scan_file_reports_line_numbers_and_never_the_value(
    cli, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FP_KEY", KEY)
    log, planted = _setup(tmp_path)
    result = cli("scan", "file", str(log), "--json")
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    text = log.read_text().splitlines()
    by_line = {r["line"]: r for r in rows}
    for detector, value, line in planted:
        row = by_line[text.index(line) + 1]
        assert row["detector"] == detector
        assert row["rule_id"] in ("logs.secret_leak", "logs.prompt_leak")
        assert value not in result.stdout and value[-10:] not in result.stdout
    assert len(rows) == len(planted)
    assert set(rows[0]) >= {"line", "rule_id", "detector", "preview", "fingerprint"}


def test_scan_stdin_matches_file(cli, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FP_KEY", KEY)
    log, _ = _setup(tmp_path)
    from_file = json.loads(cli("scan", "file", str(log), "--json").stdout)
    proc = subprocess.run(
        [sys.executable, "-m", "sentinel", "scan", "file", "-", "--format", "ndjson"],
        input=log.read_bytes(),
        cwd=tmp_path,
        env=sentinel_process_env({"FP_KEY": KEY}),
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    from_stdin = [json.loads(x) for x in proc.stdout.decode().splitlines()]
    assert from_stdin == from_file


def test_scan_file_without_key_refuses(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "a.log").write_text("hello\n")
    result = cli("scan", "file", str(tmp_path / "a.log"))
    assert result.exit_code == 1
    assert "fingerprint_key" in result.stderr


def test_unknown_detector_names_are_config_errors(cli, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FP_KEY", KEY)
    (tmp_path / "sentinel.toml").write_text(
        '[scan]\nfingerprint_key = { env = "FP_KEY" }\ndisabled_detectors = ["github_tokens"]\n'
    )
    (tmp_path / "a.log").write_text("hello\n")
    result = cli("scan", "file", str(tmp_path / "a.log"))
    assert result.exit_code == 1
    assert "unknown detector 'github_tokens'" in result.stderr and "github_token" in result.stderr
