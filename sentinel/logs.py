"""Structured logs on stderr: JSON lines for jobs, a readable console format on a terminal.

Events are named ``area.what_happened`` (``ingest.file_loaded``) and carry their figures as
keys, so a log pipeline can count and alert on them without parsing sentences.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

LEVELS = ("debug", "info", "warning", "error")


def configure(level: str = "info", *, json_logs: bool | None = None) -> None:
    if json_logs is None:
        json_logs = not sys.stderr.isatty()
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if json_logs
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        # Look up sys.stderr per logger, not once: tests and embedders swap the stream.
        logger_factory=lambda *_: structlog.PrintLogger(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def get(name: str) -> Any:
    if not structlog.is_configured():
        configure()  # library use without the CLI still logs to stderr, never stdout
    return structlog.get_logger(name)
