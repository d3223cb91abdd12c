"""Leak scanning: log lines in, findings with masked evidence out; the lines are never stored.

``scan_lines`` / ``scan_file`` report leaks line by line (``sentinel scan file``). ``scan_entries``
turns timestamped entries of labelled streams into occurrences, and ``record`` folds occurrences
into ``findings`` (one per secret per stream per day, or per prompt detector per stream per day)
in the same transaction as the Loki watermark (``sentinel scan loki``, see ``scan_loki``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from sentinel import findings, logs
from sentinel.config import Config, ScanConfig
from sentinel.detectors import SECRET_RULE, Hit
from sentinel.detectors.engine import LineHits, Scanner, all_detectors, detector_names
from sentinel.errors import ConfigError, Problem
from sentinel.fingerprint import Fingerprinter, mask
from sentinel.loki import Entry
from sentinel.store import Store
from sentinel.timeutil import utcnow

log = logs.get(__name__)


@dataclass(frozen=True)
class Settings:
    """What a scan needs besides the lines: the fingerprint key and the detector choices."""

    fingerprint_key: bytes
    canaries: tuple[str, ...] = ()
    prompts: bool = True
    disabled: tuple[str, ...] = ()
    allow_fingerprints: frozenset[str] = frozenset()
    severity: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, scan: ScanConfig, key: bytes, *, prompts: bool = True) -> Settings:
        known = set(detector_names())
        named = [*scan.disabled_detectors, *(o.detector for o in scan.severity)]
        unknown = sorted({n for n in named if n not in known})
        if unknown:
            raise ConfigError(
                [Problem("scan", None, f"unknown detector {n!r}") for n in unknown],
                hint="detectors: " + ", ".join(sorted(known)),
            )
        return cls(
            fingerprint_key=key,
            canaries=scan.canaries,
            prompts=prompts,
            disabled=scan.disabled_detectors,
            allow_fingerprints=frozenset(scan.allow_fingerprints),
            severity={o.detector: o.severity for o in scan.severity},
        )

    def scanner(self) -> Scanner:
        return Scanner(
            all_detectors(
                canaries=self.canaries, prompts_enabled=self.prompts, disabled=self.disabled
            )
        )


@dataclass(frozen=True)
class Leak:
    """A reportable leak: everything here is safe to print or store."""

    rule_id: str
    detector: str
    severity: str
    confidence: str
    preview: str
    fingerprint: str
    offset: int
    length: int


def _leaks(hits: Sequence[Hit], settings: Settings, fingerprint: Fingerprinter) -> list[Leak]:
    out = []
    for hit in hits:
        fp = fingerprint(hit.value)
        if fp in settings.allow_fingerprints:
            continue
        out.append(
            Leak(
                hit.rule_id,
                hit.detector,
                settings.severity.get(hit.detector, hit.severity),
                hit.confidence,
                mask(hit.value, hit.kind),
                fp,
                hit.start,
                hit.end - hit.start,
            )
        )
    return out


def _rows(found: Iterator[LineHits], settings: Settings) -> Iterator[dict[str, Any]]:
    fingerprint = Fingerprinter(settings.fingerprint_key)
    for line_hits in found:
        for leak in _leaks(line_hits.hits, settings, fingerprint):
            yield {
                "line": line_hits.index + 1,
                "rule_id": leak.rule_id,
                "detector": leak.detector,
                "severity": leak.severity,
                "confidence": leak.confidence,
                "preview": leak.preview,
                "fingerprint": leak.fingerprint,
            }


def scan_lines(lines: Iterable[str], settings: Settings) -> Iterator[dict[str, Any]]:
    """Leaks in an iterable of lines: rows with ``line`` (1-based), ``rule_id``, ``detector``,
    ``severity``, ``confidence``, ``preview`` (masked) and ``fingerprint``. Never the secret."""
    yield from _rows(settings.scanner().scan_lines(lines), settings)


def scan_file(stream: BinaryIO, settings: Settings) -> Iterator[dict[str, Any]]:
    """Same as ``scan_lines`` over a binary stream (plain or JSON-lines logs)."""
    yield from _rows(settings.scanner().scan_binary(stream), settings)


# -- occurrences and findings -------------------------------------------------------------------


@dataclass(frozen=True)
class Occurrence:
    source: str
    tenant: str
    stream: str
    labels: dict[str, str]
    ts_ns: int
    leak: Leak

    @property
    def occurrence_id(self) -> str:
        key = "|".join(
            [self.source, self.stream, str(self.ts_ns), self.leak.detector, self.leak.fingerprint]
        )
        return _digest(f"{key}|{self.leak.offset}")

    @property
    def finding_id(self) -> str:
        day = dt.datetime.fromtimestamp(self.ts_ns / 1e9, tz=dt.UTC).date().isoformat()
        what = self.leak.fingerprint if self.leak.rule_id == SECRET_RULE else self.leak.detector
        return findings.finding_id(self.leak.rule_id, (self.source, self.stream, what), day)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def scan_entries(
    entries: Iterable[Entry],
    settings: Settings,
    *,
    source: str,
    tenant: str = "",
    scanner: Scanner | None = None,
    stats: dict[str, int] | None = None,
) -> Iterator[Occurrence]:
    """Occurrences of leaks in timestamped entries of labelled streams (e.g. from Loki)."""
    scanner = scanner or settings.scanner()
    fingerprint = Fingerprinter(settings.fingerprint_key)
    counts = stats if stats is not None else {}
    batch: list[Entry] = []
    size = 0

    def flush() -> Iterator[Occurrence]:
        counts["lines"] = counts.get("lines", 0) + len(batch)
        counts["bytes"] = counts.get("bytes", 0) + size
        for found in scanner.scan_lines((e.line for e in batch), chunk_bytes=1 << 62):
            entry = batch[found.index]
            for leak in _leaks(found.hits, settings, fingerprint):
                yield Occurrence(source, tenant, entry.stream, entry.labels, entry.ts_ns, leak)

    for entry in entries:
        batch.append(entry)
        size += len(entry.line) + 1
        if size >= 4 << 20:
            yield from flush()
            batch, size = [], 0
    if batch:
        yield from flush()


def record(
    store: Store, cfg: Config, occurrences: Sequence[Occurrence], *, now: dt.datetime
) -> int:
    """Insert occurrences (once each) and upsert their findings through ``sentinel.findings``
    (which queues deliveries in the same transaction); returns findings touched."""
    if not occurrences:
        return 0
    with store.transaction():
        for occ in occurrences:
            store.execute(
                "INSERT INTO leak_occurrences VALUES (?, ?, ?, ?, ?, ?,"
                " make_timestamp(?::BIGINT // 1000), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                [
                    occ.occurrence_id,
                    occ.finding_id,
                    occ.source,
                    occ.tenant or None,
                    occ.stream,
                    json.dumps(occ.labels, sort_keys=True),
                    occ.ts_ns,
                    occ.ts_ns,
                    occ.leak.rule_id,
                    occ.leak.detector,
                    occ.leak.severity,
                    occ.leak.confidence,
                    occ.leak.fingerprint,
                    occ.leak.preview,
                    occ.leak.offset,
                    occ.leak.length,
                    now,
                ],
            )
        ids = sorted({o.finding_id for o in occurrences})
        for row in store.query(_AGGREGATE_FINDINGS, [ids]):
            row["evidence"] = json.loads(row["evidence"])
            findings.upsert(store, cfg, findings.Finding(**row), now=now)
    return len(ids)


# One finding per (rule, source, stream, fingerprint or detector, day), re-aggregated from all of
# its occurrences: masked preview and fingerprints only, never the leaked value.
_AGGREGATE_FINDINGS = """
SELECT finding_id, any_value(rule_id) AS rule_id,
       max_by(severity, CASE severity WHEN 'critical' THEN 4 WHEN 'high' THEN 3
                        WHEN 'medium' THEN 2 WHEN 'low' THEN 1 ELSE 0 END) AS severity,
       CASE any_value(rule_id) WHEN 'logs.secret_leak' THEN 'Secret leaked in logs: '
            ELSE 'LLM prompt or completion leaked in logs: ' END || any_value(detector) AS title,
       any_value(detector) || ' ' || any_value(preview) || ' seen ' || count(*)::VARCHAR
         || 'x in ' || any_value(stream) || ' (' || any_value(source) || ')' AS summary,
       'loki' AS provider, any_value(source) AS account, any_value(tenant) AS tenant,
       min(ts) AS first_seen, max(ts) AS last_seen, count(*) AS event_count,
       json_object('detector', any_value(detector), 'preview', any_value(preview),
                   'fingerprint', CASE WHEN count(DISTINCT fingerprint) = 1
                                       THEN any_value(fingerprint) END,
                   'fingerprints', list(DISTINCT fingerprint ORDER BY fingerprint)[1:20],
                   'confidence', any_value(confidence), 'source', any_value(source),
                   'stream', any_value(stream), 'labels', any_value(stream_labels),
                   'timestamps_ns', list(ts_ns ORDER BY ts_ns)[1:50])::VARCHAR AS evidence
FROM leak_occurrences WHERE list_contains(?, finding_id) GROUP BY finding_id ORDER BY finding_id
"""


# -- Loki ---------------------------------------------------------------------------------------


@dataclass
class SourceResult:
    source: str
    windows: int = 0
    lines: int = 0
    bytes: int = 0
    leaks: int = 0
    findings: int = 0
    scanned_until: str | None = None
    error: str | None = None


def line_filter(settings: Settings) -> str:
    """A Loki line filter naming every fixed literal the secret detectors need (and canaries).

    Loki turns an alternation of literals into substring checks, so this costs the server little
    and only matching lines cross the network. Prompt detection needs the full stream instead.
    """
    literals: list[str] = []
    for detector in all_detectors(canaries=settings.canaries, prompts_enabled=False):
        if detector.name in settings.disabled:
            continue
        literals.extend(x for x in detector.literals if x not in literals)
    alternation = "|".join(re.escape(x) for x in literals)
    return f"|~ {json.dumps('(?i)(?:' + alternation + ')')}"


def get_watermark(store: Store, source: str) -> int | None:
    value = store.scalar("SELECT scanned_until_ns FROM loki_watermarks WHERE source = ?", [source])
    return int(value) if value is not None else None


def _set_watermark(
    store: Store, src: Any, until_ns: int, stats: dict[str, int], now: dt.datetime
) -> None:
    store.execute(
        "INSERT INTO loki_watermarks VALUES"
        " (?, ?, ?, ?, ?, make_timestamp(?::BIGINT // 1000), ?, ?, ?)"
        " ON CONFLICT (source) DO UPDATE SET"
        " scanned_until_ns = greatest(loki_watermarks.scanned_until_ns, excluded.scanned_until_ns),"
        " scanned_until = greatest(loki_watermarks.scanned_until, excluded.scanned_until),"
        " lines = loki_watermarks.lines + excluded.lines,"
        " bytes = loki_watermarks.bytes + excluded.bytes, updated_at = excluded.updated_at",
        [
            src.label,
            src.url,
            src.tenant or None,
            src.selector,
            until_ns,
            until_ns,
            stats.get("lines", 0),
            stats.get("bytes", 0),
            now,
        ],
    )


def scan_loki(
    store: Store,
    cfg: Config,
    src: Any,
    client: Any,
    settings: Settings,
    *,
    now_ns: int,
    since_ns: int | None = None,
    until_ns: int | None = None,
) -> SourceResult:
    """Scan one ``[[sources.loki]]`` up to now - lag, window by window.

    Each window's findings commit with the watermark, so a crash loses at most one window of
    work and a rerun repeats it harmlessly. Each run starts ``overlap_seconds`` before the
    watermark to catch lines Loki accepted late; occurrences are keyed, so nothing doubles.
    ``since_ns``/``until_ns`` replay a window without moving the watermark.
    """
    ns = 1_000_000_000
    result = SourceResult(src.label)
    backfill = since_ns is not None or until_ns is not None
    end = until_ns if until_ns is not None else now_ns - src.lag_seconds * ns
    mark = get_watermark(store, src.label)
    if since_ns is not None:
        start = since_ns
    elif mark is not None:
        start = mark - src.overlap_seconds * ns
    elif src.start:
        start = parse_time(src.start, now_ns)
    else:
        start = end - src.overlap_seconds * ns
    per_source = dataclasses.replace(settings, prompts=settings.prompts and src.prompt_detection)
    pipeline = "" if per_source.prompts or not src.line_filter else line_filter(per_source)
    scanner = per_source.scanner()
    window = max(1, min(src.window_seconds, 3600)) * ns
    cursor = start
    while cursor < end:
        w_end = min(cursor + window, end)
        stats: dict[str, int] = {}
        entries = client.entries(
            src.selector, pipeline, cursor, w_end, limit=src.limit, max_attempts=src.max_attempts
        )
        found = list(
            scan_entries(
                entries,
                per_source,
                source=src.label,
                tenant=src.tenant,
                scanner=scanner,
                stats=stats,
            )
        )
        now = utcnow()
        with store.transaction():
            result.findings += record(store, cfg, found, now=now)
            if not backfill:
                _set_watermark(store, src, w_end, stats, now)
        result.windows += 1
        result.lines += stats.get("lines", 0)
        result.bytes += stats.get("bytes", 0)
        result.leaks += len(found)
        log.info(
            "scan.window_done",
            source=src.label,
            start_ns=cursor,
            end_ns=w_end,
            lines=stats.get("lines", 0),
            leaks=len(found),
        )
        cursor = w_end
    if end > start:
        result.scanned_until = _iso(end)
    return result


def parse_time(text: str, now_ns: int) -> int:
    """``2026-11-29T10:00:00Z`` or a duration before now (``90m``, ``6h``, ``2d``) as ns."""
    from sentinel.errors import UsageError

    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    text = text.strip()
    if text[:-1].isdigit() and text[-1:] in units:
        return now_ns - int(text[:-1]) * units[text[-1]] * 1_000_000_000
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise UsageError(f"cannot read time {text!r}: use ISO 8601 or a duration like 6h") from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp()) * 1_000_000_000 + when.microsecond * 1000


def _iso(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, tz=dt.UTC).isoformat().replace("+00:00", "Z")


def record_entries(
    store: Store,
    cfg: Config,
    entries: Iterable[Entry],
    settings: Settings,
    *,
    source: str,
    tenant: str = "",
    now: dt.datetime | None = None,
) -> int:
    """Scan entries and record their leaks as findings (what ``sentinel demo`` calls with
    ``Settings(fingerprint_key=fingerprint.DEMO_KEY)``); returns the findings touched."""
    found = list(scan_entries(entries, settings, source=source, tenant=tenant))
    when = now or utcnow()
    return record(store, cfg, found, now=when)
