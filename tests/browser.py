"""A real headless browser for page tests: Debian's Chromium driven by Playwright (never a
downloaded browser). Skipped, with the reason, where either is missing, unless
``MEMWIRE_TEST_BROWSER`` is set (CI sets it: there a missing browser is a failure)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = os.environ.get("MEMWIRE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


@contextlib.contextmanager
def browser_page(width: int = 900, height: int = 1200) -> Iterator[Any]:
    """A fresh page of a headless Chromium."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package is not installed")
    if not os.path.exists(CHROMIUM):
        _missing(f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium; or set MEMWIRE_CHROMIUM)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()


def _missing(why: str) -> None:
    if os.environ.get("MEMWIRE_TEST_BROWSER"):
        pytest.fail(f"browser tests required (MEMWIRE_TEST_BROWSER is set) but {why}")
    pytest.skip(f"browser test: {why}")
