"""The cache figures of real traffic, per mode and provider: what ``memwire stats --requests``
prints, from a running proxy's ``/metrics`` (every worker's figures added up) or from a request
log (``memwire proxy --request-log FILE``).

Cost units are the demo's (``memwire demo``): uncached input 1.0; OpenAI cached input 0.5;
Anthropic cache reads 0.1 and cache writes 1.25. *vs no cache* is the cost over what the same
prompts would cost if the provider had no cache at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..middleware._records import Record
from .cache import Usage

__all__ = ["Figures", "from_metrics", "from_records"]

@dataclass
class Figures:
    """One mode's traffic to one provider."""

    mode: str
    provider: str
    requests: int = 0
    injected: int = 0           # requests that got a memory block
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def cached_ratio(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def _usage(self) -> Any:
        """These tokens as the demo's cache simulator counts them: its cost model prices them."""
        return Usage(self.provider, self.prompt_tokens, self.cached_tokens, self.cache_write_tokens)

    @property
    def cost(self) -> float:
        return float(self._usage().cost())

    @property
    def vs_uncached(self) -> float:
        return self.cost / self._usage().uncached_cost() if self.prompt_tokens else 1.0

    def as_json(self) -> dict[str, object]:
        return {"mode": self.mode, "provider": self.provider, "requests": self.requests, "injected": self.injected,
                "prompt_tokens": self.prompt_tokens, "cached_tokens": self.cached_tokens,
                "cache_write_tokens": self.cache_write_tokens, "cached_ratio": round(self.cached_ratio, 4),
                "cost_units": round(self.cost, 1), "vs_uncached": round(self.vs_uncached, 3)}


def _sorted(by: dict[tuple[str, str], Figures]) -> list[Figures]:
    return [by[k] for k in sorted(by)]


def from_records(records: Iterable[Record]) -> list[Figures]:
    """Figures per (mode, provider) of request records (requests memwire passed through: mode "none")."""
    by: dict[tuple[str, str], Figures] = {}
    for r in records:
        f = by.setdefault((r.mode or "none", r.provider), Figures(r.mode or "none", r.provider))
        f.requests += 1
        f.injected += r.injected > 0
        if r.prompt_tokens is not None:
            f.prompt_tokens += r.prompt_tokens
            f.cached_tokens += r.cached_tokens or 0
            f.cache_write_tokens += r.cache_write_tokens or 0
    return _sorted(by)


def from_metrics(text: str) -> list[Figures]:
    """Figures per (mode, provider) of a ``/metrics`` scrape."""
    from prometheus_client.parser import text_string_to_metric_families

    by: dict[tuple[str, str], Figures] = {}

    def row(mode: str, provider: str) -> Figures:
        return by.setdefault((mode, provider), Figures(mode, provider))

    for family in text_string_to_metric_families(text):
        for s in family.samples:
            mode, provider = s.labels.get("mode", ""), s.labels.get("provider", "")
            if s.name in ("memwire_prompt_tokens_total", "memwire_cached_tokens_total",
                          "memwire_cache_write_tokens_total"):
                field = s.name.removeprefix("memwire_").removesuffix("_total")
                f = row(mode, provider)
                setattr(f, field, getattr(f, field) + int(s.value))
            elif s.name == "memwire_requests_total":
                row(mode, provider).requests += int(s.value)
            elif s.name == "memwire_injections_total" and s.labels.get("outcome") == "injected":
                row(mode, provider).injected += int(s.value)
    return _sorted(by)
