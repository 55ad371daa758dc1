"""Every refusal of the HTTP server, byte for byte: its status, content type and body in the format
of the API the request was for: OpenAI's ``{"error": {...}}`` and Anthropic's ``{"type": "error",
...}`` on the proxy's routes, ``{"error": {"code", "message"}}`` on the memory API, an HTML page on
``/memwire/ui``. In process (ASGI), the upstream an httpx mock."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from html import escape
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from memwire import MemoryStore, Middleware
from memwire._errors import ConfigError
from memwire.adapters.server._keys import add_key
from memwire.adapters.server._memory_api import memory_api
from memwire.adapters.server._proxy import create_app
from memwire.adapters.server._ui_page import CSP, CSS, SCRIPT

BASE = "http://proxy.test"
CHAT = b'{"model": "m", "messages": [{"role": "user", "content": "Which port does staging use?"}]}'
JSON = "application/json"
WRONG_KEY = "missing or wrong x-memwire-key header"
EID = r"mw-[0-9a-f]{8}"


def one_id(text: str) -> str:
    """``text`` with its one error id spelt ``mw-ID``."""
    out, n = re.subn(EID, "mw-ID", text)
    assert n == 1, text
    return out


def oai(message: str, code: str | None = None, kind: str = "invalid_request_error") -> bytes:
    code_json = "null" if code is None else f'"{code}"'
    return (f'{{"error": {{"message": "{message}", "type": "{kind}", "param": null, "code": {code_json}}}}}'
            ).encode()


def ant(message: str, kind: str) -> bytes:
    return f'{{"type": "error", "error": {{"type": "{kind}", "message": "{message}"}}}}'.encode()


def v1(code: str, message: str) -> bytes:
    return f'{{"error":{{"code":"{code}","message":"{message}"}}}}'.encode()


def page(title: str, inner: str) -> str:
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{title}</title><style>{CSS}</style></head><body>{inner}"
            f"<script>{SCRIPT}</script></body></html>")


def page_ends(title: str) -> tuple[str, str]:
    """The page around its body: what comes before it and after it."""
    head, tail = page(title, "\0").split("\0")
    return head, tail


def refused_page(message: str) -> str:
    return page("memwire: refused", f'<p class="error">{escape(message)}</p>')


def is_page(r: httpx.Response) -> None:
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    assert r.headers["content-security-policy"] == CSP and r.headers["referrer-policy"] == "same-origin"
    assert r.headers["x-content-type-options"] == "nosniff"


@pytest.fixture
def upstream_fails() -> list[Exception]:
    return []  # what the mock upstream raises, in turn (none: it answers 200)


def make_app(mw: Middleware, upstream_fails: list[Exception], **kw: Any) -> Starlette:
    def answer(request: httpx.Request) -> httpx.Response:
        if upstream_fails:
            raise upstream_fails.pop(0)
        return httpx.Response(200, json={"ok": True})

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return create_app(mw, openai_upstream="http://up", anthropic_upstream="http://up", client=client, **kw)


@pytest.fixture
def keys_file(tmp_path: Path) -> Path:
    return tmp_path / "keys.json"


@pytest.fixture
def alice(keys_file: Path) -> str:
    return add_key(keys_file, "alice", label="alice")[0]


@pytest.fixture
async def http(mw: Middleware, upstream_fails: list[Exception], keys_file: Path,
               alice: str) -> AsyncIterator[httpx.AsyncClient]:
    app = make_app(mw, upstream_fails, proxy_key="pk", keys_file=keys_file, max_body_bytes=4096)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as c:
        c.app = app  # type: ignore[attr-defined]
        yield c


# ---------------------------------------------------------------- the proxy's routes


async def test_a_wrong_key_in_each_apis_format(http: httpx.AsyncClient) -> None:
    r = await http.post("/v1/chat/completions", content=CHAT)
    assert (r.status_code, r.headers["content-type"]) == (401, JSON)
    assert r.content == oai(WRONG_KEY, "invalid_memwire_key")
    r = await http.post("/v1/messages", content=CHAT, headers={"x-memwire-key": "nope"})
    assert (r.status_code, r.headers["content-type"]) == (401, JSON)
    assert r.content == ant(WRONG_KEY, "authentication_error")
    r = await http.get("/v1/models", headers={"x-api-key": "sk"})  # the pass-through: Anthropic-looking
    assert r.status_code == 401 and r.content == ant(WRONG_KEY, "authentication_error")


async def test_a_namespace_the_key_may_not_use(http: httpx.AsyncClient, alice: str) -> None:
    r = await http.post("/v1/chat/completions", content=CHAT, headers={"x-memwire-key": alice,
                                                                        "x-memwire-namespace": "bob"})
    message = ("x-memwire-namespace 'bob': this key is bound to namespace 'alice'; it may use 'alice' or a "
               "sub-namespace 'alice.NAME', nothing else")
    assert r.status_code == 403 and r.content == oai(message, "namespace_forbidden")
    r = await http.post("/v1/messages", content=CHAT, headers={"x-memwire-key": alice, "x-memwire-namespace": "bob"})
    assert r.status_code == 403 and r.content == ant(message, "permission_error")
    r = await http.get("/memwire/v1/memories", headers={"x-memwire-key": alice, "x-memwire-namespace": "bob"})
    assert r.status_code == 403 and r.content == v1("namespace_forbidden", message)
    r = await http.get("/memwire/ui", params={"ns": "bob"}, headers={"x-memwire-key": alice})
    assert r.status_code == 403 and r.text == refused_page(message)


async def test_an_invalid_namespace(http: httpx.AsyncClient) -> None:
    r = await http.post("/v1/chat/completions", content=CHAT, headers={"x-memwire-key": "pk",
                                                                        "x-memwire-namespace": "a b"})
    assert r.status_code == 400
    body = r.json()["error"]
    assert body["code"] == "invalid_namespace" and body["message"].startswith("x-memwire-namespace: ")
    assert r.content == oai(body["message"], "invalid_namespace")


async def test_the_keys_file_cannot_be_read(http: httpx.AsyncClient, alice: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    keys = http.app.state.proxy.access.keys  # type: ignore[attr-defined]

    def broken(key: str) -> Any:
        raise ConfigError("keys file: cannot be read")

    monkeypatch.setattr(keys, "lookup", broken)
    message = "the proxy's keys file cannot be read; its operator is told in the log"
    r = await http.post("/v1/chat/completions", content=CHAT, headers={"x-memwire-key": alice})
    assert r.status_code == 503 and r.content == oai(message, "keys_unavailable", "server_error")
    r = await http.post("/v1/messages", content=CHAT, headers={"x-memwire-key": alice})
    assert r.status_code == 503 and r.content == ant(message, "api_error")
    r = await http.get("/memwire/v1/memories", headers={"x-memwire-key": alice})
    assert r.status_code == 503 and r.content == v1("keys_unavailable", message)
    r = await http.get("/memwire/ui", headers={"x-memwire-key": alice})
    assert r.status_code == 503 and r.text == refused_page(message)
    is_page(r)


async def test_a_path_that_climbs(http: httpx.AsyncClient) -> None:
    r = await http.get("/v1/%2e%2e/admin", headers={"x-memwire-key": "pk"})
    message = "request path must not contain '.' or '..' segments"
    assert r.status_code == 400 and r.content == oai(message, "invalid_path")


@pytest.mark.parametrize(("body", "message"), [
    (b"[1, 2]", "openai.chat: request body must be a JSON object, got list"),
    (b"[" * 100_000 + b"]" * 100_000, "request body is nested too deeply"),
])
async def test_a_body_that_is_no_json_object(http: httpx.AsyncClient, body: bytes, message: str) -> None:
    http.app.state.proxy.max_body_bytes = 1 << 20  # type: ignore[attr-defined]
    r = await http.post("/v1/chat/completions", content=body, headers={"x-memwire-key": "pk"})
    assert r.status_code == 400 and r.content == oai(message)


async def test_a_body_that_is_no_json(http: httpx.AsyncClient) -> None:
    r = await http.post("/v1/messages", content=b"{not json", headers={"x-memwire-key": "pk"})
    assert r.status_code == 400
    message = r.json()["error"]["message"]
    assert message.startswith("request body is not valid JSON: ")
    assert r.content == ant(message.replace('"', '\\"'), "invalid_request_error")


async def test_a_body_too_big(http: httpx.AsyncClient) -> None:
    r = await http.post("/v1/chat/completions", content=b" " * 5000, headers={"x-memwire-key": "pk"})
    assert r.status_code == 413 and r.content == oai(
        "request body of 5000 bytes exceeds the proxy's limit of 4096 bytes")
    r = await http.post("/v1/messages", content=b" " * 5000, headers={"x-memwire-key": "pk"})
    assert r.status_code == 413 and r.content == ant(
        "request body of 5000 bytes exceeds the proxy's limit of 4096 bytes", "request_too_large")

    async def chunks() -> AsyncIterator[bytes]:  # no content-length: counted as it arrives
        for _ in range(5):
            yield b" " * 1000

    r = await http.post("/v1/chat/completions", content=chunks(), headers={"x-memwire-key": "pk"})
    assert r.status_code == 413 and r.content == oai("request body exceeds the proxy's limit of 4096 bytes")


async def test_a_body_that_stalls(mw: Middleware, upstream_fails: list[Exception]) -> None:
    app = make_app(mw, upstream_fails, body_timeout=0.05)
    sent: list[dict[str, Any]] = []
    first = True

    async def receive() -> dict[str, Any]:
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": b'{"model"', "more_body": True}
        await asyncio.Event().wait()  # the rest never comes
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/v1/messages", "raw_path": b"/v1/messages",
             "query_string": b"", "root_path": "", "headers": [(b"host", b"proxy.test")],
             "client": ("127.0.0.1", 5000), "server": ("proxy.test", 80)}
    await app(scope, receive, send)
    assert sent[0]["status"] == 408 and (b"content-type", JSON.encode()) in sent[0]["headers"]
    assert b"".join(m.get("body", b"") for m in sent[1:]) == ant(
        "request body not received within 0.05 s (8 bytes arrived)", "invalid_request_error")


async def test_the_namespace_cap(http: httpx.AsyncClient) -> None:
    http.app.state.proxy.quota.total = 0  # type: ignore[attr-defined]
    message = "this proxy holds its limit of 0 namespaces (proxy_max_namespaces); use an existing one"
    r = await http.post("/v1/chat/completions", content=CHAT, headers={"x-memwire-key": "pk",
                                                                        "x-memwire-namespace": "new1"})
    assert r.status_code == 429 and r.content == oai(message, "memwire_namespace_limit")
    r = await http.post("/memwire/v1/memories", content=b'{"text": "A fact"}',
                        headers={"x-memwire-key": "pk", "x-memwire-namespace": "new1"})
    assert r.status_code == 429 and r.content == v1("memwire_namespace_limit", message)
    r = await http.post("/memwire/ui/memories?ns=new1", content=b"text=A+fact",
                        headers={"x-memwire-key": "pk", "origin": BASE,
                                 "content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 429 and r.text == refused_page(message)


@pytest.mark.parametrize(("error", "status", "message", "code", "kind"), [
    (httpx.ConnectError("down"), 502, "the OpenAI-compatible upstream is unreachable (ConnectError)",
     "upstream_unreachable", "api_error"),
    (httpx.ReadTimeout("slow"), 504, "the OpenAI-compatible upstream timed out", "upstream_timeout", "timeout_error"),
])
async def test_an_upstream_that_fails(http: httpx.AsyncClient, upstream_fails: list[Exception], error: Exception,
                                      status: int, message: str, code: str, kind: str) -> None:
    upstream_fails.append(error)
    r = await http.post("/v1/chat/completions", content=CHAT, headers={"x-memwire-key": "pk"})
    assert r.status_code == status and r.content == oai(message, code, "server_error")
    upstream_fails.append(error)
    r = await http.post("/v1/messages", content=CHAT, headers={"x-memwire-key": "pk"})
    anthropic_message = message.replace("OpenAI-compatible", "Anthropic")
    assert r.status_code == status and r.content == ant(anthropic_message, kind)


async def test_metrics_with_a_client_key(http: httpx.AsyncClient, alice: str) -> None:
    r = await http.get("/metrics", headers={"x-memwire-key": alice})
    assert r.status_code == 403 and r.content == oai(
        "/metrics holds every tenant's figures: it needs the proxy key, not a client key", "metrics_forbidden")


async def test_an_unexpected_error(http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> Any:
        raise TypeError("a bug")

    monkeypatch.setattr(http.app.state.proxy, "_check", broken)  # type: ignore[attr-defined]
    r = await http.post("/v1/chat/completions", content=CHAT)
    assert r.status_code == 500 and r.headers["content-type"] == JSON
    message = "memwire failed on this request (error mw-ID; the proxy's log has the details)"
    assert one_id(r.text) == oai(message, "memwire_error", "server_error").decode()
    r = await http.post("/v1/messages", content=CHAT)
    assert r.status_code == 500 and one_id(r.text) == ant(message, "api_error").decode()


# ---------------------------------------------------------------- the memory API


@pytest.fixture
async def api(mw: Middleware) -> AsyncIterator[httpx.AsyncClient]:
    app = Starlette(routes=[memory_api(mw, proxy_key="pk")])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE,
                                 headers={"x-memwire-key": "pk"}) as c:
        yield c


async def test_the_memory_api_refusals(api: httpx.AsyncClient) -> None:
    r = await api.get("/memwire/v1/memories", headers={"x-memwire-key": "nope"})
    assert (r.status_code, r.headers["content-type"]) == (401, JSON)
    assert r.content == v1("invalid_memwire_key", WRONG_KEY)
    r = await api.get("/memwire/v1/openapi.json", headers={"x-memwire-key": ""})
    assert r.status_code == 401 and r.content == v1("invalid_memwire_key", WRONG_KEY)
    r = await api.get("/memwire/v1/memories", params={"limit": "0"})
    assert r.status_code == 400 and r.content == v1("invalid_limit", "limit must be an integer from 1 to 1000, got '0'")
    r = await api.get("/memwire/v1/memories/abcdef12")
    assert r.status_code == 404 and r.content == v1("not_found", "no memory with id 'abcdef12' in this namespace")
    r = await api.get("/memwire/v1/memories/abcdef12/history")
    assert r.status_code == 404 and r.content == v1("not_found", "no memory with id 'abcdef12' in this namespace")
    r = await api.post("/memwire/v1/inbox/abcdef12/approve")
    assert r.status_code == 404 and r.content == v1("not_found", "no memory with id 'abcdef12' in this namespace")
    r = await api.put("/memwire/v1/memories")
    assert r.status_code == 405 and r.content == v1("method_not_allowed", "Method Not Allowed")
    r = await api.get("/memwire/v1/nowhere")
    assert r.status_code == 404 and r.content == v1("not_found", "Not Found")
    r = await api.post("/memwire/v1/memories", content=b'{"text": 5}')
    assert r.status_code == 400 and r.content == v1("invalid_body", "text: Input should be a valid string")
    r = await api.post("/memwire/v1/memories", content=b"x" * (64 * 1024 + 1))
    assert r.status_code == 413 and r.content == v1("body_too_large", "a memory API body is at most 65,536 bytes")
    r = await api.post("/memwire/v1/memories", content=b'{"text": "' + b"word " * 2000 + b'"}')
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_memory"
    assert r.content == v1("invalid_memory", r.json()["error"]["message"])
    r = await api.post("/memwire/v1/memories",
                       content=b'{"text": "the key is sk-proj-abcdefghijklmnopqrstuvwxyz012345"}')
    assert r.status_code == 400 and r.json()["error"]["code"] == "secret_refused"
    assert r.content == v1("secret_refused", r.json()["error"]["message"])
    r = await api.get("/memwire/v1/memories", headers={"x-memwire-namespace": "a b"})
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("x-memwire-namespace: ")
    assert r.content == v1("invalid_namespace", r.json()["error"]["message"])


async def test_the_memory_api_failures(api: httpx.AsyncClient, store: MemoryStore,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def fails(error: Exception) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            raise error
        return call

    monkeypatch.setattr(store, "memories", fails(OSError(5, "I/O error")))
    r = await api.get("/memwire/v1/memories")
    assert r.status_code == 503 and r.headers["content-type"] == JSON
    assert one_id(r.text) == v1("memory_unavailable", "the memory store cannot be used now (error mw-ID; the proxy's "
                                                      "log has the details)").decode()
    monkeypatch.setattr(store, "memories", fails(KeyError("a bug")))
    r = await api.get("/memwire/v1/memories")
    assert r.status_code == 500
    assert one_id(r.text) == v1("memwire_error", "the memory API failed on this request (error mw-ID; the proxy's "
                                                 "log has the details)").decode()


# ---------------------------------------------------------------- the page


@pytest.fixture
async def ui(mw: Middleware, upstream_fails: list[Exception]) -> AsyncIterator[httpx.AsyncClient]:
    app = make_app(mw, upstream_fails)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as c:
        yield c


FORM = {"content-type": "application/x-www-form-urlencoded"}


async def test_the_page_refusals(ui: httpx.AsyncClient) -> None:
    r = await ui.post("/memwire/ui/memories", content=b"text=A+fact", headers=FORM)
    assert r.status_code == 403 and r.text == refused_page("this form must be sent from the memwire page itself")
    is_page(r)
    r = await ui.get("/memwire/ui/memories/abcdef12")
    assert r.status_code == 404 and r.text == refused_page("no memory with id 'abcdef12' in this namespace")
    r = await ui.post("/memwire/ui/memories/abcdef12/forget", headers={"origin": BASE})
    assert r.status_code == 404 and r.text == refused_page("no memory with id 'abcdef12' in this namespace")
    r = await ui.post("/memwire/ui/inbox/abcdef12/judge", headers={"origin": BASE})
    assert r.status_code == 404 and r.text == refused_page("no such review action: judge")
    r = await ui.post("/memwire/ui/archive/abcdef12/restore", headers={"origin": BASE})
    head, tail = page_ends("memwire: refused")
    assert r.status_code == 404 and r.text == refused_page("no memory with id 'abcdef12' in this namespace")
    r = await ui.post("/memwire/ui/memories", content=b"text=the+key+is+sk-proj-abcdefghijklmnopqrstuvwxyz012345",
                      headers={"origin": BASE, **FORM})
    assert r.status_code == 400 and r.text.startswith(head) and r.text.endswith(tail)
    assert '<p class="error">not added: the text looks like it holds a secret (' in r.text
    r = await ui.post("/memwire/ui/memories", content=b"x" * (64 * 1024 + 1), headers={"origin": BASE, **FORM})
    assert r.status_code == 413 and r.text == refused_page(
        "request body of 65537 bytes exceeds the proxy's limit of 65536 bytes")
    r = await ui.get("/memwire/ui", params={"ns": "a b"})
    assert r.status_code == 400 and r.text.startswith(head + '<p class="error">invalid namespace')


async def test_the_page_failures(ui: httpx.AsyncClient, store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    def fails(error: Exception) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            raise error
        return call

    monkeypatch.setattr(store, "memories", fails(OSError(5, "I/O error")))
    r = await ui.get("/memwire/ui")
    assert r.status_code == 503
    is_page(r)
    head, tail = page_ends("memwire: unavailable")
    assert one_id(r.text) == (head + '<p class="error">The memory store cannot be used now (error mw-ID; '
                              "the proxy's log has the details).</p>" + tail)
    monkeypatch.setattr(store, "memories", fails(KeyError("a bug")))
    r = await ui.get("/memwire/ui")
    assert r.status_code == 500
    head, tail = page_ends("memwire: error")
    assert one_id(r.text) == (head + '<p class="error">memwire failed on this request (error mw-ID; '
                              "the proxy's log has the details).</p>" + tail)
