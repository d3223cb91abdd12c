"""The scheduler's HTTP endpoints: ``/healthz``, ``/metrics`` and ``/sd`` (Prometheus HTTP SD).

``/sd`` answers what Prometheus' ``http_sd_configs`` expects: 200, ``application/json``, the full
list of target groups every time. When a token is configured it requires
``Authorization: Bearer <token>`` (or the bare token, which is what Prometheus 2.42 sends when
``authorization.type`` is omitted), compared in constant time, and answers 401 otherwise.
"""

from __future__ import annotations

import hmac
import json
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from sentinel import logs
from sentinel.errors import UsageError

log = logs.get(__name__)

JSON = "application/json; charset=utf-8"


def parse_listen(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise UsageError(f"listen address {address!r} must be HOST:PORT", hint="e.g. 0.0.0.0:9464")
    return host.strip("[]") or "0.0.0.0", int(port)  # noqa: S104  (an empty host means all)


def advertise_address(listen: str) -> str:
    """The address Prometheus should scrape: this host's IP when listening on all addresses
    (in Kubernetes, the pod IP)."""
    host, port = parse_listen(listen)
    if host in ("0.0.0.0", "::"):  # noqa: S104
        host = socket.gethostbyname(socket.gethostname())
    return f"{host}:{port}"


class MetricsServer:
    """A small threaded HTTP server; ``port`` is the bound port (useful when asked for 0)."""

    def __init__(
        self,
        listen: str,
        registry: CollectorRegistry,
        *,
        health: Callable[[], dict[str, Any]],
        targets: Callable[[], list[dict[str, Any]]],
        sd_token: str | None = None,
    ) -> None:
        host, port = parse_listen(listen)
        handler = _handler_class(registry, health, targets, sd_token)
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()
        log.info("http.listening", address=self._server.server_address[0], port=self.port)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler_class(
    registry: CollectorRegistry,
    health: Callable[[], dict[str, Any]],
    targets: Callable[[], list[dict[str, Any]]],
    sd_token: str | None,
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "sentinel"

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, CONTENT_TYPE_LATEST, generate_latest(registry))
            elif path == "/healthz":
                self._json(200, health())
            elif path == "/sd":
                if sd_token and not self._authorized(sd_token):
                    self._json(401, {"error": "missing or wrong bearer token"})
                else:
                    self._json(200, targets())
            else:
                self._json(404, {"error": f"no such path {path}"})

        def _authorized(self, token: str) -> bool:
            given = self.headers.get("Authorization", "").encode()
            # Prometheus 2.42 sends the bare credential from http_sd_configs.authorization when
            # `type` is left out (observed on Debian's build); accept that form as well.
            return hmac.compare_digest(given, f"Bearer {token}".encode()) | hmac.compare_digest(
                given, token.encode()
            )

        def _json(self, status: int, body: Any) -> None:
            self._send(status, JSON, json.dumps(body).encode())

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("http.request", client=self.client_address[0], line=format % args)

    return Handler
