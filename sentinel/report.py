"""``sentinel report``: one self-contained HTML file (inline SVG, no scripts, no external
assets) that an analyst can open or attach to a ticket: open findings, bytes read per actor per
day, findings per rule, and source freshness."""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Sequence
from typing import Any

from sentinel.store import Store
from sentinel.timeutil import utcnow

_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
_SEVERITY_COLORS = {
    "critical": "#7b1020",
    "high": "#d62728",
    "medium": "#ff7f0e",
    "low": "#1f77b4",
    "info": "#7f7f7f",
}
_CSS = """body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;
text-align:left;vertical-align:top}th{background:#f3f3f3}h2{margin-top:2em}
.t{white-space:nowrap}.sev{color:#fff;padding:1px 6px;border-radius:3px;font-size:12px}
svg text{font-size:11px}"""


def render(store: Store, *, days: int = 30, now: dt.datetime | None = None) -> str:
    now = now or utcnow()
    since = now - dt.timedelta(days=days)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        "<title>Sentinel report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>Sentinel report</h1>",
        f"<p>Generated {now:%Y-%m-%d %H:%M} UTC, covering the last {days} days.</p>",
        _open_findings(store),
        _bytes_chart(store, since),
        _findings_chart(store, since),
        _freshness(store),
        "</body></html>",
    ]
    return "\n".join(parts)


def _table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{_cell(c, v)}</td>" for c, v in zip(columns, row, strict=True))
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _cell(column: str, value: Any) -> str:
    if value is None:
        return ""
    if column == "severity":
        color = _SEVERITY_COLORS.get(str(value), "#555")
        return f"<span class='sev' style='background:{color}'>{html.escape(str(value))}</span>"
    if isinstance(value, dt.datetime):
        return f"<span class='t'>{value:%Y-%m-%d %H:%M}</span>"
    return html.escape(str(value))


def _open_findings(store: Store) -> str:
    columns, rows = store.columns_and_rows(
        "SELECT severity, rule_id, title, first_seen, last_seen, event_count"
        " FROM v_open_findings WHERE severity <> 'info' LIMIT 200"
    )
    if not rows:
        return "<h2>Open findings</h2><p>None.</p>"
    return f"<h2>Open findings ({len(rows)})</h2>" + _table(columns, rows)


def _bytes_chart(store: Store, since: dt.datetime) -> str:
    rows = store.query(
        "WITH top AS (SELECT actor FROM v_bytes_by_actor_hour WHERE hour >= ? AND actor IS NOT NULL"
        "  GROUP BY actor ORDER BY sum(bytes) DESC NULLS LAST LIMIT 6)"
        " SELECT actor, date_trunc('day', hour) AS day, sum(bytes) AS bytes"
        " FROM v_bytes_by_actor_hour JOIN top USING (actor) WHERE hour >= ?"
        " GROUP BY ALL ORDER BY day",
        [since, since],
    )
    series: dict[str, list[tuple[dt.datetime, float]]] = {}
    for row in rows:
        series.setdefault(row["actor"], []).append((row["day"], float(row["bytes"] or 0) / 2**30))
    title = "<h2>GiB read per day, top readers</h2>"
    if not series:
        return title + "<p>No reads in this period.</p>"
    return title + _line_chart(series)


def _line_chart(series: dict[str, list[tuple[dt.datetime, float]]]) -> str:
    width, height, left, bottom = 760, 260, 60, 30
    days = sorted({d for points in series.values() for d, _ in points})
    top = max(v for points in series.values() for _, v in points) or 1.0
    span = max(1, len(days) - 1)
    x = {d: left + (width - left - 10) * i / span for i, d in enumerate(days)}

    def y(v: float) -> float:
        return height - bottom - (height - bottom - 10) * v / top

    svg = [
        f"<svg width='{width}' height='{height + 20 * len(series)}' role='img'>",
        f"<line x1='{left}' y1='{height - bottom}' x2='{width}' y2='{height - bottom}'"
        " stroke='#999'/>",
        f"<text x='4' y='14'>{top:,.1f} GiB</text><text x='4' y='{height - bottom}'>0</text>",
        f"<text x='{left}' y='{height - 10}'>{days[0]:%Y-%m-%d}</text>",
        f"<text x='{width - 80}' y='{height - 10}'>{days[-1]:%Y-%m-%d}</text>",
    ]
    for i, (actor, points) in enumerate(sorted(series.items())):
        color = _COLORS[i % len(_COLORS)]
        path = " ".join(f"{x[d]:.1f},{y(v):.1f}" for d, v in points)
        svg.append(f"<polyline fill='none' stroke='{color}' stroke-width='2' points='{path}'/>")
        # Markers keep one-day bursts (a single point) visible.
        svg.extend(
            f"<circle cx='{x[d]:.1f}' cy='{y(v):.1f}' r='3' fill='{color}'/>" for d, v in points
        )
        label_y = height + 14 + 20 * i
        svg.append(f"<rect x='{left}' y='{label_y - 9}' width='10' height='10' fill='{color}'/>")
        svg.append(f"<text x='{left + 16}' y='{label_y}'>{html.escape(actor)}</text>")
    svg.append("</svg>")
    return "".join(svg)


def _findings_chart(store: Store, since: dt.datetime) -> str:
    rows = store.query(
        "SELECT rule_id, severity, count(*) AS n FROM findings WHERE last_seen >= ?"
        " GROUP BY ALL ORDER BY n DESC",
        [since],
    )
    title = "<h2>Findings per rule and severity (any status)</h2>"
    if not rows:
        return title + "<p>None in this period.</p>"
    top = max(r["n"] for r in rows)
    bar_h, label_w, width = 18, 300, 760
    svg = [f"<svg width='{width}' height='{bar_h * len(rows) + 10}' role='img'>"]
    for i, r in enumerate(rows):
        w = (width - label_w - 60) * r["n"] / top
        color = _SEVERITY_COLORS.get(r["severity"], "#555")
        label = html.escape(f"{r['rule_id']} ({r['severity']})")
        svg.append(
            f"<text x='0' y='{i * bar_h + 13}'>{label}</text>"
            f"<rect x='{label_w}' y='{i * bar_h + 3}' width='{w:.1f}' height='{bar_h - 5}'"
            f" fill='{color}'/><text x='{label_w + w + 4:.1f}' y='{i * bar_h + 13}'>"
            f"{r['n']}</text>"
        )
    svg.append("</svg>")
    return title + "".join(svg)


def _freshness(store: Store) -> str:
    columns, rows = store.columns_and_rows(
        "SELECT provider, account, bucket, newest_event, events FROM v_source_freshness"
        " ORDER BY newest_event"
    )
    return "<h2>Newest event per bucket</h2>" + _table(columns, rows)
