"""The one door to DuckDB. Nothing else in Sentinel imports ``duckdb``.

A ``Store`` is one connection to one database file. Writers (ingest, detect, scan, deliver) open
it read-write and apply pending migrations; analysts open it read-only. DuckDB allows one writing
process per file, which matches how jobs run (``sentinel run`` takes a lock first).
"""

from __future__ import annotations

import contextlib
import importlib.resources
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb

from sentinel.errors import StoreError

Params = Sequence[Any] | dict[str, Any] | None

_MIGRATION_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class Store:
    def __init__(self, connection: duckdb.DuckDBPyConnection, path: str, read_only: bool) -> None:
        self._con = connection
        self.path = path
        self.read_only = read_only
        self._depth = 0

    # -- opening -----------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        read_only: bool = False,
        memory_limit: str = "1GB",
        threads: int = 2,
    ) -> Store:
        path = str(path)
        if read_only and path != ":memory:" and not Path(path).exists():
            raise StoreError(
                f"no database at {path}",
                hint="run an ingest first (or `sentinel demo`), or pass --db PATH",
            )
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        try:
            con = duckdb.connect(path, read_only=read_only)
        except duckdb.IOException as exc:
            raise StoreError(
                f"cannot open {path}: {exc}",
                hint="another sentinel process may be writing it; DuckDB allows one writer",
            ) from exc
        store = cls(con, path, read_only)
        store.execute(f"SET memory_limit = '{_safe_size(memory_limit)}'")
        store.execute(f"SET threads = {int(threads)}")
        # Insertion order is irrelevant to us and keeping it costs ~1.4x on bulk loads.
        store.execute("SET preserve_insertion_order = false")
        # Checkpoint-time vacuum merges the partly filled row groups each parallel bulk insert
        # leaves behind: a burst of single-threaded work and memory after large ingests, for
        # fuller row groups. Fully deleted row groups are still dropped without it.
        store.execute("SET max_vacuum_tasks = 0")
        if not read_only:
            store.migrate()
        return store

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- statements --------------------------------------------------------------------------
    def execute(self, sql: str, params: Params = None) -> None:
        try:
            self._con.execute(sql, params)
        except duckdb.Error as exc:
            raise _error(exc) from exc

    def execute_count(self, sql: str, params: Params = None) -> int:
        """Run an INSERT/UPDATE/DELETE and return how many rows it changed."""
        _, rows = self.columns_and_rows(sql, params)
        return int(rows[0][0]) if rows else 0

    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        try:
            self._con.executemany(sql, rows)
        except duckdb.Error as exc:
            raise _error(exc) from exc

    def query(self, sql: str, params: Params = None) -> list[dict[str, Any]]:
        columns, rows = self.columns_and_rows(sql, params)
        return [dict(zip(columns, row, strict=True)) for row in rows]

    def columns_and_rows(
        self, sql: str, params: Params = None
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run a statement and fetch its whole result (DuckDB refuses new work while one is
        half-read)."""
        try:
            cursor = self._con.execute(sql, params)
            columns = [d[0] for d in cursor.description or []]
            return columns, cursor.fetchall()
        except duckdb.Error as exc:
            raise _error(exc) from exc

    def scalar(self, sql: str, params: Params = None) -> Any:
        _, rows = self.columns_and_rows(sql, params)
        return rows[0][0] if rows else None

    def register(self, name: str, frame: Any) -> None:
        """Expose an in-memory frame (polars/arrow) to SQL as a view named ``name``."""
        self._con.register(name, frame)

    def unregister(self, name: str) -> None:
        self._con.unregister(name)

    def disable_optimizer(self, name: str | None) -> None:
        """Turn one of DuckDB's optimizer passes off for this connection (``None``: all on).
        A session setting, so it survives a rolled-back transaction."""
        if name is None:
            self.execute("RESET disabled_optimizers")
        elif name.replace("_", "").isalnum():
            self.execute(f"SET disabled_optimizers = '{name}'")
        else:
            raise ValueError(f"not an optimizer name: {name!r}")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Store]:
        """All statements inside commit together or not at all. Nested calls join the outer one."""
        if self._depth:
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1
            return
        self._con.execute("BEGIN TRANSACTION")
        self._depth = 1
        try:
            yield self
        except BaseException:
            self._depth = 0
            self._con.execute("ROLLBACK")
            raise
        self._depth = 0
        try:
            self._con.execute("COMMIT")
        except duckdb.Error as exc:
            raise StoreError(f"commit failed: {exc}") from exc

    def next_id(self, sequence: str) -> int:
        return int(self.scalar(f"SELECT nextval('{_safe_ident(sequence)}')"))

    # -- schema ------------------------------------------------------------------------------
    def migrate(self) -> list[str]:
        """Apply migrations not yet recorded in ``schema_migrations``; return their names."""
        self.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name VARCHAR NOT NULL,"
            " applied_at TIMESTAMP NOT NULL DEFAULT (now()::TIMESTAMP))"
        )
        done = {row[0] for row in self.columns_and_rows("SELECT version FROM schema_migrations")[1]}
        applied = []
        for version, name, sql in _migrations():
            if version in done:
                continue
            with self.transaction():
                for statement in _split_sql(sql):
                    self.execute(statement)
                self.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (?, ?)", [version, name]
                )
            applied.append(f"{version:04d}_{name}")
        return applied


def _error(exc: duckdb.Error) -> StoreError:
    kind = type(exc).__name__
    hint = None
    if isinstance(exc, duckdb.OutOfMemoryException):
        hint = "raise store.memory_limit or lower store.threads in sentinel.toml"
    return StoreError(f"{kind}: {exc}", hint=hint, kind=kind)


def _migrations() -> list[tuple[int, str, str]]:
    found = []
    for entry in importlib.resources.files("sentinel.migrations").iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    return sorted(found)


def _split_sql(sql: str) -> list[str]:
    """Split a migration into statements: each one ends with ';' at the end of a line."""
    body = "\n".join(line for line in sql.splitlines() if not line.strip().startswith("--"))
    return [s.strip() for s in re.split(r";[ \t]*$", body, flags=re.MULTILINE) if s.strip()]


def _safe_size(value: str) -> str:
    if not re.fullmatch(r"\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)", value.strip()):
        raise StoreError(f"invalid memory_limit {value!r}", hint="use a size such as '1GB'")
    return value.strip()


def _safe_ident(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise StoreError(f"invalid identifier {name!r}")
    return name
