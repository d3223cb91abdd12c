"""Loki HTTP client: exact forward pagination over ``query_range`` and the delete API.

Pagination never loses or repeats a line: pages are merged across streams in time order, the
entries at a page's last timestamp are remembered (stream + ns + line) and skipped when the next
page starts there again (``start`` is inclusive), and a window only ends when a page brings
nothing new, never because a page came back short. 429/5xx and dropped connections are retried
with backoff; 504s and timeouts also halve the window. 400s quote Loki's own plain-text message.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import httpx

from sentinel import http, logs
from sentinel.errors import AccessDeniedError, SourceError

log = logs.get(__name__)

MAX_LIMIT = 5000
NS = 1_000_000_000


class Entry(NamedTuple):
    ts_ns: int
    stream: str  # canonical selector of the stream's labels
    line: str
    labels: dict[str, str]


def stream_selector(labels: dict[str, str]) -> str:
    """An exact LogQL stream selector for a label set: ``{app="gw",namespace="ml"}``."""
    parts = [f"{k}={json.dumps(v)}" for k, v in sorted(labels.items())]
    return "{" + ",".join(parts) + "}"


class _RetryableError(Exception):
    def __init__(self, detail: str, *, shrink: bool, retry_after: float | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.shrink = shrink
        self.retry_after = retry_after


class LokiClient:
    def __init__(
        self,
        url: str,
        *,
        tenant: str = "",
        token: str | None = None,
        username: str = "",
        password: str | None = None,
        delete_url: str = "",
        timeout: float = 30.0,
        backoff: http.Backoff | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        headers = {"X-Scope-OrgID": tenant} if tenant else {}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._client = http.client(timeout=timeout, headers=headers)
        if username:
            self._client.auth = httpx.BasicAuth(username, password or "")
        self.url = url.rstrip("/")
        self.delete_url = (delete_url or url).rstrip("/")
        self.tenant = tenant
        self.backoff = backoff or http.Backoff()
        self.sleep = sleep
        self.requests = 0

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> LokiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- query ----------------------------------------------------------------------------------
    def page(self, query: str, start_ns: int, end_ns: int, limit: int) -> list[Entry]:
        """One ``query_range`` page (forward), flattened and sorted by (ts, stream, position)."""
        params = {
            "query": query,
            "start": str(start_ns),
            "end": str(end_ns),
            "limit": str(limit),
            "direction": "forward",
        }
        body = self._get_json("/loki/api/v1/query_range", params)
        rows: list[tuple[int, str, int, str, dict[str, str]]] = []
        for stream in body.get("data", {}).get("result", []):
            labels = stream.get("stream", {})
            key = stream_selector(labels)
            for i, value in enumerate(stream.get("values", [])):
                rows.append((int(value[0]), key, i, value[1], labels))
        rows.sort(key=lambda r: (r[0], r[1], r[2]))
        return [Entry(ts, key, line, labels) for ts, key, _, line, labels in rows]

    def series(self, selector: str, start_ns: int, end_ns: int) -> list[dict[str, str]]:
        params = {"match[]": selector, "start": str(start_ns), "end": str(end_ns)}
        data = self._get_json("/loki/api/v1/series", params).get("data", [])
        return list(data) if isinstance(data, list) else []

    def entries(
        self,
        selector: str,
        pipeline: str,
        start_ns: int,
        end_ns: int,
        *,
        limit: int = MAX_LIMIT,
        max_attempts: int = 6,
    ) -> Iterator[Entry]:
        """Every entry in [start, end) exactly once, in time order."""
        query = f"{selector} {pipeline}".strip()
        cursor, sub_end, page_limit = start_ns, end_ns, min(limit, MAX_LIMIT)
        boundary: set[tuple[str, int, str]] = set()
        attempts = 0
        while cursor < end_ns:
            try:
                rows = self.page(query, cursor, sub_end, page_limit)
            except _RetryableError as exc:
                attempts += 1
                if attempts >= max_attempts:
                    raise SourceError(
                        f"Loki {self.url} kept failing: {exc.detail}",
                        hint="the scan resumes from the watermark on the next run",
                        transient=True,
                    ) from exc
                if exc.shrink and sub_end - cursor > NS:
                    sub_end = cursor + (sub_end - cursor) // 2
                    log.warning("scan.window_halved", url=self.url, seconds=(sub_end - cursor) / NS)
                self.sleep(self.backoff.delay(attempts, exc.retry_after))
                continue
            attempts = 0
            new = [
                r for r in rows if r.ts_ns != cursor or (r.stream, r.ts_ns, r.line) not in boundary
            ]
            yield from new
            if rows and rows[0].ts_ns == rows[-1].ts_ns == cursor and len(rows) >= page_limit:
                # A full page at one nanosecond cannot advance: widen the page, then fan out.
                boundary |= {(r.stream, r.ts_ns, r.line) for r in rows}
                if page_limit < MAX_LIMIT:
                    page_limit = min(2 * page_limit, MAX_LIMIT)
                    continue
                yield from self._one_nanosecond(selector, pipeline, cursor, boundary)
                cursor, boundary = cursor + 1, set()
                continue
            if not new and rows and rows[0].ts_ns == cursor:
                # Only boundary entries came back. A server that under-fills pages (grafana/loki
                # #19133) may still hold more at this nanosecond: ask stream by stream, move on.
                yield from self._one_nanosecond(selector, pipeline, cursor, boundary)
                cursor, boundary = cursor + 1, set()
                continue
            if not new:  # this (sub-)window is complete
                cursor, sub_end, boundary = sub_end, end_ns, set()
                continue
            last = rows[-1].ts_ns
            keep = boundary if last == cursor else set()
            boundary = keep | {(r.stream, r.ts_ns, r.line) for r in rows if r.ts_ns == last}
            cursor = last

    def _one_nanosecond(
        self, selector: str, pipeline: str, ts: int, seen: set[tuple[str, int, str]]
    ) -> Iterator[Entry]:
        """More than a full page at one ns: fetch that ns stream by stream."""
        for labels in self.series(selector, ts, ts + 1):
            exact = f"{stream_selector(labels)} {pipeline}".strip()
            rows = self.page(exact, ts, ts + 1, MAX_LIMIT)
            if len(rows) >= MAX_LIMIT:
                log.error("scan.nanosecond_overflow", stream=stream_selector(labels), ts_ns=ts)
            yield from (r for r in rows if (r.stream, r.ts_ns, r.line) not in seen)

    # -- delete ---------------------------------------------------------------------------------
    def delete(self, query: str, start_ms: int, end_ms: int) -> str | None:
        """File a delete request; returns ``X-Delete-Request-ID`` when Loki sends it (>= 3.6)."""
        params = {"query": query, "start": _rfc3339_ms(start_ms), "end": _rfc3339_ms(end_ms)}
        response = self._send("POST", self.delete_url + "/loki/api/v1/delete", params)
        if response.status_code != 204:
            self._raise_for(response, "delete")
        request_id = response.headers.get("X-Delete-Request-ID")
        return str(request_id) if request_id else None

    def delete_requests(self) -> list[dict[str, Any]]:
        response = self._send("GET", self.delete_url + "/loki/api/v1/delete", {})
        if response.status_code != 200:
            self._raise_for(response, "delete")
        data = response.json()
        return list(data) if isinstance(data, list) else []

    # -- plumbing -------------------------------------------------------------------------------
    def _get_json(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        response = self._send("GET", self.url + path, params, raise_retry=True)
        if response.status_code != 200:
            self._raise_for(response, "query")
        try:
            data = json.loads(response.content)
        except ValueError as exc:
            raise _RetryableError("response was not JSON (cut off?)", shrink=True) from exc
        return data if isinstance(data, dict) else {}

    def _send(
        self, method: str, url: str, params: dict[str, str], *, raise_retry: bool = False
    ) -> httpx.Response:
        """One request. Query calls raise ``_RetryableError`` to the pager; others retry here."""
        attempt = 0
        while True:
            attempt += 1
            self.requests += 1
            try:
                if method == "GET":
                    response = self._client.get(url, params=params)
                else:
                    response = self._client.request(method, url, params=params)
                if response.status_code not in http.RETRYABLE_STATUS:
                    return response
                retry = _RetryableError(
                    f"HTTP {response.status_code}: {response.text.strip()[:200]}",
                    shrink=response.status_code == 504,
                    retry_after=http.retry_after_seconds(response.headers.get("Retry-After")),
                )
            except http.RETRYABLE_ERRORS as exc:
                retry = _RetryableError(f"{type(exc).__name__}: {exc}", shrink=True)
            if raise_retry:
                raise retry
            if attempt >= self.backoff.max_attempts:
                raise SourceError(
                    f"Loki {url} failed after {attempt} attempts: {retry.detail}", transient=True
                )
            self.sleep(self.backoff.delay(attempt, retry.retry_after))

    def _raise_for(self, response: httpx.Response, what: str) -> None:
        message = response.text.strip()
        code = response.status_code
        if what == "delete" and code in (403, 404):
            raise DeletionUnavailableError(code, message)
        if code in (401, 403):
            raise AccessDeniedError(
                f"Loki {self.url} refused access ({code}): {message}",
                hint="check the tenant (X-Scope-OrgID) and the token or basic-auth credentials",
            )
        raise SourceError(
            f"Loki rejected the request ({code}): {message}",
            hint="fix the selector or limits in [[sources.loki]]" if code == 400 else None,
        )


class DeletionUnavailableError(SourceError):
    """The delete API is off: 403 (deletion_mode disabled) or 404 (retention not enabled)."""

    def __init__(self, code: int, message: str) -> None:
        if code == 403:
            hint = (
                "deletion is disabled for this tenant: set limits_config.deletion_mode to "
                "filter-and-delete (or filter-only) for it"
            )
        else:
            hint = (
                "the delete API is not served: set compactor.retention_enabled: true and "
                "compactor.delete_request_store, and route /loki/api/v1/delete to the compactor "
                "(set delete_url in [[sources.loki]] if it differs)"
            )
        super().__init__(f"Loki deletion unavailable ({code}): {message}", hint=hint)
        self.code = code


def _rfc3339_ms(ms: int) -> str:
    when = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
