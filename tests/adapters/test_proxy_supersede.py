"""Issue 33 items 1, 3 and 5 behind the proxy, with the real openai and anthropic SDKs as callers (a
fake upstream): each statement said in a conversation of its own, then a new conversation asks. A
new value replaces the old one in what is injected, a preference switch too, look-alikes stay
apart, a paraphrase reinforces, a doubtful pair is injected as the newer one saying what it may
replace, and the memory API shows the chain of values."""

from __future__ import annotations

import json
from pathlib import Path

import anthropic
import httpx
import httpx2
import openai
import pytest
from starlette.applications import Starlette

from memwire import MemoryStore, Middleware
from memwire._sim.fake_provider import FakeProvider
from memwire.adapters.server._proxy import create_app

PROXY = "http://proxy.test"


@pytest.fixture
def fake() -> FakeProvider:
    return FakeProvider()


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path / "mem")


@pytest.fixture
def mw(store: MemoryStore) -> Middleware:
    return Middleware(store=store, mode="contextPerTurn")


@pytest.fixture
def app(mw: Middleware, fake: FakeProvider) -> Starlette:
    mw.warm_up(("gpt-4o-mini", "claude-sonnet-4-5"))  # a cold token encoding must not decide a test
    upstream = httpx.AsyncClient(transport=httpx.ASGITransport(app=fake))
    return create_app(mw, openai_upstream="http://openai.upstream", anthropic_upstream="http://anthropic.upstream",
                      client=upstream)


def oai(app: Starlette, session: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=PROXY + "/v1", api_key="sk-test", max_retries=0,
                              default_headers={"x-memwire-session": session},
                              http_client=httpx.AsyncClient(transport=httpx.ASGITransport(app=app)))


def ant(app: Starlette, session: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=PROXY, api_key="sk-ant-test", max_retries=0,
                                    default_headers={"x-memwire-session": session},
                                    http_client=httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app)))


async def say(app: Starlette, mw: Middleware, *statements: str) -> None:
    """Each statement in a conversation of its own (as a person would, days apart)."""
    for i, text in enumerate(statements):
        await oai(app, f"said-{i}-{hash(text)}").chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": text}])
        mw.flush()


async def ask(app: Starlette, fake: FakeProvider, question: str) -> tuple[int, str]:
    raw = await oai(app, f"ask-{hash(question)}").chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": question}])
    return int(raw.headers["x-memwire-injected"]), json.dumps(fake.requests[-1].body["messages"])


async def test_a_new_port_replaces_the_old_one_and_the_history_keeps_both(
        app: Starlette, mw: Middleware, store: MemoryStore, fake: FakeProvider) -> None:
    await say(app, mw, "Remember that the staging database listens on port 5433.",
              "Remember that the staging database now listens on port 6543.")
    store.add("The staging database listens on port 7000.")  # memwire add, by hand
    injected, sent = await ask(app, fake, "Which port does the staging database listen on?")
    assert injected == 1 and "7000" in sent and "6543" not in sent and "5433" not in sent
    [current] = store.memories()
    api = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PROXY)
    body = (await api.get(f"/memwire/v1/memories/{current.id}/history")).json()
    assert [("5433" in s["text"], "6543" in s["text"], "7000" in s["text"]) for s in body["data"]] == [
        (True, False, False), (False, True, False), (False, False, True)]
    assert [s["state"] for s in body["data"]] == ["superseded", "superseded", "current"]


async def test_a_preference_switch_leaves_only_the_new_one(
        app: Starlette, mw: Middleware, store: MemoryStore, fake: FakeProvider) -> None:
    await say(app, mw, "I prefer npm for installing packages.", "I prefer pnpm over npm now.")
    assert [m.text for m in store.memories()] == ["User prefers pnpm over npm now."]
    injected, sent = await ask(app, fake, "Should I install packages with npm or pnpm?")
    assert injected == 1 and "pnpm over npm" in sent and "npm for installing" not in sent


async def test_look_alikes_stay_apart_and_a_paraphrase_reinforces(
        app: Starlette, mw: Middleware, store: MemoryStore, fake: FakeProvider) -> None:
    await say(app, mw, "Remember that the staging Redis port is 6380.",
              "Remember that the production database port is 5432.",
              "Remember that the ledger runs on PostgreSQL 15.",
              "Keep in mind that the ledger database is PostgreSQL 15.")
    texts = sorted(m.text for m in store.memories())
    assert texts == ["The ledger runs on PostgreSQL 15.", "The production database port is 5432.",
                     "The staging Redis port is 6380."]
    ledger = next(m for m in store.memories() if "ledger" in m.text)
    store.lifecycle.flush()
    assert store.lifecycle.get(ledger).evidence == 2
    injected, sent = await ask(app, fake, "Which port does the staging Redis use, and the production database?")
    assert injected == 2 and "6380" in sent and "5432" in sent


async def test_a_doubtful_pair_is_injected_as_the_newer_one(
        app: Starlette, mw: Middleware, store: MemoryStore, fake: FakeProvider) -> None:
    await say(app, mw, "Remember that the API runs on port 8080.",
              "Remember that the API gateway runs on port 9090.")
    assert len(store.memories()) == 2  # both kept: a person decides (memwire conflicts)
    raw = await ant(app, "ask").messages.with_raw_response.create(
        model="claude-sonnet-4-5", max_tokens=50,
        messages=[{"role": "user", "content": "Which port does the API run on?"}])
    sent = json.dumps(fake.requests[-1].body["messages"])
    assert raw.headers["x-memwire-injected"] == "1"
    assert "9090" in sent and "newer than an earlier note it may replace" in sent
