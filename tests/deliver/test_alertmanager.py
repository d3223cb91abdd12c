"""Integration with the real Alertmanager (Debian's prometheus-alertmanager) on loopback."""

from __future__ import annotations

import datetime as dt
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sentinel import deliver, findings
from sentinel.store import Store
from tests.deliver.receiver import make_config, make_finding

BINARY = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
TEMPLATE = Path("/usr/share/prometheus/alertmanager/default.tmpl")
CONFIG = """\
route:
  receiver: "null"
  group_wait: 1s
  group_interval: 2s
  repeat_interval: 1h
receivers:
  - name: "null"
"""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        BINARY is None,
        reason="prometheus-alertmanager is not installed (apt-get install prometheus-alertmanager)",
    ),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    if not TEMPLATE.exists():
        pytest.skip(f"{TEMPLATE} is missing: install the Debian package, not a bare binary")
    (tmp_path / "am.yml").write_text(CONFIG)
    url = f"http://127.0.0.1:{free_port()}"
    log = (tmp_path / "am.log").open("wb")
    process = subprocess.Popen(
        [
            str(BINARY),
            f"--config.file={tmp_path / 'am.yml'}",
            f"--storage.path={tmp_path / 'am-data'}",
            f"--web.listen-address={url.removeprefix('http://')}",
            "--cluster.listen-address=",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None:
                text = (tmp_path / "am.log").read_text(errors="replace")[-2000:]
                pytest.fail(f"alertmanager exited: {text}")
            time.sleep(0.1)
        else:
            pytest.fail("alertmanager did not become ready in 20 s")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def alerts(url: str, finding_id: str) -> list[dict[str, Any]]:
    answer = httpx.get(
        f"{url}/api/v2/alerts", params={"filter": f'finding_id="{finding_id}"'}, timeout=5
    )
    answer.raise_for_status()
    result: list[dict[str, Any]] = answer.json()
    return result


def test_findings_appear_in_the_real_alertmanager_and_resolve(
    store: Store, alertmanager: str
) -> None:
    hook = (
        f'name = "am"\nurl = "{alertmanager}/api/v2/alerts"\nformat = "alertmanager"\n'
        'finding_url = "https://sentinel.example/findings/{finding_id}"'
    )
    cfg = make_config(hook)
    f = make_finding()
    now = dt.datetime.now(dt.UTC)
    findings.upsert(store, cfg, f, now=now)
    report = deliver.run(store, cfg, now=now)
    assert (report.tallies[0].sent, report.failed) == (1, False)
    (alert,) = alerts(alertmanager, f.finding_id)
    assert alert["labels"]["alertname"] == "SentinelWeightsNonHydratorRead"
    assert alert["labels"]["severity"] == "high"
    assert alert["annotations"]["summary"] == f.title
    assert alert["generatorURL"] == f"https://sentinel.example/findings/{f.finding_id}"
    assert alert["status"]["state"] == "active"
    ends = dt.datetime.fromisoformat(alert["endsAt"].replace("Z", "+00:00"))
    assert ends - now > dt.timedelta(minutes=55)  # alert_ttl_minutes (60) ahead, re-sent before

    findings.set_status(store, cfg, f.finding_id, "resolved", reason="test", who="ci")
    assert deliver.run(store, cfg).tallies[0].sent == 1
    deadline = time.monotonic() + 5
    while alerts(alertmanager, f.finding_id) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert alerts(alertmanager, f.finding_id) == []  # resolved alerts leave the active list
