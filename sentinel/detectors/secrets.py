"""Provider secret detectors: fixed-prefix formats, each validated beyond its regex where the
format allows (checksums, decoded headers, required context, placeholder and entropy checks)."""

from __future__ import annotations

import base64
import binascii
import json
import re
import string
from collections.abc import Callable, Iterator
from typing import Any

from sentinel.detectors import (
    SECRET_RULE,
    Detector,
    Hit,
    bounded,
    entropy,
    is_placeholder,
)

_B62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
_TOKEN_CHARS = r"[A-Za-z0-9_-]"  # noqa: S105 (a character class)
Validator = Callable[[str, str, "re.Match[str]"], tuple[str, str] | None]  # -> (severity, kind)


def base62(n: int, width: int = 6) -> str:
    out = ""
    while n:
        n, r = divmod(n, 62)
        out = _B62[r] + out
    return out.rjust(width, "0")


def crc32_checksum_ok(token: str) -> bool:
    """GitHub-style tokens end in base62(CRC32(random part)), six characters."""
    prefix_len = token.index("_") + 1
    body, tail = token[prefix_len:-6], token[-6:]
    return base62(binascii.crc32(body.encode())) == tail


def _b64json(part: str) -> Any:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        return json.loads(raw)
    except (ValueError, binascii.Error):
        return None


def _regex(
    name: str,
    pattern: str,
    validate: Validator,
    *,
    trigger: str,
    literals: tuple[str, ...],
    quick: tuple[str, ...] = (),
    quick_lower: bool = False,
    group: int = 0,
    word: str | None = r"[A-Za-z0-9_]",
    extend: Callable[[str, int], int] | None = None,
) -> Detector:
    compiled = re.compile(pattern)

    def find(line: str) -> Iterator[Hit]:
        for m in compiled.finditer(line):
            start, end = m.span(group)
            if word and not bounded(line, start, end, word):
                continue
            verdict = validate(m.group(group), line, m)
            if verdict:
                severity, kind = verdict
                if extend:
                    end = extend(line, end)
                yield Hit(name, SECRET_RULE, severity, start, end, line[start:end], kind)

    return Detector(
        name,
        SECRET_RULE,
        trigger,
        find,
        literals,
        quick or literals,
        quick_lower,
    )


# -- validators -----------------------------------------------------------------------------


def _aws_key_id(value: str, _line: str, _m: re.Match[str]) -> tuple[str, str] | None:
    if is_placeholder(value[4:]) or value.endswith("EXAMPLE"):
        return None
    return ("critical" if value.startswith("AKIA") else "high", value[:4])


_AWS_ID = re.compile(r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}")


def _aws_secret(value: str, line: str, m: re.Match[str]) -> tuple[str, str] | None:
    if is_placeholder(value) or entropy(value) < 3.5:
        return None
    has_context = bool(m.group(1))
    near_id = _AWS_ID.search(line) is not None
    mixed = any(c.islower() for c in value) and any(c.isupper() for c in value)
    if has_context or (near_id and mixed and any(c.isdigit() for c in value)):
        return ("critical", "aws-secret")
    return None


def _github(value: str, _line: str, _m: re.Match[str]) -> tuple[str, str] | None:
    return ("critical", value[:4]) if crc32_checksum_ok(value) else None


def _npm(value: str, _line: str, _m: re.Match[str]) -> tuple[str, str] | None:
    # npm tokens carry a GitHub-style CRC32 tail; without it we still report a random-looking
    # body, with lower confidence, because the scheme is not documented by npm.
    if crc32_checksum_ok(value):
        return ("critical", "npm_")
    body = value[4:]
    if is_placeholder(body) or entropy(body) < 4.0:
        return None
    return ("high", "npm_")


def _random_body(prefix_len: int, severity: str, kind: str, min_entropy: float = 3.0) -> Validator:
    def check(value: str, _line: str, _m: re.Match[str]) -> tuple[str, str] | None:
        body = value[prefix_len:]
        if is_placeholder(body) or entropy(body) < min_entropy:
            return None
        if body.isalpha() and (body.islower() or body.isupper()):
            return None  # words, not random tokens
        return (severity, kind)

    return check


def _stripe(value: str, line: str, m: re.Match[str]) -> tuple[str, str] | None:
    verdict = _random_body(8, "critical", value[:8])(value, line, m)
    if verdict and "_test_" in value:
        return ("low", value[:8])
    return verdict


def _slack(value: str, _line: str, _m: re.Match[str]) -> tuple[str, str] | None:
    if is_placeholder(value[5:]):
        return None
    if value.startswith(("xoxb-", "xoxp-")) and not re.match(r"xox[bp]-\d{6,}-\d{6,}-", value):
        return None
    return ("critical", value[:5])


def _pypi(value: str, _line: str, _m: re.Match[str]) -> tuple[str, str] | None:
    body = value[5:]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (ValueError, binascii.Error):
        return None
    if b"pypi.org" not in raw[:40] or is_placeholder(body[19:]):
        return None
    return ("critical", "pypi-")


def _jwt_classify(value: str, _line: str, _m: re.Match[str]) -> tuple[str, str] | None:
    parts = value.split(".")
    header, payload = _b64json(parts[0]), _b64json(parts[1])
    if not isinstance(header, dict) or "alg" not in header or not isinstance(payload, dict):
        return None
    if _is_k8s(payload):
        return None  # the Kubernetes detector reports it
    return ("medium" if header.get("alg") != "none" else "low", "jwt:")


def _is_k8s(payload: dict[str, Any]) -> bool:
    iss = str(payload.get("iss", ""))
    return iss == "kubernetes/serviceaccount" or any(
        str(k).startswith("kubernetes.io") for k in payload
    )


def _k8s(value: str, _line: str, _m: re.Match[str]) -> tuple[str, str] | None:
    parts = value.split(".")
    header, payload = _b64json(parts[0]), _b64json(parts[1])
    if isinstance(header, dict) and "alg" in header and isinstance(payload, dict):
        return ("critical", "k8s-sa:") if _is_k8s(payload) else None
    return None


_PEM_BODY = re.compile(r"(?:\\n|\\r|[\r\n\s])*([A-Za-z0-9+/=]{16,})")


def _pem(value: str, line: str, m: re.Match[str]) -> tuple[str, str] | None:
    body = _PEM_BODY.match(line, m.end())
    if not body or is_placeholder(body.group(1)) or entropy(body.group(1)) < 3.5:
        return None
    return ("critical", "pem:")


def _key_block_end(line: str, end: int) -> int:
    """Extend a PEM header match over the key material: the value (and fingerprint) is the key."""
    stop = line.find("-----END", end, end + 16384)
    if stop >= 0:
        close = line.find("-----", stop + 8)
        return close + 5 if close >= 0 else stop
    body = _PEM_BODY.match(line, end)
    return body.end() if body else end


def _gcp_sa(value: str, line: str, m: re.Match[str]) -> tuple[str, str] | None:
    if "service_account" not in line and ".iam.gserviceaccount.com" not in line:
        return None
    return _pem(value, line, m) and ("critical", "gcp-sa:")


_BASIC_PLACEHOLDERS = {"user:pass", "user:password", "username:password", "admin:admin"}


def _auth_header(value: str, line: str, m: re.Match[str]) -> tuple[str, str] | None:
    scheme = m.group(1).lower()
    if is_placeholder(value):
        return None
    if scheme == "basic":
        try:
            decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode()
        except (ValueError, binascii.Error, UnicodeDecodeError):
            return None
        if ":" not in decoded or decoded.lower() in _BASIC_PLACEHOLDERS or is_placeholder(decoded):
            return None
        return ("high", "basic:")
    if len(value) < 20 or entropy(value) < 3.0:
        return None
    return ("high", "bearer:")


_WEAK_PASSWORDS = {"password", "passwd", "changeme", "secret", "pass", "root", "admin", "postgres"}


def _db_url(value: str, line: str, m: re.Match[str]) -> tuple[str, str] | None:
    password = m.group(2)
    if password.lower() in _WEAK_PASSWORDS or is_placeholder(password):
        return None
    if password.startswith(("$", "%", "{")):
        return None
    return ("high", m.group(1) + "://")


def _azure_secret(value: str, _line: str, _m: re.Match[str]) -> tuple[str, str] | None:
    if is_placeholder(value) or entropy(value) < 3.5:
        return None
    return ("high", "azure-entra:")


# -- the table ------------------------------------------------------------------------------

_JWT = r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"

DETECTORS: tuple[Detector, ...] = (
    _regex(
        "anthropic_api_key",
        r"sk-ant-(?:api03|admin01)-[A-Za-z0-9_-]{93}AA",
        _random_body(13, "critical", "sk-ant-"),
        trigger=r"sk-ant-(?:api03|admin01)-",
        literals=("sk-ant-",),
        word=_TOKEN_CHARS,
    ),
    _regex(
        "openai_api_key",
        r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,200}T3BlbkFJ[A-Za-z0-9_-]{20,200}",
        _random_body(3, "critical", "sk-"),
        trigger=r"T3BlbkFJ",
        literals=("T3BlbkFJ",),
        word=_TOKEN_CHARS,
    ),
    _regex(
        "github_token",
        r"gh[pousr]_[A-Za-z0-9]{36}",
        _github,
        trigger=r"gh[pousr]_[A-Za-z0-9]{36}",
        literals=("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ),
    _regex(
        "github_fine_grained_pat",
        r"github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}",
        _random_body(11, "critical", "github_pat_", 3.5),
        trigger=r"github_pat_",
        literals=("github_pat_",),
    ),
    _regex(
        "gitlab_token",
        r"gl(?:pat|dt|rt|ptt|oas)-[A-Za-z0-9_-]{20,64}",
        _random_body(6, "critical", "glpat-"),
        trigger=r"gl(?:pat|dt|rt|ptt|oas)-",
        literals=("glpat-", "gldt-", "glrt-", "glptt-", "gloas-"),
        word=_TOKEN_CHARS,
    ),
    _regex(
        "slack_token",
        r"xox(?:[abposr]|e\.xox[bp]|e)-[0-9A-Za-z-]{10,250}",
        _slack,
        trigger=r"xox[abposre][-.]",
        literals=("xox",),
        word=_TOKEN_CHARS,
    ),
    _regex(
        "slack_webhook",
        r"https://hooks\.slack\.com/services/T[A-Z0-9]{8,12}/B[A-Z0-9]{8,12}/[A-Za-z0-9]{24}",
        _random_body(52, "high", "slack-webhook:"),
        trigger=r"hooks\.slack\.com/services/",
        literals=("hooks.slack.com",),
    ),
    _regex(
        "stripe_secret_key",
        r"[rs]k_(?:live|test)_[A-Za-z0-9]{24,99}",
        _stripe,
        trigger=r"[rs]k_(?:live|test)_",
        literals=("sk_live_", "rk_live_", "sk_test_", "rk_test_"),
    ),
    _regex(
        "huggingface_token",
        r"(?:hf_|api_org_)[A-Za-z0-9]{34}",
        _random_body(3, "high", "hf_", 3.5),
        trigger=r"(?:hf_|api_org_)[A-Za-z0-9]{34}",
        literals=("hf_", "api_org_"),
    ),
    _regex(
        "npm_token",
        r"npm_[A-Za-z0-9]{36}",
        _npm,
        trigger=r"npm_[A-Za-z0-9]{36}",
        literals=("npm_",),
    ),
    _regex(
        "pypi_token",
        r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
        _pypi,
        trigger=r"pypi-AgEIcHlwaS5vcmc",
        literals=("pypi-AgEIcHlwaS5vcmc",),
        word=_TOKEN_CHARS,
    ),
    _regex(
        "gcp_api_key",
        r"AIza[0-9A-Za-z_-]{35}",
        _random_body(4, "high", "AIza", 3.5),
        trigger=r"AIza[0-9A-Za-z_-]{35}",
        literals=("AIza",),
        word=_TOKEN_CHARS,
    ),
    _regex(
        "gcp_service_account_key",
        r"\\{0,3}\"private_key\\{0,3}\"\s*:\s*\\{0,3}\"-----BEGIN (?:RSA )?PRIVATE KEY-----",
        _gcp_sa,
        trigger=r"private_key\\{0,3}\"\s*:\s*\\{0,3}\"-----BEGIN",
        literals=("-----BEGIN",),
        quick=("private_key",),
        word=None,
        extend=_key_block_end,
    ),
    _regex(
        "private_key",
        r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED |PGP )?PRIVATE KEY(?: BLOCK)?-----",
        _pem,
        trigger=r"-----BEGIN [A-Z ]{0,16}PRIVATE KEY",
        literals=("-----BEGIN",),
        word=None,
        extend=_key_block_end,
    ),
    _regex(
        "aws_access_key_id",
        r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}",
        _aws_key_id,
        trigger=r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}",
        literals=("AKIA", "ASIA", "ABIA", "ACCA"),
    ),
    _regex(
        "aws_secret_access_key",
        r"(?i:(aws_?secret_?(?:access_?)?key\\{0,3}[\"']?\s{0,3}[:=]\s{0,3}\\{0,3}[\"']?)|[\s\"'=:,])"
        r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        _aws_secret,
        trigger=r"(?i:aws_?secret)|(?:AKIA|ASIA)[A-Z2-7]{16}",
        literals=("aws_secret", "awssecret", "AKIA", "ASIA"),
        quick=("aws_secret", "awssecret", "akia", "asia"),
        quick_lower=True,
        group=2,
        word=None,
    ),
    _regex(
        "azure_storage_key",
        r"AccountKey=([A-Za-z0-9+/]{86}==)",
        _random_body(0, "critical", "azure-storage:", 4.0),
        trigger=r"AccountKey=",
        literals=("AccountKey=",),
        group=1,
        word=None,
    ),
    _regex(
        "azure_entra_client_secret",
        r"(?:^|[^A-Za-z0-9_~.-])([A-Za-z0-9_~.-]{3}[78]Q~[A-Za-z0-9_~.-]{31,34})(?:[^A-Za-z0-9_~.-]|$)",
        _azure_secret,
        trigger=r"[A-Za-z0-9_~.-]{3}[78]Q~[A-Za-z0-9_~.-]{31}",
        literals=("8Q~", "7Q~"),
        group=1,
        word=None,
    ),
    _regex(
        "kubernetes_service_account_token",
        _JWT,
        _k8s,
        trigger=r"eyJ[A-Za-z0-9_-]{8,}\.eyJ",
        literals=("eyJ",),
        word=_TOKEN_CHARS,
    ),
    _regex(
        "jwt",
        _JWT,
        _jwt_classify,
        trigger=r"eyJ[A-Za-z0-9_-]{8,}\.eyJ",
        literals=("eyJ",),
        word=_TOKEN_CHARS,
    ),
    _regex(
        "database_url_password",
        r"(postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql)://"
        r"[^:\s/@\"']{0,64}:([^@\s/\"'$<*{]{3,128})@[A-Za-z0-9.-]+",
        _db_url,
        trigger=r"(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql)://[^:\s/@\"']{0,64}:[^@\s/\"']{3,128}@",
        literals=("://",),
        quick=("://",),
        group=0,
        word=None,
    ),
    _regex(
        "authorization_header",
        r"(?i:authorization\\{0,3}[\"']?\s{0,3}[:=]\s{0,3}\\{0,3}[\"']?(bearer|basic)\s+)([A-Za-z0-9._~+/=-]{8,})",
        _auth_header,
        trigger=r"(?i:authorization\\{0,3}[\"']?\s{0,3}[:=]\s{0,3}\\{0,3}[\"']?(?:bearer|basic)\s)",
        literals=("authorization",),
        quick=("authorization",),
        quick_lower=True,
        group=2,
        word=None,
    ),
)
