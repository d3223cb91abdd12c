"""Kill the ingest with SIGKILL at arbitrary moments; a rerun loses nothing and duplicates nothing."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sentinel.store import Store
from sentinel.synth import Scenario, write_trail
from tests.conftest import run_sentinel, sentinel_process_env


@pytest.fixture(scope="module")
def trail(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("trail")
    write_trail(root, Scenario(start=dt.datetime(2026, 3, 1), days=2, events_per_hour=400, seed=3))
    return root


def _config(tmp: Path, trail: Path, db: Path) -> Path:
    cfg = tmp / "sentinel.toml"
    cfg.write_text(
        f'[store]\npath = "{db}"\n[[sources.cloudtrail]]\npath = "{trail}"\nbatch_files = 4\n'
    )
    return cfg


def _snapshot(db: Path) -> tuple[int, int, int, int]:
    with Store.open(db, read_only=True) as store:
        row = store.columns_and_rows(
            "SELECT (SELECT count(*) FROM access_events),"
            " (SELECT count(DISTINCT event_id) FROM access_events),"
            " (SELECT count(*) FROM source_files),"
            " (SELECT count(*) FROM quarantine)"
        )[1][0]
    return (int(row[0]), int(row[1]), int(row[2]), int(row[3]))


def test_sigkill_at_any_point_then_rerun_equals_one_clean_run(tmp_path: Path, trail: Path) -> None:
    clean_db = tmp_path / "clean.duckdb"
    clean = run_sentinel(
        "--config", str(_config(tmp_path, trail, clean_db)), "ingest", "cloudtrail", cwd=tmp_path
    )
    assert clean.returncode == 0, clean.stderr
    expected = _snapshot(clean_db)
    assert expected[0] > 1000 and expected[0] == expected[1]

    db = tmp_path / "crashy.duckdb"
    cfg = _config(tmp_path, trail, db)
    kills = 0
    for delay in (0.4, 0.9, 1.3, 1.8, 2.4):
        proc = subprocess.Popen(
            [sys.executable, "-m", "sentinel", "--config", str(cfg), "ingest", "cloudtrail"],
            cwd=tmp_path,
            env=sentinel_process_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        proc.wait()
    assert kills >= 2, "the ingest finished before it could be killed; make the trail bigger"
    final = run_sentinel("--config", str(cfg), "ingest", "cloudtrail", cwd=tmp_path)
    assert final.returncode == 0, final.stderr
    assert _snapshot(db) == expected
