"""sentinel.toml: every problem reported at once, located, with suggestions; secrets by reference."""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

import pytest

from sentinel import config
from sentinel.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "sentinel.example.toml"


def test_defaults_without_a_file() -> None:
    cfg = config.load(None, {})
    assert cfg.store.path == "sentinel.duckdb"
    assert cfg.store.keep_raw == "non_read"
    assert cfg.sources.cloudtrail == ()


def test_every_problem_is_reported_at_once_with_line_and_suggestion() -> None:
    text = """
[store]
pth = "x.duckdb"
keep_raw = "sometimes"

[[sources.cloudtrail]]
bucket = "trail"
lookback_dayz = 3

[hydrators]
actors = "not-a-list"
"""
    with pytest.raises(ConfigError) as info:
        config.loads(text, origin="sentinel.toml")
    messages = [str(p) for p in info.value.problems]
    assert len(messages) == 4, messages
    assert "sentinel.toml:3: store.pth: unknown key (did you mean 'path'?)" in messages
    assert any(m.startswith("sentinel.toml:4: store.keep_raw: must be one of") for m in messages)
    assert (
        "sentinel.toml:8: sources.cloudtrail.lookback_dayz: unknown key (did you mean 'lookback_days'?)"
        in messages
    )
    assert any(
        m.startswith("sentinel.toml:11: hydrators.actors: expected a list") for m in messages
    )


def test_literal_secrets_are_refused() -> None:
    text = '[[alerts.webhook]]\nurl = "https://siem.example/h"\nsecret = "hunter2"\n'
    with pytest.raises(ConfigError) as info:
        config.loads(text)
    assert "never literals" in info.value.message
    assert "hunter2" not in info.value.message


def test_secret_references_resolve_from_the_environment_passed_in() -> None:
    text = '[scan]\nfingerprint_key = { env = "FP_KEY" }\n'
    cfg = config.loads(text, environ={"FP_KEY": "k3y"})
    assert cfg.scan.fingerprint_key is not None
    assert cfg.secret(cfg.scan.fingerprint_key) == "k3y"
    assert "k3y" not in repr(cfg)
    with pytest.raises(ConfigError, match="FP_KEY is not set"):
        config.loads(text, environ={}).secret(cfg.scan.fingerprint_key)


def test_cloudtrail_source_needs_exactly_one_of_bucket_or_path() -> None:
    with pytest.raises(ConfigError, match="exactly one of 'bucket'"):
        config.loads('[[sources.cloudtrail]]\nbucket = "a"\npath = "/b"\n')
    with pytest.raises(ConfigError, match="exactly one of 'bucket'"):
        config.loads("[[sources.cloudtrail]]\nprefix = 'x/'\n")


def test_plain_http_webhooks_need_loopback_or_an_explicit_opt_in() -> None:
    with pytest.raises(ConfigError, match="must use https"):
        config.loads('[[alerts.webhook]]\nurl = "http://siem.internal/h"\n')
    ok = config.loads(
        '[[alerts.webhook]]\nurl = "http://127.0.0.1:8080/h"\nsecret = { env = "S" }\n'
    )
    assert ok.alerts.webhook[0].url.startswith("http://127.0.0.1")


def test_toml_syntax_errors_name_the_line() -> None:
    with pytest.raises(ConfigError) as info:
        config.loads("[store]\npath = \n", origin="s.toml")
    assert info.value.problems[0].line == 2


def _keys(cls: type, prefix: str = "") -> set[str]:
    out: set[str] = set()
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in ("origin", "environ"):
            continue
        tp = hints[f.name]
        inner = typing.get_args(tp)[0] if typing.get_origin(tp) is tuple else tp
        name = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(inner) and inner is not config.SecretRef:
            out |= _keys(inner, name + ".")  # type: ignore[arg-type]
        else:
            out.add(name)
    return out


def _documented(text: str) -> set[str]:
    """Dotted keys in the example, counting commented-out `# key = value` lines too."""
    found: set[str] = set()
    table = ""
    for line in text.splitlines():
        header = re.match(r"^\s*\[\[?([a-z_.]+)\]\]?", line)
        if header:
            table = header.group(1) + "."
            continue
        key = re.match(r"^\s*#?\s*([a-z0-9_]+)\s*=", line)
        if key:
            found.add(table + key.group(1))
    return found


def test_example_config_documents_every_key_and_loads_cleanly() -> None:
    text = EXAMPLE.read_text()
    missing = _keys(config.Config) - _documented(text)
    assert not missing, f"keys missing from sentinel.example.toml: {sorted(missing)}"
    cfg = config.load(EXAMPLE, {})
    assert cfg.sources.cloudtrail and cfg.tenants and cfg.alerts.webhook
