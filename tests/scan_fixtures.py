"""Fixtures for leak-scanning tests: a fake Loki server per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fake_loki import FakeLoki, FakeLokiServer


@pytest.fixture
def fake_loki() -> Iterator[FakeLokiServer]:
    with FakeLokiServer(FakeLoki()) as server:
        yield server
