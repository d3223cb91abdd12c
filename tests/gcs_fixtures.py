"""GCS test helpers: LogEntry builders and a local Cloud Logging server (``entries:list``)."""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from sentinel import logs

PROJECT = "acme-ml-prod"
BUCKET = "acme-model-weights-prod-gcs"
HYDRATOR = f"weights-hydrator@{PROJECT}.iam.gserviceaccount.com"


def ts(when: dt.datetime, nanos: int = 123) -> str:
    """RFC 3339 with nanoseconds, as Cloud Logging writes it."""
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond:06d}{nanos:03d}Z"


def entry(
    method: str,
    when: dt.datetime,
    insert_id: str,
    *,
    actor: str | None = HYDRATOR,
    bucket: str = BUCKET,
    key: str | None = "llm-70b/v3.2/model-00001-of-00030.safetensors",
    log: str = "data_access",
    status: dict[str, Any] | None = None,
    size: int | None = None,
    request: dict[str, Any] | None = None,
    delegation: list[str] | None = None,
    ip: str = "10.128.0.42",
    project: str = PROJECT,
) -> dict[str, Any]:
    resource = f"projects/_/buckets/{bucket}" + (f"/objects/{key}" if key is not None else "")
    auth: dict[str, Any] = {}
    if actor:
        kind = "serviceAccount" if actor.endswith(".gserviceaccount.com") else "user"
        auth = {"principalEmail": actor, "principalSubject": f"{kind}:{actor}"}
    if delegation:
        auth["serviceAccountDelegationInfo"] = [
            {"firstPartyPrincipal": {"principalEmail": d}} for d in delegation
        ]
    payload: dict[str, Any] = {
        "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
        "status": status or {},
        "authenticationInfo": auth,
        "requestMetadata": {"callerIp": ip, "callerSuppliedUserAgent": "test-agent/1.0,gzip(gfe)"},
        "serviceName": "storage.googleapis.com",
        "methodName": method,
        "resourceName": resource,
    }
    if size is not None:
        payload["response"] = {
            "bucket": bucket,
            "name": key,
            "size": str(size),
            "generation": "1740823917288512",
        }
    if request is not None:
        payload["request"] = request
    return {
        "protoPayload": payload,
        "insertId": insert_id,
        "resource": {
            "type": "gcs_bucket",
            "labels": {"project_id": project, "bucket_name": bucket, "location": "us-central1"},
        },
        "timestamp": ts(when),
        "severity": "ERROR" if status else "INFO",
        "logName": f"projects/{project}/logs/cloudaudit.googleapis.com%2F{log}",
        "receiveTimestamp": ts(when + dt.timedelta(seconds=1)),
    }


def write_ndjson(
    path: Path, entries: list[dict[str, Any]], extra_lines: tuple[str, ...] = ()
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(e) for e in entries] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def export_path(root: Path, log: str, hour: dt.datetime, shard: int = 0) -> Path:
    """Where a sink writes an hour of one log: ``cloudaudit.googleapis.com/<log>/Y/M/D/…``."""
    return (
        root
        / "cloudaudit.googleapis.com"
        / log
        / f"{hour:%Y/%m/%d}"
        / f"{hour:%H}:00:00_{hour:%H}:59:59_S{shard}.json"
    )


# -- a local Cloud Logging API ----------------------------------------------------------------
_WINDOW = re.compile(r'timestamp>="([^"]+)" AND timestamp<"([^"]+)"')


@dataclass
class LoggingServerState:
    entries: list[dict[str, Any]] = field(default_factory=list)
    max_page: int = 1000
    faults: list[int] = field(default_factory=list)  # statuses returned before serving
    empty_pages: int = 0  # empty pages (with a token) before the first real page of a query
    requests: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _parse(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


class _Handler(BaseHTTPRequestHandler):
    state: LoggingServerState

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        state = self.state
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        with state.lock:
            state.requests.append({"path": self.path, "body": body})
            if not self.path.startswith("/v2/entries:list"):
                self._send(404, {"error": {"code": 404, "message": "not found"}})
                return
            if state.faults:
                status = state.faults.pop(0)
                name = "RESOURCE_EXHAUSTED" if status == 429 else "UNAVAILABLE"
                self._send(
                    status, {"error": {"code": status, "message": "injected", "status": name}}
                )
                return
            match = _WINDOW.search(body.get("filter", ""))
            if not match:
                state.problems.append(f"filter without a timestamp window: {body.get('filter')}")
                self._send(400, {"error": {"code": 400, "message": "no time window"}})
                return
            start, end = _parse(match.group(1)), _parse(match.group(2))
            token = body.get("pageToken", "")
            empties = int(token[2:]) if token.startswith("e:") else 0
            if not token or token.startswith("e:"):
                if empties < state.empty_pages:
                    self._send(200, {"entries": [], "nextPageToken": f"e:{empties + 1}"})
                    return
                offset = 0
            else:
                offset = int(token[2:])
            projects = {n.split("/", 1)[1] for n in body.get("resourceNames", [])}
            matching = sorted(
                (
                    e
                    for e in state.entries
                    if start <= _parse(e["timestamp"]) < end
                    and e["logName"].split("/")[1] in projects
                ),
                key=lambda e: (e["timestamp"], e["insertId"]),
            )
            size = min(int(body.get("pageSize", 50)), state.max_page)
            page = matching[offset : offset + size]
            out: dict[str, Any] = {"entries": page}
            if offset + size < len(matching):
                out["nextPageToken"] = f"o:{offset + size}"
            self._send(200, out)


@dataclass
class LoggingServer:
    url: str
    state: LoggingServerState

    def filters(self) -> list[str]:
        return [r["body"].get("filter", "") for r in self.state.requests]


def start_logging_server() -> Iterator[LoggingServer]:
    state = LoggingServerState()
    handler = type("Handler", (_Handler,), {"state": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield LoggingServer(f"http://127.0.0.1:{server.server_address[1]}", state)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(autouse=True)
def fresh_logs() -> None:
    """``logs.configure`` binds the stderr of its moment; an earlier in-process CLI test leaves
    it pointing at a closed capture stream, so library-level tests rebind it."""
    logs.configure("info")
