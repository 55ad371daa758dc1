"""conftest's shared SSL context: what default httpx clients get in the tests, and what they do not."""

from __future__ import annotations

import ssl

import certifi
import httpx
import pytest


def _context(client: httpx.Client) -> ssl.SSLContext:
    return client._transport._pool._ssl_context  # type: ignore[attr-defined,no-any-return]


def test_default_clients_share_one_verifying_context() -> None:
    with httpx.Client() as a, httpx.Client() as b:
        assert _context(a) is _context(b)
        assert httpx.AsyncClient()._transport._pool._ssl_context is _context(a)  # type: ignore[attr-defined]
        assert _context(a).verify_mode == ssl.CERT_REQUIRED and _context(a).check_hostname


def test_other_arguments_and_settings_get_their_own_context(monkeypatch: pytest.MonkeyPatch) -> None:
    with httpx.Client() as default, httpx.Client(verify=False) as unverified:
        assert _context(unverified) is not _context(default)
        assert _context(unverified).verify_mode == ssl.CERT_NONE
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())  # the default context depends on it
    with httpx.Client() as other:
        assert _context(other) is not _context(default)
