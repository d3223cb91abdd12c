"""The delivery docs stay true: every key is in the example, which loads; --help teaches."""

from __future__ import annotations

from pathlib import Path

from sentinel import config

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_example_config_shows_every_destination_format() -> None:
    # tests/test_config.py checks that every key is documented; here: the formats are all shown.
    cfg = config.load(DOCS.parent / "sentinel.example.toml", {})
    assert [h.format for h in cfg.alerts.webhook] == ["ocsf", "splunk_hec", "alertmanager"]


def test_help_and_receiver_example(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli("deliver", "--help")
    assert result.exit_code == 0
    for option in ("--dry-run", "--status", "--retry-dead", "Examples:"):
        assert option in result.stdout
    example = (DOCS / "receiver_example.py").read_text()
    assert "verify(body, dict(self.headers), SECRETS)" in example
    assert "receiver_example.py" in (DOCS / "deliver.md").read_text()
