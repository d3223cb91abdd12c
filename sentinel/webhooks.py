"""Standard Webhooks signatures: ``sign`` for Sentinel's sender, ``verify`` for your receiver.

Every POST carries three headers::

    webhook-id:        the delivery id (stable across retries: dedupe on it)
    webhook-timestamp: Unix seconds of this attempt
    webhook-signature: v1,<base64 HMAC-SHA256(key, f"{id}.{timestamp}.{body}")> [v1,<...> ...]

One ``v1,`` signature per active secret, space separated, so a receiver can rotate keys without
dropping deliveries. A secret written as ``whsec_<base64>`` (the Standard Webhooks form) is
base64-decoded to get the key; any other string is used as UTF-8 bytes.

A receiver needs only this module (it imports nothing else from Sentinel)::

    from sentinel.webhooks import verify, VerificationError
    try:
        delivery_id = verify(request_body, request_headers, [current_secret, previous_secret])
    except VerificationError:
        return 401
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Iterable, Mapping

DEFAULT_TOLERANCE_SECONDS = 300


class VerificationError(Exception):
    """The request is not a valid, fresh Sentinel webhook for any of the given secrets."""


def key_bytes(secret: str) -> bytes:
    if secret.startswith("whsec_"):
        try:
            return base64.b64decode(secret.removeprefix("whsec_"), validate=True)
        except binascii.Error as exc:
            raise ValueError("a whsec_ secret must be base64 after the prefix") from exc
    return secret.encode("utf-8")


def signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<base64>`` signature of ``id.timestamp.body``."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(key_bytes(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def sign(secrets: Iterable[str], msg_id: str, body: bytes, timestamp: int) -> dict[str, str]:
    """The three headers for one attempt, signed with every active secret."""
    signatures = " ".join(signature(s, msg_id, timestamp, body) for s in secrets)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signatures,
    }


def verify(
    body: bytes,
    headers: Mapping[str, str],
    secrets: str | Iterable[str],
    *,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> str:
    """Check a received webhook and return its ``webhook-id`` (dedupe on it).

    ``body`` must be the raw request bytes, before any JSON parsing. ``secrets`` is one secret
    or several (during a rotation). Raises ``VerificationError`` when a header is missing, the
    timestamp is outside ``tolerance_seconds`` of now (replay), or no signature matches.
    """
    lower = {k.lower(): v for k, v in headers.items()}
    msg_id = lower.get("webhook-id", "")
    stamp = lower.get("webhook-timestamp", "")
    offered = lower.get("webhook-signature", "")
    if not (msg_id and stamp and offered):
        raise VerificationError("missing webhook-id, webhook-timestamp or webhook-signature")
    try:
        timestamp = int(stamp)
    except ValueError as exc:
        raise VerificationError("webhook-timestamp is not an integer") from exc
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_seconds:
        raise VerificationError("webhook-timestamp is outside the tolerance (replay?)")
    wanted = [secrets] if isinstance(secrets, str) else list(secrets)
    expected = [signature(s, msg_id, timestamp, body) for s in wanted]
    for candidate in offered.split():
        if any(hmac.compare_digest(candidate, e) for e in expected):
            return msg_id
    raise VerificationError("no signature matches")
