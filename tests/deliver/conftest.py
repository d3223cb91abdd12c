"""Fixtures for delivery tests: a real signature-verifying webhook receiver on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog

from tests.deliver.receiver import Receiver, start_receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    rec, server = start_receiver()
    yield rec
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def _fresh_structlog() -> Iterator[None]:
    """The in-process CLI binds structlog to that test's captured stderr; unbind it after."""
    yield
    structlog.reset_defaults()
