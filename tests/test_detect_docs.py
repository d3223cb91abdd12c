"""The [detect] section of the example config shows the defaults (tests/test_config.py checks
that every key is documented)."""

from __future__ import annotations

from pathlib import Path

from sentinel import config

EXAMPLE = Path(__file__).resolve().parent.parent / "sentinel.example.toml"


def test_example_detect_section_shows_the_defaults() -> None:
    cfg = config.load(EXAMPLE, {})
    assert cfg.detect == config.DetectConfig()
    assert cfg.suppressions and all(s.reason for s in cfg.suppressions)
