"""Stand-ins that fail, shared by the adapters' fail-open tests."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from memwire import Hit, MemoryStore, Middleware


class BrokenStore(MemoryStore):
    def search(self, *args: Any, **kwargs: Any) -> list[Hit]:
        raise OSError("disk on fire")


class BrokenMiddleware(Middleware):
    def prepare_request(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    async def aprepare_request(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")


def memwire_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "memwire" and r.levelno == logging.WARNING]


def call_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The warnings of calls: without the one a background warm-up (``wrap()``) logs for a broken store."""
    return [r for r in memwire_warnings(caplog) if "warm-up" not in r.getMessage()]
