"""End to end: `sentinel scan loki` and `sentinel purge` against the fake Loki server, and a
search of every byte Sentinel wrote for the secrets it found."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sentinel.store import Store
from tests.fake_loki import FakeLoki, FakeLokiServer, Query
from tests.leak_corpus import CANARY, positives

NS = 1_000_000_000
TOKEN = "loki-gateway-token-for-tests"
KEY = "k" * 40


@pytest.fixture
def loki() -> Iterator[FakeLokiServer]:
    with FakeLokiServer(FakeLoki(bearer=TOKEN)) as server:
        yield server


def _config(tmp_path: Path, url: str, *, prompt: bool = True) -> Path:
    path = tmp_path / "sentinel.toml"
    path.write_text(
        f"""
[scan]
fingerprint_key = {{ env = "TEST_FP_KEY" }}
canaries = ["{CANARY}"]

[[sources.loki]]
name = "gateway"
url = "{url}"
tenant = "inference"
selector = '{{namespace=~"inference-.+"}}'
token = {{ env = "TEST_LOKI_TOKEN" }}
prompt_detection = {str(prompt).lower()}
window_seconds = 1800
limit = 7
""",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_FP_KEY", KEY)
    monkeypatch.setenv("TEST_LOKI_TOKEN", TOKEN)


def _plant(loki: FakeLoki, base_ns: int) -> list[str]:
    """Benign lines, secrets (one repeated, one in two streams) and prompts; returns values."""
    gw = {"namespace": "inference-gw", "app": "gateway"}
    vllm = {"namespace": "inference-llm", "app": "vllm"}
    other = {"namespace": "batch", "app": "etl"}
    planted = {d: (v, line) for d, v, line in positives(seed=5, per_detector=1)}
    values = []
    ts = base_ns
    for i in range(40):
        loki.add("inference", gw, ts + i * NS, f"GET /v1/models 200 {i}ms")
    gh_value, gh_line = planted["github_token"]
    loki.add("inference", gw, ts + 3 * NS + 1, gh_line)
    loki.add("inference", gw, ts + 9 * NS + 1, gh_line)  # same secret, same stream, same day
    loki.add("inference", vllm, ts + 9 * NS + 1, gh_line)  # same secret, another stream
    loki.add("inference", other, ts + 9 * NS + 2, gh_line)  # not selected by the selector
    loki.add("other-tenant", gw, ts + 9 * NS + 3, gh_line)
    values.append(gh_value)
    for i, name in enumerate(["aws_access_key_id", "database_url_password", "jwt"]):
        value, line = planted[name]
        loki.add("inference", gw, ts + (20 + i) * NS, line)
        values.append(value)
    for i, name in enumerate(["vllm_request_log", "openai_compatible_body", "canary"]):
        value, line = planted[name]
        loki.add("inference", vllm, ts + (30 + i) * NS, line)
        values.append(value)
    return values


def _findings(db: Path) -> list[dict[str, object]]:
    with Store.open(db, read_only=True) as store:
        return store.query("SELECT * FROM findings ORDER BY rule_id, title")


def test_scan_loki_end_to_end(cli, tmp_path: Path, loki: FakeLokiServer, env: None) -> None:  # type: ignore[no-untyped-def]
    base = time.time_ns() - 1800 * NS
    values = _plant(loki.loki, base)
    cfg = _config(tmp_path, loki.url)
    db = tmp_path / "s.duckdb"
    first = cli(
        "--config", str(cfg), "--db", str(db), "--log-level", "debug", "scan", "loki", "--json"
    )
    assert first.exit_code == 0, first.stderr
    summary = json.loads(first.stdout)[0]
    assert summary["error"] is None and summary["lines"] == 40 + 3 + 3 + 3

    findings = _findings(db)
    secrets = [f for f in findings if f["rule_id"] == "logs.secret_leak"]
    prompts = [f for f in findings if f["rule_id"] == "logs.prompt_leak"]
    assert len(secrets) == 5  # github x2 streams, aws, db url, jwt
    assert len(prompts) == 3
    github = [f for f in secrets if "github_token" in str(f["title"])]
    assert sorted(int(str(f["event_count"])) for f in github) == [1, 2]
    evidence = json.loads(str(github[0]["evidence"]))
    assert evidence["detector"] == "github_token" and evidence["labels"]["namespace"]
    assert evidence["preview"].startswith("gh")

    with Store.open(db, read_only=True) as store:
        shared = store.query("SELECT streams FROM v_leak_fingerprints WHERE streams > 1")
        mark = store.scalar("SELECT scanned_until_ns FROM loki_watermarks")
    assert shared == [{"streams": 2}]
    assert mark > base

    # A rerun re-scans the overlap: nothing doubles. A late line inside the overlap is found.
    second = cli("--config", str(cfg), "--db", str(db), "scan", "loki", "--json")
    assert second.exit_code == 0
    assert _findings(db) == [
        {**f, "updated_at": g["updated_at"]} for f, g in zip(findings, _findings(db), strict=True)
    ]
    _, late_line = next((d, line) for d, _, line in positives(seed=6) if d == "github_token")
    loki.loki.add(
        "inference", {"namespace": "inference-gw", "app": "gateway"}, base + 100 * NS, late_line
    )
    cli("--config", str(cfg), "--db", str(db), "scan", "loki", "--json")
    assert len(_findings(db)) == len(findings) + 1

    # Purge: prepare, execute, re-execute (no second request), lines hidden from queries.
    prepared = cli("--config", str(cfg), "--db", str(db), "purge", "loki", "--json")
    rows = json.loads(prepared.stdout)
    assert rows and all(r["status"] == "prepared" for r in rows)
    assert all(r["query"].startswith('{app="') for r in rows)
    executed = cli("--config", str(cfg), "--db", str(db), "purge", "loki", "--execute", "--json")
    assert executed.exit_code == 0, executed.stderr
    filed = json.loads(executed.stdout)
    assert all(r["status"] == "filed" and len(r["request_id"]) == 8 for r in filed)
    assert len(loki.loki.deletes) == len(filed)
    cli("--config", str(cfg), "--db", str(db), "purge", "loki", "--execute", "--json")
    assert len(loki.loki.deletes) == len(filed)
    status = cli("--config", str(cfg), "--db", str(db), "purge", "status", "--refresh", "--json")
    assert {r["loki_status"] for r in json.loads(status.stdout)} == {"received"}
    gateway = loki.loki.select("inference", Query.parse('{app="gateway"}'), 0, time.time_ns())
    assert not any(values[0] in row[3] for row in gateway)
    assert len(gateway) > 30  # benign lines outside the purge windows stay

    # Nothing Sentinel wrote holds a planted value: the database (raw bytes and every table
    # through SQL), its WAL, and everything printed on stdout and stderr.
    outputs = "".join(r.stdout + r.stderr for r in (first, second, prepared, executed, status))
    with Store.open(db, read_only=True) as store:
        tables = [r["table_name"] for r in store.query("SELECT table_name FROM duckdb_tables()")]
        dump = "".join(str(store.query(f"SELECT * FROM {t}")) for t in tables)
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("s.duckdb*"))
    for value in values:
        middle = len(value) // 2
        for piece in {value, value[middle - 6 : middle + 6], value[-12:]}:
            assert piece not in outputs
            assert piece not in dump
            assert piece.encode() not in raw


def test_retry_after_lost_response_does_not_file_twice(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, loki: FakeLokiServer, env: None
) -> None:
    _plant(loki.loki, time.time_ns() - 1800 * NS)
    cfg = _config(tmp_path, loki.url, prompt=False)
    db = tmp_path / "s.duckdb"
    cli("--config", str(cfg), "--db", str(db), "scan", "loki")
    cli("--config", str(cfg), "--db", str(db), "purge", "loki")
    cli("--config", str(cfg), "--db", str(db), "purge", "loki", "--execute")
    count = len(loki.loki.deletes)
    with Store.open(db) as store:  # as if the POST went through but its response was lost
        store.execute("UPDATE purge_requests SET status = 'failed', request_id = NULL")
    loki.loki.send_delete_id = False
    again = cli("--config", str(cfg), "--db", str(db), "purge", "loki", "--execute", "--json")
    assert len(loki.loki.deletes) == count
    assert all(r["status"] == "filed" and r["request_id"] for r in json.loads(again.stdout))


@pytest.mark.parametrize(
    ("mode", "code", "hint"),
    [("disabled", 403, "deletion_mode"), ("off", 404, "retention_enabled")],
)
def test_deletion_unavailable_is_explained(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, loki: FakeLokiServer, env: None, *, mode: str, code: int, hint: str
) -> None:
    _plant(loki.loki, time.time_ns() - 1800 * NS)
    cfg = _config(tmp_path, loki.url, prompt=False)
    db = tmp_path / "s.duckdb"
    cli("--config", str(cfg), "--db", str(db), "scan", "loki")
    loki.loki.deletion = mode
    result = cli("--config", str(cfg), "--db", str(db), "purge", "loki", "--execute", "--json")
    assert result.exit_code == 3
    rows = json.loads(result.stdout)
    assert {r["status"] for r in rows} == {"unavailable"}
    assert all(r["http_status"] == code and hint in r["detail"] for r in rows)


def test_secret_only_sources_push_a_line_filter(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, loki: FakeLokiServer, env: None
) -> None:
    _plant(loki.loki, time.time_ns() - 1800 * NS)
    cfg = _config(tmp_path, loki.url, prompt=False)
    db = tmp_path / "s.duckdb"
    result = cli("--config", str(cfg), "--db", str(db), "scan", "loki", "--json")
    assert json.loads(result.stdout)[0]["lines"] < 20  # benign lines never crossed the wire
    queries = [p["query"][0] for _, path, p in loki.loki.requests if path.endswith("query_range")]
    assert all("|~" in q for q in queries)
    rules = {f["rule_id"] for f in _findings(db)}
    assert rules == {"logs.secret_leak", "logs.prompt_leak"}  # the canary is always detected


def test_refuses_without_fingerprint_key(cli, tmp_path: Path, loki: FakeLokiServer) -> None:  # type: ignore[no-untyped-def]
    cfg = tmp_path / "sentinel.toml"
    cfg.write_text(f'[[sources.loki]]\nurl = "{loki.url}"\nselector = \'{{a="b"}}\'\n')
    result = cli("--config", str(cfg), "scan", "loki")
    assert result.exit_code == 1
    assert "fingerprint_key" in result.stderr


def test_bad_selector_is_a_clear_error(
    cli, tmp_path: Path, loki: FakeLokiServer, env: None
) -> None:  # type: ignore[no-untyped-def]
    cfg = _config(tmp_path, loki.url)
    cfg.write_text(cfg.read_text().replace('{namespace=~"inference-.+"}', '{namespace=~".*"}'))
    result = cli("--config", str(cfg), "--db", str(tmp_path / "s.duckdb"), "scan", "loki", "--json")
    assert result.exit_code == 1
    error = json.loads(result.stdout)[0]["error"]
    assert "Loki rejected the request (400)" in error and "empty-compatible value" in error
