"""The delivery docs stay true: every key is in the example, which loads; --help teaches."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from sentinel import config

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_alerts_key_is_documented_and_the_example_loads() -> None:
    text = (DOCS / "deliver.example.toml").read_text()
    documented = set(re.findall(r"^#?\s*([a-z_]+)\s*=", text, flags=re.MULTILINE))
    for cls in (config.Webhook, config.AlertsConfig):
        keys = {f.name for f in dataclasses.fields(cls)} - {"webhook"}
        assert keys <= documented, keys - documented
    cfg = config.loads(text, environ={})
    assert [h.format for h in cfg.alerts.webhook] == ["ocsf", "splunk_hec", "alertmanager"]


def test_help_and_receiver_example(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli("deliver", "--help")
    assert result.exit_code == 0
    for option in ("--dry-run", "--status", "--retry-dead", "Examples:"):
        assert option in result.stdout
    example = (DOCS / "receiver_example.py").read_text()
    assert "verify(body, dict(self.headers), SECRETS)" in example
    assert "receiver_example.py" in (DOCS / "deliver.md").read_text()
