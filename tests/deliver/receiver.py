"""A real local webhook receiver (and Splunk HEC look-alike) for delivery tests.

The receiver verifies Standard Webhooks signatures with ``sentinel.webhooks.verify`` exactly as a
customer would, dedupes on ``webhook-id``, and plays a script of failures: ``"500"``,
``"429:SECONDS"`` (with Retry-After), ``"400"``, ``"timeout"`` (answers too late),
``"drop"`` (closes the connection without answering), ``"hang"`` (answers after 3 s).
When the script runs out it answers 200.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sentinel import config, findings
from sentinel.webhooks import VerificationError, verify

SECRET_ENV = "TEST_WEBHOOK_SECRET"
OLD_SECRET_ENV = "TEST_WEBHOOK_SECRET_OLD"
TOKEN_ENV = "TEST_HEC_TOKEN"


def fake_secret(tag: str) -> str:
    return "whsec_" + base64.b64encode(f"test-{tag}-signing-key-".encode() * 2).decode()


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    webhook_id: str | None
    accepted: bool = False


@dataclass
class Receiver:
    secrets: list[str]
    script: list[str] = field(default_factory=list)
    requests: list[Received] = field(default_factory=list)
    seen_ids: dict[str, int] = field(default_factory=dict)
    rejected: int = 0
    down: bool = False  # a long outage: every request gets 503 while set
    acks_after: int = 0  # HEC: how many polls answer false before true
    arrived: threading.Event = field(default_factory=threading.Event)  # set on every POST
    url: str = ""
    _ack_polls: int = 0
    _next_ack: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait_for(self, accepted: int, seconds: float = 5.0) -> None:
        """Wait until ``accepted`` requests were answered 200 (a timed-out one finishes late)."""
        deadline = time.monotonic() + seconds
        while sum(self.seen_ids.values()) < accepted and time.monotonic() < deadline:
            time.sleep(0.05)

    @property
    def delivered(self) -> list[dict[str, Any]]:
        """Bodies accepted once per webhook-id, parsed (HEC bodies are one object per line)."""
        out: list[dict[str, Any]] = []
        firsts: set[str] = set()
        for r in self.requests:
            key = r.webhook_id or str(id(r))
            if not r.accepted or key in firsts:
                continue
            firsts.add(key)
            for line in r.body.decode().splitlines():
                doc = json.loads(line)
                out.extend(doc if isinstance(doc, list) else [doc])  # Alertmanager: an array
        return out


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        wbufsize = -1  # one write per response (avoids Nagle + delayed-ACK stalls)

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            receiver.arrived.set()
            headers = {k.lower(): v for k, v in self.headers.items()}
            if self.path.startswith("/services/collector/ack"):
                self.ack(body)
                return
            with receiver.lock:
                action = receiver.script.pop(0) if receiver.script else "ok"
                if receiver.down:
                    action = "503"
            if action == "drop":
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            if action in ("timeout", "hang"):
                time.sleep(1.5 if action == "timeout" else 3.0)
            webhook_id = None
            if receiver.secrets:
                try:
                    webhook_id = verify(body, headers, receiver.secrets)
                except VerificationError:
                    receiver.rejected += 1
                    self.reply(401, {"error": "bad signature"})
                    return
            received = Received(self.path, headers, body, webhook_id)
            receiver.requests.append(received)
            if action.startswith("429"):
                self.reply(429, {"error": "slow down"}, {"Retry-After": action.split(":")[1]})
            elif action[:1] in ("4", "5") and action != "timeout":
                self.reply(int(action), {"error": f"simulated {action}"})
            else:
                received.accepted = True
                if webhook_id is not None:
                    with receiver.lock:
                        receiver.seen_ids[webhook_id] = receiver.seen_ids.get(webhook_id, 0) + 1
                answer: dict[str, Any] = {"text": "Success", "code": 0}
                if "x-splunk-request-channel" in headers:
                    answer["ackId"] = receiver._next_ack
                    receiver._next_ack += 1
                self.reply(200, answer)

        def ack(self, body: bytes) -> None:
            wanted = json.loads(body)["acks"]
            receiver._ack_polls += 1
            done = receiver._ack_polls > receiver.acks_after
            self.reply(200, {"acks": {str(a): done for a in wanted}})

        def reply(self, status: int, doc: Any, extra: dict[str, str] | None = None) -> None:
            data = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            # the client may have given up (a simulated timeout): it will retry
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(data)

    return Handler


def start_receiver() -> tuple[Receiver, ThreadingHTTPServer]:
    rec = Receiver(secrets=[fake_secret("new"), fake_secret("old")])
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(rec))
    server.daemon_threads = True
    rec.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return rec, server


def environ() -> dict[str, str]:
    return {
        SECRET_ENV: fake_secret("new"),
        OLD_SECRET_ENV: fake_secret("old"),
        TOKEN_ENV: "-".join(["hec", "token", "0000"]),
    }


def make_config(*hooks: str, extra: str = "") -> config.Config:
    """A real sentinel.toml text through the real loader; each hook is a [[alerts.webhook]] body."""
    text = extra + "\n" + "\n".join(f"[[alerts.webhook]]\n{h}\n" for h in hooks)
    return config.loads(text, environ=environ())


def json_hook(url: str, name: str = "siem", fmt: str = "json", more: str = "") -> str:
    return (
        f'name = "{name}"\nurl = "{url}/hook"\nformat = "{fmt}"\n'
        f'secret = [{{ env = "{SECRET_ENV}" }}]\ntimeout_seconds = 0.5\n'
        f"backoff_base_seconds = 1.0\nbackoff_cap_seconds = 60.0\n{more}"
    )


T0 = dt.datetime(2026, 11, 2, 9, 0, 0)


def make_finding(n: int = 0, **overrides: Any) -> findings.Finding:
    actor = f"arn:aws:sts::111122223333:assumed-role/ds-notebook/user{n}"
    values: dict[str, Any] = {
        "finding_id": findings.finding_id("weights.non_hydrator_read", (actor, "acme-w"), T0),
        "rule_id": "weights.non_hydrator_read",
        "severity": "high",
        "title": f"Non-hydrator read of acme-w by user{n}",
        "summary": "412 objects read outside the hydrator allow-list",
        "provider": "aws",
        "account": "111122223333",
        "actor": actor,
        "bucket": "acme-w",
        "object_key": "models/llama-ft/",
        "model": "llama-ft",
        "tenant": "team-a",
        "first_seen": T0,
        "last_seen": T0 + dt.timedelta(minutes=50),
        "event_count": 5,
        "bytes": 3 * 2**30,
        "evidence": {"event_ids": [f"ev-{n}-1", f"ev-{n}-2"]},
    }
    values.update(overrides)
    return findings.Finding(**values)
