"""The detection config keys are all documented, and the documented example is valid."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sentinel import config

DOC = Path(__file__).resolve().parent.parent / "docs" / "detect.example.toml"


def test_example_loads_and_documents_every_detect_key() -> None:
    text = DOC.read_text(encoding="utf-8")
    cfg = config.loads(text, origin=str(DOC))
    assert cfg.detect == config.DetectConfig()  # the example shows the defaults
    for section in (config.DetectConfig, config.WatchConfig, config.HydratorsConfig,
                    config.PromotedConfig, config.Suppression, config.Tenant):  # fmt: skip
        for field in dataclasses.fields(section):
            assert f"\n{field.name} =" in text, f"{section.__name__}.{field.name} undocumented"
