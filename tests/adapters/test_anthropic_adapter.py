"""The Anthropic adapter at the HTTP layer, with the real SDK clients as callers.

The provider is memwire's fake provider on 127.0.0.1 (the anthropic SDK 2.x is built on httpx2,
which respx does not intercept), or a mock transport where the exact bytes on the wire matter."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pydantic
import pytest

from memwire import MemoryStore, Middleware
from memwire.adapters.anthropic import wrap
from memwire.policies.modes._render import OPEN
from memwire._sim.fake_provider import FakeProvider, ServerThread, default_reply, serve_in_thread, structured_reply

from .failing import BrokenMiddleware, BrokenStore, call_warnings, memwire_warnings

MODEL = "claude-sonnet-4-6"
SYSTEM = "You are a careful coding agent."
QUESTION = "Should I indent this Python file with tabs or spaces?"
SESSION = {"x-memwire-session": "conv-1"}
MESSAGE = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": MODEL,
    "content": [{"type": "text", "text": "Tabs."}], "stop_reason": "end_turn", "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 1},
}


def _http_module() -> Any:
    """The http module the installed anthropic SDK is built on: httpx2 (2.x) or httpx (older)."""
    try:
        import httpx2
    except ImportError:
        return httpx
    return httpx2 if isinstance(anthropic.Anthropic(api_key="t")._client, httpx2.Client) else httpx


HTTP = _http_module()


class Answer(pydantic.BaseModel):
    answer: str


@pytest.fixture(scope="module")
def fake() -> Iterator[tuple[FakeProvider, ServerThread]]:
    provider = FakeProvider(reply=lambda body, api: structured_reply(body, api) or default_reply(body, api))
    with serve_in_thread(provider) as server:
        yield provider, server


class Wire:
    """A mock provider at the transport: keeps every request as sent, answers with ``MESSAGE``."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> Any:
        self.requests.append(request)
        return HTTP.Response(200, json=MESSAGE)

    @property
    def last(self) -> Any:
        return self.requests[-1]

    def body(self) -> dict[str, Any]:
        return json.loads(self.last.content)  # type: ignore[no-any-return]

    def client(self, **kw: Any) -> anthropic.Anthropic:
        http_client = HTTP.Client(transport=HTTP.MockTransport(self))
        return anthropic.Anthropic(api_key="test", base_url="https://api.anthropic.com", http_client=http_client, **kw)


def conversation() -> list[dict[str, Any]]:
    return [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello! What are we doing?"},
            {"role": "user", "content": QUESTION}]


def is_memory(message: dict[str, Any], text: str = "tabs over spaces") -> bool:
    content = message["content"]
    return (message["role"] == "user" and isinstance(content, list) and content[0]["type"] == "text"
            and content[0]["text"].startswith(OPEN) and text in content[0]["text"])


def assert_memory_before_latest_user(messages: list[dict[str, Any]], original: list[dict[str, Any]]) -> None:
    assert len(messages) == len(original) + 1
    assert messages[:-2] == original[:-1] and messages[-1] == original[-1]
    assert is_memory(messages[-2])


# ---------------------------------------------------------------------- the client keeps its class


def test_wrapped_client_is_an_anthropic_client_and_the_original_is_untouched(mw: Middleware) -> None:
    create = anthropic.resources.messages.Messages.create
    wire = Wire()
    original = wire.client(max_retries=4, timeout=11, default_headers={"x-team": "core"})
    http_client = original._client
    client = wrap(original, mw)
    assert type(client) is anthropic.Anthropic and client is not original
    assert (client.api_key, client.max_retries, client.timeout) == ("test", 4, 11)
    assert anthropic.resources.messages.Messages.create is create and original._client is http_client

    original.messages.create(model=MODEL, max_tokens=64, system=SYSTEM, messages=conversation())
    assert wire.body()["messages"] == conversation()  # the original client has no memory
    client.messages.create(model=MODEL, max_tokens=64, system=SYSTEM, messages=conversation())
    body = wire.body()
    assert body["system"] == SYSTEM  # the system prompt is untouched
    assert_memory_before_latest_user(body["messages"], conversation())
    headers = wire.last.headers
    assert headers["x-team"] == "core" and "test" in headers.get("x-api-key", headers.get("authorization", ""))


def test_with_options_and_copy_keep_memory(mw: Middleware) -> None:
    wire = Wire()
    client = wrap(wire.client(), mw)
    for derived in (client.with_options(timeout=5), client.copy(max_retries=0)):
        assert type(derived) is anthropic.Anthropic
        derived.messages.create(model=MODEL, max_tokens=64, messages=conversation())
        assert_memory_before_latest_user(wire.body()["messages"], conversation())


def test_wrong_arguments_and_wrapping_twice_raise(mw: Middleware, monkeypatch: pytest.MonkeyPatch) -> None:
    client = wrap(anthropic.Anthropic(api_key="test"), mw)
    with pytest.raises(TypeError, match="already wrapped"):
        wrap(client, mw)
    with pytest.raises(TypeError, match="Anthropic or AsyncAnthropic client, got OpenAI"):
        import openai
        wrap(openai.OpenAI(api_key="test"), mw)

    calls: list[tuple[Any, Any]] = []
    monkeypatch.setattr(mw, "warm_up", lambda models, *, background=False: calls.append((tuple(models), background)))
    wrap(anthropic.AsyncAnthropic(api_key="test"), mw)
    assert calls == [((None,), True)]  # the store and the encoding load off the request path


# ---------------------------------------------------------------------- every path gets memory


def sync_paths(client: Any, messages: list[Any]) -> dict[str, Callable[[], Any]]:
    kw: dict[str, Any] = {"model": MODEL, "max_tokens": 64, "system": SYSTEM, "messages": messages,
                          "extra_headers": SESSION}
    m, beta = client.messages, client.beta.messages

    def stream(resource: Any) -> Callable[[], Any]:
        def run() -> Any:
            with resource.stream(**kw) as s:
                return s.get_final_message()
        return run

    def streaming_response() -> Any:
        with m.with_streaming_response.create(**kw) as response:
            return response.parse()

    def count(resource: Any) -> Callable[[], Any]:
        return lambda: resource.count_tokens(**{k: v for k, v in kw.items() if k != "max_tokens"})

    return {
        "create": lambda: m.create(**kw),
        "create(stream=True)": lambda: list(m.create(**kw, stream=True)),
        "stream()": stream(m),
        "parse": lambda: m.parse(**kw, output_format=Answer),
        "count_tokens": count(m),
        "with_raw_response": lambda: m.with_raw_response.create(**kw).parse(),
        "with_streaming_response": streaming_response,
        "beta.create": lambda: beta.create(**kw),
        "beta.stream()": stream(beta),
        "beta.count_tokens": count(beta),
    }


def async_paths(client: Any, messages: list[Any]) -> dict[str, Callable[[], Any]]:
    kw: dict[str, Any] = {"model": MODEL, "max_tokens": 64, "system": SYSTEM, "messages": messages,
                          "extra_headers": SESSION}
    m, beta = client.messages, client.beta.messages

    async def events() -> Any:
        return [event async for event in await m.create(**kw, stream=True)]

    def stream(resource: Any) -> Callable[[], Any]:
        async def run() -> Any:
            async with resource.stream(**kw) as s:
                return await s.get_final_message()
        return run

    async def raw() -> Any:
        return await (await m.with_raw_response.create(**kw)).parse()

    async def streaming_response() -> Any:
        async with m.with_streaming_response.create(**kw) as response:
            return await response.parse()

    def count(resource: Any) -> Callable[[], Any]:
        return lambda: resource.count_tokens(**{k: v for k, v in kw.items() if k != "max_tokens"})

    return {
        "create": lambda: m.create(**kw),
        "create(stream=True)": events,
        "stream()": stream(m),
        "parse": lambda: m.parse(**kw, output_format=Answer),
        "count_tokens": count(m),
        "with_raw_response": raw,
        "with_streaming_response": streaming_response,
        "beta.create": lambda: beta.create(**kw),
        "beta.stream()": stream(beta),
        "beta.count_tokens": count(beta),
    }


PATHS = ["create", "create(stream=True)", "stream()", "parse", "count_tokens", "with_raw_response",
         "with_streaming_response", "beta.create", "beta.stream()", "beta.count_tokens"]


def check(provider: FakeProvider, plain: Any, original: list[dict[str, Any]], messages: list[dict[str, Any]]) -> None:
    """The wrapped request is the plain one plus a memory message before the latest user message."""
    got = provider.last
    assert got.path == plain.path and messages == original  # the caller's list is not mutated
    assert not [h for h in got.headers if h.startswith("x-memwire")]
    assert {k: v for k, v in got.body.items() if k != "messages"} == {k: v for k, v in plain.body.items() if k != "messages"}
    assert_memory_before_latest_user(got.body["messages"], plain.body["messages"])


@pytest.mark.parametrize("path", PATHS)
def test_every_sync_path_gets_memory(mw: Middleware, fake: Any, path: str) -> None:
    provider, server = fake
    raw_client = anthropic.Anthropic(api_key="test", base_url=server.base_url)
    messages = conversation()
    sync_paths(raw_client, messages)[path]()
    plain = provider.last
    sync_paths(wrap(raw_client, mw), messages)[path]()
    check(provider, plain, conversation(), messages)


@pytest.mark.parametrize("path", PATHS)
async def test_every_async_path_gets_memory(mw: Middleware, fake: Any, path: str) -> None:
    provider, server = fake
    raw_client = anthropic.AsyncAnthropic(api_key="test", base_url=server.base_url)
    messages = conversation()
    await async_paths(raw_client, messages)[path]()
    plain = provider.last
    await async_paths(wrap(raw_client, mw), messages)[path]()
    check(provider, plain, conversation(), messages)


async def test_the_callers_async_http_client_is_kept(mw: Middleware) -> None:
    # an in-process ASGI transport given by the caller is still what carries the requests
    provider = FakeProvider()
    http_client = HTTP.AsyncClient(transport=HTTP.ASGITransport(app=provider))
    client = wrap(anthropic.AsyncAnthropic(api_key="test", base_url="http://fake", http_client=http_client), mw)
    message = await client.messages.create(model=MODEL, max_tokens=64, messages=conversation())
    assert message.content[0].text == "ok: " + QUESTION[:40]  # type: ignore[union-attr]
    assert_memory_before_latest_user(provider.last.body["messages"], conversation())


def test_a_tool_loop_gets_the_same_block_at_the_same_place(mw: Middleware, fake: Any) -> None:
    provider, server = fake
    client = wrap(anthropic.Anthropic(api_key="test", base_url=server.base_url), mw)
    tools = [{"name": "read_file", "description": "Read a file", "input_schema": {"type": "object", "properties": {}}}]
    messages: list[dict[str, Any]] = conversation()
    client.messages.create(model=MODEL, max_tokens=64, system=SYSTEM, tools=tools, messages=messages,
                           extra_headers=SESSION)
    first = provider.last.body["messages"]
    messages += [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "print('hi')"}]},
    ]
    client.messages.create(model=MODEL, max_tokens=64, system=SYSTEM, tools=tools, messages=messages,
                           extra_headers=SESSION)
    second = provider.last.body["messages"]
    assert second[:len(first)] == first  # a prefix extension: the cache holds through the tool loop
    assert len(second) == len(messages) + 1 and is_memory(second[2])


def test_with_the_profile_every_request_extends_the_previous_one(store: MemoryStore, fake: Any) -> None:
    provider, server = fake
    client = wrap(anthropic.Anthropic(api_key="test", base_url=server.base_url), Middleware(store=store, profile=True))
    messages: list[dict[str, Any]] = conversation()
    sent: list[Any] = []
    for more in ([], [{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "sh", "input": {}}]},
                      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}],
                 [{"role": "assistant", "content": "Tabs."}, {"role": "user", "content": "Which port is staging on?"}]):
        messages += more
        client.messages.create(model=MODEL, max_tokens=64, system=SYSTEM, messages=messages, extra_headers=SESSION)
        sent.append(provider.last.body["messages"])
    assert is_memory(sent[0][0], "Postgres 15") and provider.last.body["system"] == SYSTEM  # the profile, first
    for before, after in zip(sent, sent[1:]):
        assert after[: len(before)] == before  # a prefix extension: the cache holds, profile included


# ---------------------------------------------------------------------- session and namespace


def test_headers_choose_session_and_namespace_and_are_not_sent(store: MemoryStore, mw: Middleware) -> None:
    alice = MemoryStore.for_namespace(store.path, "alice")
    alice.add("Alice indents with two spaces in YAML files only")
    alice.add("Alice deploys from her laptop on Fridays")
    wire = Wire()
    client = wrap(wire.client(), mw)
    client.messages.create(model=MODEL, max_tokens=64, messages=conversation(),
                           extra_headers={"x-memwire-session": "s-1", "x-memwire-namespace": "alice"})
    assert not [h for h in wire.last.headers if h.startswith("x-memwire")]
    memory = wire.body()["messages"][-2]
    assert is_memory(memory, "Alice indents") and not is_memory(memory, "tabs over spaces")

    client = wrap(wire.client(), mw, namespace="alice")  # the wrap() default
    client.messages.create(model=MODEL, max_tokens=64, messages=conversation())
    assert is_memory(wire.body()["messages"][-2], "Alice indents")


def test_session_header_and_default_pick_the_conversation(store: MemoryStore) -> None:
    mw = Middleware(store=store, mode="startup")  # one block per session, kept for the session
    mw.warm_up()
    wire = Wire()
    client = wrap(wire.client(), mw, session="a")

    def block(**kw: Any) -> str:
        client.messages.create(model=MODEL, max_tokens=64, messages=conversation(), **kw)
        return str(wire.body()["messages"][0]["content"][0]["text"])

    first = block()
    store.add("Releases are tagged vYYYY.MM on the main branch")
    assert block() == first and block(extra_headers={"x-memwire-session": "a"}) == first
    assert "Releases are tagged" in block(extra_headers={"x-memwire-session": "b"})


# ---------------------------------------------------------------------- bytes


def test_unchanged_request_goes_out_as_the_exact_original_bytes(mw: Middleware) -> None:
    body = b'{"model": "claude-sonnet-4-6", "max_tokens": 9, "messages": [{"role": "user", "content": "Caf\\u00e9 hours?"}]}'
    wire = Wire()
    client = wrap(wire.client(), mw)
    client.post("/v1/messages", cast_to=anthropic.types.Message, content=body, options={"headers": SESSION})
    assert wire.last.content == body and "x-memwire-session" not in wire.last.headers


def test_changed_body_keeps_utf8_and_a_right_content_length(mw: Middleware) -> None:
    wire = Wire()
    client = wrap(wire.client(), mw)
    question = "Tabs or spaces for the café’s Python file? 日本語"
    client.messages.create(model=MODEL, max_tokens=64, system="Réponds en français.",
                           messages=[{"role": "user", "content": question}])
    content = wire.last.content
    assert question.encode() in content and "Réponds".encode() in content and b"\\u" not in content
    assert int(wire.last.headers["content-length"]) == len(content)
    assert is_memory(wire.body()["messages"][0])


def test_other_requests_pass_through_untouched(mw: Middleware) -> None:
    wire = Wire()
    client = wrap(wire.client(), mw)
    client.models.with_raw_response.list(extra_headers=SESSION)
    assert wire.last.method == "GET" and "x-memwire-session" not in wire.last.headers
    batch = {"requests": [{"custom_id": "a", "params": {"model": MODEL, "max_tokens": 9, "messages": conversation()}}]}
    client.post("/v1/messages/batches", cast_to=HTTP.Response, body=batch)
    assert wire.body() == batch  # a batch is not a request memwire understands


# ---------------------------------------------------------------------- fail open


def test_fail_open_when_search_raises(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    MemoryStore(tmp_path / "mem").add("User prefers tabs over spaces")  # written whole; then its search breaks
    store = BrokenStore(tmp_path / "mem")
    wire = Wire()
    client = wrap(wire.client(), Middleware(store=store, mode="contextPerTurn"))
    message = client.messages.create(model=MODEL, max_tokens=64, messages=conversation())
    assert message.content[0].text == "Tabs."  # type: ignore[union-attr]
    assert wire.body()["messages"] == conversation()
    assert len(call_warnings(caplog)) == 1


@pytest.mark.parametrize("is_async", [False, True])
async def test_fail_open_when_middleware_raises(store: MemoryStore, caplog: pytest.LogCaptureFixture,
                                                is_async: bool) -> None:
    mw = BrokenMiddleware(store=store)
    mw.warm_up()
    wire = Wire()
    kw: dict[str, Any] = {"model": MODEL, "max_tokens": 64, "messages": conversation(), "extra_headers": SESSION}
    if is_async:
        http_client = HTTP.AsyncClient(transport=HTTP.MockTransport(wire))
        client = wrap(anthropic.AsyncAnthropic(api_key="test", http_client=http_client), mw)
        await client.messages.create(**kw)
    else:
        wrap(wire.client(), mw).messages.create(**kw)
    assert wire.body() == {"max_tokens": 64, "messages": conversation(), "model": MODEL}
    assert "x-memwire-session" not in wire.last.headers
    assert len(memwire_warnings(caplog)) == 1


@pytest.mark.parametrize("body", [b"not json", b'{"model": "m", "max_tokens": 9, "messages": "hi"}'],
                         ids=["not-json", "messages-not-a-list"])
def test_fail_open_on_a_body_memwire_cannot_read(mw: Middleware, caplog: pytest.LogCaptureFixture, body: bytes) -> None:
    wire = Wire()
    wrap(wire.client(), mw).post("/v1/messages", cast_to=HTTP.Response, content=body)
    assert wire.last.content == body
    assert len(memwire_warnings(caplog)) == 1
