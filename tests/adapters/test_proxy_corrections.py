"""Issue 33 items 2 and 4 behind the proxy, with the real openai SDK as the caller (a fake upstream):
a relative date is stored as an absolute one, and "actually, forget that" / "correction: ..." act on
what the same conversation captured."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from starlette.applications import Starlette

from memwire import MemoryStore, Middleware
from memwire._sim.fake_provider import FakeProvider
from memwire.adapters.server._proxy import create_app
from memwire.policies._dates import zone

PROXY = "http://proxy.test"


@pytest.fixture
def fake() -> FakeProvider:
    return FakeProvider()


def proxy(mw: Middleware, fake: FakeProvider) -> Starlette:
    mw.warm_up(("gpt-4o-mini",))  # a cold token encoding must not decide a test
    upstream = httpx.AsyncClient(transport=httpx.ASGITransport(app=fake))
    return create_app(mw, openai_upstream="http://openai.upstream", client=upstream)


def oai(app: Starlette, session: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=PROXY + "/v1", api_key="sk-test", max_retries=0,
                              default_headers={"x-memwire-session": session},
                              http_client=httpx.AsyncClient(transport=httpx.ASGITransport(app=app)))


async def converse(mw: Middleware, client: openai.AsyncOpenAI, *said: str) -> None:
    """One conversation, as a chat client holds it: each reply goes back into the history."""
    messages: list[Any] = []
    for text in said:
        messages.append({"role": "user", "content": text})
        reply = await client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        messages.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
        mw.flush()


async def ask(client: openai.AsyncOpenAI, question: str, fake: FakeProvider) -> tuple[int, str]:
    raw = await client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": question}])
    return int(raw.headers["x-memwire-injected"]), json.dumps(fake.requests[-1].body["messages"])


async def test_tomorrow_is_stored_as_the_date_it_meant_in_the_users_zone(tmp_path: Path, fake: FakeProvider) -> None:
    mw = Middleware(store=MemoryStore(tmp_path / "mem"), mode="contextPerTurn", timezone="Europe/Paris")
    app = proxy(mw, fake)
    await converse(mw, oai(app, "monday"), "Remember that the code freeze starts tomorrow.")
    [line] = [ln for ln in (tmp_path / "mem" / "MEMORY.md").read_text().splitlines() if "code freeze" in ln]
    today = datetime.now(timezone.utc).astimezone(zone("Europe/Paris")).date()
    said = date.fromisoformat(line.rsplit("date: ", 1)[1].split()[0])
    assert said in (today - timedelta(days=1), today)  # the day may turn during the test
    assert line.startswith(f"- The code freeze starts tomorrow ({(said + timedelta(days=1)).isoformat()}). ")
    injected, sent = await ask(oai(app, "tuesday"), "When does the code freeze start?", fake)
    assert injected == 1 and f"tomorrow ({(said + timedelta(days=1)).isoformat()})" in sent


async def test_actually_forget_that_takes_back_what_the_conversation_just_captured(
        tmp_path: Path, fake: FakeProvider) -> None:
    store = MemoryStore(tmp_path / "mem")
    mw = Middleware(store=store, mode="contextPerTurn")
    app = proxy(mw, fake)
    await converse(mw, oai(app, "other"), "Remember that the ledger runs on PostgreSQL 15.")
    await converse(mw, oai(app, "s1"), "Remember that the release branch is called release-2026.",
                   "Actually, forget that.")
    assert [m.text for m in store.memories()] == ["The ledger runs on PostgreSQL 15."]  # another session's stays
    [gone] = store.archive.memories()
    assert gone.text == "The release branch is called release-2026." and "forgotten" in gone.tags
    injected, _ = await ask(oai(app, "s2"), "What is the release branch called?", fake)
    assert injected == 0
    store.restore(gone.id)  # nothing is lost
    injected, sent = await ask(oai(app, "s3"), "What is the release branch called?", fake)
    assert injected == 1 and "release-2026" in sent


async def test_a_correction_replaces_the_captured_value(tmp_path: Path, fake: FakeProvider) -> None:
    store = MemoryStore(tmp_path / "mem")
    mw = Middleware(store=store, mode="contextPerTurn")
    app = proxy(mw, fake)
    await converse(mw, oai(app, "s1"), "Remember that the deploy script is deploy.sh.",
                   "Correction: the deploy script is ship.sh, not deploy.sh.")
    assert [m.text for m in store.memories()] == ["The deploy script is ship.sh."]
    assert [(m.text, "superseded" in m.tags) for m in store.archive.memories()] == [
        ("The deploy script is deploy.sh.", True)]
    injected, sent = await ask(oai(app, "s2"), "Which deploy script do we run?", fake)
    assert injected == 1 and "ship.sh" in sent and "deploy.sh" not in sent


async def test_the_memory_api_writes_relative_dates_out_in_the_configured_zone(
        tmp_path: Path, fake: FakeProvider) -> None:
    store = MemoryStore(tmp_path / "mem", timezone="Pacific/Kiritimati")
    app = proxy(Middleware(store=store, mode="contextPerTurn"), fake)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PROXY) as client:
        r = await client.post("/memwire/v1/memories", json={"text": "The audit is next week."})
    assert r.status_code in (200, 201), r.text
    [mem] = store.memories()
    said = date.fromisoformat(mem.date or "")
    monday = said - timedelta(days=said.weekday()) + timedelta(days=7)
    assert mem.text == f"The audit is next week (the week of {monday.isoformat()})." == r.json()["text"]
