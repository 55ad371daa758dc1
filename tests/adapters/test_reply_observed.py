"""The reply reaches ``Middleware.observe_reply`` from the SDK adapters and the proxy: once per call
whose request got memories, with the reply's exact text, while the caller gets the very bytes the
provider sent. The provider is an upstream on 127.0.0.1 that answers with replies recorded from the
fake provider, in 7-byte chunks; the callers are the real openai and anthropic SDK clients."""

from __future__ import annotations

import gzip
import json
import operator
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anthropic
import anyio
import httpx
import openai
import pytest
from starlette.requests import Request

from memwire import MemoryStore, Middleware
from memwire.adapters.anthropic import wrap as wrap_anthropic
from memwire.adapters.openai import wrap as wrap_openai
from memwire.adapters.server._proxy import create_app
from memwire.memory._telemetry import read_telemetry
from memwire._sim.fake_provider import ServerThread, serve_in_thread

from ..replies import APIS, PATHS, TEXT, Spy, recorded, request

CHUNK = 7  # bytes per body message the upstream sends: events arrive cut anywhere


class Canned:
    """An upstream that answers each request of the three APIs with the recorded reply of its api
    and ``stream`` flag (``encoding="gzip"``: compressed; ``status``: that status, same body).
    With ``hold`` set, a body stops halfway until ``release`` is set (or the client leaves)."""

    def __init__(self) -> None:
        self.replies = {(api, stream): recorded(api, stream) for api in APIS for stream in (False, True)}
        self.status = 200
        self.encoding: str | None = None
        self.hold = False
        self.release = threading.Event()
        self.sent: list[bytes] = []  # each answer's body bytes, as sent

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        raw = await Request(scope, receive).body()
        api = next((a for a, path in PATHS.items() if path == scope["path"]), None)
        if api is None:  # count_tokens, models: a JSON answer that is no reply
            await self._send(send, {"content-type": "application/json"}, b'{"input_tokens": 42}')
            return
        _, headers, body = self.replies[(api, bool(json.loads(raw).get("stream")))]
        if self.encoding:
            body = gzip.compress(body)
        await self._send(send, {"content-type": headers["content-type"],
                                **({"content-encoding": self.encoding} if self.encoding else {})}, body, receive)

    async def _send(self, send: Any, headers: dict[str, str], body: bytes, receive: Any = None) -> None:
        self.sent.append(body)
        await send({"type": "http.response.start", "status": self.status,
                    "headers": [(k.encode(), v.encode()) for k, v in headers.items()]})
        for i in range(0, len(body), CHUNK):
            if self.hold and i >= len(body) // 2:
                await self._wait_for_release(receive)
                if not self.release.is_set():
                    return
            await send({"type": "http.response.body", "body": body[i : i + CHUNK], "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _wait_for_release(self, receive: Any) -> None:
        with anyio.move_on_after(5):
            async with anyio.create_task_group() as tg:
                async def watch() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    tg.cancel_scope.cancel()

                tg.start_soon(watch)
                while not self.release.is_set():
                    await anyio.sleep(0.005)
                tg.cancel_scope.cancel()


@pytest.fixture(scope="module")
def canned() -> Iterator[tuple[Canned, ServerThread]]:
    app = Canned()
    with serve_in_thread(app) as server:
        yield app, server


@pytest.fixture
def upstream(canned: tuple[Canned, ServerThread]) -> Iterator[tuple[Canned, str]]:
    app, server = canned
    app.status, app.encoding, app.hold = 200, None, False
    app.release.clear()
    app.sent.clear()
    yield app, server.base_url
    app.release.set()


@pytest.fixture
def spy(mw: Middleware, monkeypatch: pytest.MonkeyPatch) -> Spy:
    spy = Spy()
    monkeypatch.setattr(mw, "observe_reply", spy)
    return spy


RESOURCE = {"openai.chat": "chat.completions", "openai.responses": "responses", "anthropic.messages": "messages"}


def client(api: str, mw: Middleware, base_url: str, is_async: bool = False) -> Any:
    if api.startswith("anthropic"):
        cls = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
        return wrap_anthropic(cls(base_url=base_url, api_key="sk-ant-test", max_retries=0), mw)
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    return wrap_openai(cls(base_url=base_url + "/v1", api_key="sk-test", max_retries=0), mw)


def resource(sdk_client: Any, api: str) -> Any:
    return operator.attrgetter(RESOURCE[api])(sdk_client)


def text_of(api: str, stream: bool, result: Any) -> str:
    """The reply's text as the caller got it from the SDK."""
    if not stream:
        return {"openai.chat": lambda r: r.choices[0].message.content, "openai.responses": lambda r: r.output_text,
                "anthropic.messages": lambda r: r.content[0].text}[api](result)
    if api == "openai.chat":
        return "".join(c.choices[0].delta.content or "" for c in result if c.choices)
    kind = "response.output_text.delta" if api == "openai.responses" else "content_block_delta"
    return "".join(e.delta if api == "openai.responses" else e.delta.text for e in result if e.type == kind)


# ---------------------------------------------------------------------- the SDK adapters


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("api", APIS)
def test_sdk_call_is_observed_once(mw: Middleware, spy: Spy, upstream: Any, api: str, stream: bool) -> None:
    # create(), a stream iterated to its end: the SDK stops reading at [DONE] and closes the stream
    result = resource(client(api, mw, upstream[1]), api).create(**request(api, stream))
    assert text_of(api, stream, list(result) if stream else result) == TEXT
    spy.once()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("api", APIS)
async def test_async_sdk_call_is_observed_once(mw: Middleware, spy: Spy, upstream: Any, api: str, stream: bool) -> None:
    result = await resource(client(api, mw, upstream[1], is_async=True), api).create(**request(api, stream))
    assert text_of(api, stream, [e async for e in result] if stream else result) == TEXT
    spy.once()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("api", APIS)
def test_sdk_caller_gets_the_bytes_the_provider_sent(mw: Middleware, spy: Spy, upstream: Any, api: str,
                                                     stream: bool) -> None:
    with resource(client(api, mw, upstream[1]), api).with_streaming_response.create(**request(api, stream)) as r:
        got = b"".join(r.http_response.iter_raw())
    assert got == upstream[0].sent[-1]
    spy.once()


@pytest.mark.parametrize("api", APIS)
async def test_async_sdk_caller_gets_the_bytes_the_provider_sent(mw: Middleware, spy: Spy, upstream: Any,
                                                                 api: str) -> None:
    sdk = resource(client(api, mw, upstream[1], is_async=True), api)
    async with sdk.with_streaming_response.create(**request(api, True)) as r:
        got = b"".join([chunk async for chunk in r.http_response.aiter_raw()])
    assert got == upstream[0].sent[-1]
    spy.once()


@pytest.mark.parametrize("api", APIS)
def test_sdk_reads_a_gzipped_reply_from_a_copy(mw: Middleware, spy: Spy, upstream: Any, api: str) -> None:
    upstream[0].encoding = "gzip"
    with resource(client(api, mw, upstream[1]), api).with_streaming_response.create(**request(api, True)) as r:
        got = b"".join(r.http_response.iter_raw())
    assert got == upstream[0].sent[-1] and got[:2] == b"\x1f\x8b"  # gzip, as it came
    spy.once()


@pytest.mark.parametrize("api", APIS)
def test_the_reply_reaches_the_telemetry_recorder(store: MemoryStore, mw: Middleware, upstream: Any, api: str) -> None:
    list(resource(client(api, mw, upstream[1]), api).create(**request(api, True)))
    mw.flush()
    [record] = read_telemetry(store)
    tabs = next(m.id for m in store if "tabs" in m.text)
    assert record["injected"] == [tabs] and record["used"] == [tabs] and record["reply_chars"] == len(TEXT)


def test_sdk_stream_closed_before_its_end_is_not_observed(mw: Middleware, spy: Spy, upstream: Any) -> None:
    upstream[0].hold = True  # the second half of the body waits: the caller has read only part of the reply
    stream = client("openai.chat", mw, upstream[1]).chat.completions.create(**request("openai.chat", True))
    said = ""
    while not said:  # into the reply: text read, [DONE] not
        said = next(stream).choices[0].delta.content
    stream.close()
    assert spy.calls == []


def test_sdk_call_without_memories_is_not_observed(tmp_path: Path, upstream: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = Middleware(store=MemoryStore(tmp_path / "empty"))
    spy = Spy()
    monkeypatch.setattr(empty, "observe_reply", spy)
    for api in APIS:
        for stream in (False, True):
            result = resource(client(api, empty, upstream[1]), api).create(**request(api, stream))
            assert text_of(api, stream, list(result) if stream else result) == TEXT
    assert spy.calls == []


def test_sdk_error_and_token_count_are_not_observed(mw: Middleware, spy: Spy, upstream: Any) -> None:
    count = client("anthropic.messages", mw, upstream[1]).messages.count_tokens(
        model="claude-haiku-4-5", messages=request("anthropic.messages", False)["messages"])
    assert count.input_tokens == 42
    upstream[0].status = 500
    with pytest.raises(openai.InternalServerError):
        client("openai.chat", mw, upstream[1]).chat.completions.create(**request("openai.chat", False))
    assert spy.calls == []


async def test_sdk_stream_without_an_end_marker_is_observed_when_it_ends(mw: Middleware, spy: Spy) -> None:
    # some OpenAI-compatible servers end a stream without "data: [DONE]": the body's end is the end
    _, headers, body = recorded("openai.chat", True)
    body = body.replace(b"data: [DONE]\n\n", b"")

    async def pieces() -> AsyncIterator[bytes]:
        yield body[:50]
        yield body[50:]

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=headers, content=iter([body[:50], body[50:]]))

    async def async_answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=headers, content=pieces())

    sync = openai.OpenAI(base_url="http://mock/v1", api_key="sk-test",
                         http_client=httpx.Client(transport=httpx.MockTransport(answer)))
    result = wrap_openai(sync, mw).chat.completions.create(**request("openai.chat", True))
    assert text_of("openai.chat", True, list(result)) == TEXT
    spy.once()
    spy.calls.clear()
    aio = openai.AsyncOpenAI(base_url="http://mock/v1", api_key="sk-test",
                             http_client=httpx.AsyncClient(transport=httpx.MockTransport(async_answer)))
    stream = await wrap_openai(aio, mw).chat.completions.create(**request("openai.chat", True))
    assert text_of("openai.chat", True, [c async for c in stream]) == TEXT
    spy.once()


def test_sdk_answer_a_mock_transport_read_already_is_observed(mw: Middleware, spy: Spy) -> None:
    _, headers, body = recorded("openai.chat", False)
    transport = httpx.MockTransport(lambda request: httpx.Response(200, headers=headers, content=body))
    raw = openai.OpenAI(base_url="http://mock/v1", api_key="sk-test", http_client=httpx.Client(transport=transport))
    result = wrap_openai(raw, mw).chat.completions.create(**request("openai.chat", False))
    assert result.choices[0].message.content == TEXT
    spy.once()


def test_a_failing_observe_reply_never_fails_the_call(mw: Middleware, upstream: Any, monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    def broken(injection: Any, text: str) -> None:
        raise RuntimeError("recorder on fire")

    monkeypatch.setattr(mw, "observe_reply", broken)
    for stream in (False, True):
        result = client("openai.chat", mw, upstream[1]).chat.completions.create(**request("openai.chat", stream))
        assert text_of("openai.chat", stream, list(result) if stream else result) == TEXT
    assert caplog.text.count("observing the reply failed (RuntimeError: details not logged)") == 2


# ---------------------------------------------------------------------- the proxy


@pytest.fixture
def proxy(mw: Middleware, upstream: tuple[Canned, str]) -> Iterator[str]:
    app = create_app(mw, openai_upstream=upstream[1], anthropic_upstream=upstream[1],
                     client=httpx.AsyncClient(trust_env=False, timeout=10))
    with serve_in_thread(app) as server:
        yield server.base_url


def post_raw(url: str, api: str, stream: bool, **headers: str) -> tuple[httpx.Response, bytes]:
    with httpx.Client(timeout=10, trust_env=False) as http, \
            http.stream("POST", url + PATHS[api], json=request(api, stream), headers=headers) as r:
        return r, b"".join(r.iter_raw())


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("api", APIS)
def test_proxy_relays_the_bytes_and_observes_the_reply_once(spy: Spy, upstream: Any, proxy: str, api: str,
                                                            stream: bool) -> None:
    r, got = post_raw(proxy, api, stream)
    assert r.headers["x-memwire-injected"] == "1"
    assert got == upstream[0].sent[-1]
    spy.wait()
    spy.once()


@pytest.mark.parametrize("api", APIS)
def test_proxy_with_an_sdk_client(spy: Spy, upstream: Any, proxy: str, api: str) -> None:
    if api.startswith("anthropic"):
        sdk: Any = anthropic.Anthropic(base_url=proxy, api_key="sk-ant-test", max_retries=0)
    else:
        sdk = openai.OpenAI(base_url=proxy + "/v1", api_key="sk-test", max_retries=0)
    assert text_of(api, True, list(resource(sdk, api).create(**request(api, True)))) == TEXT
    spy.wait()
    spy.once()


def test_proxy_relays_a_gzipped_reply_as_it_came_and_reads_a_copy(spy: Spy, upstream: Any, proxy: str) -> None:
    upstream[0].encoding = "gzip"
    r, got = post_raw(proxy, "openai.chat", True, **{"accept-encoding": "gzip"})
    assert r.headers["content-encoding"] == "gzip" and got == upstream[0].sent[-1]
    spy.wait()
    spy.once()


def test_proxy_client_leaving_mid_reply_is_not_observed(spy: Spy, upstream: Any, proxy: str) -> None:
    upstream[0].hold = True
    with httpx.Client(timeout=10, trust_env=False) as http, \
            http.stream("POST", proxy + PATHS["anthropic.messages"], json=request("anthropic.messages", True)) as r:
        next(r.iter_raw())
    time.sleep(0.3)  # time for a wrong observation to come
    upstream[0].release.set()
    time.sleep(0.1)
    assert spy.calls == []


def test_proxy_error_pass_through_and_token_count_are_not_observed(spy: Spy, upstream: Any, proxy: str) -> None:
    with httpx.Client(timeout=10, trust_env=False) as http:
        assert http.post(proxy + "/v1/messages/count_tokens", json=request("anthropic.messages", False)).json() == \
            {"input_tokens": 42}
        assert http.get(proxy + "/v1/models").status_code == 200  # relayed without memory
        upstream[0].status = 500
        r, got = post_raw(proxy, "openai.chat", True)
        assert r.status_code == 500 and got == upstream[0].sent[-1]
    time.sleep(0.2)
    assert spy.calls == []


def test_proxy_call_without_memories_is_not_observed(tmp_path: Path, upstream: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    empty = Middleware(store=MemoryStore(tmp_path / "empty"))
    spy = Spy()
    monkeypatch.setattr(empty, "observe_reply", spy)
    app = create_app(empty, openai_upstream=upstream[1], anthropic_upstream=upstream[1],
                     client=httpx.AsyncClient(trust_env=False, timeout=10))
    with serve_in_thread(app) as server:
        r, got = post_raw(server.base_url, "openai.chat", True)
    assert r.headers["x-memwire-injected"] == "0" and got == upstream[0].sent[-1]
    time.sleep(0.2)
    assert spy.calls == []
