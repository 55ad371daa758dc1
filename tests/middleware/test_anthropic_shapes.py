"""The Anthropic format refuses the message shapes it cannot read with ``RequestFormatError``
naming the place (issue 34 item 2), as the OpenAI formats do, and reads every shape the API takes:
the proxy answers the refusal with a 400 in Anthropic's format (tests/adapters/test_proxy.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memwire import MemoryStore, Middleware, RequestFormatError


@pytest.fixture
def mw(tmp_path: Path) -> Middleware:
    store = MemoryStore(tmp_path)
    store.add("The staging database is Postgres 16")
    mw = Middleware(store=store, mode="contextPerTurn")
    mw.warm_up()  # the index and token encodings: the retrieval budget is never what a test measures
    return mw


def body(*messages: Any, **extra: Any) -> dict[str, Any]:
    return {"model": "claude-haiku-4-5", "max_tokens": 10, "messages": list(messages), **extra}


@pytest.mark.parametrize(("request_body", "problem"), [
    (body({"role": "user"}), "messages[0] has no 'content'"),
    (body({"role": "user", "content": None}), "messages[0] has no 'content'"),
    (body({"role": "user", "content": "hi"}, {"role": "assistant"}), "messages[1] has no 'content'"),
    (body({"role": "user", "content": ["hi"]}), "messages[0].content[0] must be an object (a content block), got str"),
    (body({"role": "user", "content": [{"text": "hi"}]}), "messages[0].content[0] has no 'type'"),
    (body({"role": "user", "content": [{"type": 3, "text": "hi"}]}), "messages[0].content[0] has no 'type'"),
    (body({"role": "user", "content": [{"type": "text"}]}),
     "messages[0].content[0] is a text block without a string 'text'"),
    (body({"role": "user", "content": [{"type": "text", "text": ["x"]}]}), "messages[0].content[0] is a text block"),
    (body({"role": "user", "content": "Which database?"}, system=[{"type": "text"}]), "system[0] is a text block"),
    (body({"role": "user", "content": "Which database?"}, system=["x"]), "system[0] must be an object"),
])
def test_a_shape_anthropic_refuses_is_refused_naming_its_place(mw: Middleware, request_body: dict[str, Any],
                                                                problem: str) -> None:
    with pytest.raises(RequestFormatError) as caught:
        mw.prepare_request(request_body, api="anthropic.messages")
    assert str(caught.value).startswith("anthropic.messages: ") and problem in str(caught.value)


def test_every_shape_the_api_takes_is_read(mw: Middleware) -> None:
    """Tool use and results, images, documents, thinking, blocks of types memwire does not know,
    cache_control, a system list and a mid-conversation system message: all read, memory added."""
    request_body = body(
        {"role": "user", "content": [{"type": "text", "text": "Look at this", "cache_control": {"type": "ephemeral"}},
                                     {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                  "data": "iVBORw0KGgo="}}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "...", "signature": "s"},
                                          {"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "42"}]},
        {"role": "assistant", "content": [{"type": "a_block_type_from_next_year", "data": 1}]},
        {"role": "system", "content": "mid-conversation note"},
        {"role": "user", "content": [{"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                                                     "data": "x"}},
                                     {"type": "text", "text": "Which database does staging use?"}]},
        system=[{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}])
    p = mw.prepare_request(request_body, api="anthropic.messages")
    assert p.injection is not None and p.injection.memory_ids
    assert request_body["messages"][5]["content"][1]["text"] == "Which database does staging use?"  # not mutated
