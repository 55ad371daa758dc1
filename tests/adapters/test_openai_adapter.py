"""The OpenAI adapter at the HTTP layer, with the real SDK clients (and instructor, the Agents SDK)
as callers. The provider is mocked: respx for api.openai.com, or memwire's fake provider on
127.0.0.1 where realistic streams are needed."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pydantic
import pytest
import respx
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response

from memwire import MemoryStore, Middleware
from memwire.adapters.openai import wrap
from memwire.policies.modes._render import OPEN
from memwire._sim.fake_provider import FakeProvider, ServerThread, default_reply, serve_in_thread, structured_reply

from .failing import BrokenMiddleware, BrokenStore, call_warnings, memwire_warnings

BASE = "https://api.openai.com/v1"
MODEL = "gpt-4o-mini"
SYSTEM = {"role": "system", "content": "You are a careful coding agent."}
QUESTION = "Should I indent this Python file with tabs or spaces?"
SESSION = {"x-memwire-session": "conv-1"}

COMPLETION = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": MODEL,
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Tabs."}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
}
RESPONSE = {
    "id": "resp_1", "object": "response", "created_at": 1, "model": MODEL, "status": "completed",
    "output": [{"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": "Tabs.", "annotations": []}]}],
    "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
}


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


CHUNKS = [_chunk({"role": "assistant", "content": ""}), *(_chunk({"content": t}) for t in ["Use ", "tabs", "."]),
          _chunk({}, "stop")]
SSE = "".join(f"data: {json.dumps(c)}\n\n" for c in CHUNKS) + "data: [DONE]\n\n"


class Answer(pydantic.BaseModel):
    answer: str


@pytest.fixture
def api() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        router.post("/chat/completions", name="chat").mock(return_value=httpx.Response(200, json=COMPLETION))
        router.post("/responses", name="responses").mock(return_value=httpx.Response(200, json=RESPONSE))
        router.post("/responses/input_tokens", name="input_tokens").mock(
            return_value=httpx.Response(200, json={"object": "response.input_tokens", "input_tokens": 42}))
        router.post("/embeddings", name="embeddings").mock(return_value=httpx.Response(200, json={}))
        router.get("/models", name="models").mock(return_value=httpx.Response(200, json={"object": "list", "data": []}))
        yield router


@pytest.fixture(scope="module")
def fake() -> Iterator[tuple[FakeProvider, ServerThread]]:
    provider = FakeProvider(reply=lambda body, api: structured_reply(body, api) or default_reply(body, api))
    with serve_in_thread(provider) as server:
        yield provider, server


def raw(api: respx.MockRouter, name: str = "chat") -> bytes:
    return bytes(api[name].calls.last.request.content)


def sent(api: respx.MockRouter, name: str = "chat") -> dict[str, Any]:
    return json.loads(raw(api, name))  # type: ignore[no-any-return]


def conversation() -> list[dict[str, Any]]:
    return [SYSTEM, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello! What are we doing?"},
            {"role": "user", "content": QUESTION}]


def memory_text(item: dict[str, Any]) -> str:
    content = item.get("content")
    return content if isinstance(content, str) else content[0]["text"]


def assert_memory_before_latest_user(items: list[dict[str, Any]], original: list[dict[str, Any]]) -> None:
    """``items`` is ``original`` with one memory message inserted right before the latest user message."""
    assert len(items) == len(original) + 1
    assert items[:-2] == original[:-1]  # the prefix (system prompt, history) is byte-stable
    assert items[-1] == original[-1]    # the latest user message is still last
    assert items[-2]["role"] == "user"
    text = memory_text(items[-2])
    assert text.startswith(OPEN) and "tabs over spaces" in text


# ---------------------------------------------------------------------- the client keeps its class


def test_wrapped_client_is_an_openai_client_and_the_original_is_untouched(mw: Middleware, api: Any) -> None:
    create = openai.resources.chat.completions.Completions.create
    original = openai.OpenAI(api_key="test", max_retries=5, timeout=12, default_headers={"x-team": "core"})
    http_client = original._client
    client = wrap(original, mw)
    assert type(client) is openai.OpenAI and client is not original
    assert (client.api_key, client.max_retries, client.timeout, str(client.base_url)) == ("test", 5, 12, BASE + "/")
    assert openai.resources.chat.completions.Completions.create is create  # nothing patched
    assert original._client is http_client

    original.chat.completions.create(model=MODEL, messages=conversation())
    assert sent(api)["messages"] == conversation()  # the original client has no memory
    client.chat.completions.create(model=MODEL, messages=conversation())
    assert_memory_before_latest_user(sent(api)["messages"], conversation())
    assert api["chat"].calls.last.request.headers["x-team"] == "core"


def test_with_options_and_copy_keep_memory(mw: Middleware, api: Any) -> None:
    client = wrap(openai.OpenAI(api_key="test"), mw)
    for derived in (client.with_options(timeout=5), client.copy(max_retries=0)):
        assert type(derived) is openai.OpenAI
        derived.chat.completions.create(model=MODEL, messages=conversation())
        assert_memory_before_latest_user(sent(api)["messages"], conversation())


def test_wrong_arguments_and_wrapping_twice_raise(mw: Middleware) -> None:
    client = wrap(openai.OpenAI(api_key="test"), mw)
    with pytest.raises(TypeError, match="already wrapped"):
        wrap(client, mw)
    with pytest.raises(TypeError, match="already wrapped"):
        wrap(client.with_options(timeout=3), mw)
    with pytest.raises(TypeError, match="OpenAI or AsyncOpenAI client, got dict"):
        wrap({}, mw)
    with pytest.raises(TypeError, match="Middleware, got str"):
        wrap(openai.OpenAI(api_key="test"), "mw")  # type: ignore[arg-type]


def test_wrap_warms_up_in_the_background(mw: Middleware, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, Any]] = []
    monkeypatch.setattr(mw, "warm_up", lambda models, *, background=False: calls.append((tuple(models), background)))
    wrap(openai.AsyncOpenAI(api_key="test"), mw)
    assert calls == [(("gpt-4o", None), True)]


def test_the_original_http_client_is_kept(mw: Middleware) -> None:
    # a caller's own http client: its transport (here a mock), headers and event hooks still apply
    seen: list[httpx.Request] = []
    hooked: list[str] = []

    def provider(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=COMPLETION)

    http_client = httpx.Client(transport=httpx.MockTransport(provider), headers={"x-proxy-auth": "k"},
                               event_hooks={"request": [lambda r: hooked.append(r.url.path)]})
    client = wrap(openai.OpenAI(api_key="test", base_url="https://llm.internal/v1", http_client=http_client), mw)
    client.chat.completions.create(model=MODEL, messages=conversation())
    assert_memory_before_latest_user(json.loads(seen[-1].content)["messages"], conversation())
    assert seen[-1].headers["x-proxy-auth"] == "k" and hooked == ["/v1/chat/completions"]

    # mounts (a proxy for one host, as HTTPS_PROXY makes them) carry memory too
    http_client = httpx.Client(mounts={"https://llm.internal": httpx.MockTransport(provider)})
    client = wrap(openai.OpenAI(api_key="test", base_url="https://llm.internal/v1", http_client=http_client), mw)
    client.chat.completions.create(model=MODEL, messages=conversation())
    assert_memory_before_latest_user(json.loads(seen[-1].content)["messages"], conversation())


def test_an_httpx2_http_client(mw: Middleware) -> None:
    httpx2 = pytest.importorskip("httpx2", reason="httpx2 is not installed")
    seen: list[Any] = []

    def provider(request: Any) -> Any:
        seen.append(request)
        return httpx2.Response(200, json=COMPLETION)

    try:
        original = openai.OpenAI(api_key="test", http_client=httpx2.Client(transport=httpx2.MockTransport(provider)))
    except TypeError:
        pytest.skip("this openai version takes httpx clients only")
    wrap(original, mw).chat.completions.create(model=MODEL, messages=conversation(), extra_headers=SESSION)
    assert_memory_before_latest_user(json.loads(seen[-1].content)["messages"], conversation())
    assert "x-memwire-session" not in seen[-1].headers


# ---------------------------------------------------------------------- every path gets memory


def chat_paths(client: Any, messages: list[Any]) -> dict[str, Callable[[], Any]]:
    kw: dict[str, Any] = {"model": MODEL, "messages": messages, "extra_headers": SESSION}
    c = client.chat.completions

    def stream_helper() -> Any:
        with c.stream(**kw) as stream:
            return stream.get_final_completion()

    def streaming_response() -> Any:
        with c.with_streaming_response.create(**kw) as response:
            return response.parse()

    return {
        "create": lambda: c.create(**kw),
        "create(stream=True)": lambda: [chunk for chunk in c.create(**kw, stream=True)],
        "parse": lambda: c.parse(**kw, response_format=Answer),
        "stream()": stream_helper,
        "with_raw_response": lambda: c.with_raw_response.create(**kw).parse(),
        "with_streaming_response": streaming_response,
    }


def responses_paths(client: Any, items: list[Any]) -> dict[str, Callable[[], Any]]:
    kw: dict[str, Any] = {"model": MODEL, "input": items, "instructions": "Be brief.", "extra_headers": SESSION}
    r = client.responses

    def stream_helper() -> Any:
        with r.stream(**kw) as stream:
            return stream.get_final_response()

    return {
        "create": lambda: r.create(**kw),
        "create(stream=True)": lambda: [event for event in r.create(**kw, stream=True)],
        "parse": lambda: r.parse(**kw, text_format=Answer),
        "stream()": stream_helper,
        "with_raw_response": lambda: r.with_raw_response.create(**kw).parse(),
    }


def async_chat_paths(client: Any, messages: list[Any]) -> dict[str, Callable[[], Any]]:
    kw: dict[str, Any] = {"model": MODEL, "messages": messages, "extra_headers": SESSION}
    c = client.chat.completions

    async def stream() -> Any:
        return [chunk async for chunk in await c.create(**kw, stream=True)]

    async def stream_helper() -> Any:
        async with c.stream(**kw) as s:
            return await s.get_final_completion()

    async def raw() -> Any:
        return (await c.with_raw_response.create(**kw)).parse()

    async def streaming_response() -> Any:
        async with c.with_streaming_response.create(**kw) as response:
            return await response.parse()

    return {"create": lambda: c.create(**kw), "create(stream=True)": stream,
            "parse": lambda: c.parse(**kw, response_format=Answer), "stream()": stream_helper,
            "with_raw_response": raw, "with_streaming_response": streaming_response}


def async_responses_paths(client: Any, items: list[Any]) -> dict[str, Callable[[], Any]]:
    kw: dict[str, Any] = {"model": MODEL, "input": items, "instructions": "Be brief.", "extra_headers": SESSION}
    r = client.responses

    async def stream() -> Any:
        return [event async for event in await r.create(**kw, stream=True)]

    async def stream_helper() -> Any:
        async with r.stream(**kw) as s:
            return await s.get_final_response()

    async def raw() -> Any:
        return (await r.with_raw_response.create(**kw)).parse()

    return {"create": lambda: r.create(**kw), "create(stream=True)": stream,
            "parse": lambda: r.parse(**kw, text_format=Answer), "stream()": stream_helper, "with_raw_response": raw}


CHAT_PATHS = ["create", "create(stream=True)", "parse", "stream()", "with_raw_response", "with_streaming_response"]
RESPONSES_PATHS = ["create", "create(stream=True)", "parse", "stream()", "with_raw_response"]


def responses_items() -> list[dict[str, Any]]:
    return [{"role": "user", "content": "hi"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello!"}]},
            {"role": "user", "content": [{"type": "input_text", "text": QUESTION}]}]


def check_path(fake: FakeProvider, key: str, run: Callable[[Any], Any], raw_client: Any, client: Any,
               original: list[dict[str, Any]]) -> None:
    """``run`` through the plain client, then through the wrapped one: the provider got the same
    request plus one memory message before the latest user message, and no memwire header."""
    run(raw_client)
    plain = fake.last.body
    items = copy.deepcopy(original)
    run(client)
    got = fake.last
    assert items == original  # the caller's list is not mutated
    assert not [h for h in got.headers if h.startswith("x-memwire")]
    assert {k: v for k, v in got.body.items() if k != key} == {k: v for k, v in plain.items() if k != key}
    assert_memory_before_latest_user(got.body[key], plain[key])


@pytest.mark.parametrize("path", CHAT_PATHS)
def test_every_sync_chat_path_gets_memory(mw: Middleware, fake: Any, path: str) -> None:
    provider, server = fake
    raw_client = openai.OpenAI(api_key="test", base_url=server.base_url + "/v1")
    client = wrap(raw_client, mw)
    messages = conversation()
    check_path(provider, "messages", lambda c: chat_paths(c, messages)[path](), raw_client, client, messages)


@pytest.mark.parametrize("path", RESPONSES_PATHS)
def test_every_sync_responses_path_gets_memory(mw: Middleware, fake: Any, path: str) -> None:
    provider, server = fake
    raw_client = openai.OpenAI(api_key="test", base_url=server.base_url + "/v1")
    client = wrap(raw_client, mw)
    items = responses_items()
    check_path(provider, "input", lambda c: responses_paths(c, items)[path](), raw_client, client, items)


@pytest.mark.parametrize("path", CHAT_PATHS)
async def test_every_async_chat_path_gets_memory(mw: Middleware, fake: Any, path: str) -> None:
    provider, server = fake
    raw_client = openai.AsyncOpenAI(api_key="test", base_url=server.base_url + "/v1")
    client = wrap(raw_client, mw)
    messages = conversation()
    await async_chat_paths(raw_client, messages)[path]()
    plain = provider.last.body["messages"]
    await async_chat_paths(client, messages)[path]()
    assert messages == conversation()
    assert not [h for h in provider.last.headers if h.startswith("x-memwire")]
    assert_memory_before_latest_user(provider.last.body["messages"], plain)


@pytest.mark.parametrize("path", RESPONSES_PATHS)
async def test_every_async_responses_path_gets_memory(mw: Middleware, fake: Any, path: str) -> None:
    provider, server = fake
    raw_client = openai.AsyncOpenAI(api_key="test", base_url=server.base_url + "/v1")
    client = wrap(raw_client, mw)
    items = responses_items()
    await async_responses_paths(raw_client, items)[path]()
    plain = provider.last.body["input"]
    await async_responses_paths(client, items)[path]()
    assert items == responses_items()
    assert_memory_before_latest_user(provider.last.body["input"], plain)


def test_stream_chunks_arrive_unchanged(mw: Middleware, api: Any) -> None:
    api["chat"].mock(return_value=httpx.Response(200, text=SSE, headers={"content-type": "text/event-stream"}))
    client = wrap(openai.OpenAI(api_key="test"), mw)
    got = [c.model_dump(exclude_unset=True) for c in
           client.chat.completions.create(model=MODEL, messages=conversation(), stream=True)]
    assert got == CHUNKS
    assert sent(api)["stream"] is True and memory_text(sent(api)["messages"][-2]).startswith(OPEN)


async def test_async_stream_chunks_arrive_unchanged(mw: Middleware, api: Any) -> None:
    api["chat"].mock(return_value=httpx.Response(200, text=SSE, headers={"content-type": "text/event-stream"}))
    client = wrap(openai.AsyncOpenAI(api_key="test"), mw)
    stream = await client.chat.completions.create(model=MODEL, messages=conversation(), stream=True)
    got = [c async for c in stream]
    assert all(isinstance(c, ChatCompletionChunk) for c in got)
    assert [c.model_dump(exclude_unset=True) for c in got] == CHUNKS


def test_responses_input_string_and_token_count(mw: Middleware, api: Any) -> None:
    client = wrap(openai.OpenAI(api_key="test"), mw)
    result = client.responses.create(model=MODEL, instructions="Be brief.", input=QUESTION)
    assert isinstance(result, Response) and result.output_text == "Tabs."
    body = sent(api, "responses")
    assert body["instructions"] == "Be brief."  # the cached prefix is untouched
    memory, user = body["input"]
    assert memory["role"] == "user" and memory["content"][0]["type"] == "input_text"
    assert memory_text(memory).startswith(OPEN) and user == {"role": "user", "content": QUESTION}

    # counting tokens counts what create() sends: the same memory message
    assert client.responses.input_tokens.count(model=MODEL, input=QUESTION).input_tokens == 42
    assert sent(api, "input_tokens")["input"] == body["input"]


def test_messages_as_a_tuple_and_sdk_objects_passed_back(mw: Middleware, api: Any) -> None:
    # agent loops pass the SDK's own objects back; the SDK serializes them, memwire reads the JSON
    client = wrap(openai.OpenAI(api_key="test"), mw)
    client.chat.completions.create(model=MODEL, messages=tuple(conversation()))
    assert_memory_before_latest_user(sent(api)["messages"], conversation())
    reply = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    messages = [{"role": "user", "content": "hi"}, reply.choices[0].message, {"role": "user", "content": QUESTION}]
    client.chat.completions.create(model=MODEL, messages=messages)
    assert sent(api)["messages"][1] == {"role": "assistant", "content": "Tabs."}
    assert memory_text(sent(api)["messages"][2]).startswith(OPEN)


def test_azure_client(mw: Middleware) -> None:
    client = wrap(openai.AzureOpenAI(api_key="test", azure_endpoint="https://example.openai.azure.com",
                                     api_version="2024-10-21"), mw)
    assert isinstance(client, openai.AzureOpenAI)
    with respx.mock(assert_all_called=True) as router:
        route = router.post(url__regex=r"https://example\.openai\.azure\.com/openai/deployments/my-gpt/chat/completions.*")
        route.mock(return_value=httpx.Response(200, json=COMPLETION))
        client.with_options(timeout=9).chat.completions.create(model="my-gpt", messages=conversation())
        assert_memory_before_latest_user(json.loads(route.calls.last.request.content)["messages"], conversation())


def test_a_retry_sends_the_same_bytes(mw: Middleware, api: Any) -> None:
    api["chat"].mock(side_effect=[httpx.Response(500, json={"error": {"message": "x"}}, headers={"retry-after-ms": "1"}),
                                  httpx.Response(200, json=COMPLETION)])
    wrap(openai.OpenAI(api_key="test", max_retries=1), mw).chat.completions.create(model=MODEL, messages=conversation())
    first, second = (call.request for call in api["chat"].calls)
    assert first.content == second.content and OPEN.encode() in first.content


# ---------------------------------------------------------------------- session and namespace


def test_headers_choose_session_and_namespace_and_are_not_sent(store: MemoryStore, mw: Middleware, api: Any) -> None:
    alice = MemoryStore.for_namespace(store.path, "alice")
    alice.add("Alice indents with two spaces in YAML files only")
    alice.add("Alice deploys from her laptop on Fridays")
    client = wrap(openai.OpenAI(api_key="test"), mw)
    client.chat.completions.create(model=MODEL, messages=conversation(),
                                   extra_headers={"x-memwire-session": "s-1", "x-memwire-namespace": "alice"})
    request = api["chat"].calls.last.request
    assert not [h for h in request.headers if h.startswith("x-memwire")]
    memory = memory_text(sent(api)["messages"][-2])
    assert "Alice indents" in memory and "tabs over spaces" not in memory  # namespaces are isolated

    # the wrap() default namespace, and a header that overrides it
    client = wrap(openai.OpenAI(api_key="test"), mw, namespace="alice")
    client.chat.completions.create(model=MODEL, messages=conversation())
    assert "Alice indents" in memory_text(sent(api)["messages"][-2])
    client.chat.completions.create(model=MODEL, messages=conversation(), extra_headers={"x-memwire-namespace": "default"})
    assert "tabs over spaces" in memory_text(sent(api)["messages"][-2])


def test_session_header_and_default_pick_the_conversation(store: MemoryStore, api: Any) -> None:
    # startup mode: one block per session, kept for the session; a new memory shows only in a new session
    mw = Middleware(store=store, mode="startup")
    mw.warm_up()
    client = wrap(openai.OpenAI(api_key="test"), mw, session="a")

    def block(**kw: Any) -> str:
        client.chat.completions.create(model=MODEL, messages=conversation(), **kw)
        return memory_text(sent(api)["messages"][1])

    first = block()
    store.add("Releases are tagged vYYYY.MM on the main branch")
    assert block() == first  # the wrap() default session "a"
    assert block(extra_headers={"x-memwire-session": "a"}) == first
    assert "Releases are tagged" in block(extra_headers={"x-memwire-session": "b"})


def test_bad_namespace_fails_at_wrap_and_fails_open_per_call(mw: Middleware, api: Any, caplog: Any) -> None:
    with pytest.raises(ValueError, match="namespace"):
        wrap(openai.OpenAI(api_key="test"), mw, namespace="../etc")
    client = wrap(openai.OpenAI(api_key="test"), mw)
    client.chat.completions.create(model=MODEL, messages=conversation(), extra_headers={"x-memwire-namespace": "../etc"})
    assert sent(api)["messages"] == conversation()
    assert len(memwire_warnings(caplog)) == 1


# ---------------------------------------------------------------------- bytes


def test_unchanged_request_goes_out_as_the_exact_original_bytes(mw: Middleware, api: Any) -> None:
    # no memory is relevant: the body the caller sent (spaces, \u escapes) is what arrives
    body = b'{"model": "gpt-4o-mini",  "messages": [{"role": "user", "content": "Caf\\u00e9 opening hours?"}]}'
    client = wrap(openai.OpenAI(api_key="test"), mw)
    client.post("/chat/completions", cast_to=ChatCompletion, content=body, options={"headers": SESSION})
    assert raw(api) == body
    assert "x-memwire-session" not in api["chat"].calls.last.request.headers


def test_changed_body_keeps_utf8_and_a_right_content_length(mw: Middleware, api: Any) -> None:
    client = wrap(openai.OpenAI(api_key="test"), mw)
    messages = [SYSTEM, {"role": "user", "content": "Tabs or spaces for the café’s Python file? 日本語"}]
    client.chat.completions.create(model=MODEL, messages=messages)
    request = api["chat"].calls.last.request
    assert "café’s Python file? 日本語".encode() in request.content and b"\\u" not in request.content
    assert int(request.headers["content-length"]) == len(request.content)
    assert memory_text(json.loads(request.content)["messages"][1]).startswith(OPEN)


def test_other_requests_pass_through_untouched(mw: Middleware, api: Any) -> None:
    client = wrap(openai.OpenAI(api_key="test"), mw)
    client.models.list(extra_headers=SESSION)
    assert "x-memwire-session" not in api["models"].calls.last.request.headers
    client.embeddings.with_raw_response.create(model="e", input=QUESTION, encoding_format="float")
    assert sent(api, "embeddings") == {"model": "e", "input": QUESTION, "encoding_format": "float"}


# ---------------------------------------------------------------------- fail open


def test_fail_open_when_search_raises(tmp_path: Path, api: Any, caplog: pytest.LogCaptureFixture) -> None:
    MemoryStore(tmp_path / "mem").add("User prefers tabs over spaces")  # written whole; then its search breaks
    store = BrokenStore(tmp_path / "mem")
    client = wrap(openai.OpenAI(api_key="test"), Middleware(store=store, mode="contextPerTurn"))
    assert isinstance(client.chat.completions.create(model=MODEL, messages=conversation()), ChatCompletion)
    assert sent(api)["messages"] == conversation()
    assert len(call_warnings(caplog)) == 1


def test_fail_open_on_broken_memory_directory(tmp_path: Path, api: Any, caplog: pytest.LogCaptureFixture) -> None:
    not_a_dir = tmp_path / "memory"
    not_a_dir.write_text("this is a file, not a directory")
    client = wrap(openai.OpenAI(api_key="test"), Middleware(store=MemoryStore(not_a_dir), mode="contextPerTurn"))
    client.chat.completions.create(model=MODEL, messages=conversation())
    assert sent(api)["messages"] == conversation()
    assert len(call_warnings(caplog)) == 1


@pytest.mark.parametrize("is_async", [False, True])
async def test_fail_open_when_middleware_raises(store: MemoryStore, api: Any, caplog: pytest.LogCaptureFixture,
                                                is_async: bool) -> None:
    mw = BrokenMiddleware(store=store)
    mw.warm_up()
    if is_async:
        result = await wrap(openai.AsyncOpenAI(api_key="test"), mw).responses.create(
            model=MODEL, input=QUESTION, extra_headers=SESSION)
    else:
        result = wrap(openai.OpenAI(api_key="test"), mw).responses.create(model=MODEL, input=QUESTION, extra_headers=SESSION)
    assert isinstance(result, Response)
    request = api["responses"].calls.last.request
    assert json.loads(request.content) == {"model": MODEL, "input": QUESTION}
    assert "x-memwire-session" not in request.headers  # memwire's headers are still removed
    assert len(memwire_warnings(caplog)) == 1


def test_fail_open_on_malformed_messages(mw: Middleware, api: Any, caplog: pytest.LogCaptureFixture) -> None:
    odd = [{"role": "narrator", "content": "Once upon a time"}, {"role": "user", "content": QUESTION}]
    wrap(openai.OpenAI(api_key="test"), mw).chat.completions.create(model=MODEL, messages=odd)
    assert sent(api)["messages"] == odd
    warnings = memwire_warnings(caplog)
    assert len(warnings) == 1 and "RequestFormatError" in warnings[0].getMessage()


@pytest.mark.parametrize("body", [b"not json at all", b"[1, 2, 3]", b"\xff\xfe{}", iter([b'{"model": "m"}'])],
                         ids=["not-json", "not-an-object", "not-utf8", "streamed"])
async def test_fail_open_on_a_body_memwire_cannot_read(mw: Middleware, api: Any, caplog: pytest.LogCaptureFixture,
                                                       body: Any) -> None:
    expected = b'{"model": "m"}' if not isinstance(body, bytes) else body
    client = wrap(openai.OpenAI(api_key="test"), mw)
    client.post("/chat/completions", cast_to=httpx.Response, content=body, options={"headers": SESSION})
    assert raw(api) == expected and "x-memwire-session" not in api["chat"].calls.last.request.headers
    assert len(memwire_warnings(caplog)) == 1
    caplog.clear()
    aclient = wrap(openai.AsyncOpenAI(api_key="test"), mw)
    if not isinstance(body, bytes):
        async def chunks() -> Any:
            yield expected
        body = chunks()
    await aclient.post("/chat/completions", cast_to=httpx.Response, content=body)
    assert raw(api) == expected and len(memwire_warnings(caplog)) == 1


# ---------------------------------------------------------------------- frameworks as callers


class UserInfo(pydantic.BaseModel):
    name: str
    indent: str


def _tool_call_completion(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}
    return {**COMPLETION, "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}


@pytest.mark.parametrize("is_async", [False, True])
async def test_instructor_structured_extraction(mw: Middleware, api: Any, is_async: bool) -> None:
    instructor = pytest.importorskip("instructor", reason="instructor is not installed")
    api["chat"].mock(return_value=httpx.Response(200, json=_tool_call_completion("UserInfo", {"name": "Ada", "indent": "tabs"})))
    messages = [{"role": "user", "content": "Ada here. " + QUESTION}]
    if is_async:
        client = instructor.from_openai(wrap(openai.AsyncOpenAI(api_key="test"), mw))
        user = await client.chat.completions.create(model=MODEL, response_model=UserInfo, messages=messages)
    else:
        client = instructor.from_openai(wrap(openai.OpenAI(api_key="test"), mw))
        user = client.chat.completions.create(model=MODEL, response_model=UserInfo, messages=messages)
    assert user.model_dump() == {"name": "Ada", "indent": "tabs"}
    body = sent(api)
    assert body["tools"][0]["function"]["name"] == "UserInfo"  # instructor's request, with memory added
    assert_memory_before_latest_user(body["messages"], messages)


@pytest.mark.parametrize("streamed", [False, True])
async def test_openai_agents_sdk(mw: Middleware, fake: Any, streamed: bool) -> None:
    agents = pytest.importorskip("agents", reason="openai-agents is not installed")
    provider, server = fake
    client = wrap(openai.AsyncOpenAI(api_key="test", base_url=server.base_url + "/v1"), mw)
    agent = agents.Agent(name="coder", instructions="You are a careful coding agent.",
                         model=agents.OpenAIResponsesModel(model=MODEL, openai_client=client))
    config = agents.RunConfig(tracing_disabled=True)
    if streamed:
        run = agents.Runner.run_streamed(agent, QUESTION, run_config=config)
        async for _ in run.stream_events():
            pass
    else:
        run = await agents.Runner.run(agent, QUESTION, run_config=config)
    assert run.final_output == "ok: " + QUESTION[:40]
    body = provider.last.body
    assert body["instructions"] == "You are a careful coding agent." and body.get("stream", False) is streamed
    assert_memory_before_latest_user(body["input"], [{"role": "user", "content": QUESTION}])


def test_every_wrap_misuse_is_a_memwire_usage_error() -> None:
    import litellm
    from openai import OpenAI

    from memwire import MemwireError, UsageError
    from memwire.adapters.anthropic import wrap as wrap_anthropic
    from memwire.adapters.litellm import wrap as wrap_litellm

    mw = Middleware(store=MemoryStore("unused-dir"))
    misuses = [lambda: wrap({}, mw), lambda: wrap(OpenAI(api_key="x"), "mw"), lambda: wrap_anthropic(OpenAI(api_key="x"), mw),
               lambda: wrap_litellm("litellm.completion", mw), lambda: wrap_litellm(litellm.completion, None)]
    for misuse in misuses:
        with pytest.raises(UsageError) as info:
            misuse()
        assert isinstance(info.value, (MemwireError, TypeError))  # one tree, and still a TypeError
