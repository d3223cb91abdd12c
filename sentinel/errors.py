"""Domain errors. The library raises these; only the CLI turns them into exit codes.

    SentinelError                 anything we report to a user (message + optional hint)
    ├── ConfigError               sentinel.toml is wrong; carries every problem found
    ├── UsageError                arguments that cannot work together (exit 2)
    ├── StoreError                the DuckDB file cannot be opened, migrated or written
    ├── SourceError               a log source failed; ``transient`` marks retryable failures
    │   └── AccessDeniedError     credentials lack permission on a named bucket/prefix/project
    ├── InputError                one input (file, line, record) is malformed; it is quarantined
    └── LockedError               another writer holds the job lock (exit 4)

Transient errors carry ``transient = True`` so retry loops need a single ``except``.
"""

from __future__ import annotations

from dataclasses import dataclass

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_PARTIAL = 3
EXIT_LOCKED = 4


class SentinelError(Exception):
    """Base for errors shown to users. ``hint`` says what to do about it."""

    exit_code = EXIT_ERROR
    transient = False

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def as_dict(self) -> dict[str, object]:
        """The one JSON shape of an error, for ``--format json`` callers."""
        return {"error": type(self).__name__, "message": self.message, "hint": self.hint}


@dataclass(frozen=True)
class Problem:
    """One problem in a configuration or rule file, located for the reader."""

    path: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.message}"


class ConfigError(SentinelError):
    def __init__(self, problems: list[Problem], *, hint: str | None = None) -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{len(problems)} problem(s) in configuration:\n{lines}", hint=hint)

    def as_dict(self) -> dict[str, object]:
        base = super().as_dict()
        base["problems"] = [
            {"path": p.path, "line": p.line, "message": p.message} for p in self.problems
        ]
        return base


class UsageError(SentinelError):
    exit_code = EXIT_USAGE


class StoreError(SentinelError):
    """``kind`` is the database's own error class (e.g. ``InvalidInputException``), so callers
    can tell bad input from a full disk or memory without parsing messages."""

    def __init__(self, message: str, *, hint: str | None = None, kind: str = "") -> None:
        super().__init__(message, hint=hint)
        self.kind = kind


class SourceError(SentinelError):
    def __init__(self, message: str, *, hint: str | None = None, transient: bool = False) -> None:
        super().__init__(message, hint=hint)
        self.transient = transient


class AccessDeniedError(SourceError):
    pass


class InputError(SentinelError):
    """A single input is malformed. ``reason`` is a short machine-readable code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class LockedError(SentinelError):
    exit_code = EXIT_LOCKED
