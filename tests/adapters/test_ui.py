"""/memwire/ui in a real browser (Debian's Chromium through Playwright): it loads, lists the
memories, adding, editing, pinning and forgetting through its forms work, the session page charts
the provider's cached share, the key is asked for, and namespaces stay apart."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from memwire import MemoryStore, Middleware
from memwire._sim.fake_provider import FakeProvider, serve_in_thread
from memwire.adapters.server._proxy import create_app

from ..browser import browser_page
from ..replies import wait_records

SYSTEM = "You are a careful coding assistant for the payments service. " * 400


@pytest.fixture
def proxy(mw: Middleware) -> Iterator[str]:
    fake = FakeProvider(reply=lambda body, api: "Noted.")
    with serve_in_thread(fake) as upstream, serve_in_thread(create_app(mw, openai_upstream=upstream.base_url)) as p:
        yield p.base_url


def converse(base: str, session: str, n: int, **headers: str) -> None:
    client = openai.OpenAI(base_url=base + "/v1", api_key="sk-fake", max_retries=0,
                           default_headers={"x-memwire-session": session, **headers})
    messages: list[Any] = [{"role": "system", "content": SYSTEM}]
    for q in ["Which port does the staging database use?", "When do deploys go out?", "Tabs or spaces?"][:n]:
        messages.append({"role": "user", "content": q})
        messages.append({"role": "assistant", "content": client.chat.completions.create(
            model="gpt-4o", messages=messages).choices[0].message.content})


def test_the_page_tends_memories_and_shows_sessions(mw: Middleware, store: MemoryStore, proxy: str,
                                                    tmp_path: Any) -> None:
    converse(proxy, "pay-1", 3)
    wait_records(mw, 3)
    with browser_page() as page:
        from playwright.sync_api import expect  # waits for the page a click loads (no sleeps, no races)

        page.goto(proxy + "/memwire/ui")
        memories = page.locator("#memories")
        expect(memories.locator("tbody tr")).to_have_count(3)
        expect(memories).to_contain_text("Postgres 15 on port 5433")
        page.fill("#add input[name=text]", "The payments service is owned by team Kestrel")
        page.fill("#add input[name=tags]", "owner, team")
        page.click("#add button")
        expect(memories).to_contain_text("owned by team Kestrel")
        added = next(m for m in store.memories() if "Kestrel" in m.text)
        assert added.tags == ("owner", "team")
        row = page.locator(f'#memories tr[data-id="{added.id}"]')
        row.locator("form.edit input[name=text]").fill("The payments service is owned by team Osprey")
        row.locator("form.edit button").click()
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
        page.click("form[method=get] button")
        expect(memories.locator("tbody tr").first).to_contain_text("Deploys go out on Tuesdays")
        assert memories.locator("tbody tr").first.inner_text().startswith("Deploys go out on Tuesdays")
        page.click("nav >> text=sessions")
        page.click("#sessions >> text=pay-1")
        expect(page.locator("#requests tbody tr")).to_have_count(3)
        expect(page.locator('svg[data-chart="pay-1"] circle')).to_have_count(3)
        expect(page.locator("#requests")).to_contain_text("Postgres 15 on port 5433")  # the block, as memories
        shot = tmp_path / "session.png"
        page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:4] == b"\x89PNG"


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
