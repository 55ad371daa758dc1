"""``memwire mcp``: a Model Context Protocol server over stdio (``build_server``, ``run_stdio``).
Needs the ``mcp`` extra; importing this module imports the SDK. Implemented in
``memwire.adapters.server``."""

from __future__ import annotations

from .server._mcp import build_server, run_stdio

__all__ = ["build_server", "run_stdio"]
