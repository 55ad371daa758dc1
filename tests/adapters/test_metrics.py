"""/metrics figures from request records: values, the derived cache hit ratio, several processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from memwire.adapters.server._metrics import MULTIPROC_ENV, Metrics
from memwire.middleware._core import Injection
from memwire.middleware._records import record_of
from memwire.middleware._usage import Usage


def scrape(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    body, ctype = metrics.render()
    assert ctype.startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(body.decode()) for s in f.samples}


def feed(metrics: Metrics) -> None:
    inj = Injection("contextPerTurn", ("a", "b"), "x", 30, elapsed_ms=1.5, session="s")
    metrics.observe(record_of(inj, "anthropic.messages", "claude", 200, Usage(1000, 600, 100, 20)))
    metrics.observe(record_of(inj, "anthropic.messages", "claude", 200, Usage(1000, 900, 0, 20)))
    gated = Injection("contextPerTurn", skipped="gate", elapsed_ms=0.2, session="s")
    metrics.observe(record_of(gated, "openai.chat", "gpt-4o", 200, Usage(500, 0)))
    failed = Injection("startup", skipped="error", elapsed_ms=3.0, session="t")
    metrics.observe(record_of(failed, "openai.chat", "gpt-4o", 502, None))
    metrics.capture("captured")


def test_figures_after_a_scripted_conversation() -> None:
    metrics = Metrics(store_size=lambda: 56)
    feed(metrics)
    got = scrape(metrics)
    assert got[("memwire_requests_total", (("api", "anthropic.messages"), ("mode", "contextPerTurn"), ("provider", "anthropic"), ("status", "2xx")))] == 2
    assert got[("memwire_requests_total", (("api", "openai.chat"), ("mode", "startup"), ("provider", "openai"), ("status", "5xx")))] == 1
    assert got[("memwire_injections_total", (("mode", "contextPerTurn"), ("outcome", "injected"), ("provider", "anthropic")))] == 2
    assert got[("memwire_injections_total", (("mode", "contextPerTurn"), ("outcome", "gate"), ("provider", "openai")))] == 1
    assert got[("memwire_cached_tokens_total", (("mode", "contextPerTurn"), ("provider", "anthropic")))] == 1500
    assert got[("memwire_cache_write_tokens_total", (("mode", "contextPerTurn"), ("provider", "anthropic")))] == 100
    assert got[("memwire_cache_hit_ratio", (("mode", "contextPerTurn"), ("provider", "anthropic")))] == 0.75
    assert got[("memwire_cache_hit_ratio", (("mode", "contextPerTurn"), ("provider", "openai")))] == 0.0
    assert got[("memwire_memory_tokens_total", (("mode", "contextPerTurn"),))] == 60
    assert got[("memwire_added_latency_seconds_count", (("mode", "contextPerTurn"),))] == 3
    assert got[("memwire_added_latency_seconds_bucket", (("le", "0.002"), ("mode", "contextPerTurn")))] == 3
    assert got[("memwire_errors_total", (("kind", "memory"),))] == 1
    assert got[("memwire_errors_total", (("kind", "upstream"),))] == 1
    assert got[("memwire_captures_total", (("event", "captured"),))] == 1
    assert got[("memwire_store_memories", ())] == 56


def test_a_store_that_cannot_be_read_leaves_its_figure_out() -> None:
    metrics = Metrics(store_size=lambda: 1 // 0)
    feed(metrics)
    got = scrape(metrics)
    assert not any(name == "memwire_store_memories" for name, _ in got) and got


def test_workers_figures_add_up(tmp_path: Path) -> None:
    """Two worker processes count; a third, answering the scrape, reports the sum."""
    env = {**os.environ, MULTIPROC_ENV: str(tmp_path)}
    worker = ("from tests.adapters.test_metrics import feed; from memwire.adapters.server._metrics import Metrics; "
              "feed(Metrics())")
    scraper = ("from memwire.adapters.server._metrics import Metrics; import sys; "
               "sys.stdout.write(Metrics().render()[0].decode())")
    root = Path(__file__).resolve().parents[2]
    for _ in range(2):
        subprocess.run([sys.executable, "-c", worker], env=env, cwd=root, check=True)
    body = subprocess.run([sys.executable, "-c", scraper], env=env, cwd=root, check=True, capture_output=True,
                          text=True).stdout
    got = {(s.name, tuple(sorted(s.labels.items()))): s.value
           for f in text_string_to_metric_families(body) for s in f.samples}
    assert got[("memwire_injections_total", (("mode", "contextPerTurn"), ("outcome", "injected"), ("provider", "anthropic")))] == 4
    assert got[("memwire_cache_hit_ratio", (("mode", "contextPerTurn"), ("provider", "anthropic")))] == 0.75
