"""The last barrier before a finding is stored or sent: nothing that looks like a secret, and no
prompt or log text, ever leaves in a finding.

Leak detectors already store only a masked preview and a keyed fingerprint. This module makes that
a property of every finding, whoever wrote it: evidence keys that carry raw content (``line``,
``secret``, ``prompt``, ``body``, ...) are dropped, and any string that matches a well-known
credential shape is masked to ``AKIA…MPLE`` form.
"""

from __future__ import annotations

import re
from typing import Any

# Evidence keys whose values are raw content; dropped whatever they hold.
RAW_CONTENT_KEYS = frozenset(
    {
        "secret",
        "secret_value",
        "match",
        "matched",
        "line",
        "raw_line",
        "log_line",
        "raw",
        "prompt",
        "completion",
        "messages",
        "content",
        "body",
        "request_body",
        "response_body",
        "text",
    }
)

_CREDENTIALS = re.compile(
    "|".join(
        [
            r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",  # AWS access key ids
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)",
            r"\bgh[pousr]_[A-Za-z0-9]{30,}\b",  # GitHub tokens
            r"\bgithub_pat_[A-Za-z0-9_]{30,}\b",
            r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b",  # Slack
            r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_\-]{20,}\b",  # OpenAI / Anthropic style keys
            r"\bhf_[A-Za-z0-9]{30,}\b",  # Hugging Face
            r"\bAIza[0-9A-Za-z_\-]{35}\b",  # Google API keys
            r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\b",  # JWTs
            r"(?<=[Bb]earer )[A-Za-z0-9._~+/\-]{16,}=*",
        ]
    )
)


def mask(value: str) -> str:
    """``AKIAIOSFODNN7EXAMPLE`` -> ``AKIA…MPLE``; short values become ``…``."""
    if len(value) < 12:
        return "…"
    return f"{value[:4]}…{value[-4:]}"


def scrub_text(text: str) -> str:
    return _CREDENTIALS.sub(lambda m: mask(m.group(0)), text)


def scrub(value: Any) -> Any:
    """A copy of ``value`` with raw-content keys dropped and credential shapes masked."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, dict):
        return {
            k: scrub(v)
            for k, v in value.items()
            if not (isinstance(k, str) and k.lower() in RAW_CONTENT_KEYS)
        }
    if isinstance(value, list | tuple):
        return [scrub(v) for v in value]
    return value
