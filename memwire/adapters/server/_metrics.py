"""``/metrics``: the proxy's figures in the Prometheus text format, with ``prometheus_client``.

Counted from each request's :class:`~memwire.middleware._records.Record` as its reply ends:
requests, injections by mode and outcome (``injected`` or the skip reason), memwire's added latency,
the provider's prompt, cached, cache-write and output tokens by mode and provider, memory-block
tokens, errors (memory failures, upstream failures), capture events and the background work shed
under load (``memwire_capture_dropped_total{kind}``: distillation, telemetry, records, replies).
Derived when scraped: the cache hit ratio (cached / prompt tokens) by mode and provider, and the default store's size.

Several worker processes (``memwire proxy --workers N``) share their figures through
``prometheus_client``'s multiprocess mode: the parent sets ``PROMETHEUS_MULTIPROC_DIR`` before the
workers start (``multiprocess_dir``), each worker writes its values there, and whichever worker
answers a scrape adds them all up.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from ..._worker import on_dropped
from ...middleware._records import Record

__all__ = ["MULTIPROC_ENV", "Metrics"]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_TOKENS = ("prompt", "cached", "cache_write", "output")
_SHED_KINDS = ("distillation", "telemetry", "records", "replies")


def _status_class(status: int) -> str:
    return f"{status // 100}xx" if 100 <= status < 600 else "none"


class Metrics:
    """The proxy's Prometheus metrics. ``observe(record)`` counts one request (it is a listener of
    :class:`~memwire.middleware._records.Records`); ``render()`` is a scrape's body and type.
    ``store_size``: a function giving the default store's number of memories (read when scraped)."""

    def __init__(self, store_size: Callable[[], int] | None = None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.multiprocess = bool(os.environ.get(MULTIPROC_ENV))
        self.registry = CollectorRegistry()
        self.store_size = store_size
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        reg = self.registry
        self.requests = Counter("memwire_requests", "Requests on the memory routes",
                                ["api", "mode", "provider", "status"], registry=reg)
        self.injections = Counter("memwire_injections", "Requests by what memwire did: injected, or why not",
                                  ["mode", "provider", "outcome"], registry=reg)
        self.latency = Histogram("memwire_added_latency_seconds", "Time memwire added before the request left",
                                 ["mode"], buckets=_LATENCY_BUCKETS, registry=reg)
        self.tokens = {kind: Counter(f"memwire_{kind}_tokens", f"The provider's {kind.replace('_', ' ')} tokens",
                                     ["mode", "provider"], registry=reg) for kind in _TOKENS}
        self.block_tokens = Counter("memwire_memory_tokens", "Tokens of the memory blocks memwire inserted",
                                    ["mode"], registry=reg)
        self.errors = Counter("memwire_errors", "Failures: memory (the request went unchanged) or upstream",
                              ["kind"], registry=reg)
        self.captures = Counter("memwire_captures", "Capture events: captured, reinforced, forgotten, ...",
                                ["event"], registry=reg)
        self.dropped = Counter("memwire_capture_dropped", "Background work shed under load, by kind: distillation, "
                               "telemetry, records, replies (an explicit capture is never shed)", ["kind"],
                               registry=reg)
        for kind in _SHED_KINDS:  # shown at 0 until something is shed
            self._of(self.dropped, kind)
        on_dropped(self.shed)

    def _of(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, kept: prometheus_client checks and locks on every call, and
        a request makes a dozen (a handful of label sets recur)."""
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def observe(self, r: Record) -> None:
        mode, of = r.mode or "none", self._of
        of(self.requests, r.api, mode, r.provider, _status_class(r.status)).inc()
        of(self.injections, mode, r.provider, "injected" if r.injected else (r.skipped or "passthrough")).inc()
        if r.mode:
            of(self.latency, mode).observe(r.added_ms / 1000)
        if r.block_tokens:
            of(self.block_tokens, mode).inc(r.block_tokens)
        if r.prompt_tokens is not None:
            for kind in _TOKENS:
                of(self.tokens[kind], mode, r.provider).inc(getattr(r, f"{kind}_tokens") or 0)
        if r.skipped in ("error", "timeout"):
            of(self.errors, "memory").inc()
        if r.status >= 500 or r.status == 0:
            of(self.errors, "upstream").inc()

    def capture(self, event: str) -> None:
        self.captures.labels(event).inc()

    def shed(self, kind: str, count: int = 1) -> None:
        """``count`` items of ``kind`` were shed (``memwire._worker.dropped``)."""
        self._of(self.dropped, kind).inc(count)

    def render(self) -> tuple[bytes, str]:
        """The scrape: every worker's figures (multiprocess mode) or this process's, and the
        derived ones."""
        from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

        if self.multiprocess:
            from prometheus_client import multiprocess

            source = CollectorRegistry()
            multiprocess.MultiProcessCollector(source)
        else:
            source = self.registry
        out = CollectorRegistry(auto_describe=False)
        out.register(_Derived(source, self.store_size))
        return generate_latest(out), CONTENT_TYPE_LATEST


class _Derived:
    """Every metric of ``source``, plus the cache hit ratio and the store size."""

    def __init__(self, source: Any, store_size: Callable[[], int] | None) -> None:
        self.source, self.store_size = source, store_size

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        sums: dict[str, dict[tuple[str, str], float]] = defaultdict(lambda: defaultdict(float))
        for family in self.source.collect():
            for s in family.samples:
                if s.name in ("memwire_prompt_tokens_total", "memwire_cached_tokens_total"):
                    sums[s.name][(s.labels["mode"], s.labels["provider"])] += s.value
            yield family
        ratio = GaugeMetricFamily("memwire_cache_hit_ratio", "Share of prompt tokens the provider read from its cache",
                                  labels=["mode", "provider"])
        for key, prompt in sorted(sums["memwire_prompt_tokens_total"].items()):
            if prompt:
                ratio.add_metric(list(key), sums["memwire_cached_tokens_total"][key] / prompt)
        yield ratio
        if self.store_size is not None:
            try:
                size = self.store_size()
            except Exception:
                return
            yield GaugeMetricFamily("memwire_store_memories", "Memories in the default namespace's store", value=size)
