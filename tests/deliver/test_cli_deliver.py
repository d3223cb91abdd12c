"""``sentinel deliver`` end to end: send, exit codes, --status, --retry-dead, --dry-run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sentinel import config, deliver, findings
from sentinel.store import Store
from tests.conftest import sentinel_process_env
from tests.deliver.receiver import Receiver, environ, json_hook, make_config, make_finding


@pytest.fixture
def setup(
    tmp_path: Path, db_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> Path:
    for name, value in environ().items():
        monkeypatch.setenv(name, value)
    hook = json_hook(receiver.url)
    (tmp_path / "sentinel.toml").write_text(
        f'[store]\npath = "{db_path}"\n[[alerts.webhook]]\n{hook}'
    )
    with Store.open(db_path) as store:
        cfg = make_config(hook)
        for n in range(2):
            findings.upsert(store, cfg, make_finding(n))
    return tmp_path / "sentinel.toml"


def test_deliver_sends_and_status_reports(cli, setup: Path, receiver: Receiver) -> None:  # type: ignore[no-untyped-def]
    dry = cli("--config", str(setup), "deliver", "--dry-run", "--json")
    assert dry.exit_code == 0
    shown = json.loads(dry.stdout)
    assert len(shown) == 2
    assert receiver.requests == []
    result = cli("--config", str(setup), "deliver", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == [
        {"destination": "siem", "sent": 2, "retrying": 0, "dead": 0, "deferred": 0}
    ]
    status = json.loads(cli("--config", str(setup), "deliver", "--status", "--json").stdout)
    assert status == [
        {"destination": "siem", "pending": 0, "delivered": 2, "dead": 0,
         "oldest_pending_age_s": None}
    ]  # fmt: skip


def test_failures_exit_3_and_retry_dead_requeues(cli, setup: Path, receiver: Receiver) -> None:  # type: ignore[no-untyped-def]
    receiver.script = ["410", "500"]
    result = cli("--config", str(setup), "deliver")
    assert result.exit_code == 3
    assert "siem" in result.stdout
    table = cli("--config", str(setup), "deliver", "--status").stdout
    assert "oldest_pending_age_s" in table
    requeued = cli("--config", str(setup), "deliver", "--retry-dead", "--json")
    assert json.loads(requeued.stdout) == [{"requeued": 1}]
    assert cli("--config", str(setup), "deliver", "--dry-run", "--status").exit_code == 2


def test_a_killed_deliver_process_resends_with_the_same_id(
    setup: Path, receiver: Receiver, db_path: Path
) -> None:
    """Crash safety: SIGKILL while a POST is in flight leaves the item pending, not delivered."""
    config_text = setup.read_text().replace("timeout_seconds = 0.5", "timeout_seconds = 30.0")
    setup.write_text(config_text)
    receiver.script = ["hang", "hang"]
    process = subprocess.Popen(
        [sys.executable, "-m", "sentinel", "--config", str(setup), "deliver"],
        env=sentinel_process_env(environ()),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert receiver.arrived.wait(30), "the deliver process never POSTed"
    finally:
        process.kill()
        process.wait()
    with Store.open(db_path) as store:
        rows = store.query("SELECT delivery_id, state, attempts FROM outbox ORDER BY 1")
        assert [(r["state"], r["attempts"]) for r in rows] == [("pending", 0), ("pending", 0)]
        cfg = config.load(setup, environ())
        receiver.script = []
        report = deliver.run(store, cfg)
        assert (report.tallies[0].sent, report.failed) == (2, False)
    receiver.wait_for(3)  # the hung request completes late on the receiver's side
    assert set(receiver.seen_ids) == {r["delivery_id"] for r in rows}
    # the in-flight one was processed twice by the receiver, under one id: dedupe on it works
    assert sorted(receiver.seen_ids.values()) == [1, 2]
