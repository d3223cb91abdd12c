"""Standard Webhooks signing and the public verify() helper."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

import pytest

from sentinel.webhooks import VerificationError, key_bytes, sign, verify

BODY = b'{"finding_id":"f_1","severity":"high"}'


def secret(tag: str) -> str:
    return "whsec_" + base64.b64encode(f"key-{tag}-".encode() * 4).decode()


def test_signature_is_hmac_of_id_timestamp_body() -> None:
    headers = sign([secret("a")], "msg_1", BODY, 1_700_000_000)
    expected = hmac.new(key_bytes(secret("a")), b"msg_1.1700000000." + BODY, hashlib.sha256)
    assert headers == {
        "webhook-id": "msg_1",
        "webhook-timestamp": "1700000000",
        "webhook-signature": "v1," + base64.b64encode(expected.digest()).decode(),
    }


def test_verify_accepts_any_active_secret_during_rotation() -> None:
    now = int(time.time())
    headers = sign([secret("new"), secret("old")], "msg_2", BODY, now)
    assert len(headers["webhook-signature"].split()) == 2
    assert verify(BODY, headers, secret("old")) == "msg_2"
    assert verify(BODY, headers, [secret("other"), secret("new")]) == "msg_2"
    upper = {k.upper(): v for k, v in headers.items()}  # header names are case-insensitive
    assert verify(BODY, upper, secret("new")) == "msg_2"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda h, b: (h, b + b" "), "no signature matches"),
        (lambda h, b: ({**h, "webhook-id": "msg_other"}, b), "no signature matches"),
        (lambda h, b: ({**h, "webhook-timestamp": str(int(time.time()) - 3600)}, b), "tolerance"),
        (lambda h, b: ({k: v for k, v in h.items() if k != "webhook-id"}, b), "missing"),
        (lambda h, b: ({**h, "webhook-timestamp": "soon"}, b), "not an integer"),
    ],
)
def test_verify_rejects_tampering_replay_and_missing_headers(change, message) -> None:  # type: ignore[no-untyped-def]
    headers = sign([secret("a")], "msg_3", BODY, int(time.time()))
    bad_headers, bad_body = change(headers, BODY)
    with pytest.raises(VerificationError, match=message):
        verify(bad_body, bad_headers, secret("a"))


def test_wrong_secret_is_rejected_and_plain_secrets_work() -> None:
    headers = sign(["plain-shared-secret-value"], "msg_4", BODY, int(time.time()))
    assert verify(BODY, headers, "plain-shared-secret-value") == "msg_4"
    with pytest.raises(VerificationError):
        verify(BODY, headers, secret("a"))
