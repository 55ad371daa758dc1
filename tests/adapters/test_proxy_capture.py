"""Explicit capture behind the proxy, with the real openai and anthropic SDKs as callers: what a
person asks to remember in one session is what a new session gets injected."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest
from starlette.applications import Starlette

from memwire import MemoryStore, Middleware
from memwire.adapters.server._proxy import create_app
from memwire.memory._inbox import inbox_of
from memwire._sim.fake_provider import FakeProvider

PROXY = "http://proxy.test"
REMEMBER = "Remember that the staging database listens on port 5433."
ASK = "Which port does the staging database use?"


@pytest.fixture
def fake() -> FakeProvider:
    return FakeProvider()


def proxy(mw: Middleware, fake: FakeProvider) -> Starlette:
    mw.warm_up(("gpt-4o-mini", "claude-sonnet-4-5"))  # a cold token encoding must not decide a test
    upstream = httpx.AsyncClient(transport=httpx.ASGITransport(app=fake))
    return create_app(mw, openai_upstream="http://openai.upstream", anthropic_upstream="http://anthropic.upstream",
                      client=upstream)


def oai(app: Starlette, session: str, namespace: str | None = None) -> openai.AsyncOpenAI:
    headers = {"x-memwire-session": session, **({"x-memwire-namespace": namespace} if namespace else {})}
    return openai.AsyncOpenAI(base_url=PROXY + "/v1", api_key="sk-test", max_retries=0, default_headers=headers,
                              http_client=httpx.AsyncClient(transport=httpx.ASGITransport(app=app)))


def ant(app: Starlette, session: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=PROXY, api_key="sk-ant-test", max_retries=0,
                                    default_headers={"x-memwire-session": session},
                                    http_client=httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app)))


def memory_text(body: dict) -> str:
    return json.dumps(body)


async def test_openai_chat_remember_then_a_new_session_gets_it(tmp_path: Path, fake: FakeProvider) -> None:
    mw = Middleware(store=MemoryStore(tmp_path / "mem"), mode="contextPerTurn")
    app = proxy(mw, fake)
    first = await oai(app, "monday").chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": REMEMBER}])
    assert first.headers["x-memwire-injected"] == "0"
    assert fake.requests[-1].body["messages"] == [{"role": "user", "content": REMEMBER}]  # sent as it came
    mw.flush()
    assert "- The staging database listens on port 5433. #fact #captured" in (tmp_path / "mem" / "MEMORY.md").read_text()
    later = await oai(app, "tuesday").chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": ASK}])
    assert later.headers["x-memwire-injected"] == "1"
    assert "port 5433" in memory_text(fake.requests[-1].body["messages"][0])


async def test_anthropic_messages_remember_then_a_new_session_gets_it(tmp_path: Path, fake: FakeProvider) -> None:
    mw = Middleware(store=MemoryStore(tmp_path / "mem"), mode="contextPerTurn")
    app = proxy(mw, fake)
    await ant(app, "monday").messages.create(model="claude-sonnet-4-5", max_tokens=50,
                                             messages=[{"role": "user", "content": REMEMBER}])
    mw.flush()
    raw = await ant(app, "tuesday").messages.with_raw_response.create(
        model="claude-sonnet-4-5", max_tokens=50, messages=[{"role": "user", "content": ASK}])
    assert raw.headers["x-memwire-injected"] == "1"
    assert "port 5433" in memory_text(fake.requests[-1].body["messages"][0])


async def test_responses_capture_stays_in_its_namespace(tmp_path: Path, fake: FakeProvider) -> None:
    mw = Middleware(store=MemoryStore(tmp_path / "mem"), mode="contextPerTurn")
    app = proxy(mw, fake)
    await oai(app, "a", namespace="alice").responses.create(model="gpt-4o-mini", input=REMEMBER)
    mw.flush()
    assert "port 5433" in (tmp_path / "mem" / "namespaces" / "alice" / "MEMORY.md").read_text()
    assert not (tmp_path / "mem" / "MEMORY.md").exists()
    bob = await oai(app, "b", namespace="bob").responses.with_raw_response.create(model="gpt-4o-mini", input=ASK)
    assert bob.headers["x-memwire-injected"] == "0"
    alice = await oai(app, "c", namespace="alice").responses.with_raw_response.create(model="gpt-4o-mini", input=ASK)
    assert alice.headers["x-memwire-injected"] == "1"


async def test_review_mode_behind_the_proxy_waits_in_the_inbox(tmp_path: Path, fake: FakeProvider) -> None:
    store = MemoryStore(tmp_path / "mem")
    mw = Middleware(store=store, mode="contextPerTurn", capture="review")
    app = proxy(mw, fake)
    await oai(app, "monday").chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": REMEMBER}])
    mw.flush()
    assert [m.text for m in inbox_of(store).memories()] == ["The staging database listens on port 5433."]
    later = await oai(app, "tuesday").chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": ASK}])
    assert later.headers["x-memwire-injected"] == "0"


async def test_distillation_through_the_upstream_with_the_callers_credentials(tmp_path: Path) -> None:
    from memwire.middleware._distill import PROMPT
    from memwire.testing import serve_in_thread

    def reply(body: dict, api: str) -> str:
        if body.get("system") == PROMPT:
            return json.dumps({"memories": [{"text": "The repository uses pnpm", "kind": "fact", "confidence": 0.9}]})
        return "ok"

    fake = FakeProvider(reply)
    store = MemoryStore(tmp_path / "mem")
    mw = Middleware(store=store, mode="contextPerTurn", distill_model="claude-haiku-4-5", distill_via_upstream=True)
    mw.warm_up(("claude-sonnet-4-5",))
    with serve_in_thread(fake) as server:
        app = create_app(mw, anthropic_upstream=server.base_url, openai_upstream=server.base_url)
        client = anthropic.AsyncAnthropic(base_url=PROXY, api_key="sk-ant-caller", max_retries=0,
                                          http_client=httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app)))
        history = [{"role": "user", "content": "We use pnpm here. Add a lint script."},
                   {"role": "assistant", "content": "Added `pnpm lint`."}, {"role": "user", "content": "Thanks!"}]
        await client.messages.create(model="claude-sonnet-4-5", max_tokens=50, messages=history)
        mw.flush()
    [distill] = [r for r in fake.requests if r.body and r.body.get("system") == PROMPT]
    assert distill.path == "/v1/messages" and distill.body["model"] == "claude-haiku-4-5"
    [own] = [r for r in fake.requests if r is not distill]
    credentials = ("authorization", "x-api-key", "anthropic-version")
    assert {k: v for k, v in distill.headers.items() if k in credentials} == \
        {k: v for k, v in own.headers.items() if k in credentials}  # the caller's own credentials
    assert "sk-ant-caller" in distill.headers.get("x-api-key", "") + distill.headers.get("authorization", "")
    assert "x-memwire-session" not in distill.headers and "We use pnpm here" in json.dumps(distill.body)
    assert [m.text for m in store.memories()] == ["The repository uses pnpm"]


async def test_without_the_operators_opt_in_no_caller_credentials_are_used(tmp_path: Path, fake: FakeProvider) -> None:
    mw = Middleware(store=MemoryStore(tmp_path / "mem"), mode="contextPerTurn", distill_model="claude-haiku-4-5")
    calls: list[Any] = []
    mw.capture.distiller.complete = lambda messages: calls.append(messages) or '{"memories": []}'  # type: ignore[union-attr]
    app = proxy(mw, fake)
    history = [{"role": "user", "content": "We use pnpm here."}, {"role": "assistant", "content": "Noted."},
               {"role": "user", "content": "Next?"}]
    await ant(app, "s").messages.create(model="claude-sonnet-4-5", max_tokens=50, messages=history)
    mw.flush()
    assert len(calls) == 1  # the configured model, not the upstream
    assert len(fake.requests) == 1  # only the caller's own request went upstream
