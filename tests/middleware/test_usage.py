"""The provider's usage read from replies of the three APIs, streamed and not: the figures the
fake provider's cache simulator reported, in one shape (``Usage``)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.testclient import TestClient

from memwire._sim.fake_provider import FakeProvider
from memwire.middleware._reply import ReplyReader, read_reply
from memwire.middleware._usage import Usage, usage_of

from ..replies import APIS, PATHS, TEXT, request

LONG = "You are a careful assistant. " * 1000  # past every model's minimum cacheable prefix (Haiku: 4,096 tokens)


def body_of(api: str, stream: bool, question: str) -> dict[str, Any]:
    body = request(api, stream, question)
    if api == "openai.chat":
        body["messages"].insert(0, {"role": "system", "content": LONG})
    elif api == "openai.responses":
        body["instructions"] = LONG
    else:
        body["system"] = [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}]
    return body


@pytest.mark.parametrize("size", [None, 3], ids=["whole", "3-byte chunks"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("api", APIS)
def test_usage_as_the_provider_reported_it(api: str, stream: bool, size: int | None) -> None:
    fake = FakeProvider(reply=lambda body, api: TEXT)
    got = []
    with TestClient(fake) as client:
        for question in ("First question?", "Second question?"):  # the second reads the cached prefix
            r = client.post(PATHS[api], json=body_of(api, stream, question))
            reader = ReplyReader(api, r.status_code, dict(r.headers))
            data = r.content
            for i in range(0, len(data), size or len(data)):
                reader.feed(data[i : i + (size or len(data))])
            got.append(reader.read())
    reported = fake.usages()
    assert [g.text for g in got] == [TEXT, TEXT]
    assert [g.usage for g in got] == [Usage(u.prompt_tokens, u.cache_read, u.cache_write, u.output_tokens)
                                      for u in reported]
    assert got[1].usage is not None and got[1].usage.cached_tokens > 0  # the figures are real, not zeros
    if api == "anthropic.messages":
        assert got[0].usage is not None and got[0].usage.cache_write_tokens > 0


def test_anthropic_stream_takes_message_delta_figures_over_message_start() -> None:
    events = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 10, "cache_read_input_tokens": 90,
                                                        "cache_creation_input_tokens": 0, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 42}},
        {"type": "message_stop"},
    ]
    reader = ReplyReader("anthropic.messages", 200, {"content-type": "text/event-stream"})
    reader.feed("".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode())
    assert reader.read() == ("Hi", Usage(100, 90, 0, 42))


def test_a_stream_cut_short_keeps_its_usage_not_its_text() -> None:
    reader = ReplyReader("anthropic.messages", 200, {"content-type": "text/event-stream"})
    start = {"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}}
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hal"}}
    reader.feed(f"data: {json.dumps(start)}\n\ndata: {json.dumps(delta)}\n\n".encode())
    assert reader.read(ended=False) == (None, Usage(5, 0, 0, 1))


@pytest.mark.parametrize("api, usage", [
    ("openai.chat", {"completion_tokens": 3}),
    ("openai.chat", None),
    ("anthropic.messages", {"output_tokens": 3}),
    ("openai.responses", {"output_tokens": 3, "input_tokens": "12"}),
    ("openai.chat", {"prompt_tokens": -4}),
])
def test_no_prompt_figure_is_unknown_usage_not_zero(api: str, usage: Any) -> None:
    assert usage_of(api, usage) is None


def test_other_spellings_and_sdk_objects() -> None:
    assert usage_of("openai.chat", {"prompt_tokens": 100, "prompt_cache_hit_tokens": 60}) == Usage(100, 60)
    assert usage_of("openai.chat", {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 99}}) == Usage(10, 10)
    sdk = SimpleNamespace(prompt_tokens=50, completion_tokens=7, prompt_tokens_details=SimpleNamespace(cached_tokens=20))
    assert usage_of("openai.chat", sdk) == Usage(50, 20, 0, 7)  # litellm's Usage object
    assert read_reply("openai.chat", {"choices": [], "usage": {"prompt_tokens": 8}}).usage == Usage(8)
    assert Usage(200, 50).cached_share == 0.25 and Usage(0).cached_share == 0.0
