"""Sentinel's own metrics: state read from the store, the textfile, and Pushgateway semantics."""

from __future__ import annotations

import datetime as dt
import shutil
import threading
from pathlib import Path

import httpx
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sentinel import metrics
from sentinel.store import Store
from tests.conftest import run_sentinel
from tests.ops_fixtures import free_port, start_server, stop, write_job

PUSHGATEWAY = shutil.which("prometheus-pushgateway")


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition text, keyed by name and sorted labels."""
    found = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


def value(
    found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float | None:
    for (n, lbls), v in found.items():
        if n == name and all(dict(lbls).get(k) == x for k, x in labels.items()):
            return v
    return None


def seed(store: Store) -> None:
    t = dt.datetime(2026, 3, 1, 12, 0)
    store.execute("INSERT INTO loads VALUES (1, 'aws', 'trail-a', ?, 1, 2, 1)", [t])
    for i, (bucket, when) in enumerate([("w-prod", t), ("w-ckpt", t - dt.timedelta(hours=3))]):
        store.execute(
            "INSERT INTO access_events (provider, event_id, logical_id, event_time, operation,"
            " action, bucket, source_uri, load_id, source_index)"
            " VALUES ('aws', ?, ?, ?, 'GetObject', 'read', ?, 'f', 1, ?)",
            [f"e{i}", f"e{i}", when, bucket, i],
        )
    for i, (rule, sev) in enumerate(
        [
            ("weights.denied_read", "medium"),
            ("weights.denied_read", "medium"),
            ("logs.secret_leak", "critical"),
        ]
    ):
        store.execute(
            "INSERT INTO findings (finding_id, rule_id, severity, title, created_at, updated_at)"
            " VALUES (?, ?, ?, 't', ?, ?)",
            [f"f{i}", rule, sev, t, t],
        )
    store.execute(
        "INSERT INTO quarantine VALUES (1, 'aws', 'trail-a', 'f', NULL, 'bad_json', NULL, NULL,"
        " 1, ?)",
        [t],
    )


def test_state_metrics_read_from_the_store(store: Store) -> None:
    seed(store)
    for i, (state, created) in enumerate([("pending", "2026-03-01 10:00:00"),
                                          ("pending", "2026-03-01 11:00:00"),
                                          ("dead", "2026-03-01 09:00:00"),
                                          ("delivered", "2026-03-01 08:00:00")]):  # fmt: skip
        store.execute(
            "INSERT INTO outbox (delivery_id, destination, finding_id, change, snapshot, state,"
            " created_at, next_attempt_at) VALUES (?, 'siem', 'f0', 'new', '{}', ?, ?, ?)",
            [f"d{i}", state, created, created],
        )
    store.execute(
        "INSERT INTO loki_watermarks (source, url, tenant, selector, scanned_until_ns,"
        " scanned_until, updated_at) VALUES ('inference', 'http://loki', 't', '{a=\"b\"}', 0,"
        " '2026-03-01 11:58:00', '2026-03-01 11:58:00')"
    )
    text = generate_latest(metrics.state_registry(metrics.collect_state(store))).decode()
    found = samples(text)
    noon = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC).timestamp()
    assert (
        value(
            found,
            "sentinel_findings",
            rule_id="weights.denied_read",
            severity="medium",
            status="open",
        )
        == 2
    )
    assert value(found, "sentinel_findings", rule_id="logs.secret_leak") == 1
    assert value(found, "sentinel_access_events", provider="aws") == 2
    assert value(found, "sentinel_quarantined_inputs", source="trail-a") == 1
    assert value(found, "sentinel_source_newest_event_timestamp_seconds", source="trail-a") == noon
    assert (
        value(found, "sentinel_bucket_newest_event_timestamp_seconds", bucket="w-ckpt")
        == noon - 3 * 3600
    )
    assert value(found, "sentinel_outbox_pending") == 2
    assert value(found, "sentinel_outbox_dead_letters") == 1
    assert value(found, "sentinel_outbox_oldest_pending_timestamp_seconds") == noon - 2 * 3600
    assert (
        value(found, "sentinel_loki_scan_watermark_timestamp_seconds", source="inference")
        == noon - 120
    )


def test_textfile_is_replaced_atomically(tmp_path: Path) -> None:
    """A reader racing 100 rewrites always parses a whole file with every sample in it."""
    registry = metrics.state_registry(
        [
            metrics.Sample(
                "sentinel_findings", {"rule_id": f"r{i}", "severity": "low", "status": "open"}, i
            )
            for i in range(100)
        ]
    )
    target = tmp_path / "sentinel_state.prom"
    metrics.write_textfile(tmp_path, "sentinel_state", registry)
    stop_reading = threading.Event()
    seen: list[int] = []

    def read() -> None:
        while not stop_reading.is_set():
            seen.append(len(samples(target.read_text(encoding="utf-8"))))

    reader = threading.Thread(target=read)
    reader.start()
    for _ in range(100):
        metrics.write_textfile(tmp_path, "sentinel_state", registry)
    stop_reading.set()
    reader.join()
    assert seen and set(seen) == {100}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sentinel_state.prom"]
    assert oct(target.stat().st_mode & 0o777) == "0o644"


def test_one_shot_run_writes_textfiles_and_a_failed_run_keeps_last_success(
    tmp_path: Path,
) -> None:
    jobs, prom = tmp_path / "jobs", tmp_path / "textfiles"
    (tmp_path / "sentinel.toml").write_text(
        f'[metrics]\njobs_dir = "jobs"\ntextfile_dir = "{prom}"\n', encoding="utf-8"
    )
    write_job(
        jobs, "nightly", [{"run": "config check"}, {"run": "sql 'SELECT 1'"}], schedule="0 3 * * *"
    )
    args = ["--config", "sentinel.toml", "--db", "s.duckdb", "run", "nightly"]
    assert run_sentinel(*args, cwd=tmp_path).returncode == 0
    first = samples((prom / "sentinel_job_nightly.prom").read_text(encoding="utf-8"))
    success = value(first, "sentinel_job_last_success_timestamp_seconds", sentinel_job="nightly")
    assert success is not None
    assert value(first, "sentinel_job_last_run_success") == 1
    assert value(first, "sentinel_job_period_seconds") == 86400
    assert value(first, "sentinel_job_step_duration_seconds", step="sql 'SELECT 1'") is not None
    assert (prom / "sentinel_state.prom").exists()

    write_job(jobs, "nightly", [{"run": "sql 'SELECT * FROM nope'"}], schedule="0 3 * * *")
    assert run_sentinel(*args, cwd=tmp_path).returncode == 1
    second = samples((prom / "sentinel_job_nightly.prom").read_text(encoding="utf-8"))
    assert value(second, "sentinel_job_last_success_timestamp_seconds") == success
    assert value(second, "sentinel_job_last_run_success") == 0
    assert value(second, "sentinel_job_last_run_exit_code") == 1
    completion = value(second, "sentinel_job_last_completion_timestamp_seconds")
    assert completion is not None and completion > success


@pytest.mark.skipif(
    PUSHGATEWAY is None,
    reason="needs Debian's prometheus-pushgateway "
    "(apt-get install prometheus-pushgateway; .ci/run installs it)",
)
def test_pushgateway_failed_run_keeps_last_success(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    gateway = start_server(
        [str(PUSHGATEWAY), f"--web.listen-address=127.0.0.1:{port}"], url, tmp_path / "pgw.log"
    )
    try:
        (tmp_path / "sentinel.toml").write_text(
            f'[metrics]\njobs_dir = "jobs"\npushgateway = "{url}"\n', encoding="utf-8"
        )
        write_job(tmp_path / "jobs", "hourly", [{"run": "config check"}], schedule="0 * * * *")
        args = ["--config", "sentinel.toml", "--db", "s.duckdb", "run", "hourly"]
        assert run_sentinel(*args, cwd=tmp_path).returncode == 0
        first = samples(httpx.get(f"{url}/metrics").text)
        success = value(
            first,
            "sentinel_job_last_success_timestamp_seconds",
            job="sentinel",
            sentinel_job="hourly",
        )
        assert success is not None
        assert (
            value(first, "sentinel_state_collected_timestamp_seconds", job="sentinel_state")
            is not None
        )

        write_job(
            tmp_path / "jobs", "hourly", [{"run": "sql 'SELECT * FROM nope'"}], schedule="0 * * * *"
        )
        assert run_sentinel(*args, cwd=tmp_path).returncode == 1
        second = samples(httpx.get(f"{url}/metrics").text)
        assert (
            value(second, "sentinel_job_last_success_timestamp_seconds", sentinel_job="hourly")
            == success
        )
        assert value(second, "sentinel_job_last_run_success", sentinel_job="hourly") == 0
        assert value(second, "push_failure_time_seconds", job="sentinel") == 0  # both accepted

        write_job(tmp_path / "jobs", "hourly", [{"run": "config check"}], schedule="0 * * * *")
        assert run_sentinel(*args, cwd=tmp_path).returncode == 0
        third = samples(httpx.get(f"{url}/metrics").text)
        newer = value(third, "sentinel_job_last_success_timestamp_seconds", sentinel_job="hourly")
        assert newer is not None and newer > success
    finally:
        stop(gateway)


def test_push_to_an_unreachable_gateway_is_logged_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "sentinel.toml").write_text(
        f'[metrics]\njobs_dir = "jobs"\npushgateway = "http://127.0.0.1:{free_port()}"\n',
        encoding="utf-8",
    )
    write_job(tmp_path / "jobs", "x", [{"run": "config check"}])
    result = run_sentinel("--config", "sentinel.toml", "--db", "s.duckdb", "run", "x", cwd=tmp_path)
    assert result.returncode == 0
    assert '"event": "job.push_failed"' in result.stderr
