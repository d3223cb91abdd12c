"""The low-confidence class: a secret-like name assigned a random-looking value.

Reported with severity ``low`` and confidence ``low`` so analysts can tell it from provider
formats; values that a provider detector already claims are left to that detector.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from sentinel.detectors import SECRET_RULE, Detector, Hit, entropy, is_placeholder

_KEYWORDS = (
    r"api[_-]?key|apikey|secret[_-]?key|client[_-]?secret|app[_-]?secret|secret"
    r"|passw(?:or)?d|pwd|access[_-]?token|auth[_-]?token|refresh[_-]?token|private[_-]?key"
)
_ASSIGN = re.compile(
    r"(?i:\b(" + _KEYWORDS + r"))\\{0,3}[\"']?\s{0,3}[:=]\s{0,3}\\{0,3}[\"']?"
    r"([A-Za-z0-9._~+/=!@#%^&*-]{12,128})"
)
_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")
_HAS_DIGIT = re.compile(r"\d")
_PATHLIKE = re.compile(r"^(?:/|\.{1,2}/|[a-z]+://)|\.(?:json|yaml|yml|pem|txt|key|crt)$")


def _value_is_secretlike(value: str) -> bool:
    if is_placeholder(value) or _UUID.match(value) or _PATHLIKE.search(value):
        return False
    if not _HAS_DIGIT.search(value) or value.isdigit():
        return False  # words (secret_name=model-weights-reader) or numbers (pwd_len=16)
    return entropy(value) >= 3.5


def _find(line: str) -> Iterator[Hit]:
    for m in _ASSIGN.finditer(line):
        value = m.group(2).rstrip(".,;")
        if _value_is_secretlike(value):
            start = m.start(2)
            yield Hit(
                "generic_secret_assignment",
                SECRET_RULE,
                "low",
                start,
                start + len(value),
                value,
                m.group(1).lower() + "=",
                "low",
            )


GENERIC = Detector(
    "generic_secret_assignment",
    SECRET_RULE,
    r"(?i:(?:" + _KEYWORDS + r")\\{0,3}[\"']?\s{0,3}[:=])",
    _find,
    literals=("key", "secret", "passw", "pwd", "token"),
    quick=("key", "secret", "pass", "pwd", "token"),
    quick_lower=True,
)
