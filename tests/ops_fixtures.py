"""Helpers for the ops tests: job files, free loopback ports, waiting for a process or a URL."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import REPO, sentinel_process_env


def write_job(directory: Path, name: str, steps: list[dict[str, str]], **extra: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    lines = [f'name = "{name}"', f'schedule = "{extra.get("schedule", "*/5 * * * *")}"']
    lines.append("steps = [")
    for step in steps:
        body = ", ".join(f"{key} = {json.dumps(value)}" for key, value in step.items())
        lines.append(f"  {{ {body} }},")
    lines.append("]")
    path = directory / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], Any], timeout: float = 20.0, every: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
        except (OSError, httpx.HTTPError, ValueError, KeyError):
            value = None
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {check}")


def start_sentinel(
    *args: str, cwd: Path, log: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``python -m sentinel ARGS`` in the background: stderr to ``log``, stdout to ``log.out``."""
    with log.open("wb") as err, log.with_suffix(".out").open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "sentinel", *args],
            cwd=cwd,
            env=sentinel_process_env(env),
            stdout=out,
            stderr=err,
        )


def log_events(log: Path, event: str) -> list[dict[str, Any]]:
    found = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("{") and f'"{event}"' in line:
            record = json.loads(line)
            if record.get("event") == event:
                found.append(record)
    return found


def feed_fifo(path: Path, text: str) -> None:
    """Open the FIFO a waiting ``sql -f`` step reads from, and give it its query."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def start_server(argv: list[str], url: str, log: Path, ready_path: str = "/-/ready") -> Any:
    """Start a Prometheus-family binary and wait until it answers ``ready_path``."""
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: httpx.get(url + ready_path, timeout=1).status_code == 200, timeout=30)
    except AssertionError:
        proc.kill()
        proc.wait()
        raise AssertionError(log.read_text(errors="replace")[-2000:]) from None
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


__all__ = ["REPO"]
