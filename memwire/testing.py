"""A fake OpenAI + Anthropic provider for trying memwire without an API key (examples, demos,
your own tests): scripted, deterministic replies in the providers' wire formats, with usage
figures from a prompt-cache simulator, served on 127.0.0.1.

    from memwire.testing import FakeProvider, serve_in_thread
    fake = FakeProvider()
    with serve_in_thread(fake) as server:      # server.base_url: "http://127.0.0.1:PORT"
        client = OpenAI(base_url=server.base_url + "/v1", api_key="test")
        ...
    fake.requests                                   # every request it received, in order
"""

from __future__ import annotations

from ._sim.fake_provider import (
    ErrorReply,
    FakeProvider,
    RecordedRequest,
    Reply,
    ServerThread,
    ToolCall,
    serve_in_thread,
)

__all__ = ["ErrorReply", "FakeProvider", "RecordedRequest", "Reply", "ServerThread", "ToolCall", "serve_in_thread"]
