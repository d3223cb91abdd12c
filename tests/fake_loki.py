"""A local Loki-compatible server for tests, faithful where a scanner can tell the difference.

Follows the shared interfaces reference (section 5): global time order and ``limit`` across
streams, inclusive ``start`` / exclusive ``end``, same-nanosecond entries kept (exact duplicates
collapsed), Loki's timestamp parsing, 400 plain-text errors (limit > 5000, bad selectors, bad
regexes), RE2 semantics via ``google-re2``, tenants (401 ``no org id``), the delete API (204 +
``X-Delete-Request-ID``, list, cancel, 403/404 when deletion is off, query-time hiding), and
fault injection: scripted statuses, dropped connections and under-filled pages.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import re
import threading
import time
import zlib
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import re2

MAX_ENTRIES = 5000
MAX_QUERY_HOURS = 721
_MATCHER = re.compile(
    r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|`[^`]*`)\s*,?'
)
_FILTER = re.compile(r'\s*(\|=|!=|\|~|!~)\s*("(?:[^"\\]|\\.)*"|`[^`]*`)')


class LokiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _string(token: str) -> str:
    return token[1:-1] if token.startswith("`") else str(json.loads(token))


def _compile(pattern: str) -> Any:
    try:
        return re2.compile(pattern)
    except re2.error as exc:
        raise LokiError(400, f"parse error : invalid regex {pattern!r}: {exc}") from exc


@dataclass
class Query:
    matchers: list[tuple[str, str, Any]]
    filters: list[tuple[str, Any]]

    @classmethod
    def parse(cls, text: str) -> Query:
        text = text.strip()
        if not text.startswith("{") or "}" not in text:
            raise LokiError(
                400, f"parse error at line 1, col 1: syntax error: unexpected {text[:1]!r}"
            )
        close = text.index("}")
        inner, rest = text[1:close], text[close + 1 :]
        matchers: list[tuple[str, str, Any]] = []
        pos = 0
        while pos < len(inner.strip()):
            m = _MATCHER.match(inner, pos)
            if not m:
                raise LokiError(400, f"parse error at line 1, col {pos + 2}: syntax error")
            name, op, raw = m.group(1), m.group(2), _string(m.group(3))
            value: Any = _compile(f"^(?:{raw})$") if op in ("=~", "!~") else raw
            matchers.append((name, op, value))
            pos = m.end()
        if not any(_non_empty(op, v) for _, op, v in matchers):
            raise LokiError(
                400,
                "parse error : queries require at least one regexp or equality matcher that "
                'does not have an empty-compatible value. For instance, app=~".*" does not meet '
                'this requirement, but app=~".+" will',
            )
        filters: list[tuple[str, Any]] = []
        pos = 0
        while rest[pos:].strip():
            f = _FILTER.match(rest, pos)
            if not f:
                raise LokiError(400, f"parse error at line 1, col {close + pos + 2}: syntax error")
            op, raw = f.group(1), _string(f.group(2))
            filters.append((op, _compile(raw) if op in ("|~", "!~") else raw))
            pos = f.end()
        return cls(matchers, filters)

    def selects(self, labels: dict[str, str]) -> bool:
        for name, op, value in self.matchers:
            actual = labels.get(name, "")
            if op == "=" and actual != value:
                return False
            if op == "!=" and actual == value:
                return False
            if op == "=~" and not value.search(actual):
                return False
            if op == "!~" and value.search(actual):
                return False
        return True

    def keeps(self, line: str) -> bool:
        for op, value in self.filters:
            if op == "|=" and value not in line:
                return False
            if op == "!=" and value in line:
                return False
            if op == "|~" and not value.search(line):
                return False
            if op == "!~" and value.search(line):
                return False
        return True


def _non_empty(op: str, value: Any) -> bool:
    if op == "=":
        return value != ""
    if op == "=~":
        return not value.search("")
    return False


def parse_ts(value: str) -> int:
    """Loki's parseTimestamp: '.' = float seconds (ms precision), <=10 digits = s, else ns."""
    if "." in value and not value.endswith("Z") and "T" not in value:
        return round(float(value) * 1000) * 1_000_000
    if value.lstrip("-").isdigit():
        return int(value) * 1_000_000_000 if len(value.lstrip("-")) <= 10 else int(value)
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise LokiError(400, f'cannot parse "{value}" to a valid timestamp') from exc
    return int(when.timestamp()) * 1_000_000_000 + when.microsecond * 1000


def parse_delete_ts(value: str, what: str) -> int:
    """Delete API times: exactly 10-digit seconds or RFC3339, stored at ms precision."""
    if re.fullmatch(r"\d{10}", value):
        return int(value) * 1000
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise LokiError(
            400, f"invalid {what} time: require unix seconds or RFC3339 format"
        ) from exc
    return int(when.timestamp()) * 1000 + when.microsecond // 1000


@dataclass
class DeleteRequest:
    request_id: str
    tenant: str
    query: str
    start_ms: int
    end_ms: int
    created_at: float
    status: str = "received"
    cancelled: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "start_time": self.start_ms / 1000,
            "end_time": self.end_ms / 1000,
            "query": self.query,
            "status": self.status,
            "created_at": self.created_at,
        }


@dataclass
class FakeLoki:
    auth_enabled: bool = True
    max_entries: int = MAX_ENTRIES
    deletion: str = "filter-and-delete"  # | "disabled" (403) | "off" (404: retention disabled)
    send_delete_id: bool = True
    hide_delay: float = 0.0
    bearer: str | None = None
    streams: dict[str, dict[str, tuple[dict[str, str], list[tuple[int, str]]]]] = field(
        default_factory=dict
    )
    faults: deque[tuple[Any, ...]] = field(default_factory=deque)
    underfill: int | None = None
    deletes: list[DeleteRequest] = field(default_factory=list)
    requests: list[tuple[str, str, dict[str, list[str]]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    # -- data -------------------------------------------------------------------------------
    def add(self, tenant: str, labels: dict[str, str], ts_ns: int, line: str) -> None:
        key = json.dumps(labels, sort_keys=True)
        with self.lock:
            stream = self.streams.setdefault(tenant, {}).setdefault(key, (dict(labels), []))
            if stream[1] and stream[1][-1] == (ts_ns, line):
                return  # the ingester drops an entry equal to the stream's last one
            stream[1].append((ts_ns, line))

    def _hidden(self, tenant: str, labels: dict[str, str], ts_ns: int, line: str) -> bool:
        now = time.time()
        for req in self.deletes:
            if req.tenant != tenant or req.cancelled or now - req.created_at < self.hide_delay:
                continue
            ms = ts_ns // 1_000_000
            if req.start_ms <= ms <= req.end_ms:
                q = Query.parse(req.query)
                if q.selects(labels) and q.keeps(line):
                    return True
        return False

    def select(self, tenant: str, query: Query, start: int, end: int) -> list[tuple[Any, ...]]:
        rows = []
        with self.lock:
            for key, (labels, entries) in self.streams.get(tenant, {}).items():
                if not query.selects(labels):
                    continue
                seen = set()
                for pos, (ts, line) in enumerate(entries):
                    if not (start <= ts < end) or (ts, line) in seen or not query.keeps(line):
                        continue
                    if not self._hidden(tenant, labels, ts, line):
                        seen.add((ts, line))
                        rows.append((ts, key, pos, line, labels))
        return rows

    # -- endpoints --------------------------------------------------------------------------
    def query_range(self, tenant: str, params: dict[str, str]) -> dict[str, Any]:
        query = Query.parse(params.get("query", ""))
        limit = int(params.get("limit", "100"))
        if limit <= 0:
            raise LokiError(400, "limit must be a positive value")
        if limit > self.max_entries:
            raise LokiError(
                400,
                "max entries limit per query exceeded, limit > max_entries_limit_per_query "
                f"({limit} > {self.max_entries})",
            )
        direction = params.get("direction", "backward").lower()
        if direction not in ("forward", "backward"):
            raise LokiError(400, f"invalid direction '{params['direction']}'")
        end = parse_ts(params["end"]) if "end" in params else time.time_ns()
        start = parse_ts(params["start"]) if "start" in params else end - 3600 * 10**9
        if end < start:
            raise LokiError(400, "end timestamp must not be before or equal to start time")
        if end - start > MAX_QUERY_HOURS * 3600 * 10**9:
            raise LokiError(400, "the query time range exceeds the limit (query length: ...)")
        rows = self.select(tenant, query, start, end)
        rows.sort(key=lambda r: (r[0], r[1], r[2]), reverse=direction == "backward")
        if direction == "backward":  # same-ts entries of one stream keep ingestion order
            rows.sort(key=lambda r: (-r[0], r[1], r[2]))
        cut = min(limit, self.underfill) if self.underfill else limit
        rows = rows[:cut]
        result: dict[str, dict[str, Any]] = {}
        for ts, key, _, line, labels in rows:
            result.setdefault(key, {"stream": labels, "values": []})["values"].append(
                [str(ts), line]
            )
        return {
            "status": "success",
            "data": {
                "resultType": "streams",
                "result": list(result.values()),
                "stats": {"summary": {"totalEntriesReturned": len(rows)}},
            },
        }

    def series(self, tenant: str, params: dict[str, list[str]]) -> dict[str, Any]:
        selectors = params.get("match[]", []) + params.get("match", [])
        end = parse_ts(params["end"][0]) if "end" in params else time.time_ns()
        start = parse_ts(params["start"][0]) if "start" in params else end - 3600 * 10**9
        found: dict[str, dict[str, str]] = {}
        for selector in selectors:
            for _, key, _, _, labels in self.select(tenant, Query.parse(selector), start, end):
                found[key] = labels
        return {"status": "success", "data": list(found.values())}

    def delete(
        self, tenant: str, method: str, params: dict[str, str]
    ) -> tuple[int, Any, dict[str, str]]:
        if self.deletion == "off":
            return 404, "404 page not found", {}
        if self.deletion == "disabled":
            return 403, "deletion is not available for this tenant", {}
        if method == "GET":
            items = [d.as_json() for d in self.deletes if d.tenant == tenant and not d.cancelled]
            return 200, items, {}
        if method == "DELETE":
            for req in self.deletes:
                if req.request_id == params.get("request_id") and req.tenant == tenant:
                    req.cancelled = True
                    return 204, "", {}
            return 404, "could not find delete request with given id", {}
        if not params.get("query"):
            raise LokiError(400, "query not set")
        Query.parse(params["query"])
        if not params.get("start"):
            raise LokiError(400, "start time not set")
        start = parse_delete_ts(params["start"], "start")
        end = (
            parse_delete_ts(params["end"], "end") if params.get("end") else int(time.time() * 1000)
        )
        if end > time.time() * 1000 + 1000:
            raise LokiError(400, "deletes in the future are not allowed")
        if start >= end:
            raise LokiError(400, "start time can't be greater than or equal to end time")
        now = time.time()
        seed = f"{tenant}{now}{params.get('query')}".encode()
        request_id = f"{zlib.crc32(seed):08x}"
        self.deletes.append(DeleteRequest(request_id, tenant, params["query"], start, end, now))
        headers = {"X-Delete-Request-ID": request_id} if self.send_delete_id else {}
        return 204, "", headers


def _handler(loki: FakeLoki) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _params(self) -> dict[str, list[str]]:
            parts = urlsplit(self.path)
            params = parse_qs(parts.query, keep_blank_values=True)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            self._body = body
            if body and "form-urlencoded" in (self.headers.get("Content-Type") or ""):
                for k, v in parse_qs(body.decode(), keep_blank_values=True).items():
                    params.setdefault(k, []).extend(v)
            return params

        def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            if isinstance(body, str):
                data = (body + "\n").encode() if body else b""
                ctype = "text/plain; charset=utf-8"
            else:
                data = json.dumps(body).encode()
                ctype = "application/json"
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            if data:
                self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _handle(self, method: str) -> None:
            multi = self._params()
            params = {k: v[0] for k, v in multi.items()}
            path = urlsplit(self.path).path
            loki.requests.append((method, path, multi))
            if path == "/ready":
                return self._send(200, "ready")
            if loki.bearer and self.headers.get("Authorization") != f"Bearer {loki.bearer}":
                return self._send(401, "Unauthorized")
            tenant = self.headers.get("X-Scope-OrgID") or ("" if loki.auth_enabled else "fake")
            if not tenant:
                return self._send(401, "no org id")
            try:
                if path == "/loki/api/v1/query_range":
                    if loki.faults:
                        fault = loki.faults.popleft()
                        if fault[0] == "reset":
                            self.close_connection = True
                            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n{")
                            return None
                        return self._send(fault[0], fault[1])
                    return self._send(200, loki.query_range(tenant, params))
                if path == "/loki/api/v1/query":
                    return self._send(
                        400,
                        "log queries are not supported as an instant query type, please change "
                        "your query to a range query type",
                    )
                if path == "/loki/api/v1/series":
                    return self._send(200, loki.series(tenant, multi))
                if path == "/loki/api/v1/push":
                    return self._push(tenant)
                if path == "/loki/api/v1/delete":
                    status, body, headers = loki.delete(tenant, method, params)
                    return self._send(status, body, headers)
            except LokiError as exc:
                return self._send(exc.status, exc.message)
            return self._send(404, "404 page not found")

        def _push(self, tenant: str) -> None:
            data = json.loads(self._body or b"{}")
            for stream in data.get("streams", []):
                for value in stream.get("values", []):
                    if not isinstance(value[0], str):
                        raise LokiError(400, "timestamps must be strings")
                    loki.add(tenant, stream["stream"], int(value[0]), value[1])
            return self._send(204, "")

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_PUT(self) -> None:
            self._handle("POST")

        def do_DELETE(self) -> None:
            self._handle("DELETE")

    return Handler


class FakeLokiServer:
    """Runs a FakeLoki on 127.0.0.1 with an ephemeral port in a background thread."""

    def __init__(self, loki: FakeLoki | None = None) -> None:
        self.loki = loki or FakeLoki()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.loki))
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> FakeLokiServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
