"""Offline stand-ins for the providers: a prompt-cache simulator and a fake provider server.

``CacheSimulator`` applies OpenAI's and Anthropic's published prompt-caching rules to requests and
reports the usage fields they would; ``FakeProvider`` is an ASGI app speaking the OpenAI (chat
completions, Responses) and Anthropic (messages) wire formats with usage from the simulator;
``serve_in_thread`` runs any ASGI app on 127.0.0.1 for clients that need a real socket.

Not imported by ``import memwire``: only tests, demos and benchmarks need it.
"""

from memwire._sim.cache import (
    ANTHROPIC_COSTS,
    OPENAI_COSTS,
    CacheRuleError,
    CacheSimulator,
    CostModel,
    Provider,
    Usage,
    anthropic_min_tokens,
)
from memwire._sim.fake_provider import (
    ErrorReply,
    FakeProvider,
    RecordedRequest,
    Reply,
    ServerThread,
    ToolCall,
    default_reply,
    last_user_text,
    serve_in_thread,
)
from memwire._sim.serialize import Block, request_blocks

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
