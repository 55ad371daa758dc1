"""Under load only distillation is shed, and each shed exchange is counted on /metrics
(``memwire_capture_dropped_total{kind}``); what people ask to remember is stored all the same."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from memwire import MemoryStore, Middleware
from memwire._sim.fake_provider import FakeProvider
from memwire.adapters.server._proxy import create_app
from memwire.middleware import _capture
from memwire.middleware._capture import Capture
from memwire.middleware._distill import Distiller


async def test_shed_distillation_is_counted_and_statements_are_kept(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_capture, "MAX_PENDING", 1)
    entered, release = threading.Event(), threading.Event()

    def slow_model(messages: list[dict[str, str]]) -> str:
        entered.set()
        release.wait(30)
        return '{"memories": []}'

    store = MemoryStore(tmp_path / "mem")
    mw = Middleware(store=store, mode="contextPerTurn")
    mw.capture = Capture("auto", distiller=Distiller(slow_model))
    mw.warm_up(("gpt-4o-mini",))
    app = create_app(mw, openai_upstream="http://openai.upstream", anthropic_upstream="http://anthropic.upstream",
                     client=httpx.AsyncClient(transport=httpx.ASGITransport(app=FakeProvider())))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy.test") as client:
        async def second_turn(n: int) -> None:
            messages = [{"role": "user", "content": f"Let us plan release {n}."},
                        {"role": "assistant", "content": "Sure."},
                        {"role": "user", "content": f"Remember that release {n} ships from branch rel-{n}."}]
            r = await client.post("/v1/chat/completions", json={"model": "gpt-4o-mini", "messages": messages},
                                  headers={"x-memwire-session": f"s{n}"})
            assert r.status_code == 200

        await second_turn(0)
        assert entered.wait(10)  # the worker is in the first distillation
        for n in range(1, 5):  # one more waits (MAX_PENDING = 1); three are shed
            await second_turn(n)
        release.set()
        mw.flush(30)
        scrape = (await client.get("/metrics")).text
    got = {(s.name, tuple(sorted(s.labels.items()))): s.value
           for f in text_string_to_metric_families(scrape) for s in f.samples}
    assert got[("memwire_capture_dropped_total", (("kind", "distillation"),))] == 3
    assert got[("memwire_capture_dropped_total", (("kind", "telemetry"),))] == 0
    stored = sorted(m.text for m in store.memories() if "captured" in m.tags)
    assert stored == [f"Release {n} ships from branch rel-{n}." for n in range(5)]  # never shed
