"""The fake Loki itself behaves like Loki where a scanner could tell the difference."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.fake_loki import FakeLoki, FakeLokiServer, parse_delete_ts, parse_ts

H = {"X-Scope-OrgID": "t1"}


@pytest.fixture
def server() -> Iterator[FakeLokiServer]:
    with FakeLokiServer(FakeLoki()) as s:
        yield s


def test_timestamp_parsing_follows_loki() -> None:
    assert parse_ts("1767225600") == 1767225600 * 10**9  # <= 10 digits: seconds
    assert parse_ts("1767225600000000001") == 1767225600000000001  # else ns
    assert parse_ts("1767225600.0012345") == 1767225600001 * 10**6  # float s, ms precision
    assert parse_ts("2026-01-01T00:00:00Z") == 1767225600 * 10**9
    assert parse_delete_ts("2026-01-01T00:00:00.250Z", "start") == 1767225600250


def test_push_needs_string_timestamps_and_query_merges_streams(server: FakeLokiServer) -> None:
    now = time.time_ns()
    body = {
        "streams": [
            {"stream": {"app": "b"}, "values": [[str(now + 1), "b1"], [str(now + 3), "b3"]]},
            {"stream": {"app": "a"}, "values": [[str(now + 2), "a2"], [str(now + 2), "a2"]]},
        ]
    }
    assert httpx.post(server.url + "/loki/api/v1/push", json=body, headers=H).status_code == 204
    bad = {"streams": [{"stream": {"app": "a"}, "values": [[now, "x"]]}]}
    assert httpx.post(server.url + "/loki/api/v1/push", json=bad, headers=H).status_code == 400
    params = {
        "query": '{app=~"a|b"}',
        "start": str(now),
        "end": str(now + 10),
        "limit": "2",
        "direction": "forward",
    }
    data = httpx.get(server.url + "/loki/api/v1/query_range", params=params, headers=H).json()
    got = sorted((s["stream"]["app"], v[1]) for s in data["data"]["result"] for v in s["values"])
    assert got == [("a", "a2"), ("b", "b1")]  # global limit across streams, in time order


def test_instant_log_query_and_lookbehind_are_rejected(server: FakeLokiServer) -> None:
    r = httpx.get(server.url + "/loki/api/v1/query", params={"query": '{a="b"}'}, headers=H)
    assert r.status_code == 400 and "range query" in r.text
    params = {"query": '{a="b"} |~ `(?<=x)y`', "start": "1", "end": "2"}
    r = httpx.get(server.url + "/loki/api/v1/query_range", params=params, headers=H)
    assert r.status_code == 400 and r.headers["content-type"].startswith("text/plain")


def test_delete_api_validates_like_loki(server: FakeLokiServer) -> None:
    url = server.url + "/loki/api/v1/delete"
    assert (
        httpx.post(url, params={"start": "1767225600"}, headers=H).text.strip() == "query not set"
    )
    r = httpx.post(url, params={"query": '{a="b"}', "start": "17672256000"}, headers=H)
    assert r.status_code == 400 and "unix seconds or RFC3339" in r.text
    r = httpx.post(
        url, params={"query": '{a="b"}', "start": "1767225600", "end": "1767225601"}, headers=H
    )
    assert r.status_code == 204 and len(r.headers["X-Delete-Request-ID"]) == 8
    listed = httpx.get(url, headers=H).json()
    assert listed[0]["start_time"] == 1767225600 and listed[0]["status"] == "received"
    cancel = httpx.delete(url, params={"request_id": listed[0]["request_id"]}, headers=H)
    assert cancel.status_code == 204 and httpx.get(url, headers=H).json() == []
