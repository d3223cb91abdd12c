"""Render query-shaped results (column names + rows) as table, json, ndjson or csv on stdout."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import json
import sys
from collections.abc import Sequence
from typing import IO, Any, Literal

Format = Literal["table", "json", "ndjson", "csv"]
FORMATS: tuple[Format, ...] = ("table", "json", "ndjson", "csv")
_MAX_CELL = 60


def to_jsonable(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return value.isoformat() + "Z"
        return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return value


def dumps(value: Any, *, indent: int | None = None) -> str:
    return json.dumps(to_jsonable(value), indent=indent, ensure_ascii=False, sort_keys=False)


def render(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    fmt: Format,
    out: IO[str] | None = None,
) -> None:
    out = out or sys.stdout
    if fmt == "json":
        out.write(dumps([dict(zip(columns, r, strict=True)) for r in rows], indent=2) + "\n")
    elif fmt == "ndjson":
        for row in rows:
            out.write(dumps(dict(zip(columns, row, strict=True))) + "\n")
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow(["" if v is None else _cell(v, limit=None) for v in row])
    else:
        _table(columns, rows, out)


def render_records(
    records: Sequence[dict[str, Any]], fmt: Format, out: IO[str] | None = None
) -> None:
    columns: list[str] = []
    for record in records:
        columns.extend(k for k in record if k not in columns)
    render(columns, [[r.get(c) for c in columns] for r in records], fmt, out)


def _cell(value: Any, *, limit: int | None = _MAX_CELL) -> str:
    if value is None:
        text = ""
    elif isinstance(value, dict | list):
        text = dumps(value)
    elif isinstance(value, dt.datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S")
    else:
        text = str(value)
    text = text.replace("\n", " ")
    if limit and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def _table(columns: Sequence[str], rows: Sequence[Sequence[Any]], out: IO[str]) -> None:
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        widths = [max(w, len(v)) for w, v in zip(widths, row, strict=True)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()
    out.write(line + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for row in cells:
        out.write("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() + "\n")
    out.write(f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n")
