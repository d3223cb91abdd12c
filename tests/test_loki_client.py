"""Pagination and error handling of the Loki client against the fake Loki server."""

from __future__ import annotations

import random
from collections.abc import Iterator

import httpx
import pytest

from sentinel import http
from sentinel.errors import AccessDeniedError, SourceError
from sentinel.loki import LokiClient
from tests.fake_loki import FakeLoki, FakeLokiServer
from tests.scan_fixtures import fake_loki  # noqa: F401

Rng = random.Random
T0 = 1_767_225_600_000_000_000
SEL = '{app=~".+"}'


_OPEN: list[LokiClient] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def _client(server: FakeLokiServer, tenant: str = "t1") -> LokiClient:
    client = LokiClient(
        server.url, tenant=tenant, backoff=http.Backoff(base=0.001, cap=0.002), sleep=lambda s: None
    )
    _OPEN.append(client)
    return client


def _plant(
    loki: FakeLoki, rng: random.Random, n: int, spread: int = 40
) -> list[tuple[str, int, str]]:
    """Lines in three streams with many same-nanosecond collisions, identical texts included."""
    planted = []
    for _ in range(n):
        app = f"app{rng.randrange(3)}"
        ts = T0 + rng.randrange(spread) * 1000  # few distinct timestamps: many ties
        line = f"line {rng.randrange(n // 3)}"
        before = sum(len(e) for _, e in loki.streams.get("t1", {}).values())
        loki.add("t1", {"app": app}, ts, line)
        if sum(len(e) for _, e in loki.streams["t1"].values()) > before:
            planted.append((app, ts, line))
    # Loki collapses exact duplicates (stream + ts + line) at query time.
    return sorted(set(planted), key=lambda p: (p[1], p[0], p[2]))


@pytest.mark.parametrize("limit", [1, 3, 7, 50, 5000])
def test_pagination_returns_every_entry_exactly_once(
    fake_loki: FakeLokiServer,  # noqa: F811
    limit: int,
) -> None:
    planted = _plant(fake_loki.loki, Rng(limit), 300)
    got = list(_client(fake_loki).entries(SEL, "", T0, T0 + 10**9, limit=limit))
    assert sorted((e.labels["app"], e.ts_ns, e.line) for e in got) == sorted(planted)
    assert [e.ts_ns for e in got] == sorted(e.ts_ns for e in got)


def test_underfilled_pages_do_not_end_the_scan(fake_loki: FakeLokiServer) -> None:  # noqa: F811
    planted = _plant(fake_loki.loki, Rng(1), 200, spread=2000)
    fake_loki.loki.underfill = 4  # the server returns fewer than `limit` although more exist
    got = list(_client(fake_loki).entries(SEL, "", T0, T0 + 10**9, limit=50))
    assert len(got) == len(planted)


def test_whole_page_at_one_nanosecond(fake_loki: FakeLokiServer) -> None:  # noqa: F811
    for i in range(25):
        fake_loki.loki.add("t1", {"app": f"a{i % 2}"}, T0 + 5, f"same ns {i}")
    fake_loki.loki.add("t1", {"app": "a0"}, T0 + 6, "after")
    got = list(_client(fake_loki).entries(SEL, "", T0, T0 + 100, limit=4))
    assert len(got) == 26
    assert got[-1].line == "after"


def test_end_is_exclusive_and_start_inclusive(fake_loki: FakeLokiServer) -> None:  # noqa: F811
    for ts in (T0, T0 + 1, T0 + 2):
        fake_loki.loki.add("t1", {"app": "a"}, ts, f"at {ts - T0}")
    got = list(_client(fake_loki).entries(SEL, "", T0, T0 + 2))
    assert [e.line for e in got] == ["at 0", "at 1"]


def test_retries_429_5xx_and_dropped_connections(fake_loki: FakeLokiServer) -> None:  # noqa: F811
    _plant(fake_loki.loki, Rng(2), 60)
    fake_loki.loki.faults.extend(
        [(429, "too many outstanding requests"), (502, "bad gateway"), ("reset",), (504, "timeout")]
    )
    client = _client(fake_loki)
    got = list(client.entries(SEL, "", T0, T0 + 10**9, limit=10))
    expected = list(_client(fake_loki).entries(SEL, "", T0, T0 + 10**9, limit=5000))
    assert [(e.stream, e.ts_ns, e.line) for e in got] == [
        (e.stream, e.ts_ns, e.line) for e in expected
    ]
    assert not fake_loki.loki.faults


def test_timeouts_halve_the_window(fake_loki: FakeLokiServer) -> None:  # noqa: F811
    fake_loki.loki.add("t1", {"app": "a"}, T0 + 10, "x")
    fake_loki.loki.faults.extend([(504, "request timed out"), (504, "request timed out")])
    got = list(_client(fake_loki).entries(SEL, "", T0, T0 + 3600 * 10**9))
    assert [e.line for e in got] == ["x"]
    spans = [
        int(p["end"][0]) - int(p["start"][0])
        for _, path, p in fake_loki.loki.requests
        if path.endswith("query_range")
    ]
    assert spans[0] == 3600 * 10**9 and spans[1] == 1800 * 10**9 and spans[2] == 900 * 10**9


def test_gives_up_after_max_attempts_as_transient(fake_loki: FakeLokiServer) -> None:  # noqa: F811
    fake_loki.loki.faults.extend([(503, "unavailable")] * 10)
    with pytest.raises(SourceError) as err:
        list(_client(fake_loki).entries(SEL, "", T0, T0 + 10**9, max_attempts=3))
    assert err.value.transient


def test_400_quotes_lokis_message(fake_loki: FakeLokiServer) -> None:  # noqa: F811
    with pytest.raises(SourceError) as err:
        list(_client(fake_loki).entries("{}", "", T0, T0 + 10**9))
    assert "at least one regexp or equality matcher" in err.value.message
    assert not err.value.transient
    with pytest.raises(SourceError, match=r"invalid regex"):
        list(_client(fake_loki).entries(SEL, "|~ `(?<=a)b`", T0, T0 + 10**9))


def test_tenant_is_sent_and_isolated(fake_loki: FakeLokiServer) -> None:  # noqa: F811
    fake_loki.loki.add("t1", {"app": "a"}, T0, "one")
    fake_loki.loki.add("t2", {"app": "a"}, T0, "two")
    assert [e.line for e in _client(fake_loki, "t2").entries(SEL, "", T0, T0 + 9)] == ["two"]
    with pytest.raises(AccessDeniedError, match="no org id"):
        list(_client(fake_loki, "").entries(SEL, "", T0, T0 + 9))


def test_fake_rejects_limits_like_loki(fake_loki: FakeLokiServer) -> None:  # noqa: F811
    params = {"query": SEL, "start": str(T0), "end": str(T0 + 9), "limit": "5001"}
    response = httpx.get(
        fake_loki.url + "/loki/api/v1/query_range", params=params, headers={"X-Scope-OrgID": "t1"}
    )
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("text/plain")
    assert "(5001 > 5000)" in response.text
