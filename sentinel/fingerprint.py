"""Evidence that never contains what leaked: keyed fingerprints and masked previews.

A fingerprint is HMAC-SHA256 of the leaked value under a key from configuration, so the same
secret seen in two streams (or two days) carries the same fingerprint, while someone holding the
database cannot brute-force short passwords from it without the key (unlike an unsalted hash).
"""

from __future__ import annotations

import hashlib
import hmac

from sentinel.errors import ConfigError, Problem

# Only for `sentinel demo` and tests: a fixed key makes demo output reproducible. Real runs must
# configure `scan.fingerprint_key`; the CLI refuses to scan without one.
DEMO_KEY = b"sentinel-demo-fingerprint-key-not-for-production"
MIN_KEY_BYTES = 16


class Fingerprinter:
    """Keyed fingerprints of leaked values (hex, 128 bits shown)."""

    def __init__(self, key: bytes) -> None:
        if len(key) < MIN_KEY_BYTES:
            raise ConfigError(
                [
                    Problem(
                        "scan.fingerprint_key", None, f"key is shorter than {MIN_KEY_BYTES} bytes"
                    )
                ],
                hint="generate one with: python -c 'import secrets; print(secrets.token_hex(32))'",
            )
        self._key = key

    def __call__(self, value: str) -> str:
        digest = hmac.new(self._key, value.encode("utf-8", "surrogatepass"), hashlib.sha256)
        return digest.hexdigest()[:32]


def mask(value: str, kind: str) -> str:
    """``kind`` prefix + the last few characters + the length: ``ghp_…x9Qa (40 chars)``.

    Short values show fewer (or no) trailing characters so the preview never reveals a
    meaningful share of the secret. Prompt content shows no characters at all.
    """
    n = len(value)
    if kind.startswith("prompt") or kind == "canary":
        return f"[{kind}: {n} chars]"
    tail = 4 if n >= 24 else 2 if n >= 12 else 0
    shown = value[-tail:] if tail else ""
    return f"{kind}…{shown} ({n} chars)"
