"""Leak detectors: one module per family, one combined prefilter over all of them.

A detector says two things: a *trigger* (an RE2 regex that must match somewhere in a line for the
detector to possibly fire; all triggers are OR-ed into one compiled pattern that runs over large
byte chunks) and ``find(line)``, the precise Python check that runs only on the few lines a
trigger hit. Validation beyond the regex (checksums, decoded JWT headers, placeholders, entropy,
substance of a prompt) lives in ``find``.

Families: :mod:`.secrets` (provider formats, high confidence), :mod:`.generic` (secret-like
assignments, low confidence) and :mod:`.prompts` (LLM prompts and completions, canaries).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

SECRET_RULE = "logs.secret_leak"  # noqa: S105 (a rule id)
PROMPT_RULE = "logs.prompt_leak"


@dataclass(frozen=True)
class Hit:
    """One leak in one line. ``value`` is the leaked text: memory only, never stored or printed."""

    detector: str
    rule_id: str
    severity: str
    start: int
    end: int
    value: str
    kind: str
    confidence: str = "high"

    def __repr__(self) -> str:  # keep the value out of tracebacks and debug logs
        return f"Hit({self.detector}, {self.start}:{self.end}, {len(self.value)} chars)"


Finder = Callable[[str], Iterator[Hit]]


@dataclass(frozen=True)
class Detector:
    name: str
    rule_id: str
    trigger: str  # RE2 syntax, no capture groups
    find: Finder
    # Case-insensitive literals of which one must appear in any line this detector fires on;
    # empty = the detector cannot be expressed as a Loki line filter.
    literals: tuple[str, ...] = ()
    # Substrings (already lower-cased when ``quick_lower``) for a cheap per-line gate.
    quick: tuple[str, ...] = ()
    quick_lower: bool = False

    def applies(self, line: str, lowered: str) -> bool:
        hay = lowered if self.quick_lower else line
        return not self.quick or any(q in hay for q in self.quick)


# -- helpers shared by the families ------------------------------------------------------------

_PLACEHOLDER = re.compile(
    r"(?i)example|\$\{|\{\{|<[^>]*>|\*{3,}|x{5,}|\.\.\.|…|your[_-]|changeme|change_me|placeholder"
    r"|redacted|dummy|sample|^(?:null|none|true|false|undefined)$"
)


def is_placeholder(value: str) -> bool:
    """Known example values and templates that must never fire (``${VAR}``, ``<YOUR_KEY>``...)."""
    if _PLACEHOLDER.search(value):
        return True
    return len(set(value)) <= 3  # 0000000..., aaaaaaa...


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def bounded(line: str, start: int, end: int, word: str = r"[A-Za-z0-9_]") -> bool:
    """True when the characters just outside [start, end) are not word characters."""
    before = line[start - 1] if start > 0 else ""
    after = line[end] if end < len(line) else ""
    return not (before and re.match(word, before)) and not (after and re.match(word, after))


def resolve_overlaps(hits: list[Hit]) -> list[Hit]:
    """Keep the first (highest-priority) hit where spans of the same rule overlap."""
    kept: list[Hit] = []
    for hit in hits:
        if not any(
            k.rule_id == hit.rule_id and hit.start < k.end and k.start < hit.end for k in kept
        ):
            kept.append(hit)
    return kept
