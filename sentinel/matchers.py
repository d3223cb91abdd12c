"""Who and what the configuration names: actor and bucket globs, tenant models, promoted
patterns, hydrator networks (VPC endpoints, CIDRs, literal caller values) and suppressions.

Glob semantics are the same in Python (``fnmatchcase``) and in the rule SQL (DuckDB ``GLOB``):
``*`` matches any run of characters *including* ``/``, so ``bucket/models/team-a/**`` is a prefix.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import ipaddress
from dataclasses import dataclass

from sentinel.config import Config, Suppression
from sentinel.timeutil import parse_time

REDACTED = ""  # how state tables key a redacted (NULL) actor


def glob_match(value: str | None, pattern: str) -> bool:
    return fnmatch.fnmatchcase(value or "", pattern)


def any_glob(value: str | None, patterns: tuple[str, ...]) -> bool:
    return any(glob_match(value, p) for p in patterns)


def literal_prefix(pattern: str) -> str:
    """The part of a glob before its first wildcard: ``b/models/t/**`` -> ``b/models/t/``."""
    cut = len(pattern)
    for char in "*?[":
        index = pattern.find(char)
        if index != -1:
            cut = min(cut, index)
    return pattern[:cut]


def split_bucket(pattern: str) -> tuple[str, str]:
    """``bucket/key-glob`` -> (bucket, key-glob); a bare bucket matches every key."""
    bucket, _, rest = pattern.partition("/")
    return bucket, rest or "*"


def model_regex(pattern: str) -> str:
    """A model pattern ``models/*/*`` (each ``*`` one path segment) as an anchored regex whose
    whole match is the model prefix."""
    parts = [
        r"[^/]+" if part == "*" else _re_escape(part) for part in pattern.strip("/").split("/")
    ]
    return "^" + "/".join(parts) + "/"


def _re_escape(text: str) -> str:
    return "".join("\\" + c if c in r".^$+?{}[]|()\\" else c for c in text)


@dataclass(frozen=True)
class Network:
    """One allowed network: a VPC endpoint id, an IPv4/IPv6 CIDR, or a literal caller value
    (GCS reports e.g. ``gce-internal-ip`` or ``private`` instead of an address)."""

    kind: str  # 'vpce' | 'cidr' | 'literal'
    value: str
    low: int | None = None
    high: int | None = None
    version: int | None = None

    @classmethod
    def parse(cls, text: str) -> Network:
        value = text.strip()
        if value.startswith("vpce-"):
            return cls("vpce", value)
        try:
            net = ipaddress.ip_network(value, strict=False)
        except ValueError:
            return cls("literal", value)
        return cls(
            "cidr", str(net), int(net.network_address), int(net.broadcast_address), net.version
        )

    def allows(self, vpce_id: str | None, src_ip: str | None) -> bool:
        if self.kind == "vpce":
            return vpce_id == self.value
        if self.kind == "literal":
            return src_ip == self.value
        try:
            address = ipaddress.ip_address(src_ip or "")
        except ValueError:
            return False
        return address.version == self.version and self.low <= int(address) <= self.high  # type: ignore[operator]


def networks(cfg: Config) -> list[Network]:
    return [Network.parse(n) for n in cfg.hydrators.networks]


def active_suppressions(cfg: Config, now: dt.datetime) -> list[Suppression]:
    return [s for s in cfg.suppressions if not s.expires or parse_time(s.expires) > now]


def suppression_for(
    suppressions: list[Suppression], rule_id: str, actor: str | None, bucket: str | None
) -> Suppression | None:
    """The first active suppression that covers a finding, or None."""
    for item in suppressions:
        if (
            glob_match(rule_id, item.rule)
            and glob_match(actor, item.actor)
            and glob_match(bucket, item.bucket)
        ):
            return item
    return None
