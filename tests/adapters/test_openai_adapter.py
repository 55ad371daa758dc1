"""The OpenAI adapter with the real SDK clients against a respx-mocked api.openai.com."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import respx
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response

from memwire import MemoryStore, Middleware
from memwire.adapters.openai import wrap
from memwire.middleware.render import OPEN

from .failing import BrokenMiddleware, BrokenStore, memwire_warnings

BASE = "https://api.openai.com/v1"
SYSTEM = {"role": "system", "content": "You are a careful coding agent."}
QUESTION = "Should I indent this Python file with tabs or spaces?"

COMPLETION = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Tabs."}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
}
RESPONSE = {
    "id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-4o-mini", "status": "completed",
    "output": [{"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": "Tabs.", "annotations": []}]}],
    "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
}


def _chunk(i: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


CHUNKS = [_chunk(0, {"role": "assistant", "content": ""}), *(_chunk(i, {"content": t}) for i, t in
          enumerate(["Use ", "tabs", ", width 4."], 1)), _chunk(4, {}, "stop")]
SSE = "".join(f"data: {json.dumps(c)}\n\n" for c in CHUNKS) + "data: [DONE]\n\n"


def _store(path: Path) -> MemoryStore:
    store = MemoryStore(path)
    store.add("User prefers tabs over spaces, width 4, in every Python file", tags=["preference"])
    store.add("Deploys go out on Tuesdays only, via the GitHub Actions deploy workflow")
    store.add("The staging database is Postgres 15 on port 5433")
    return store


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    return _store(tmp_path / "mem")


@pytest.fixture
def mw(store: MemoryStore) -> Middleware:
    return Middleware(store=store, mode="contextPerTurn")


@pytest.fixture
def api() -> Any:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        router.post("/chat/completions", name="chat").mock(return_value=httpx.Response(200, json=COMPLETION))
        router.post("/responses", name="responses").mock(return_value=httpx.Response(200, json=RESPONSE))
        yield router


def sent(api: Any, name: str = "chat") -> dict[str, Any]:
    return json.loads(api[name].calls.last.request.content)


def conversation() -> list[dict[str, Any]]:
    return [SYSTEM, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello! What are we doing?"},
            {"role": "user", "content": QUESTION}]


def assert_memory_before_latest_user(body_messages: list[dict[str, Any]], original: list[dict[str, Any]]) -> None:
    assert len(body_messages) == len(original) + 1
    assert body_messages[:-2] == original[:-1]  # the prefix (system prompt, history) is byte-stable
    assert body_messages[-1] == original[-1]    # the latest user message is still last
    memory = body_messages[-2]
    assert memory["role"] == "user" and memory["content"].startswith(OPEN) and "tabs over spaces" in memory["content"]


# ---------------------------------------------------------------------- chat.completions


def test_chat_create_inserts_memory_and_keeps_caller_messages(mw: Middleware, api: Any) -> None:
    client = wrap(openai.OpenAI(api_key="test"), mw)
    messages = conversation()
    before = copy.deepcopy(messages)
    result = client.chat.completions.create(model="gpt-4o-mini", messages=messages, temperature=0)
    assert isinstance(result, ChatCompletion) and result.choices[0].message.content == "Tabs."
    assert messages == before
    body = sent(api)
    assert_memory_before_latest_user(body["messages"], before)
    assert body["model"] == "gpt-4o-mini" and body["temperature"] == 0


async def test_async_chat_create(mw: Middleware, api: Any) -> None:
    client = wrap(openai.AsyncOpenAI(api_key="test"), mw)
    messages = conversation()
    before = copy.deepcopy(messages)
    result = await client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    assert isinstance(result, ChatCompletion)
    assert messages == before
    assert_memory_before_latest_user(sent(api)["messages"], before)


def test_memwire_kwargs_are_removed_and_select_the_namespace(store: MemoryStore, mw: Middleware, api: Any) -> None:
    alice = MemoryStore.for_namespace(store.path, "alice")
    alice.add("Alice indents with two spaces in YAML files only")
    alice.add("Alice deploys from her laptop on Fridays")
    alice.add("Alice's editor is Helix")
    client = wrap(openai.OpenAI(api_key="test"), mw)
    client.chat.completions.create(model="gpt-4o-mini", messages=conversation(),
                                   memwire_session="s-1", memwire_namespace="alice")
    body = sent(api)
    assert "memwire_session" not in body and "memwire_namespace" not in body
    memory = body["messages"][-2]["content"]
    assert "Alice indents" in memory and "tabs over spaces" not in memory  # namespaces are isolated


def test_stream_sync_chunks_arrive_in_order_unchanged(mw: Middleware, api: Any) -> None:
    api["chat"].mock(return_value=httpx.Response(200, text=SSE, headers={"content-type": "text/event-stream"}))
    client = wrap(openai.OpenAI(api_key="test"), mw)
    stream = client.chat.completions.create(model="gpt-4o-mini", messages=conversation(), stream=True)
    got = [c.model_dump(exclude_unset=True) for c in stream]
    assert got == CHUNKS
    body = sent(api)
    assert body["stream"] is True and body["messages"][-2]["content"].startswith(OPEN)


async def test_stream_async_chunks_arrive_in_order_unchanged(mw: Middleware, api: Any) -> None:
    api["chat"].mock(return_value=httpx.Response(200, text=SSE, headers={"content-type": "text/event-stream"}))
    client = wrap(openai.AsyncOpenAI(api_key="test"), mw)
    stream = await client.chat.completions.create(model="gpt-4o-mini", messages=conversation(), stream=True)
    got = [c async for c in stream]
    assert all(isinstance(c, ChatCompletionChunk) for c in got)
    assert [c.model_dump(exclude_unset=True) for c in got] == CHUNKS
    assert sent(api)["messages"][-2]["content"].startswith(OPEN)


def test_messages_as_a_tuple_are_accepted(mw: Middleware, api: Any) -> None:
    client = wrap(openai.OpenAI(api_key="test"), mw)
    client.chat.completions.create(model="gpt-4o-mini", messages=tuple(conversation()))
    assert_memory_before_latest_user(sent(api)["messages"], conversation())


def test_azure_client(mw: Middleware) -> None:
    client = wrap(openai.AzureOpenAI(api_key="test", azure_endpoint="https://example.openai.azure.com",
                                     api_version="2024-10-21"), mw)
    with respx.mock(assert_all_called=True) as router:
        route = router.post(url__regex=r"https://example\.openai\.azure\.com/openai/deployments/my-gpt/chat/completions.*")
        route.mock(return_value=httpx.Response(200, json=COMPLETION))
        client.chat.completions.create(model="my-gpt", messages=conversation())
        assert_memory_before_latest_user(json.loads(route.calls.last.request.content)["messages"], conversation())


# ---------------------------------------------------------------------- responses


def test_responses_input_string(mw: Middleware, api: Any) -> None:
    client = wrap(openai.OpenAI(api_key="test"), mw)
    result = client.responses.create(model="gpt-4o-mini", instructions="Be brief.", input=QUESTION)
    assert isinstance(result, Response) and result.output_text == "Tabs."
    body = sent(api, "responses")
    assert body["instructions"] == "Be brief."  # the cached prefix is untouched
    memory, user = body["input"]
    assert memory["role"] == "user" and memory["content"][0]["type"] == "input_text"
    assert memory["content"][0]["text"].startswith(OPEN) and "tabs over spaces" in memory["content"][0]["text"]
    assert user == {"role": "user", "content": QUESTION}


async def test_responses_input_items_async(mw: Middleware, api: Any) -> None:
    client = wrap(openai.AsyncOpenAI(api_key="test"), mw)
    items = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello!"}]},
        {"role": "user", "content": [{"type": "input_text", "text": QUESTION}]},
    ]
    before = copy.deepcopy(items)
    await client.responses.create(model="gpt-4o-mini", input=items)
    assert items == before
    sent_items = sent(api, "responses")["input"]
    assert sent_items[:3] == before[:3] and sent_items[4] == before[3]
    assert sent_items[3]["content"][0]["text"].startswith(OPEN)


def test_sdk_objects_passed_back_as_input(mw: Middleware, api: Any) -> None:
    # agent loops pass the SDK's own objects back: they reach the provider as the SDK would send them
    raw = openai.OpenAI(api_key="test")
    client = wrap(raw, mw)
    first = client.responses.create(model="gpt-4o-mini", input="hi")
    items = [{"role": "user", "content": "hi"}, *first.output, {"role": "user", "content": QUESTION}]
    raw.responses.create(model="gpt-4o-mini", input=items)
    plain = sent(api, "responses")["input"]
    client.responses.create(model="gpt-4o-mini", input=items)
    with_memory = sent(api, "responses")["input"]
    assert with_memory[:2] == plain[:2] and with_memory[3:] == plain[2:]
    assert with_memory[2]["content"][0]["text"].startswith(OPEN)

    reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    messages = [{"role": "user", "content": "hi"}, reply.choices[0].message, {"role": "user", "content": QUESTION}]
    raw.chat.completions.create(model="gpt-4o-mini", messages=messages)
    plain = sent(api)["messages"]
    client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    assert sent(api)["messages"] == [*plain[:2], sent(api)["messages"][2], plain[2]]
    assert sent(api)["messages"][2]["content"].startswith(OPEN)


# ---------------------------------------------------------------------- the rest of the client


def test_other_attributes_pass_through_and_nothing_is_patched(mw: Middleware) -> None:
    create = openai.resources.chat.completions.Completions.create
    client = openai.OpenAI(api_key="test", base_url="http://127.0.0.1:9/v1")
    wrapped = wrap(client, mw)
    assert openai.resources.chat.completions.Completions.create is create
    assert wrapped.models is client.models and wrapped.api_key == "test"
    assert wrapped.chat.completions.with_raw_response is not None  # delegated
    derived = wrapped.with_options(timeout=5)
    assert type(derived) is type(wrapped) and derived.timeout == 5
    with pytest.raises(TypeError, match="already wrapped"):
        wrap(wrapped, mw)
    with pytest.raises(TypeError, match="OpenAI or AsyncOpenAI"):
        wrap(object(), mw)


# ---------------------------------------------------------------------- fail open


def test_fail_open_when_search_raises(tmp_path: Path, api: Any, caplog: pytest.LogCaptureFixture) -> None:
    store = BrokenStore(tmp_path / "mem")
    store.add("User prefers tabs over spaces")
    client = wrap(openai.OpenAI(api_key="test"), Middleware(store=store, mode="contextPerTurn"))
    result = client.chat.completions.create(model="gpt-4o-mini", messages=conversation())
    assert isinstance(result, ChatCompletion)
    assert sent(api)["messages"] == conversation()
    assert len(memwire_warnings(caplog)) == 1


def test_fail_open_on_broken_memory_directory(tmp_path: Path, api: Any, caplog: pytest.LogCaptureFixture) -> None:
    not_a_dir = tmp_path / "memory"
    not_a_dir.write_text("this is a file, not a directory")
    mw = Middleware(store=MemoryStore(not_a_dir), mode="contextPerTurn")
    client = wrap(openai.OpenAI(api_key="test"), mw)
    client.chat.completions.create(model="gpt-4o-mini", messages=conversation())
    assert sent(api)["messages"] == conversation()
    assert len(memwire_warnings(caplog)) == 1


@pytest.mark.parametrize("is_async", [False, True])
async def test_fail_open_when_middleware_raises(store: MemoryStore, api: Any, caplog: pytest.LogCaptureFixture,
                                                is_async: bool) -> None:
    mw = BrokenMiddleware(store=store)
    if is_async:
        result = await wrap(openai.AsyncOpenAI(api_key="test"), mw).responses.create(
            model="gpt-4o-mini", input=QUESTION, memwire_session="s")
    else:
        result = wrap(openai.OpenAI(api_key="test"), mw).responses.create(
            model="gpt-4o-mini", input=QUESTION, memwire_session="s")
    assert isinstance(result, Response)
    assert sent(api, "responses") == {"model": "gpt-4o-mini", "input": QUESTION}  # memwire kwargs still removed
    assert len(memwire_warnings(caplog)) == 1


def test_fail_open_on_malformed_messages(mw: Middleware, api: Any, caplog: pytest.LogCaptureFixture) -> None:
    odd = [{"role": "narrator", "content": "Once upon a time"}, {"role": "user", "content": QUESTION}]
    wrap(openai.OpenAI(api_key="test"), mw).chat.completions.create(model="gpt-4o-mini", messages=odd)
    assert sent(api)["messages"] == odd
    assert len(memwire_warnings(caplog)) == 1 and "RequestFormatError" in memwire_warnings(caplog)[0].getMessage()
