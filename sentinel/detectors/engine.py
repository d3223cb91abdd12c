"""One combined pass: an RE2 prefilter over large byte chunks, precise detectors on hit lines.

Every detector's trigger is OR-ed into one RE2 pattern (linear time, DFA, no per-line Python
work). Only lines where it matches are decoded and handed to the detectors' Python checks, so
throughput is bounded by RE2 on benign logs (hundreds of MB/s) rather than by the number of
detectors.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

import re2

from sentinel.detectors import (
    PROMPT_RULE,
    SECRET_RULE,
    Detector,
    Hit,
    generic,
    prompts,
    resolve_overlaps,
    secrets,
)

CHUNK_BYTES = 4 << 20


def all_detectors(
    *, canaries: Sequence[str] = (), prompts_enabled: bool = True, disabled: Sequence[str] = ()
) -> list[Detector]:
    """Detectors in priority order: canaries, provider secrets, generic secrets, prompts."""
    found: list[Detector] = []
    canary = prompts.canary_detector(canaries)
    if canary:
        found.append(canary)
    found.extend(secrets.DETECTORS)
    found.append(generic.GENERIC)
    if prompts_enabled:
        found.extend(prompts.DETECTORS)
    return [d for d in found if d.name not in disabled]


def detector_names() -> list[str]:
    return [d.name for d in all_detectors(canaries=["x"])]


@dataclass(frozen=True)
class LineHits:
    index: int  # 0-based position of the line in its input
    hits: list[Hit]


class Scanner:
    def __init__(self, detectors: Sequence[Detector]) -> None:
        self.detectors = list(detectors)
        options = re2.Options()
        options.max_mem = 256 << 20
        options.never_capture = True
        alternation = "|".join(f"(?:{d.trigger})" for d in self.detectors)
        self._prefilter = re2.compile(alternation.encode(), options)
        self._needs_lower = any(d.quick_lower for d in self.detectors)

    def detect_line(self, line: str) -> list[Hit]:
        """All leaks in one line, overlapping secret matches resolved by detector priority."""
        lowered = line.lower() if self._needs_lower else line
        hits: list[Hit] = []
        for detector in self.detectors:
            if detector.applies(line, lowered):
                hits.extend(detector.find(line))
        if len(hits) < 2:
            return hits
        secrets_found = resolve_overlaps([h for h in hits if h.rule_id == SECRET_RULE])
        prompt_hits = [h for h in hits if h.rule_id == PROMPT_RULE]
        canaries = [h for h in prompt_hits if h.detector == "canary"]
        others = [h for h in prompt_hits if h.detector != "canary"][:1]
        return secrets_found + canaries + others

    def hit_lines(self, buf: bytes) -> Iterator[tuple[int, int, int]]:
        """(line index within buf, start, end) of every line the prefilter matches."""
        lineno = 0
        counted = 0
        line_end = -1
        for m in self._prefilter.finditer(buf):
            if m.start() <= line_end:
                continue  # another trigger on a line already reported
            start = buf.rfind(b"\n", 0, m.start()) + 1
            line_end = buf.find(b"\n", m.end())
            if line_end < 0:
                line_end = len(buf)
            lineno += buf.count(b"\n", counted, start)
            counted = start
            yield lineno, start, line_end

    def scan_buffer(self, buf: bytes) -> Iterator[LineHits]:
        for index, start, end in self.hit_lines(buf):
            hits = self.detect_line(buf[start:end].decode("utf-8", "replace"))
            if hits:
                yield LineHits(index, hits)

    def scan_lines(
        self, lines: Iterable[str], chunk_bytes: int = CHUNK_BYTES
    ) -> Iterator[LineHits]:
        """Scan an iterable of log lines (without trailing newlines); indexes are 0-based.

        Lines are taken in batches by count (``islice``: no per-line Python work), the count
        adapted so a batch is about ``chunk_bytes`` once joined.
        """
        it = iter(lines)
        base = 0
        count = 4096
        while batch := list(itertools.islice(it, count)):
            text = "\n".join(batch)
            yield from self._scan_text(text, batch, base)
            base += len(batch)
            ratio = chunk_bytes / max(1, len(text))
            count = max(64, min(1 << 17, int(count * ratio)))

    def _scan_text(self, text: str, batch: list[str], base: int) -> Iterator[LineHits]:
        if text.count("\n") != len(batch) - 1:  # lines with embedded newlines (multi-line entries)
            text = "\n".join(line.replace("\n", "\r") for line in batch)
        for found in self.scan_buffer(text.encode("utf-8", "surrogatepass")):
            yield LineHits(base + found.index, found.hits)

    def scan_binary(self, stream: BinaryIO, chunk_bytes: int = CHUNK_BYTES) -> Iterator[LineHits]:
        """Scan a binary stream of newline-separated lines; indexes are 0-based line numbers."""
        base = 0
        carry = b""
        while True:
            block = stream.read(chunk_bytes)
            if not block:
                break
            data = carry + block
            cut = data.rfind(b"\n")
            if cut < 0:
                carry = data
                continue
            chunk, carry = data[:cut], data[cut + 1 :]
            for found in self.scan_buffer(chunk):
                yield LineHits(base + found.index, found.hits)
            base += chunk.count(b"\n") + 1
        if carry:
            for found in self.scan_buffer(carry):
                yield LineHits(base + found.index, found.hits)
