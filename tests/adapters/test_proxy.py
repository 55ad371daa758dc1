"""Proxy mode, in process: official SDK clients -> proxy (ASGITransport) -> fake upstream.

Upstreams are the fake provider (memwire._sim) or an httpx.MockTransport handler; nothing leaves the
process except the 502 test, which connects to a closed port on 127.0.0.1.
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import anthropic
import anyio
import httpx
import httpx2
import openai
import pytest
import respx
from starlette.applications import Starlette
from starlette.testclient import TestClient

from memwire import MemoryStore, Middleware
from memwire.adapters.server._proxy import create_app, upstream_family
from memwire.adapters.server._proxy_cli import check_bind
from memwire.cli import main
from memwire._errors import ConfigError
from memwire._sim.fake_provider import FakeProvider, serve_in_thread

OPENAI_UP = "http://openai.upstream"
ANTHROPIC_UP = "http://anthropic.upstream"
PROXY = "http://proxy.test"

MEMORIES = [
    "User prefers tabs over spaces for indentation",
    "The project database is PostgreSQL 16",
    "Deploys run through GitHub Actions on every merge",
    "The user lives in Lisbon",
    "Favourite editor is Neovim",
]
MEMORY_TAG = "<memory>"


@pytest.fixture
def mw(tmp_path: Any) -> Middleware:
    store = MemoryStore(tmp_path / "mem")
    for text in MEMORIES:
        store.add(text)
    mw = Middleware(store=store, mode="contextPerTurn")
    mw.warm_up()  # no test passes or fails on the retrieval budget of a cold start
    return mw


@pytest.fixture
def fake() -> FakeProvider:
    return FakeProvider()


@pytest.fixture
def app(mw: Middleware, fake: FakeProvider) -> Starlette:
    upstream = httpx.AsyncClient(transport=httpx.ASGITransport(app=fake))
    return create_app(mw, openai_upstream=OPENAI_UP, anthropic_upstream=ANTHROPIC_UP, client=upstream)


@pytest.fixture
async def http(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PROXY) as client:
        yield client


def oai(app: Starlette) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=PROXY + "/v1", api_key="sk-test", max_retries=0,
                              http_client=httpx.AsyncClient(transport=httpx.ASGITransport(app=app)))


def ant(app: Starlette) -> anthropic.AsyncAnthropic:
    # the anthropic SDK is built on httpx2, which has its own ASGITransport
    return anthropic.AsyncAnthropic(base_url=PROXY, api_key="sk-ant-test", max_retries=0,
                                    http_client=httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app)))


def mock_upstream(handler: Callable[[httpx.Request], httpx.Response]) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def is_memory(item: Any) -> bool:
    content = item.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    return MEMORY_TAG in text


CHAT: list[Any] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "hello"},
    {"role": "assistant", "content": "hi, how can I help?"},
    {"role": "user", "content": "tabs or spaces for indentation?"},
]


# ------------------------------------------------------------------ SDK round trips


async def test_openai_chat_sdk(app: Starlette, fake: FakeProvider) -> None:
    raw = await oai(app).chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=CHAT)
    assert raw.headers["x-memwire-injected"] == "1"
    assert raw.headers["x-memwire-mode"] == "contextPerTurn"
    assert raw.parse().choices[0].message.content == "ok: tabs or spaces for indentation?"
    sent = fake.requests[-1].body["messages"]
    assert len(sent) == len(CHAT) + 1
    assert is_memory(sent[3]) and "tabs over spaces" in sent[3]["content"]
    assert sent[:3] == CHAT[:3] and sent[4] == CHAT[3]  # history untouched, user message last


async def test_openai_chat_streaming_sdk(app: Starlette, fake: FakeProvider) -> None:
    client = oai(app)
    async with client.chat.completions.with_streaming_response.create(
        model="gpt-4o-mini", messages=CHAT, stream=True, stream_options={"include_usage": True},
    ) as response:
        assert response.headers["x-memwire-injected"] == "1"
        assert response.headers["content-type"].startswith("text/event-stream")
        text = "".join([c.choices[0].delta.content or "" async for c in await response.parse() if c.choices])
    assert text == "ok: tabs or spaces for indentation?"
    assert is_memory(fake.requests[-1].body["messages"][3])


async def test_responses_sdk_streaming_and_not(app: Starlette, fake: FakeProvider) -> None:
    client = oai(app)
    raw = await client.responses.with_raw_response.create(model="gpt-4o-mini", input="which database do we use?")
    assert raw.headers["x-memwire-injected"] == "1"
    assert raw.parse().output_text == "ok: which database do we use?"
    sent = fake.requests[-1].body["input"]
    assert is_memory(sent[0]) and "PostgreSQL" in json.dumps(sent[0])
    assert sent[1] == {"role": "user", "content": "which database do we use?"}

    stream = await client.responses.create(model="gpt-4o-mini", input="where do deploys run?", stream=True)
    kinds = [event.type async for event in stream]
    assert kinds[-1] == "response.completed"
    assert "GitHub Actions" in json.dumps(fake.requests[-1].body["input"][0])


async def test_responses_stateful_call_gets_memory_in_input(app: Starlette, fake: FakeProvider) -> None:
    client = oai(app)
    first = await client.responses.create(model="gpt-4o-mini", input="hello there")
    await client.responses.create(model="gpt-4o-mini", previous_response_id=first.id,
                                  input=[{"role": "user", "content": "which editor do I like?"}])
    sent = fake.requests[-1].body
    assert sent["previous_response_id"] == first.id
    assert is_memory(sent["input"][0]) and "Neovim" in json.dumps(sent["input"][0])
    assert sent["input"][-1] == {"role": "user", "content": "which editor do I like?"}


async def test_responses_stateful_call_skipped_in_startup_mode(tmp_path: Any, fake: FakeProvider) -> None:
    store = MemoryStore(tmp_path / "s")
    for text in MEMORIES:
        store.add(text)
    app = create_app(Middleware(store=store, mode="startup"), openai_upstream=OPENAI_UP,
                     client=httpx.AsyncClient(transport=httpx.ASGITransport(app=fake)))
    client = oai(app)
    first = await client.responses.with_raw_response.create(model="gpt-4o-mini", input="hello there")
    assert first.headers["x-memwire-injected"] == str(len(MEMORIES))
    second = await client.responses.with_raw_response.create(
        model="gpt-4o-mini", previous_response_id=first.parse().id, input="and now?")
    assert second.headers["x-memwire-injected"] == "0"
    assert second.headers["x-memwire-mode"] == "startup"
    assert fake.requests[-1].body["input"] == "and now?"  # the caller's bytes went through


ANTHROPIC_MESSAGES: list[Any] = [
    {"role": "user", "content": "hello"},
    {"role": "assistant", "content": "hi, how can I help?"},
    {"role": "user", "content": "which database does the project use?"},
]


async def test_the_profile_block_and_its_header(tmp_path: Any, fake: FakeProvider) -> None:
    store = MemoryStore(tmp_path / "p")
    for text in MEMORIES:
        store.add(text)
    app = create_app(Middleware(store=store, profile=True, startup_max_tokens=100), anthropic_upstream=ANTHROPIC_UP,
                     client=httpx.AsyncClient(transport=httpx.ASGITransport(app=fake)))
    raw = await ant(app).messages.with_raw_response.create(
        model="claude-haiku-4-5", max_tokens=64, messages=ANTHROPIC_MESSAGES, extra_headers={"x-memwire-session": "p"})
    sent = fake.requests[-1].body["messages"]
    profile = sent[0]["content"][0]["text"]
    shown = [line for line in profile.split("\n") if line.startswith("- ")]
    assert profile.startswith(MEMORY_TAG) and 0 < len(shown) < len(MEMORIES)
    assert raw.headers["x-memwire-profile"] == str(len(shown)) and raw.headers["x-memwire-injected"] == "1"
    assert is_memory(sent[3]) and "PostgreSQL" in json.dumps(sent[3]) and not any(s[2:] in json.dumps(sent[3]) for s in shown)
    assert [m["content"] for m in sent[1:3]] == ["hello", [  # the cache breakpoint goes before the turn's block
        {"type": "text", "text": "hi, how can I help?", "cache_control": {"type": "ephemeral"}}]]


async def test_anthropic_messages_sdk(app: Starlette, fake: FakeProvider) -> None:
    raw = await ant(app).messages.with_raw_response.create(
        model="claude-haiku-4-5", max_tokens=64, system="Be brief.", messages=ANTHROPIC_MESSAGES)
    assert raw.headers["x-memwire-injected"] == "1"
    block = (await raw.parse()).content[0]
    assert isinstance(block, anthropic.types.TextBlock) and block.text == "ok: which database does the project use?"
    sent = fake.requests[-1]
    assert sent.path == "/v1/messages"
    msgs = sent.body["messages"]
    assert sent.body["system"] == "Be brief."
    assert is_memory(msgs[2]) and "PostgreSQL" in json.dumps(msgs[2])
    assert msgs[3] == ANTHROPIC_MESSAGES[2]
    # the history prefix before the memory got a cache breakpoint (string content became a block)
    assert msgs[1]["content"] == [{"type": "text", "text": "hi, how can I help?", "cache_control": {"type": "ephemeral"}}]
    assert ANTHROPIC_MESSAGES[1]["content"] == "hi, how can I help?"  # caller's object untouched
    assert "sk-ant-test" in (sent.headers.get("x-api-key") or sent.headers["authorization"])
    assert "anthropic-version" in sent.headers


async def test_anthropic_streaming_sdk(app: Starlette, fake: FakeProvider) -> None:
    async with ant(app).messages.stream(
        model="claude-haiku-4-5", max_tokens=64, messages=ANTHROPIC_MESSAGES,
    ) as stream:
        text = await stream.get_final_text()
    assert text == "ok: which database does the project use?"
    assert is_memory(fake.requests[-1].body["messages"][2])


async def test_count_tokens_gets_the_same_transformation(app: Starlette, fake: FakeProvider) -> None:
    client = ant(app)
    await client.messages.create(model="claude-haiku-4-5", max_tokens=64, messages=ANTHROPIC_MESSAGES)
    sent_messages = fake.requests[-1].body["messages"]
    count = await client.messages.count_tokens(model="claude-haiku-4-5", messages=ANTHROPIC_MESSAGES)
    assert count.input_tokens > 0
    assert fake.requests[-1].path == "/v1/messages/count_tokens"
    assert fake.requests[-1].body["messages"] == sent_messages


async def test_response_bytes_and_headers_unchanged(mw: Middleware) -> None:
    body = b'{"id":"chatcmpl-1", "weird":  "spacing kept"}'

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={
            "content-type": "application/json", "x-request-id": "req_1", "openai-processing-ms": "12"})

    app = create_app(mw, client=mock_upstream(handler))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PROXY) as http:
        r = await http.post("/v1/chat/completions", json={"model": "m", "messages": CHAT})
    assert r.content == body
    assert r.headers["x-request-id"] == "req_1" and r.headers["openai-processing-ms"] == "12"
    assert r.headers["content-length"] == str(len(body))


# ------------------------------------------------------------------ routing and headers


async def test_passthrough_models_and_routing_rule(mw: Middleware) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"object": "list", "data": [{"id": "gpt-4o-mini"}]})

    app = create_app(mw, openai_upstream=OPENAI_UP + "/v1/", anthropic_upstream=ANTHROPIC_UP,
                     client=mock_upstream(handler))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PROXY) as http:
        r = await http.get("/v1/models?limit=2", headers={"authorization": "Bearer sk-1"})
        assert r.status_code == 200 and r.json()["data"][0]["id"] == "gpt-4o-mini"
        assert "x-memwire-injected" not in r.headers  # passthrough is untouched
        await http.get("/v1/models", headers={"x-api-key": "k", "anthropic-version": "2023-06-01"})
        await http.post("/v1/messages/batches", json={"requests": []})
        await http.delete("/v1/files/file-1", headers={"authorization": "Bearer sk-1"})
        await http.get("/v1/chat/completions")  # not POST: passthrough too
        await http.get("/v1/files/file%2Fa%3Fb/content")  # the path goes as the client encoded it
    assert [str(r.url) for r in seen] == [
        OPENAI_UP + "/v1/models?limit=2",  # a trailing /v1 on the upstream is not doubled
        ANTHROPIC_UP + "/v1/models",
        ANTHROPIC_UP + "/v1/messages/batches",
        OPENAI_UP + "/v1/files/file-1",
        OPENAI_UP + "/v1/chat/completions",
        OPENAI_UP + "/v1/files/file%2Fa%3Fb/content",
    ]
    assert [r.method for r in seen] == ["GET", "GET", "POST", "DELETE", "GET", "GET"]
    assert seen[2].content == b'{"requests":[]}'


def test_upstream_family_rule() -> None:
    assert upstream_family("/v1/chat/completions", {"x-api-key": "k"}) == "openai"  # routes win
    assert upstream_family("/v1/messages", {}) == "anthropic"
    assert upstream_family("/v1/models", {}) == "openai"
    assert upstream_family("/v1/models", {"anthropic-version": "2023-06-01"}) == "anthropic"
    assert upstream_family("/v1/files", {"x-api-key": "k"}) == "anthropic"
    assert upstream_family("/v1/messages/batches", {}) == "anthropic"


async def test_request_headers_forwarded_and_dropped(mw: Middleware) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    app = create_app(mw, anthropic_upstream=ANTHROPIC_UP, client=mock_upstream(handler))
    headers = {
        "x-api-key": "sk-ant-secret", "authorization": "Bearer sk-secret", "anthropic-version": "2023-06-01",
        "anthropic-beta": "prompt-caching-2024-07-31", "openai-organization": "org-1",
        "x-memwire-session": "s1", "x-memwire-namespace": "alice", "connection": "keep-alive, x-hop",
        "x-hop": "1", "te": "trailers", "proxy-authorization": "Basic abc", "user-agent": "test-agent",
    }
    body = {"model": "claude-haiku-4-5", "max_tokens": 5, "messages": ANTHROPIC_MESSAGES}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PROXY) as http:
        await http.post("/v1/messages", json=body, headers=headers)
    sent = seen[0].headers
    for name in ("x-api-key", "authorization", "anthropic-version", "anthropic-beta", "openai-organization", "user-agent"):
        assert sent[name] == headers[name]
    for name in ("x-memwire-session", "x-memwire-namespace", "x-hop", "te", "proxy-authorization"):
        assert name not in sent
    assert sent["host"] == "anthropic.upstream"
    assert sent["content-length"] == str(len(seen[0].content))
    assert sent["accept-encoding"] == "gzip, deflate"  # what the client asked for
    assert "PostgreSQL" not in json.dumps(body) and b"PostgreSQL" not in seen[0].content  # alice's namespace is empty


async def test_no_accept_encoding_means_identity(mw: Middleware) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"data": []})

    app = create_app(mw, client=mock_upstream(handler))
    status, _, _ = await _asgi_call(app, "/v1/models", b"", [], method="GET")
    assert status == 200
    assert seen[0].headers["accept-encoding"] == "identity"  # no gzip asked for on the client's behalf


async def test_session_headers_reach_the_core(app: Starlette, mw: Middleware, monkeypatch: pytest.MonkeyPatch,
                                              http: httpx.AsyncClient) -> None:
    sessions: list[str] = []
    real = mw.aprepare_request

    async def spy(body: Any, api: str = "openai.chat", **kw: Any) -> Any:
        p = await real(body, api, **kw)
        sessions.append(p.injection.session)
        return p

    monkeypatch.setattr(mw, "aprepare_request", spy)
    await http.post("/v1/chat/completions", json={"model": "m", "messages": CHAT}, headers={"x-memwire-session": "abc"})
    await http.post("/v1/chat/completions", json={"model": "m", "messages": CHAT},
                    headers={"x-claude-code-session-id": "5f0c"})
    await http.post("/v1/chat/completions", json={"model": "m", "messages": CHAT})
    assert sessions[:2] == ["abc", "claude-code:5f0c"]
    assert sessions[2].startswith("auto:")


async def test_namespaces_are_isolated(tmp_path: Any, fake: FakeProvider) -> None:
    root = tmp_path / "root"
    MemoryStore(root).add_many(MEMORIES)
    MemoryStore.for_namespace(root, "alice").add_many(
        ["Alice keeps her notes in Obsidian", "Alice drinks green tea", "Alice runs on Sundays"])
    MemoryStore.for_namespace(root, "bob").add_many(
        ["Bob keeps his notes in Notion", "Bob drinks espresso", "Bob swims on Mondays"])
    app = create_app(Middleware(store=MemoryStore(root), mode="contextPerTurn"), openai_upstream=OPENAI_UP,
                     client=httpx.AsyncClient(transport=httpx.ASGITransport(app=fake)))
    question = {"model": "m", "messages": [{"role": "user", "content": "where do I keep my notes, and what do I drink?"}]}
    sent: dict[str, str] = {}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PROXY) as http:
        for ns in ("alice", "bob", None):
            headers = {"x-memwire-namespace": ns} if ns else {}
            r = await http.post("/v1/chat/completions", json=question, headers=headers)
            assert r.status_code == 200
            sent[ns or "default"] = json.dumps(fake.requests[-1].body)
    assert "Obsidian" in sent["alice"] and "Notion" not in sent["alice"] and "PostgreSQL" not in sent["alice"]
    assert "Notion" in sent["bob"] and "Obsidian" not in sent["bob"]
    assert "Obsidian" not in sent["default"] and "Notion" not in sent["default"]
    assert (root / "namespaces" / "alice" / "MEMORY.md").is_file()


@pytest.mark.parametrize("namespace", ["../x", "/etc", "a/b", "..", "x" * 200, "a\x00b"])
async def test_bad_namespace_is_400(app: Starlette, fake: FakeProvider, namespace: str) -> None:
    scope_headers = [(b"x-memwire-namespace", namespace.encode())]
    status, _, raw = await _asgi_call(app, "/v1/chat/completions", json.dumps({"model": "m", "messages": CHAT}).encode(),
                                      scope_headers)
    body = json.loads(raw)
    assert status == 400
    assert body["error"]["type"] == "invalid_request_error" and "invalid namespace" in body["error"]["message"]
    assert fake.requests == []


async def _asgi_call(app: Any, path: str, body: bytes, headers: list[tuple[bytes, bytes]],
                     method: str = "POST") -> tuple[int, dict[bytes, bytes], bytes]:
    """Call the ASGI app directly: header values httpx would refuse (NUL) still reach it."""
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    out: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        out.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"content-type", b"application/json"), *headers], "server": ("proxy.test", 80),
             "client": ("127.0.0.1", 1234)}
    await app(scope, receive, send)
    return out[0]["status"], dict(out[0]["headers"]), b"".join(m.get("body", b"") for m in out[1:])


# ------------------------------------------------------------------ errors


async def test_upstream_errors_relayed_unchanged(mw: Middleware) -> None:
    replies = {
        "/v1/chat/completions": httpx.Response(429, content=b'{"error":{"message":"slow down","type":"rate_limit"}}',
                                               headers={"retry-after": "7", "content-type": "application/json",
                                                        "x-ratelimit-remaining-requests": "0"}),
        "/v1/messages": httpx.Response(500, content=b'{"type":"error","error":{"type":"api_error","message":"boom"}}',
                                       headers={"content-type": "application/json", "request-id": "req_9"}),
        "/v1/models": httpx.Response(503, content=b"upstream says no", headers={"content-type": "text/plain"}),
    }
    app = create_app(mw, client=mock_upstream(lambda request: replies[request.url.path]))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PROXY) as http:
        r = await http.post("/v1/chat/completions", json={"model": "m", "messages": CHAT})
        assert (r.status_code, r.headers["retry-after"], r.headers["x-ratelimit-remaining-requests"]) == (429, "7", "0")
        assert r.content == replies["/v1/chat/completions"].content
        r = await http.post("/v1/messages", json={"model": "m", "max_tokens": 5, "messages": ANTHROPIC_MESSAGES})
        assert (r.status_code, r.headers["request-id"]) == (500, "req_9")
        assert r.content == replies["/v1/messages"].content
        r = await http.get("/v1/models")
        assert (r.status_code, r.content) == (503, b"upstream says no")


async def test_sdks_see_upstream_errors(mw: Middleware) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/messages":
            return httpx.Response(529, json={"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
        return httpx.Response(429, json={"error": {"message": "slow down", "type": "rate_limit_error", "param": None,
                                                   "code": None}}, headers={"retry-after": "3"})

    app = create_app(mw, client=mock_upstream(handler))
    with pytest.raises(openai.RateLimitError) as oerr:
        await oai(app).chat.completions.create(model="gpt-4o-mini", messages=CHAT)
    assert oerr.value.response.headers["retry-after"] == "3" and "slow down" in oerr.value.message
    with pytest.raises(anthropic.APIStatusError) as aerr:
        await ant(app).messages.create(model="claude-haiku-4-5", max_tokens=5, messages=ANTHROPIC_MESSAGES)
    assert aerr.value.status_code == 529 and "busy" in aerr.value.message


@pytest.mark.parametrize(("path", "content", "problem"), [
    ("/v1/chat/completions", b'{"model": "m", "messages": [', "not valid JSON"),
    ("/v1/chat/completions", b"[1, 2]", "must be a JSON object"),
    ("/v1/chat/completions", b'{"model": "m", "messages": "hi"}', "'messages' must be a list"),
    ("/v1/chat/completions", b'{"model": "m", "messages": [{"role": "wizard", "content": "x"}]}', "unknown role 'wizard'"),
    ("/v1/responses", b"\xff\xfe", "not valid JSON"),
    ("/v1/messages", b"{oops", "not valid JSON"),
    ("/v1/messages", b'{"model": "m", "max_tokens": 5}', "no 'messages'"),
    ("/v1/messages/count_tokens", b'{"messages": [{"content": "x"}]}', "has no 'role'"),
    ("/v1/chat/completions", b'{"model": "m", "messages": [{"role": {"a": 1}, "content": "x"}]}', "unknown role"),
    ("/v1/chat/completions", b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    # Anthropic's shapes (issue 34 item 2): refused in Anthropic's format, never forwarded unread
    ("/v1/messages", b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user"}]}',
     "messages[0] has no 'content'"),
    ("/v1/messages", b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": null}]}',
     "messages[0] has no 'content'"),
    ("/v1/messages", b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}, '
                     b'{"role": "assistant"}]}', "messages[1] has no 'content'"),
    ("/v1/messages", b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": ["hi"]}]}',
     "messages[0].content[0] must be an object"),
    ("/v1/messages", b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [{"text": "hi"}]}]}',
     "messages[0].content[0] has no 'type'"),
    ("/v1/messages", b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": '
                     b'[{"type": "text", "text": "a"}, {"type": "text", "text": 5}]}]}',
     "messages[0].content[1] is a text block without a string 'text'"),
    ("/v1/messages", b'{"model": "m", "max_tokens": 5, "system": [{"type": "text"}], '
                     b'"messages": [{"role": "user", "content": "hi"}]}', "system[0] is a text block"),
    ("/v1/messages", b'{"model": "m", "max_tokens": 5, "system": 5, "messages": [{"role": "user", "content": "hi"}]}',
     "'system' must be a string or a list"),
    ("/v1/messages/count_tokens", b'{"model": "m", "messages": [{"role": "user"}]}', "messages[0] has no 'content'"),
])
async def test_bad_request_is_400_in_the_apis_format(http: httpx.AsyncClient, fake: FakeProvider, path: str,
                                                     content: bytes, problem: str) -> None:
    r = await http.post(path, content=content, headers={"content-type": "application/json"})
    assert r.status_code == 400
    body = r.json()
    if path.startswith("/v1/messages"):
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
        assert problem in body["error"]["message"]
    else:
        assert set(body["error"]) == {"message", "type", "param", "code"}
        assert body["error"]["type"] == "invalid_request_error" and problem in body["error"]["message"]
    assert fake.requests == []


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_unreachable_upstream_is_502(mw: Middleware) -> None:
    up = f"http://127.0.0.1:{_closed_port()}"
    app = create_app(mw, openai_upstream=up, anthropic_upstream=up)  # its own, real client
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PROXY) as http:
        r = await http.post("/v1/chat/completions", json={"model": "m", "messages": CHAT})
        assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_unreachable"
        r = await http.post("/v1/messages", json={"model": "m", "max_tokens": 5, "messages": ANTHROPIC_MESSAGES})
        assert r.status_code == 502 and r.json()["type"] == "error" and r.json()["error"]["type"] == "api_error"
        r = await http.get("/v1/models")
        assert r.status_code == 502
    await app.state.proxy.client.aclose()


async def test_pooled_connection_closed_by_upstream_is_retried_once(mw: Middleware) -> None:
    calls: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.content)
        if len(calls) == 1:  # a keep-alive connection the upstream had closed while idle
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
        return httpx.Response(200, json={"ok": True})

    app = create_app(mw, client=mock_upstream(handler))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PROXY) as http:
        r = await http.post("/v1/chat/completions", json={"model": "m", "messages": CHAT})
    assert r.status_code == 200 and r.json() == {"ok": True}
    assert len(calls) == 2 and calls[0] == calls[1]  # the same bytes, memory included, sent again

    def always_closed(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)

    app = create_app(mw, client=mock_upstream(always_closed))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PROXY) as http:
        r = await http.post("/v1/chat/completions", json={"model": "m", "messages": CHAT})
    assert r.status_code == 502  # once only


async def test_upstream_timeout_is_504(mw: Middleware) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    app = create_app(mw, client=mock_upstream(handler))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PROXY) as http:
        r = await http.post("/v1/chat/completions", json={"model": "m", "messages": CHAT})
        assert r.status_code == 504 and r.json()["error"]["code"] == "upstream_timeout"
        r = await http.post("/v1/messages", json={"model": "m", "max_tokens": 5, "messages": ANTHROPIC_MESSAGES})
        assert r.status_code == 504 and r.json()["error"]["type"] == "timeout_error"


async def test_oversize_body_is_413(mw: Middleware, fake: FakeProvider) -> None:
    app = create_app(mw, client=httpx.AsyncClient(transport=httpx.ASGITransport(app=fake)), max_body_bytes=2000)
    big = {"model": "m", "messages": [{"role": "user", "content": "x" * 3000}]}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PROXY) as http:
        r = await http.post("/v1/chat/completions", json=big)  # content-length declared
        assert r.status_code == 413 and "2000 bytes" in r.json()["error"]["message"]

        async def chunked() -> AsyncIterator[bytes]:  # no content-length: counted while reading
            for _ in range(3):
                yield b" " * 1000

        r = await http.post("/v1/messages", content=chunked())
        assert r.status_code == 413 and r.json()["error"]["type"] == "request_too_large"
        r = await http.post("/v1/chat/completions", json={"model": "m", "messages": CHAT})
        assert r.status_code == 200
    assert len(fake.requests) == 1


async def test_fail_open_sends_the_original_bytes(mw: Middleware, monkeypatch: pytest.MonkeyPatch,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    seen: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.content)
        return httpx.Response(200, json={"ok": True})

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("index exploded")

    monkeypatch.setattr(mw, "aprepare_request", broken)
    app = create_app(mw, client=mock_upstream(handler))
    original = b'{"model":  "m", "messages": [{"role": "user", "content": "tabs?"}]}'
    with caplog.at_level(logging.INFO, logger="memwire"):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PROXY) as http:
            r = await http.post("/v1/chat/completions", content=original)
    assert r.status_code == 200 and r.headers["x-memwire-injected"] == "0"
    assert seen == [original]
    warnings = [rec for rec in caplog.records if rec.levelno == logging.WARNING]
    # one warning, by the exception's type: its text may quote the request, and never reaches the log
    assert len(warnings) == 1 and "RuntimeError" in warnings[0].getMessage()
    assert "index exploded" not in caplog.text


async def test_unchanged_request_keeps_the_callers_bytes(http: httpx.AsyncClient, fake: FakeProvider) -> None:
    # a social closer: the gate skips retrieval, so nothing is re-serialized
    original = b'{"model": "gpt-4o-mini",   "messages": [{"role": "user", "content": "thanks!"}]}'
    r = await http.post("/v1/chat/completions", content=original)
    assert r.status_code == 200 and r.headers["x-memwire-injected"] == "0"
    assert fake.requests[-1].raw == original  # the bytes, odd spacing included: never re-serialized


async def test_log_line_without_secrets(http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="memwire.proxy"):
        await http.post("/v1/chat/completions?key=sk-query-secret", json={"model": "gpt-4o-mini", "messages": CHAT},
                        headers={"authorization": "Bearer sk-secret-1", "x-memwire-session": "s"})
    lines = [rec.getMessage() for rec in caplog.records if rec.name == "memwire.proxy"]
    assert len(lines) == 1
    assert lines[0].startswith("POST /v1/chat/completions 200 injected=1 ")
    assert "sk-" not in caplog.text


# ------------------------------------------------------------------ access control and lifecycle


async def test_proxy_key_enforced(mw: Middleware) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"data": []})

    app = create_app(mw, client=mock_upstream(handler), proxy_key="s3cret")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PROXY) as http:
        r = await http.post("/v1/chat/completions", json={"model": "m", "messages": CHAT})
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_memwire_key"
        r = await http.post("/v1/messages", json={}, headers={"x-memwire-key": "wrong"})
        assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
        r = await http.get("/v1/models", headers={"x-memwire-key": "s3cret "})
        assert r.status_code == 401
        assert seen == []
        r = await http.get("/v1/models", headers={"x-memwire-key": "s3cret"})
        assert r.status_code == 200
        r = await http.post("/v1/chat/completions", json={"model": "m", "messages": CHAT}, headers={"x-memwire-key": "s3cret"})
        assert r.status_code == 200
    assert len(seen) == 2 and all("x-memwire-key" not in req.headers for req in seen)


def test_remote_bind_needs_allow_remote_and_key(capsys: pytest.CaptureFixture[str]) -> None:
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.5"):
        check_bind(host, False, None)
    for host, allow, key in (("0.0.0.0", False, None), ("0.0.0.0", True, None), ("192.168.1.4", False, "k"),
                             ("example.com", False, None)):
        with pytest.raises(ConfigError, match="--allow-remote and --proxy-key"):
            check_bind(host, allow, key)
    check_bind("0.0.0.0", True, "k")
    for key in ("", "   ", "\t"):
        with pytest.raises(ConfigError, match="must not be empty or whitespace"):
            check_bind("0.0.0.0", True, key)
        with pytest.raises(ConfigError, match="must not be empty or whitespace"):
            create_app(Middleware(store=MemoryStore("unused")), proxy_key=key)
    assert main(["proxy", "--host", "0.0.0.0", "--proxy-key", "k"]) == 2
    assert "refusing to bind non-loopback address '0.0.0.0'" in capsys.readouterr().err


@pytest.mark.parametrize("aio", [True, False], ids=["aiohttp", "httpx"])
def test_own_client_is_closed_by_the_lifespan(mw: Middleware, aio: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("memwire.adapters.server._proxy.aio_available", lambda: aio)
    with serve_in_thread(FakeProvider()) as up:
        app = create_app(mw, openai_upstream=up.base_url, anthropic_upstream=up.base_url)  # its own pooled client
        proxy = app.state.proxy
        assert type(proxy.direct).__name__ == ("AioTransport" if aio else "_ShardedTransport")
        with TestClient(app) as client:
            assert client.get("/v1/models").json()["object"] == "list"
            r = client.post("/v1/messages", json={"model": "m", "max_tokens": 5, "messages": ANTHROPIC_MESSAGES})
            assert r.json()["type"] == "message" and r.headers["x-memwire-injected"] == "1"
            assert not proxy.client.is_closed and (not aio or proxy.direct._session is not None)
    assert proxy.client.is_closed and (not aio or proxy.direct._session is None)


async def test_injected_client_is_not_closed(app: Starlette) -> None:
    async with app.router.lifespan_context(app):
        pass
    assert not app.state.proxy.client.is_closed


def test_proxy_command_wires_its_options(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    served: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.update(app=app, **kw))
    code = main(["proxy", "--workers", "1", "--dir", str(tmp_path / "mem"), "--mode", "startup", "--port", "9999",
                 "--openai-upstream", "http://127.0.0.1:1/v1", "--anthropic-upstream", "http://127.0.0.1:2",
                 "--no-cache-breakpoint", "--max-body-mb", "1", "--proxy-key", "k", "--log-level", "warning"])
    assert code == 0
    proxy = served["app"].state.proxy
    assert (served["host"], served["port"]) == ("127.0.0.1", 9999)
    assert proxy.upstreams == {"openai": "http://127.0.0.1:1", "anthropic": "http://127.0.0.1:2"}
    assert proxy.cache_breakpoint is False and proxy.max_body_bytes == 2**20 and proxy.proxy_key == b"k"
    assert proxy.middleware.mode == "startup" and proxy.middleware.store.path == tmp_path / "mem"
    main(["proxy", "--workers", "1", "--dir", str(tmp_path / "mem"), "--log-level", "warning"])
    assert served["app"].state.proxy.cache_breakpoint is True  # the config default



async def test_dot_segments_cannot_leave_the_upstream_prefix(app: Starlette, fake: FakeProvider) -> None:
    # clients normalize "/../" away before sending; a raw HTTP request need not: send it as ASGI
    for raw in (b"/v1/../admin", b"/v1/%2e%2E/admin", b"/v1/./models"):
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
                 "path": raw.decode(), "raw_path": raw, "query_string": b"", "root_path": "",
                 "headers": [(b"host", b"proxy.test")], "client": ("127.0.0.1", 1), "server": ("proxy.test", 80)}
        await app(scope, receive, send)
        assert sent[0]["status"] == 400 and b"'..'" in sent[1]["body"], raw
    assert fake.requests == []


async def _raw_upstream(mw: Middleware, path: str, raw: bytes) -> tuple[int, list[bytes]]:
    seen: list[bytes] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req.content)
        return httpx.Response(200, json={"id": "x"})

    app = create_app(mw, openai_upstream=OPENAI_UP, client=httpx.AsyncClient(transport=httpx.MockTransport(handler)))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PROXY) as client:
        r = await client.post(path, content=raw, headers={"content-type": "application/json"})
    return r.status_code, seen


async def test_a_number_out_of_float_range_goes_out_as_the_callers_bytes(mw: Middleware) -> None:
    raw = (b'{"model": "m", "temperature": 1e400, "messages": [{"role": "user", "content": '
           b'"Which database does the project use?"}]}')
    status, seen = await _raw_upstream(mw, "/v1/chat/completions", raw)
    assert status == 200 and seen == [raw]  # never "Infinity", which is not JSON


async def test_responses_without_input_pass_through_unchanged(mw: Middleware) -> None:
    raw = b'{"model": "m", "prompt": {"id": "pmpt_1"}, "previous_response_id": "resp_1"}'
    status, seen = await _raw_upstream(mw, "/v1/responses", raw)
    assert status == 200 and seen == [raw]


async def test_a_client_gone_on_an_asgi_2_4_server_closes_the_upstream_answer(mw: Middleware,
                                                                              caplog: pytest.LogCaptureFixture) -> None:
    closed: list[bool] = []

    class Answer(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield b"data: first\n\n"
            yield b"data: last\n\n"

        async def aclose(self) -> None:
            closed.append(True)

    app = create_app(mw, client=mock_upstream(lambda request: httpx.Response(200, stream=Answer())))
    sent: list[dict[str, Any]] = []
    requests = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> dict[str, Any]:
        if requests:
            return requests.pop()
        await anyio.sleep_forever()  # an ASGI 2.4 server need not say that the client left
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":  # an ASGI 2.4 server raises once the client is gone
            raise OSError("client gone")
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1", "method": "GET",
             "scheme": "http", "path": "/v1/models", "raw_path": b"/v1/models", "query_string": b"", "root_path": "",
             "headers": [], "client": ("127.0.0.1", 1), "server": ("proxy.test", 80)}
    with caplog.at_level(logging.INFO, logger="memwire.proxy"):
        await app(scope, receive, send)  # returns quietly
    assert sent[0]["status"] == 200 and closed == [True]
    assert [r.getMessage()[:20] for r in caplog.records] == ["GET /v1/models 200 i"]


@pytest.mark.parametrize("buffer", [4, 1024], ids=["streamed", "buffered"])
async def test_a_streamed_body_is_not_sent_twice_a_buffered_one_is(mw: Middleware, buffer: int,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("memwire.adapters.server._proxy.BUFFER_BYTES", buffer)
    calls: list[bytes] = []

    def closed(request: httpx.Request) -> httpx.Response:
        calls.append(request.content)
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)

    app = create_app(mw, client=mock_upstream(closed))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PROXY) as http:
        r = await http.post("/v1/files", content=b"file bytes")  # 10 bytes: over a buffer of 4, streamed (read once)
    assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_unreachable"
    assert calls == [b"file bytes"] * (1 if buffer < 10 else 2)


def test_pooled_upstream_connections_expire_before_a_uvicorn_upstream_closes_them() -> None:
    # vLLM, a LiteLLM proxy and other local servers run uvicorn (5 s keep-alive): a connection
    # reused in the instant the upstream closes it fails the caller's request with a 502
    import uvicorn

    from memwire.adapters.server._proxy import default_client

    from memwire.adapters.server._aio import KEEPALIVE_S

    pools = default_client()._transport._pools  # type: ignore[attr-defined]
    assert pools and all(p._pool._keepalive_expiry < uvicorn.Config(app=None).timeout_keep_alive for p in pools)
    assert KEEPALIVE_S < uvicorn.Config(app=None).timeout_keep_alive  # aiohttp's pool (memwire[fast])
