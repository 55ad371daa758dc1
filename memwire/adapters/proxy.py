"""The memwire proxy: an ASGI app in front of OpenAI-compatible and Anthropic APIs (``create_app``),
also run by the ``memwire proxy`` command. Implemented in ``memwire.adapters.server``."""

from __future__ import annotations

from .server._proxy import create_app, default_client

__all__ = ["create_app", "default_client"]
