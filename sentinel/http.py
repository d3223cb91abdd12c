"""The one door for outbound HTTP (Loki, webhooks, Pushgateway): httpx with our defaults, plus
the retry policy every caller shares (capped exponential backoff with full jitter, honouring
``Retry-After``).
"""

from __future__ import annotations

import datetime as dt
import email.utils
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from sentinel import __version__

USER_AGENT = f"sentinel/{__version__}"
RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
# Network failures worth another try: refused/reset connections, timeouts, dropped responses.
RETRYABLE_ERRORS: tuple[type[Exception], ...] = (httpx.TransportError,)


def client(*, timeout: float = 30.0, headers: dict[str, str] | None = None) -> httpx.Client:
    merged = {"User-Agent": USER_AGENT, **(headers or {})}
    return httpx.Client(timeout=timeout, headers=merged, follow_redirects=False)


@dataclass(frozen=True)
class Backoff:
    """Delays for attempt 1, 2, ...: ``min(cap, base * 2**(n-1))`` scaled by full jitter."""

    base: float = 0.5
    cap: float = 60.0
    max_attempts: int = 6
    jitter: bool = True

    def delay(
        self, attempt: int, retry_after: float | None = None, rng: random.Random | None = None
    ) -> float:
        if retry_after is not None:
            return min(self.cap, max(0.0, retry_after))
        ceiling = min(self.cap, self.base * (2 ** max(0, attempt - 1)))
        return (rng or random).uniform(0, ceiling) if self.jitter else ceiling


def retry_after_seconds(value: str | None, *, now: Callable[[], float] = time.time) -> float | None:
    """Parse ``Retry-After`` as delta-seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return max(0.0, when.timestamp() - now())
