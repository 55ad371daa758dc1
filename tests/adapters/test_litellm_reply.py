"""The reply reaches ``Middleware.observe_reply`` from litellm: ``wrap(completion)`` (respx answers
litellm's OpenAI calls with replies recorded from the fake provider) and the LiteLLM proxy
callback's post-call hooks, which get what the proxy hands them: litellm's objects, or raw
server-sent events for ``/v1/messages``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from memwire import MemoryStore, Middleware
from memwire.adapters.litellm import wrap
from memwire.middleware._reply import _sse_data

from ..replies import TEXT, Spy, recorded, request
from .lazy_litellm import auth, callback, litellm, types



@pytest.fixture
def spy(mw: Middleware, monkeypatch: pytest.MonkeyPatch) -> Spy:
    spy = Spy()
    monkeypatch.setattr(mw, "observe_reply", spy)
    return spy


@pytest.fixture
def api() -> Iterator[respx.MockRouter]:
    def answer(req: httpx.Request) -> httpx.Response:
        _, headers, body = recorded("openai.chat", bool(json.loads(req.content).get("stream")))
        return httpx.Response(200, headers={"content-type": headers["content-type"]}, content=body)

    with respx.mock(assert_all_called=False) as router:
        router.post("https://api.openai.com/v1/chat/completions").mock(side_effect=answer)
        yield router


def call(stream: bool) -> dict[str, Any]:
    return {**request("openai.chat", stream), "api_key": "sk-test"}


def delta_text(chunks: list[Any]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


# ---------------------------------------------------------------------- wrap(completion)


def test_completion_is_observed_once(mw: Middleware, spy: Spy, api: Any) -> None:
    assert wrap(litellm().completion, mw)(**call(False)).choices[0].message.content == TEXT
    spy.once()


async def test_acompletion_is_observed_once(mw: Middleware, spy: Spy, api: Any) -> None:
    assert (await wrap(litellm().acompletion, mw)(**call(False))).choices[0].message.content == TEXT
    spy.once()


def test_completion_stream_is_litellms_own_and_observed_at_its_end(mw: Middleware, spy: Spy, api: Any) -> None:
    plain = list(litellm().completion(**call(True)))
    stream = wrap(litellm().completion, mw)(**call(True))
    assert isinstance(stream, types().CustomStreamWrapper)  # the caller keeps litellm's object
    first = next(stream)
    assert spy.calls == []  # not before the reply is over
    chunks = [first, *stream]
    assert delta_text(chunks) == delta_text(plain) == TEXT and len(chunks) == len(plain)
    spy.once()


async def test_acompletion_stream_is_observed_at_its_end(mw: Middleware, spy: Spy, api: Any) -> None:
    stream = await wrap(litellm().acompletion, mw)(**call(True))
    assert isinstance(stream, types().CustomStreamWrapper)
    chunks = [await stream.__anext__()]
    assert spy.calls == []
    chunks += [c async for c in stream]
    assert delta_text(chunks) == TEXT
    spy.once()


def test_completion_stream_left_before_its_end_is_not_observed(mw: Middleware, spy: Spy, api: Any) -> None:
    with wrap(litellm().completion, mw)(**call(True)) as stream:  # its context manager still works
        next(stream)
    assert spy.calls == []


def test_completion_without_memories_is_not_observed(tmp_path: Path, api: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = Middleware(store=MemoryStore(tmp_path / "empty"))
    spy = Spy()
    monkeypatch.setattr(empty, "observe_reply", spy)
    assert wrap(litellm().completion, empty)(**call(False)).choices[0].message.content == TEXT
    stream = wrap(litellm().completion, empty)(**call(True))
    assert type(stream) is types().CustomStreamWrapper and delta_text(list(stream)) == TEXT
    assert spy.calls == []


# ---------------------------------------------------------------------- the proxy callback


def data(api: str, call_id: str | None = "call-1") -> dict[str, Any]:
    body = request(api, False)
    body.pop("stream")
    return {**body, "metadata": {"headers": {}}, **({"litellm_call_id": call_id} if call_id else {})}


CALL_TYPE = {"openai.chat": "acompletion", "anthropic.messages": "anthropic_messages", "openai.responses": "aresponses"}


async def pre_call(cb: Any, api: str, call_id: str | None = "call-1") -> dict[str, Any]:
    return await cb.async_pre_call_hook(auth(), None, data(api, call_id), CALL_TYPE[api])


def events(api: str) -> list[dict[str, Any]]:
    _, _, body = recorded(api, True)
    return [json.loads(d) for d in _sse_data(body.decode()) if d != "[DONE]"]


def responses_events() -> dict[str, Any]:
    return {"response.output_text.delta": types().OutputTextDeltaEvent,
            "response.completed": types().ResponseCompletedEvent}


def proxy_stream(api: str) -> list[Any]:
    """A stream as the proxy hands it to the iterator hook."""
    if api == "openai.chat":
        return [types().ModelResponseStream(**e) for e in events(api)]
    if api == "openai.responses":  # litellm's event objects; the others as plain dicts
        known = responses_events()
        return [known[e["type"]](**e) if e["type"] in known else e for e in events(api)]
    _, _, body = recorded(api, True)
    return [body[i : i + 40] for i in range(0, len(body), 40)]  # /v1/messages: raw SSE bytes


def proxy_response(api: str) -> Any:
    """A whole response as the proxy hands it to the success hook."""
    body = json.loads(recorded(api, False)[2])
    return {"openai.chat": types().ModelResponse, "openai.responses": types().ResponsesAPIResponse}.get(api, dict)(**body)


async def through(cb: Any, items: list[Any], request_data: dict[str, Any]) -> list[Any]:
    async def upstream() -> AsyncIterator[Any]:
        for item in items:
            yield item

    return [item async for item in cb.async_post_call_streaming_iterator_hook(auth(), upstream(), request_data)]


@pytest.mark.parametrize("api", list(CALL_TYPE))
async def test_callback_observes_a_response_once(mw: Middleware, spy: Spy, api: str) -> None:
    cb = callback(middleware=mw)
    out = await pre_call(cb, api)
    response = proxy_response(api)
    assert await cb.async_post_call_success_hook(out, auth(), response) is None  # the response goes on
    assert await cb.async_post_call_success_hook(out, auth(), response) is None
    spy.once()  # one reply per call id


@pytest.mark.parametrize("api", list(CALL_TYPE))
async def test_callback_stream_items_pass_unchanged_and_the_reply_is_observed_once(mw: Middleware, spy: Spy,
                                                                                   api: str) -> None:
    cb = callback(middleware=mw)
    out = await pre_call(cb, api)
    items = proxy_stream(api)
    got = await through(cb, items, out)
    assert len(got) == len(items) and all(a is b for a, b in zip(got, items))
    spy.once()


async def test_callback_without_a_call_id_or_memories_observes_nothing(mw: Middleware, spy: Spy, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    cb = callback(middleware=mw)
    out = await pre_call(cb, "openai.chat", call_id=None)
    await cb.async_post_call_success_hook(out, auth(), proxy_response("openai.chat"))
    items = proxy_stream("openai.chat")
    assert await through(cb, items, out) == items
    empty = Middleware(store=MemoryStore(tmp_path / "empty"))
    monkeypatch.setattr(empty, "observe_reply", spy)
    cb = callback(middleware=empty)
    out = await pre_call(cb, "openai.chat")
    await cb.async_post_call_success_hook(out, auth(), proxy_response("openai.chat"))
    assert spy.calls == []
