"""moto in server mode on loopback, and a fault-injecting proxy in front of it."""

from __future__ import annotations

import http.client
import http.server
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def moto_s3() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


class FaultProxy:
    """Forwards to ``upstream``; the first ``fail`` GETs of objects get ``status`` (e.g. 503 SlowDown)."""

    def __init__(
        self, upstream: str, *, fail: int, status: int = 503, code: str = "SlowDown"
    ) -> None:
        self.upstream = upstream.removeprefix("http://")
        self.remaining = fail
        self.status = status
        self.code = code
        self.failed = 0
        self.lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _forward(self) -> None:
                is_object_get = self.command == "GET" and "list-type" not in self.path
                with proxy.lock:
                    inject = is_object_get and proxy.remaining > 0
                    if inject:
                        proxy.remaining -= 1
                        proxy.failed += 1
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length) if length else None
                if inject:
                    payload = (
                        f"<Error><Code>{proxy.code}</Code><Message>injected</Message></Error>"
                    ).encode()
                    self.send_response(proxy.status)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                conn = http.client.HTTPConnection(proxy.upstream, timeout=30)
                conn.request(self.command, self.path, body=data, headers=dict(self.headers))
                resp = conn.getresponse()
                payload = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
