"""/memwire/ui: plain HTTP tests of what each page holds, and the page in a real browser (Debian's
Chromium through Playwright, tests/browser.py): memories with their facts, edited in place, search
that says why, filters, the inbox, conflicts, history, the archive, the header's figures, sessions
with their requests, the keyboard, two screen widths, no request beyond the page's own origin, and
one tenant's page holding only that tenant's data."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from memwire import MemoryStore, Middleware
from memwire._sim.cache import ANTHROPIC_COSTS, OPENAI_COSTS
from memwire._sim.cache import Usage as SimUsage
from memwire._sim.fake_provider import FakeProvider, serve_in_thread
from memwire.adapters.server._clients import client_name
from memwire.adapters.server._keys import add_key
from memwire.adapters.server._proxy import create_app
from memwire.adapters.server._ui_page import PRICES, figures, matched_words
from memwire.memory._inbox import inbox_of
from memwire.middleware._records import Record

from ..browser import browser_page
from ..replies import wait_records

SYSTEM = "You are a careful coding assistant for the payments service. " * 400


@pytest.fixture
def proxy(mw: Middleware) -> Iterator[str]:
    fake = FakeProvider(reply=lambda body, api: "Noted.")
    with serve_in_thread(fake) as upstream, serve_in_thread(create_app(mw, openai_upstream=upstream.base_url)) as p:
        yield p.base_url


def converse(base: str, session: str, questions: list[str], **headers: str) -> None:
    client = openai.OpenAI(base_url=base + "/v1", api_key="sk-fake", max_retries=0,
                           default_headers={"x-memwire-session": session, **headers})
    messages: list[Any] = [{"role": "system", "content": SYSTEM}]
    for q in questions:
        messages.append({"role": "user", "content": q})
        messages.append({"role": "assistant", "content": client.chat.completions.create(
            model="gpt-4o", messages=messages).choices[0].message.content})


QUESTIONS = ["Which port does the staging database use?", "When do deploys go out?", "Tabs or spaces?"]


def rows(html: str, table: str) -> list[str]:
    """The rows of a table of the page, as HTML."""
    body = html.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    return re.findall(r"<tr data-[a-z]+=.*?</tr>", body, flags=re.S)


def text_of(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)


# ---------------------------------------------------------------- memories (plain HTTP)


def test_each_memory_shows_its_text_once_with_its_facts(mw: Middleware, store: MemoryStore, proxy: str) -> None:
    converse(proxy, "pay-1", QUESTIONS[:1])
    wait_records(mw, 1)
    mw.flush()
    page = httpx.get(proxy + "/memwire/ui").text
    assert page.count("The staging database is Postgres 15 on port 5433") == 1  # no duplicate edit box
    [row] = [r for r in rows(page, "memories") if "Postgres 15" in r]
    facts = text_of(row)
    assert "explicit" in facts and "created 20" in facts and "stability 2.08 (active)" in facts
    assert "injected 1×" in facts and "last injected 20" in facts  # the one request that injected it
    tabs = next(r for r in rows(page, "memories") if "tabs over spaces" in r)
    assert "#preference" in text_of(tabs) and "injected 0×" in text_of(tabs) and "last injected" not in tabs
    assert 'href="/memwire/ui/memories/' in row  # its history


def test_another_workers_page_counts_injections_before_the_metadata_is_saved(mw: Middleware, store: MemoryStore,
                                                                              proxy: str) -> None:
    # a record reaches records.recent() before its listeners (the request log's offer among them):
    # one added after that offer says when the log has it to flush
    offered = threading.Event()
    mw.records.listeners.append(lambda record: offered.set())
    converse(proxy, "pay-1", QUESTIONS[:1])
    assert offered.wait(30)  # a hang guard: the record is made just after the reply is out
    mw.kept_records.flush()  # the request log every worker reads; the lifecycle saves every few seconds
    other = Middleware(store=MemoryStore(store.path), mode="contextPerTurn")  # another worker's view
    with serve_in_thread(create_app(other, openai_upstream="http://127.0.0.1:9")) as p:
        page = httpx.get(p.base_url + "/memwire/ui").text
    row = next(r for r in rows(page, "memories") if "Postgres 15" in r)
    assert "injected 1×" in text_of(row) and "last injected" in text_of(row)


def test_a_captured_memory_says_where_it_was_said(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")
    mw = Middleware(store=store, mode="contextPerTurn", capture="auto")
    fake = FakeProvider(reply=lambda body, api: "Noted.")
    with serve_in_thread(fake) as up, serve_in_thread(create_app(mw, openai_upstream=up.base_url)) as p:
        converse(p.base_url, "ops-7", ["Remember that the staging database listens on port 5433."])
        mw.flush()
        page = httpx.get(p.base_url + "/memwire/ui").text
        sk = httpx.get(p.base_url + "/memwire/ui", params={"source": "captured"}).text
        explicit = httpx.get(p.base_url + "/memwire/ui", params={"source": "explicit"}).text
    [row] = rows(page, "memories")
    assert "listens on port 5433" in row
    why = text_of(row)
    assert re.search(r"captured in session ops-7, message 2, at 20\d\d-\d\d-\d\d \d\d:\d\d, as a \w+", why), why
    assert ">captured<" in row
    assert 'href="/memwire/ui/sessions/ops-7"' in row
    assert len(rows(sk, "memories")) == 1 and rows(explicit, "memories") == []  # the source filter
    assert "sk-fake" not in page  # nothing of the request's credentials


def test_search_says_why_each_result_matched(mw: Middleware, proxy: str) -> None:
    page = httpx.get(proxy + "/memwire/ui", params={"q": "which port does staging use"}).text
    [first, *_] = rows(page, "memories")
    assert "Postgres 15" in first
    matched = re.search(r'data-k="matched">(.*?)</span>', first, flags=re.S)
    assert matched is not None and text_of(matched.group(1)) == "matched: port, staging"


def test_matched_words_are_the_query_words_retrieval_matched() -> None:
    from memwire.memory._model import Memory

    mem = Memory.create("Deploys go out on Tuesdays", tags=["release"])
    assert matched_words("When do DEPLOYS ship?", mem) == ["DEPLOYS"]  # folded, stemmed; stopwords never match
    assert matched_words("Tuesday release", mem) == ["Tuesday", "release (tag)"]
    assert matched_words("nothing here", mem) == []


def test_filters_by_tag_source_and_fading(mw: Middleware, store: MemoryStore, proxy: str) -> None:
    store.add("The on-call rotation changes on Mondays", tags=["ops"], cue="distilled")
    tagged = httpx.get(proxy + "/memwire/ui", params={"tag": "preference"}).text
    assert [("tabs over spaces" in r) for r in rows(tagged, "memories")] == [True]
    assert '<option selected>preference</option>' in tagged
    distilled = httpx.get(proxy + "/memwire/ui", params={"source": "distilled"}).text
    assert [("on-call" in r) for r in rows(distilled, "memories")] == [True]
    fading = httpx.get(proxy + "/memwire/ui", params={"fading": "1"}).text  # distilled starts provisional
    assert [("on-call" in r) for r in rows(fading, "memories")] == [True]
    assert "(provisional)" in text_of(rows(fading, "memories")[0])
    store.pin(next(m for m in store.memories() if "on-call" in m.text).id)  # a pinned one does not fade
    assert rows(httpx.get(proxy + "/memwire/ui", params={"fading": "1"}).text, "memories") == []


def test_filters_look_past_the_memories_shown(mw: Middleware, store: MemoryStore, proxy: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from memwire.adapters.server import _ui

    monkeypatch.setattr(_ui, "SHOWN", 1)  # only the facts of the memories shown are read, unless a filter needs all
    store.add("The on-call rotation changes on Mondays", tags=["ops"], cue="distilled")  # the last of four
    page = httpx.get(proxy + "/memwire/ui").text
    assert len(rows(page, "memories")) == 1 and "(search to see the others)" in page
    for params in ({"fading": "1"}, {"source": "distilled"}, {"tag": "ops"}):
        found = rows(httpx.get(proxy + "/memwire/ui", params=params).text, "memories")
        assert [("on-call" in r) for r in found] == [True], params


def test_an_edit_replaces_the_old_text_and_history_shows_the_chain(mw: Middleware, store: MemoryStore,
                                                                 proxy: str) -> None:
    old = next(m for m in store.memories() if "Postgres 15" in m.text)
    r = httpx.post(proxy + f"/memwire/ui/memories/{old.id}/edit", data={"text": "The staging database is Postgres 16 "
                   "on port 5433"}, headers={"origin": proxy})
    assert r.status_code == 303
    new = next(m for m in store.memories() if "Postgres 16" in m.text)
    assert old.id in store.archive and old.id not in store
    chain = httpx.get(proxy + f"/memwire/ui/memories/{new.id}").text
    history = rows(chain, "history")
    assert ["Postgres 15" in history[0], "Postgres 16" in history[1]] == [True, True]
    assert 'data-state="superseded"' in history[0] and 'data-state="current"' in history[1]
    assert "<s>" in history[0]  # the old value struck through
    assert httpx.get(proxy + "/memwire/ui/memories/ffffffffffff").status_code == 404


# ---------------------------------------------------------------- inbox, conflicts, archive


def inboxed(tmp_path: Path) -> tuple[MemoryStore, Middleware]:
    store = MemoryStore(tmp_path / "mem")
    mw = Middleware(store=store, mode="contextPerTurn", capture="review")
    return store, mw


def test_the_inbox_approves_rejects_and_edits_in_one_action(tmp_path: Path) -> None:
    store, mw = inboxed(tmp_path)
    fake = FakeProvider(reply=lambda body, api: "Noted.")
    with serve_in_thread(fake) as up, serve_in_thread(create_app(mw, openai_upstream=up.base_url)) as p:
        base = p.base_url
        for i, said in enumerate(["Remember that the staging database listens on port 5433.",
                                  "Remember that the linter is ruff.", "Remember that releases are signed."]):
            converse(base, f"s{i}", [said])
        mw.flush()
        waiting = {m.text: m.id for m in inbox_of(store).memories()}
        assert len(waiting) == 3
        page = httpx.get(base + "/memwire/ui").text
        assert len(rows(page, "inbox")) == 3 and "said in session s" in text_of(rows(page, "inbox")[0])
        [port, ruff, signed] = waiting.values()
        post = lambda path, **data: httpx.post(base + path, data=data, headers={"origin": base})  # noqa: E731
        assert post(f"/memwire/ui/inbox/{port}/approve").status_code == 303
        assert post(f"/memwire/ui/inbox/{ruff}/reject").status_code == 303
        assert post(f"/memwire/ui/inbox/{signed}/edit", text="Releases are signed with Sigstore").status_code == 303
        assert post("/memwire/ui/inbox/ffffffffff/approve").status_code == 404
    texts = sorted(m.text for m in store.memories())
    assert texts == ["Releases are signed with Sigstore", "The staging database listens on port 5433."]
    assert len(inbox_of(store)) == 0 and ruff in store.archive  # rejected: archived, not proposed again
    signed_mem = next(m for m in store.memories() if "Sigstore" in m.text)
    assert store.lifecycle.get(signed_mem).cue == "captured"  # still what capture proposed


def test_an_unknown_review_action_is_refused(tmp_path: Path) -> None:
    store, mw = inboxed(tmp_path)
    with serve_in_thread(create_app(mw, openai_upstream="http://127.0.0.1:9")) as p:
        mem = store.inbox.add("The linter is ruff", cue="captured")
        r = httpx.post(p.base_url + f"/memwire/ui/inbox/{mem.id}/bogus", headers={"origin": p.base_url})
        assert r.status_code == 404 and "no such review action" in r.text
        assert mem.id in store.inbox


def test_the_archive_lists_and_restores(mw: Middleware, store: MemoryStore, proxy: str) -> None:
    gone = next(m for m in store.memories() if "Tuesdays" in m.text)
    store.forget(gone.id)
    page = httpx.get(proxy + "/memwire/ui/archive").text
    [row] = rows(page, "archive")
    assert "Tuesdays" in row and "#forgotten" in row
    assert "Tuesdays" not in text_of(httpx.get(proxy + "/memwire/ui").text.split('id="memories"')[1])
    found = httpx.get(proxy + "/memwire/ui/archive", params={"q": "deploys"}).text
    assert len(rows(found, "archive")) == 1
    assert rows(httpx.get(proxy + "/memwire/ui/archive", params={"q": "kubernetes"}).text, "archive") == []
    r = httpx.post(proxy + f"/memwire/ui/archive/{gone.id}/restore", headers={"origin": proxy})
    assert r.status_code == 303 and r.headers["location"] == "/memwire/ui/archive"
    assert any("Tuesdays" in m.text for m in store.memories()) and gone.id not in store.archive
    assert httpx.post(proxy + f"/memwire/ui/archive/{gone.id}/restore", headers={"origin": "http://evil.example"}
                      ).status_code == 403


def test_conflicts_resolve_in_one_action(mw: Middleware, store: MemoryStore, proxy: str) -> None:
    store.add("The API listens on port 8080")
    store.add("The API gateway listens on port 9090")
    page = httpx.get(proxy + "/memwire/ui").text
    if 'id="conflicts"' not in page:
        pytest.skip("these two are not a conflict for this version of the decision table")
    [row] = rows(page, "conflicts")
    newer = re.search(r'data-id="(\w+)"', row).group(1)  # type: ignore[union-attr]
    assert 'data-figure="conflicts"><dt>conflicts</dt><dd>1</dd>' in page
    r = httpx.post(proxy + f"/memwire/ui/memories/{newer}/keep", data={"both": "1"}, headers={"origin": proxy})
    assert r.status_code == 303 and 'id="conflicts"' not in httpx.get(proxy + "/memwire/ui").text


# ---------------------------------------------------------------- figures and sessions


def record(**kw: Any) -> Record:
    base: dict[str, Any] = {"at": 1.0, "api": "openai.chat", "model": "m", "status": 200, "mode": "contextPerTurn",
                            "provider": "openai"}
    return Record(**{**base, **kw})


def test_figures_count_turns_not_a_tool_loops_requests_and_price_as_the_demo() -> None:
    loop = [record(memory_ids=("a", "b"), prompt_tokens=1000, cached_tokens=0),
            record(memory_ids=("a", "b"), reused=True, prompt_tokens=1200, cached_tokens=1000),
            record(memory_ids=("a", "b"), reused=True, prompt_tokens=1400, cached_tokens=1200),
            record(memory_ids=("c",), provider="anthropic", prompt_tokens=2000, cached_tokens=1500,
                   cache_write_tokens=400),
            record(mode="none", prompt_tokens=None)]
    f = figures(loop)
    assert (f.requests, f.turns, f.injected, f.per_turn) == (5, 2, 3, 1.5)  # not (2+2+2+1)/4
    assert f.cached_share == pytest.approx(3700 / 5600)
    sim = [SimUsage("openai", 1000, 0), SimUsage("openai", 1200, 1000), SimUsage("openai", 1400, 1200),
           SimUsage("anthropic", 2000, 1500, 400)]
    assert f.cost == pytest.approx(sum(u.cost() for u in sim))
    assert f.saved == pytest.approx(sum(u.uncached_cost() - u.cost() for u in sim))


def test_the_page_prices_tokens_as_the_simulator_does() -> None:
    assert PRICES["openai"] == (OPENAI_COSTS.cache_read, OPENAI_COSTS.cache_write)
    assert PRICES["anthropic"] == (ANTHROPIC_COSTS.cache_read, ANTHROPIC_COSTS.cache_write)
    assert OPENAI_COSTS.input == ANTHROPIC_COSTS.input == 1.0


def test_client_names_come_from_a_fixed_list_never_the_header() -> None:
    assert client_name({"user-agent": "claude-cli/2.0.1 (external, cli)"}) == "claude-code"
    assert client_name({"x-claude-code-session-id": "x", "user-agent": "whatever"}) == "claude-code"
    assert client_name({"originator": "codex_cli_rs", "user-agent": "codex_cli_rs/0.1"}) == "codex"
    assert client_name({"user-agent": "OpenAI/Python 1.99.0"}) == "openai-python"
    assert client_name({"user-agent": "Anthropic/Python 0.60"}) == "anthropic-python"
    assert client_name({"user-agent": "alice-laptop.corp.example secret-build 7"}) == "other"
    assert client_name({}) == ""


def test_sessions_show_start_client_turns_and_cached_share(mw: Middleware, proxy: str) -> None:
    before = time.time()
    converse(proxy, "pay-1", QUESTIONS)
    wait_records(mw, 3)
    page = httpx.get(proxy + "/memwire/ui/sessions").text
    [row] = rows(page, "sessions")
    cells = [text_of(c) for c in re.findall(r"<td.*?</td>", row, flags=re.S)]
    assert cells[0] == "pay-1" and cells[2] == "openai-python" and cells[3] == "contextPerTurn"
    assert cells[4] == "3" and cells[5] == "3"  # requests, turns
    assert cells[1] == time.strftime("%Y-%m-%d %H:%M", time.gmtime(mw.records.recent()[0].at))
    assert mw.records.recent()[0].at >= before
    assert re.fullmatch(r"\d+%", cells[7]) and cells[7] != "0%"  # the fake provider's cache served turns 2, 3
    assert 'data-figure="requests"><dt>requests</dt><dd>3</dd>' in page
    assert all(r.client == "openai-python" for r in mw.records.recent())
    detail = httpx.get(proxy + "/memwire/ui/sessions/pay-1").text
    third = re.search(r'<tr id="req-3">.*?</tr>', detail, flags=re.S).group(0)  # type: ignore[union-attr]
    replayed = re.search(r'data-label="replayed">(.*?)</td>', third, flags=re.S).group(1)  # type: ignore[union-attr]
    assert text_of(replayed) == "2: turn 1, turn 2" and 'href="#req-1"' in replayed  # the blocks replay put back


def test_replayed_blocks_are_named_only_when_the_count_says_which() -> None:
    from memwire.adapters.server._ui import _replayed

    assert _replayed(record(replayed=0), [(1, 1)]) == "0"
    assert text_of(_replayed(record(replayed=2), [(1, 1), (3, 4)])) == "2: turn 1, turn 3"
    assert _replayed(record(replayed=1), [(1, 1), (3, 4)]) == "1"  # a compaction or a dropped turn: which is unknown


def test_a_tool_loop_is_one_turn_on_the_session_page(mw: Middleware, store: MemoryStore, proxy: str) -> None:
    client = openai.OpenAI(base_url=proxy + "/v1", api_key="sk-fake", max_retries=0,
                           default_headers={"x-memwire-session": "loop-1"})
    messages: list[Any] = [{"role": "system", "content": SYSTEM},
                           {"role": "user", "content": "Which port does the staging database use?"}]
    client.chat.completions.create(model="gpt-4o", messages=messages)
    call = {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                 {"role": "tool", "tool_call_id": "call_1", "content": "port = 5433"}]
    client.chat.completions.create(model="gpt-4o", messages=messages)
    wait_records(mw, 2)
    recs = [r for r in mw.records.recent() if r.session == "loop-1"]
    assert [r.reused for r in recs] == [False, True]
    page = httpx.get(proxy + "/memwire/ui/sessions").text
    cells = [text_of(c) for c in re.findall(r"<td.*?</td>", rows(page, "sessions")[0], flags=re.S)]
    assert cells[4:6] == ["2", "1"]  # two requests, one turn
    detail = httpx.get(proxy + "/memwire/ui/sessions/loop-1").text
    reqs = re.findall(r'<tr id="req-\d+">.*?</tr>', detail, flags=re.S)
    assert len(reqs) == 2 and "turn 1 (reused)" in reqs[1] and "(reused)" not in reqs[0]
    assert re.search(r'data-label="replayed">0<', reqs[1])  # its own turn's block is not an earlier one
    assert "Postgres 15" in reqs[0] and 'data-memory="' in reqs[0]


def test_the_page_on_a_postgresql_store(postgres_url: str) -> None:
    from memwire.memory.postgres._store import PgStore

    store = PgStore(postgres_url)
    mw = Middleware(store=store, mode="contextPerTurn", capture="review")
    for text in ("The staging database is Postgres 15 on port 5433", "Deploys go out on Tuesdays"):
        store.add(text, tags=["ops"])
    fake = FakeProvider(reply=lambda body, api: "Noted.")
    with serve_in_thread(fake) as up, serve_in_thread(create_app(mw, openai_upstream=up.base_url)) as p:
        base = p.base_url
        converse(base, "pg-1", ["Which port does the staging database use?",
                                "Remember that the release branch is cut on Thursdays."])
        wait_records(mw, 2)
        mw.flush()
        page = httpx.get(base + "/memwire/ui").text
        row = next(r for r in rows(page, "memories") if "Postgres 15" in r)
        assert "explicit" in text_of(row) and "injected 1×" in text_of(row) and "(active)" in text_of(row)
        [waiting] = rows(page, "inbox")
        assert "said in session pg-1, message 4, at" in text_of(waiting)  # system, user, assistant, user
        mid = re.search(r'data-id="(\w+)"', waiting).group(1)  # type: ignore[union-attr]
        post = lambda path, **data: httpx.post(base + path, data=data, headers={"origin": base})  # noqa: E731
        assert post(f"/memwire/ui/inbox/{mid}/edit", text="The release branch is cut on Thursdays at noon"
                    ).status_code == 303
        gone = next(m for m in store.memories() if "Tuesdays" in m.text)
        assert post(f"/memwire/ui/memories/{gone.id}/forget").status_code == 303
        assert "Tuesdays" in httpx.get(base + "/memwire/ui/archive").text
        assert post(f"/memwire/ui/archive/{gone.id}/restore").status_code == 303
        sessions = httpx.get(base + "/memwire/ui/sessions").text
        assert len(rows(sessions, "sessions")) == 1 and "pg-1" in sessions
        assert httpx.get(base + "/memwire/ui/sessions/pg-1").text.count('<tr id="req-') == 2
        assert httpx.get(base + f"/memwire/ui/memories/{gone.id}").status_code == 200
    assert sorted(m.text for m in store.memories()) == [
        "Deploys go out on Tuesdays", "The release branch is cut on Thursdays at noon",
        "The staging database is Postgres 15 on port 5433"]


# ---------------------------------------------------------------- tenants


def test_one_tenants_page_shows_only_that_tenants_data(tmp_path: Path, store: MemoryStore) -> None:
    keys_file = tmp_path / "keys.json"
    alice_key, _ = add_key(keys_file, "alice")
    bob_key, _ = add_key(keys_file, "bob")
    mw = Middleware(store=store, mode="contextPerTurn")
    bob_mem = mw.store_for("bob").add("Bob deploys with Argo CD")
    mw.store_for("bob").forget(mw.store_for("bob").add("Bob's old linter was flake8").id)
    mw.store_for("alice").add("Alice keeps her notes in Obsidian")
    fake = FakeProvider(reply=lambda body, api: "Noted.")
    with serve_in_thread(fake) as up, serve_in_thread(create_app(mw, openai_upstream=up.base_url,
                                                                 keys_file=keys_file)) as p:
        base = p.base_url
        converse(base, "bob-secret-session", ["How does Bob deploy?"], **{"x-memwire-key": bob_key})
        converse(base, "alice-1", ["Where are the notes?"], **{"x-memwire-key": alice_key})
        wait_records(mw, 2)
        mw.flush()
        alice = httpx.Client(base_url=base, headers={"x-memwire-key": alice_key})
        pages = {path: alice.get(path).text for path in ("/memwire/ui", "/memwire/ui/sessions", "/memwire/ui/archive")}
        assert "Obsidian" in pages["/memwire/ui"] and "alice-1" in pages["/memwire/ui/sessions"]
        for path, html in pages.items():
            for theirs in ("Argo CD", "flake8", "bob-secret-session", "Postgres 15"):
                assert theirs not in html, (path, theirs)
        assert 'data-figure="requests"><dt>requests</dt><dd>1</dd>' in pages["/memwire/ui/sessions"]
        assert 'data-figure="requests"><dt>requests</dt><dd>1</dd>' in alice.get("/memwire/ui/figures").text
        assert alice.get("/memwire/ui/figures", params={"ns": "bob"}).status_code == 403
        assert alice.get("/memwire/ui/sessions/alice-1").text.count('<tr id="req-') == 1
        assert alice.get("/memwire/ui/sessions/bob-secret-session").text.count('<tr id="req-') == 0
        assert alice.get(f"/memwire/ui/memories/{bob_mem.id}").status_code == 404  # not in her store
        for path in ("/memwire/ui", "/memwire/ui/sessions", "/memwire/ui/archive",
                     f"/memwire/ui/memories/{bob_mem.id}"):
            assert alice.get(path, params={"ns": "bob"}).status_code == 403
        r = alice.post(f"/memwire/ui/archive/{bob_mem.id}/restore", params={"ns": "bob"}, headers={"origin": base})
        assert r.status_code == 403
        assert "Argo CD" in httpx.get(base + "/memwire/ui", headers={"x-memwire-key": bob_key}).text


# ---------------------------------------------------------------- in a browser


@pytest.mark.browser
def test_the_page_in_a_browser_edits_in_place_and_shows_sessions(mw: Middleware, store: MemoryStore, proxy: str,
                                                                 tmp_path: Any) -> None:
    converse(proxy, "pay-1", QUESTIONS)
    wait_records(mw, 3)
    with browser_page(1280, 800) as page:
        from playwright.sync_api import expect  # waits for the page a click loads (no sleeps, no races)

        outside: list[str] = []
        page.on("request", lambda r: None if r.url.startswith(proxy) else outside.append(r.url))
        page.goto(proxy + "/memwire/ui")
        memories = page.locator("#memories")
        expect(memories.locator("tbody tr")).to_have_count(3)
        expect(page.locator("text=The staging database is Postgres 15 on port 5433")).to_have_count(1)
        page.fill("#add input[name=text]", "The payments service is owned by team Kestrel")
        page.fill("#add input[name=tags]", "owner, team")
        page.click("#add button")
        expect(memories).to_contain_text("owned by team Kestrel")
        added = next(m for m in store.memories() if "Kestrel" in m.text)
        assert added.tags == ("owner", "team")
        text = page.locator(f'#memories tr[data-id="{added.id}"] .mtext')
        text.click()  # in place: the text becomes its edit box, nothing else shows it twice
        box = text.locator("input[name=text]")
        expect(box).to_be_focused()
        expect(box).to_have_value("The payments service is owned by team Kestrel")
        box.fill("something else")
        box.press("Escape")  # cancels: the text as it was, no request made
        expect(text).to_have_text("The payments service is owned by team Kestrel")
        expect(text.locator("input")).to_have_count(0)
        assert any("Kestrel" in m.text for m in store.memories())
        text.click()
        box.fill("The payments service is owned by team Osprey")
        box.press("Enter")
        expect(memories).to_contain_text("team Osprey")
        expect(memories).not_to_contain_text("team Kestrel")
        osprey = next(m for m in store.memories() if "Osprey" in m.text)
        assert osprey.tags == ("owner", "team") and added.id in store.archive  # the old text archived
        page.locator(f'#memories tr[data-id="{osprey.id}"] button', has_text="pin").click()
        expect(page.locator(f'#memories tr[data-id="{osprey.id}"] button', has_text="unpin")).to_have_count(1)
        assert store.get(osprey.id).pinned
        page.locator(f'#memories tr[data-id="{osprey.id}"] button', has_text="forget").click()
        expect(memories).not_to_contain_text("Osprey")
        assert osprey.id not in store
        page.fill("input[name=q]", "deploys Tuesdays")
        page.click("#search button")
        expect(memories.locator("tbody tr").first).to_contain_text("Deploys go out on Tuesdays")
        expect(memories.locator("tbody tr").first.locator("[data-k=matched]")).to_have_text(
            "matched: deploys, Tuesdays")
        page.click("nav >> text=archive")
        expect(page.locator("#archive")).to_contain_text("Osprey")
        page.locator("#archive tr", has_text="Osprey").locator("button", has_text="restore").click()
        expect(page.locator("#archive")).not_to_contain_text("Osprey")
        assert any("Osprey" in m.text for m in store.memories())
        page.click("nav >> text=sessions")
        expect(page.locator("#sessions tbody tr")).to_have_count(1)
        expect(page.locator("#sessions")).to_contain_text("openai-python")
        page.click("#sessions >> text=pay-1")
        expect(page.locator("#requests tbody tr")).to_have_count(3)
        expect(page.locator('svg[data-chart="pay-1"] circle')).to_have_count(3)
        expect(page.locator("#requests")).to_contain_text("Postgres 15 on port 5433")  # the block, as memories
        expect(page.locator("#session-facts")).to_contain_text("3 turns")
        shot = tmp_path / "session.png"
        page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:4] == b"\x89PNG"
    assert outside == []


@pytest.mark.browser
def test_the_headers_figures_stay_live_while_the_page_is_open(mw: Middleware, store: MemoryStore, proxy: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from memwire.adapters.server import _ui

    monkeypatch.setattr(_ui, "REFRESH_S", 0.2)
    store.inbox.add("The release branch is cut on Thursdays", cue="captured")
    with browser_page(1280, 800) as page:
        from playwright.sync_api import expect

        page.goto(proxy + "/memwire/ui")
        requests = page.locator('[data-figure="requests"] dd')
        expect(requests).to_have_text("0")
        converse(proxy, "pay-1", QUESTIONS[:2])  # traffic while the page is open: no reload
        expect(requests).to_have_text("2")
        expect(page.locator('[data-figure="cached share"] dd')).not_to_have_text("-")
        inbox = page.locator("#inbox .mtext")  # the inbox: edit in place, Enter approves the new words
        inbox.click()
        inbox.locator("input").fill("The release branch is cut on Thursdays at noon")
        inbox.locator("input").press("Enter")
        expect(page.locator("#memories")).to_contain_text("cut on Thursdays at noon")
        expect(page.locator("#inbox")).to_have_count(0)
    assert len(store.inbox) == 0 and any("at noon" in m.text for m in store.memories())


def test_the_figures_fragment_is_the_headers(mw: Middleware, proxy: str) -> None:
    converse(proxy, "pay-1", QUESTIONS[:1])
    wait_records(mw, 1)
    r = httpx.get(proxy + "/memwire/ui/figures")
    assert r.status_code == 200 and r.text.startswith('<dl class="figures" id="figures" data-src="/memwire/ui/figures"')
    assert 'data-figure="requests"><dt>requests</dt><dd>1</dd>' in r.text
    assert "default-src 'none'" in r.headers["content-security-policy"]


@pytest.mark.browser
def test_the_page_works_from_the_keyboard(mw: Middleware, store: MemoryStore, proxy: str) -> None:
    with browser_page(1280, 800) as page:
        from playwright.sync_api import expect

        page.goto(proxy + "/memwire/ui")
        page.keyboard.press("Tab")
        expect(page.locator("nav a").first).to_be_focused()  # the order of the page: nav, search, add, rows
        order: list[str] = []
        while "mtext" not in order and len(order) < 30:  # Tab until the first memory's text
            page.keyboard.press("Tab")
            order.append(page.evaluate("document.activeElement.getAttribute('name') || "
                                       "document.activeElement.className || document.activeElement.tagName"))
        assert order.index("q") < order.index("text") < order.index("mtext")
        style, width = page.evaluate("[getComputedStyle(document.activeElement).outlineStyle, "
                                     "parseFloat(getComputedStyle(document.activeElement).outlineWidth)]")
        assert style not in ("none", "") and width >= 2  # the focus is plain to see (not the thin default)
        focused = page.locator(".mtext:focus")
        before = focused.inner_text()
        page.keyboard.press("Enter")
        box = page.locator(".mtext input[name=text]")
        expect(box).to_be_focused()
        page.keyboard.press("Escape")
        expect(page.locator(".mtext:focus")).to_have_text(before)  # back on the text, unchanged
        page.keyboard.press("Enter")
        page.keyboard.press("End")
        page.keyboard.type(" (checked)")
        page.keyboard.press("Enter")
        expect(page.locator("#memories")).to_contain_text(before + " (checked)")
    assert any(m.text == before + " (checked)" for m in store.memories())


@pytest.mark.browser
@pytest.mark.parametrize(("width", "height", "name"), [(1280, 800, "page-1280.png"), (375, 812, "page-375.png")])
def test_the_page_reads_at_desktop_and_phone_widths(mw: Middleware, store: MemoryStore, proxy: str,
                                                    width: int, height: int, name: str, tmp_path: Path) -> None:
    """Screenshots go to ``MEMWIRE_TEST_SCREENSHOTS`` when set (docs/img: how the docs' are made)."""
    store.add("Code review needs one approval from the payments team", tags=["process"])
    store.inbox.add("The release branch is cut on Thursdays", tags=["captured"], cue="captured")
    converse(proxy, "pay-1", QUESTIONS)
    wait_records(mw, 3)
    with browser_page(width, height) as page:
        for path in ("/memwire/ui", "/memwire/ui/sessions", "/memwire/ui/sessions/pay-1"):
            page.goto(proxy + path)
            overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert overflow <= 0, (path, overflow)  # nothing wider than the screen: no sideways scrolling
            small = page.evaluate("Math.min(...[...document.querySelectorAll('td, dd, button')]"
                                  ".map(e => parseFloat(getComputedStyle(e).fontSize)))")
            assert small >= 12
        page.goto(proxy + "/memwire/ui")
        if width < 640:  # a phone: a memory's row is a card, its actions below its text
            text = page.locator("#memories tbody tr").first.locator("td").first.bounding_box()
            acts = page.locator("#memories tbody tr").first.locator("td.actions").bounding_box()
            assert text is not None and acts is not None and acts["y"] >= text["y"] + text["height"] - 1
        shots = Path(os.environ.get("MEMWIRE_TEST_SCREENSHOTS") or tmp_path)
        page.screenshot(path=str(shots / name), full_page=False)
        page.goto(proxy + "/memwire/ui/sessions/pay-1")
        page.screenshot(path=str(shots / name.replace("page-", "session-")), full_page=False)
    assert (shots / name).read_bytes()[:4] == b"\x89PNG"


@pytest.mark.browser
def test_the_page_asks_nothing_of_another_origin(mw: Middleware, proxy: str) -> None:
    r = httpx.get(proxy + "/memwire/ui")
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "form-action 'self'" in csp and "connect-src 'self'" in csp
    html = r.text
    assert not re.search(r'(src|href|action)="(https?:)?//', html)  # no other origin named anywhere
    assert "@import" not in html and "url(" not in html
    with browser_page(1280, 800) as page:
        requests: list[str] = []
        page.on("request", lambda req: requests.append(req.url))
        for path in ("/memwire/ui", "/memwire/ui/sessions", "/memwire/ui/archive"):
            page.goto(proxy + path)
        assert requests and all(u.startswith(proxy + "/") for u in requests), requests


@pytest.mark.browser
def test_the_key_is_asked_for_once(tmp_path: Any, mw: Middleware) -> None:
    with serve_in_thread(create_app(mw, openai_upstream="http://127.0.0.1:9", proxy_key="k-3")) as p:
        assert httpx.get(p.base_url + "/memwire/ui").status_code == 401
        with browser_page() as page:
            from playwright.sync_api import expect

            page.goto(p.base_url + "/memwire/ui")
            page.fill("input[name=key]", "wrong")
            page.click("button")
            expect(page.locator("body")).to_contain_text("not the proxy key")
            page.fill("input[name=key]", "k-3")
            page.click("button")
            expect(page.locator("#memories tbody tr")).to_have_count(3)  # in, and the cookie keeps it
            page.goto(p.base_url + "/memwire/ui/sessions")
            expect(page.locator("#sessions")).to_have_count(1)


def test_forms_from_elsewhere_and_other_namespaces_are_refused(mw: Middleware, proxy: str) -> None:
    mw.store_for("alice").add("Alice keeps her notes in Obsidian")
    r = httpx.post(proxy + "/memwire/ui/memories", data={"text": "planted by another site"},
                   headers={"origin": "http://evil.example"})
    assert r.status_code == 403 and not any("planted" in m.text for m in mw.store.memories())
    assert httpx.post(proxy + "/memwire/ui/memories", data={"text": "no origin at all"}).status_code == 403
    alice = httpx.get(proxy + "/memwire/ui", params={"ns": "alice"}).text
    assert "Obsidian" in alice and "Postgres" not in alice
    assert "Obsidian" not in httpx.get(proxy + "/memwire/ui").text
    bad = httpx.get(proxy + "/memwire/ui", params={"ns": "../etc"})
    assert bad.status_code == 400 and "invalid namespace" in bad.text
    secret = httpx.post(proxy + "/memwire/ui/memories", data={"text": "my key is sk-proj-" + "a" * 40},
                        headers={"origin": proxy})
    assert secret.status_code == 400 and "secret" in secret.text
    waiting = mw.store.inbox.add("The release branch is cut on Thursdays", cue="captured")
    inbox_secret = httpx.post(proxy + f"/memwire/ui/inbox/{waiting.id}/edit",
                              data={"text": "token sk-proj-" + "b" * 40}, headers={"origin": proxy})
    assert inbox_secret.status_code == 400 and "secret" in inbox_secret.text and waiting.id in mw.store.inbox
    assert not any("sk-proj" in m.text for m in mw.store.memories())
