"""Replies as they go over the wire, recorded from the fake provider: the bodies the reply reader
and the adapters' wiring are tested on."""

from __future__ import annotations

import time
from typing import Any

from starlette.testclient import TestClient

from memwire._sim.fake_provider import FakeProvider, Reply

APIS = ["openai.chat", "anthropic.messages", "openai.responses"]
PATHS = {"openai.chat": "/v1/chat/completions", "anthropic.messages": "/v1/messages", "openai.responses": "/v1/responses"}
TEXT = "Use tabs, width 4.\n\nNon-ASCII too: café ✓ 日本語 — split anywhere."
QUESTION = "Tabs or spaces in this Python file?"


def request(api: str, stream: bool, question: str = QUESTION) -> dict[str, Any]:
    """A request body of ``api`` asking ``question``."""
    messages = [{"role": "user", "content": question}]
    if api == "openai.chat":
        return {"model": "gpt-4o-mini", "messages": messages, "stream": stream,
                **({"stream_options": {"include_usage": True}} if stream else {})}
    if api == "openai.responses":
        return {"model": "gpt-4o-mini", "input": question, "stream": stream}
    return {"model": "claude-haiku-4-5", "max_tokens": 50, "messages": messages, "stream": stream}


def recorded(api: str, stream: bool, reply: Reply | str = TEXT) -> tuple[int, dict[str, str], bytes]:
    """The fake provider's answer (status, headers, body bytes) to a request of ``api``."""
    with TestClient(FakeProvider(reply=lambda body, api: reply)) as client:
        r = client.post(PATHS[api], json=request(api, stream))
    return r.status_code, dict(r.headers), r.content


def wait_records(middleware: Any, n: int, timeout: float = 5.0) -> None:
    """Until ``middleware.records`` holds ``n`` records (one is made just after its reply is out)."""
    deadline = time.monotonic() + timeout
    while len(middleware.records.recent()) < n and time.monotonic() < deadline:
        time.sleep(0.01)


class Spy:
    """Stands in for ``Middleware.observe_reply`` on one middleware: records its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, str]] = []

    def __call__(self, injection: Any, text: str) -> None:
        self.calls.append((injection, text))

    def wait(self, n: int = 1, timeout: float = 5.0) -> None:
        """Until ``n`` calls came (the proxy observes after the client has its answer)."""
        deadline = time.monotonic() + timeout
        while len(self.calls) < n and time.monotonic() < deadline:
            time.sleep(0.005)

    def once(self, text: str = TEXT) -> None:
        """Called exactly once, with ``text`` and an injection that put memories in."""
        assert [t for _, t in self.calls] == [text]
        assert self.calls[0][0].memory_ids
