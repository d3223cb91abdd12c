"""Words and numbers a person reads in finding titles: actor names, byte sizes, templates."""

from __future__ import annotations

import string
from typing import Any


class TitleFormatter(string.Formatter):
    """``str.format`` for rule templates: ``{x:bytes}`` is a human size, missing values are ?."""

    def format_field(self, value: Any, format_spec: str) -> str:
        if format_spec == "bytes":
            return human_bytes(value)
        if value is None:
            return "?"
        return str(super().format_field(value, format_spec))


def human_bytes(value: Any) -> str:
    if value is None:
        return "? B"
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(amount) < 1024 or unit == "TiB":
            return f"{int(amount)} B" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} PiB"  # pragma: no cover - loop always returns


def actor_label(actor: str | None) -> str:
    """A short human name: ``role ds-notebook``, ``user alice``, ``principal x@y``."""
    if not actor:
        return "redacted principal"
    if actor.startswith("arn:aws:"):
        resource = actor.split(":", 5)[-1]
        kind, _, rest = resource.partition("/")
        if kind == "assumed-role":
            return f"role {rest.split('/')[0]}"
        if kind in ("role", "user"):
            return f"{kind} {rest.rsplit('/', 1)[-1]}"
        return actor
    if actor.endswith(".gserviceaccount.com"):
        return f"service account {actor.split('@')[0]}"
    if "@" in actor:
        return f"principal {actor}"
    return actor
