"""Live figures from real traffic: the openai and anthropic SDKs through the proxy (a real server)
to the fake provider, whose cache simulator reports usage; then /metrics, the records, /memwire/healthz."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from memwire import MemoryStore, Middleware
from memwire._sim.fake_provider import FakeProvider, serve_in_thread
from memwire.adapters.server._proxy import create_app

from ..replies import wait_records

SYSTEM = "You are a careful coding assistant for the payments service. " * 400  # a cacheable prefix
QUESTIONS = ["Which port does the staging database use?", "When do deploys go out?", "thanks!",
             "Tabs or spaces for this Python file?"]


@pytest.fixture
def served(mw: Middleware) -> Iterator[tuple[FakeProvider, str]]:
    fake = FakeProvider(reply=lambda body, api: "Noted.")
    with serve_in_thread(fake) as upstream, serve_in_thread(create_app(
            mw, openai_upstream=upstream.base_url, anthropic_upstream=upstream.base_url, proxy_key="k-1")) as proxy:
        yield fake, proxy.base_url


def converse(api: str, base: str, stream: bool) -> None:
    """One conversation of four turns (one a social closer), streamed or not."""
    messages: list[dict[str, Any]] = []
    headers = {"x-memwire-key": "k-1", "x-memwire-session": f"{api}-{stream}"}
    for q in QUESTIONS:
        messages.append({"role": "user", "content": q})
        if api == "openai":
            c = openai.OpenAI(base_url=base + "/v1", api_key="sk-fake", default_headers=headers, max_retries=0)
            chat = [{"role": "system", "content": SYSTEM}, *messages]
            if stream:
                text = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
                    model="gpt-4o", messages=chat, stream=True, stream_options={"include_usage": True}) if ch.choices)
            else:
                text = c.chat.completions.create(model="gpt-4o", messages=chat).choices[0].message.content
        else:
            a = anthropic.Anthropic(base_url=base, api_key="sk-ant-fake", default_headers=headers, max_retries=0)
            kw = {"model": "claude-sonnet-4-5", "max_tokens": 50, "messages": messages,
                  "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]}
            if stream:
                with a.messages.stream(**kw) as s:
                    text = s.get_final_text()
            else:
                text = a.messages.create(**kw).content[0].text
        messages.append({"role": "assistant", "content": text})


def scrape(base: str, **headers: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = httpx.get(base + "/metrics", headers=headers)
    assert r.status_code == 200, r.text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(r.text) for s in f.samples}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_the_providers_usage_becomes_records_and_metrics(mw: Middleware, served: tuple[FakeProvider, str],
                                                        stream: bool) -> None:
    fake, base = served
    converse("openai", base, stream)
    converse("anthropic", base, stream)
    wait_records(mw, 8)
    records = mw.records.recent()
    reported = fake.usages()
    assert [(r.prompt_tokens, r.cached_tokens, r.cache_write_tokens) for r in records] == [
        (u.prompt_tokens, u.cache_read, u.cache_write) for u in reported]
    assert [r.skipped for r in records][2::4] == ["gate", "gate"]  # "thanks!" got no memory
    assert all(r.session for r in records) and {r.model for r in records} == {"gpt-4o", "claude-sonnet-4-5"}
    got = scrape(base, **{"x-memwire-key": "k-1"})
    for provider, usages in (("openai", reported[:4]), ("anthropic", reported[4:])):
        prompt, cached = sum(u.prompt_tokens for u in usages), sum(u.cache_read for u in usages)
        assert cached > 0  # the figures are the simulator's, and its cache hit
        label = (("mode", "contextPerTurn"), ("provider", provider))
        assert got[("memwire_prompt_tokens_total", label)] == prompt
        assert got[("memwire_cached_tokens_total", label)] == cached
        assert got[("memwire_cache_hit_ratio", label)] == pytest.approx(cached / prompt)
    for provider in ("openai", "anthropic"):
        outcome = {dict(labels)["outcome"]: n for (name, labels), n in got.items()
                   if name == "memwire_injections_total" and dict(labels)["provider"] == provider}
        assert outcome["gate"] == 1 and outcome["injected"] >= 2 and sum(outcome.values()) == 4
    assert got[("memwire_added_latency_seconds_count", (("mode", "contextPerTurn"),))] == 8
    assert got[("memwire_store_memories", ())] == 3


def test_metrics_need_the_proxy_key_and_health_does_not(served: tuple[FakeProvider, str]) -> None:
    _, base = served
    assert httpx.get(base + "/metrics").status_code == 401
    assert httpx.get(base + "/metrics", headers={"authorization": "Bearer wrong"}).status_code == 401
    assert scrape(base, authorization="Bearer k-1") is not None
    r = httpx.get(base + "/memwire/healthz")
    assert (r.status_code, r.json()) == (200, {"status": "ok", "store": "readable"})


def test_health_names_an_unreadable_store(tmp_path: Path) -> None:
    (tmp_path / "mem").write_text("a file where the memory directory should be")
    mw = Middleware(store=MemoryStore(tmp_path / "mem"), mode="contextPerTurn")
    with serve_in_thread(create_app(mw, openai_upstream="http://127.0.0.1:9")) as proxy:
        r = httpx.get(proxy.base_url + "/memwire/healthz")
    assert (r.status_code, r.json()) == (200, {"status": "ok", "store": "unreadable"})


def test_an_unreachable_upstream_is_counted(mw: Middleware) -> None:
    with serve_in_thread(create_app(mw, openai_upstream="http://127.0.0.1:9")) as proxy:
        r = httpx.post(proxy.base_url + "/v1/chat/completions", json={
            "model": "gpt-4o", "messages": [{"role": "user", "content": "Which port does staging use?"}]})
        assert r.status_code == 502
        wait_records(mw, 1)
        got = scrape(proxy.base_url)
    assert got[("memwire_errors_total", (("kind", "upstream"),))] == 1
    assert mw.records.recent()[-1].status == 502
