"""Offline stand-ins for the providers: a prompt-cache simulator and a fake provider server.

``CacheSimulator`` applies OpenAI's and Anthropic's published prompt-caching rules to requests and
reports the usage fields they would; ``FakeProvider`` is an ASGI app speaking the OpenAI (chat
completions, Responses) and Anthropic (messages) wire formats with usage from the simulator;
``serve_in_thread`` runs any ASGI app on 127.0.0.1 for clients that need a real socket.

Not imported by ``import memwire``: only tests, demos and benchmarks need it. Each name is loaded on
first use (the fake provider needs Starlette), so ``memwire demo``'s registration in the CLI and
the light ``cache`` / ``serialize`` modules do not pull in the server stack.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the module of this package that defines it
_WHERE = {
    "ANTHROPIC_COSTS": "cache",
    "OPENAI_COSTS": "cache",
    "CacheRuleError": "cache",
    "CacheSimulator": "cache",
    "CostModel": "cache",
    "Provider": "cache",
    "Usage": "cache",
    "anthropic_min_tokens": "cache",
    "ErrorReply": "fake_provider",
    "FakeProvider": "fake_provider",
    "RecordedRequest": "fake_provider",
    "Reply": "fake_provider",
    "ServerThread": "fake_provider",
    "ToolCall": "fake_provider",
    "default_reply": "fake_provider",
    "last_user_text": "fake_provider",
    "serve_in_thread": "fake_provider",
    "Block": "serialize",
    "request_blocks": "serialize",
}

__all__ = [
    "ANTHROPIC_COSTS",
    "OPENAI_COSTS",
    "Block",
    "CacheRuleError",
    "CacheSimulator",
    "CostModel",
    "ErrorReply",
    "FakeProvider",
    "Provider",
    "RecordedRequest",
    "Reply",
    "ServerThread",
    "ToolCall",
    "Usage",
    "anthropic_min_tokens",
    "default_reply",
    "last_user_text",
    "request_blocks",
    "serve_in_thread",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
