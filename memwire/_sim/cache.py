"""A prompt-cache simulator: the providers' published caching rules applied to token sequences.

It answers one question for tests, demos and benchmarks: *given this stream of requests, how many
input tokens would the provider have served from its prompt cache, and what would that cost?*
Nothing here is the providers' code; it is our reading of their documentation, written down below
so that a reader can disagree with a specific rule.

OpenAI (automatic prefix caching)
    - Every request writes its whole prompt to the cache; nothing has to be marked.
    - A request reads the longest prefix it shares with any earlier request (same model), counted
      in 128-token increments (rounded down).
    - Caching applies only to prompts of at least 1,024 tokens, and a hit is counted only when the
      cached amount is at least 1,024 tokens.
    - Reported as ``usage.prompt_tokens_details.cached_tokens`` (Responses:
      ``usage.input_tokens_details.cached_tokens``). Writes cost nothing extra; cached tokens are
      billed at a discount (0.5 of the input price here, configurable).
    - Implementation: the prompt is cut into 128-token chunks and each chunk gets a hash chained
      on the previous one (a hash of the whole prefix up to it). The hashes of every prompt are
      stored; a new prompt's hit is its longest run of stored chained hashes. This is exact:
      ``floor(LCP / 128) * 128`` over all earlier prompts.

Anthropic (explicit ``cache_control`` breakpoints)
    - The prompt is rendered in the order tools, system, messages; a request is a sequence of
      content blocks (each tool, each system block, each content block of each message).
    - Only blocks marked with ``cache_control`` are breakpoints, at most 4 per request (a top-level
      ``cache_control`` — automatic caching — puts one on the last block and counts toward the 4).
      More is an error (HTTP 400: "A maximum of 4 blocks with cache_control may be provided").
    - Reading: for each breakpoint on block ``i`` the provider looks for a previously written
      prefix ending at a block boundary, starting at ``i`` and walking back one block at a time to
      ``i - 19`` (20 positions: the documented "about 20 blocks" lookback). The first (longest) one
      found is that breakpoint's hit; the request's read is the longest hit over all breakpoints.
      Boundaries further back are not checked — a conversation that grew by more than 20 blocks
      since its last written breakpoint misses, which is why clients add extra breakpoints.
    - Writing: the prefix ending at each breakpoint is written (a hit refreshes it). Only prefixes
      ending at a breakpoint ever enter the cache; the lookback reads, it never writes.
    - Minimum: a prefix shorter than the model's minimum cacheable length is neither written nor
      read (1,024 tokens for most models; 2,048 for Haiku 3/3.5 and Sonnet 4.6; 4,096 for Opus
      4.5/4.6 and Haiku 4.5 — see ``anthropic_min_tokens``; override with ``min_tokens``).
    - Accounting, with ``R`` the read length and ``E`` the end of the last breakpoint's prefix:
      ``cache_read_input_tokens = R``; ``cache_creation_input_tokens = E - R`` when the last
      breakpoint's prefix is cacheable (else 0); ``input_tokens`` = everything else (the tokens
      after the last breakpoint, or the whole prompt when nothing is cached).
    - Costs: cache reads 0.1 of the input price, cache writes 1.25 (the 5-minute TTL price; 1-hour
      writes, which cost 2.0, are not modelled separately).
    - Not modelled: changes to ``tool_choice``, images or thinking settings invalidating the
      message part of the cache, and Anthropic's real tokenizer (we count with tiktoken).

Both caches are kept per model. Entries never expire unless a ``ttl`` (seconds) is given, in which
case an entry lives ``ttl`` seconds from its last write or hit (Anthropic's default is 300).
"""

from __future__ import annotations

import hashlib
import time
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Literal

from memwire._errors import ConfigError, RequestFormatError
from memwire._sim.serialize import Block, count_breakpoints, request_blocks
from memwire.policies._tokens import get_encoder

__all__ = [
    "ANTHROPIC_COSTS",
    "OPENAI_COSTS",
    "CacheRuleError",
    "CacheSimulator",
    "CostModel",
    "Provider",
    "Usage",
    "anthropic_min_tokens",
]

Provider = Literal["openai", "anthropic"]

OPENAI_MIN_TOKENS = 1024
OPENAI_INCREMENT = 128
ANTHROPIC_MAX_BREAKPOINTS = 4
ANTHROPIC_LOOKBACK = 20


class CacheRuleError(RequestFormatError):
    """A request breaks a provider caching rule (e.g. more than 4 Anthropic breakpoints)."""


@dataclass(frozen=True)
class CostModel:
    """Price per input token, in units of the uncached input price."""

    input: float = 1.0
    cache_read: float = 0.5
    cache_write: float = 1.0

    def __post_init__(self) -> None:
        for name in ("input", "cache_read", "cache_write"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0:
                raise ConfigError(f"CostModel.{name} must be a number >= 0, got {value!r}")

    @classmethod
    def for_provider(cls, provider: str) -> CostModel:
        if provider == "openai":
            return OPENAI_COSTS
        if provider == "anthropic":
            return ANTHROPIC_COSTS
        raise ConfigError(f"unknown provider {provider!r}; expected 'openai' or 'anthropic'")

    def cost(self, usage: Usage) -> float:
        return (
            self.input * usage.input_tokens
            + self.cache_read * usage.cache_read
            + self.cache_write * usage.cache_write
        )

    def uncached_cost(self, usage: Usage) -> float:
        """What the same prompt would cost if the provider had no cache at all."""
        return self.input * usage.prompt_tokens


OPENAI_COSTS = CostModel(input=1.0, cache_read=0.5, cache_write=1.0)
ANTHROPIC_COSTS = CostModel(input=1.0, cache_read=0.1, cache_write=1.25)


@dataclass(frozen=True)
class Usage:
    """Input-token accounting of one request (or a sum of several).

    ``prompt_tokens`` counts every input token; it splits into ``cache_read`` (served from the
    cache), ``cache_write`` (newly written; Anthropic only — OpenAI writes are free and reported
    as plain input) and ``input_tokens`` (the rest, at the full price).
    """

    provider: str
    prompt_tokens: int
    cache_read: int = 0
    cache_write: int = 0
    output_tokens: int = 0

    @property
    def input_tokens(self) -> int:
        """Uncached, unwritten input tokens: Anthropic's ``input_tokens``."""
        return self.prompt_tokens - self.cache_read - self.cache_write

    @property
    def cached_tokens(self) -> int:
        """OpenAI's ``cached_tokens``; the same number as ``cache_read``."""
        return self.cache_read

    @property
    def hit_rate(self) -> float:
        return self.cache_read / self.prompt_tokens if self.prompt_tokens else 0.0

    def cost(self, costs: CostModel | None = None) -> float:
        return (costs or self._costs()).cost(self)

    def uncached_cost(self, costs: CostModel | None = None) -> float:
        return (costs or self._costs()).uncached_cost(self)

    def _costs(self) -> CostModel:
        return CostModel.for_provider(self.provider)

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        if other.provider != self.provider:
            raise ValueError(f"cannot add {self.provider} usage to {other.provider} usage")
        return Usage(
            self.provider,
            self.prompt_tokens + other.prompt_tokens,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
            self.output_tokens + other.output_tokens,
        )

    @classmethod
    def total(cls, usages: Iterable[Usage], provider: str = "openai") -> Usage:
        out = None
        for usage in usages:
            out = usage if out is None else out + usage
        return out if out is not None else cls(provider, 0)


def anthropic_min_tokens(model: str | None) -> int:
    """Minimum cacheable prompt length per Claude model, as published; 1,024 when unknown."""
    name = (model or "").lower().replace(".", "-").rsplit("/", 1)[-1]
    if any(tag in name for tag in ("opus-4-5", "opus-4-6", "haiku-4-5")):
        return 4096
    if any(tag in name for tag in ("sonnet-4-6", "3-haiku", "3-5-haiku", "haiku-3")):
        return 2048
    return 1024


def _chain(prev: bytes, tokens: Sequence[int]) -> bytes:
    """Hash of a prefix: the previous prefix's hash extended by these tokens."""
    return hashlib.blake2b(prev + array("q", tokens).tobytes(), digest_size=16).digest()


@dataclass
class _Store:
    """Written prefix hashes of one model, with the time each was last written or hit."""

    entries: dict[bytes, float] = field(default_factory=dict)


class CacheSimulator:
    """A provider's prompt cache, fed one request at a time.

    >>> sim = CacheSimulator("openai")
    >>> sim.observe_tokens(list(range(2006))).cached_tokens
    0
    >>> sim.observe_tokens(list(range(2006))).cached_tokens
    1920
    """

    def __init__(
        self,
        provider: Provider = "openai",
        model: str | None = None,
        *,
        min_tokens: int | None = None,
        ttl: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if provider not in ("openai", "anthropic"):
            raise ConfigError(f"unknown provider {provider!r}; expected 'openai' or 'anthropic'")
        if min_tokens is not None and (not isinstance(min_tokens, int) or min_tokens < 0):
            raise ConfigError(f"min_tokens must be an int >= 0, got {min_tokens!r}")
        if ttl is not None and ttl <= 0:
            raise ConfigError(f"ttl must be > 0 seconds or None, got {ttl!r}")
        self.provider: Provider = provider
        self.model = model
        self.min_tokens = min_tokens
        self.ttl = ttl
        self._clock = clock
        self._stores: dict[str, _Store] = {}
        self.history: list[Usage] = []

    # -- public --------------------------------------------------------------------------------

    def observe(self, body: Mapping[str, Any], api: str | None = None) -> Usage:
        """Account one request body (``api``: "openai.chat", "openai.responses",
        "anthropic.messages"; inferred from the provider and body when omitted)."""
        api = api or self._default_api(body)
        model = body.get("model") if isinstance(body.get("model"), str) else self.model
        if self.provider == "anthropic":
            found = count_breakpoints(body)
            if found > ANTHROPIC_MAX_BREAKPOINTS:
                raise CacheRuleError(
                    f"A maximum of {ANTHROPIC_MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                    f"Found {found}."
                )
        return self.observe_blocks(request_blocks(body, api, get_encoder(model)), model=model)

    def observe_tokens(
        self,
        tokens: Sequence[int],
        *,
        boundaries: Iterable[int] = (),
        breakpoints: Iterable[int] = (),
        model: str | None = None,
    ) -> Usage:
        """Account a raw token sequence.

        ``boundaries``: offsets where one block ends and the next starts (default: one block).
        ``breakpoints``: indices of the blocks carrying an Anthropic ``cache_control`` (negative
        indices count from the end: ``breakpoints=[-1]`` marks the last block).
        """
        cuts = sorted({0, len(tokens), *(b for b in boundaries if 0 < b < len(tokens))})
        spans = list(pairwise(cuts)) or [(0, 0)]
        marked = {i % len(spans) for i in breakpoints}
        blocks = [Block(tuple(tokens[a:b]), i in marked) for i, (a, b) in enumerate(spans)]
        return self.observe_blocks(blocks, model=model)

    def observe_blocks(self, blocks: Sequence[Block], *, model: str | None = None) -> Usage:
        model = model or self.model
        usage = self._openai(blocks, model) if self.provider == "openai" else self._anthropic(blocks, model)
        self.history.append(usage)
        return usage

    def min_tokens_for(self, model: str | None) -> int:
        if self.min_tokens is not None:
            return self.min_tokens
        return OPENAI_MIN_TOKENS if self.provider == "openai" else anthropic_min_tokens(model)

    def total(self) -> Usage:
        """The sum of every request observed so far."""
        return Usage.total(self.history, self.provider)

    def reset(self) -> None:
        """Forget the cache and the history."""
        self._stores.clear()
        self.history.clear()

    # -- rules ---------------------------------------------------------------------------------

    def _default_api(self, body: Mapping[str, Any]) -> str:
        if self.provider == "anthropic":
            return "anthropic.messages"
        return "openai.responses" if "input" in body and "messages" not in body else "openai.chat"

    def _store(self, model: str | None) -> _Store:
        return self._stores.setdefault(model or "", _Store())

    def _live(self, store: _Store, key: bytes, now: float) -> bool:
        written = store.entries.get(key)
        if written is None:
            return False
        return self.ttl is None or now - written <= self.ttl

    def _openai(self, blocks: Sequence[Block], model: str | None) -> Usage:
        tokens = [t for block in blocks for t in block.tokens]
        store, now, minimum = self._store(model), self._clock(), self.min_tokens_for(model)
        hashes: list[bytes] = []
        prev = b""
        for start in range(0, len(tokens) - OPENAI_INCREMENT + 1, OPENAI_INCREMENT):
            prev = _chain(prev, tokens[start : start + OPENAI_INCREMENT])
            hashes.append(prev)
        cached = 0
        if len(tokens) >= minimum:
            for k, key in enumerate(hashes, start=1):
                if not self._live(store, key, now):
                    break  # chained hashes: no longer prefix can match either
                cached = k * OPENAI_INCREMENT
            if cached < minimum:
                cached = 0
        for key in hashes:  # every request writes (or refreshes) its whole prompt
            store.entries[key] = now
        return Usage("openai", len(tokens), cache_read=cached)

    def _anthropic(self, blocks: Sequence[Block], model: str | None) -> Usage:
        breakpoints = [i for i, block in enumerate(blocks) if block.breakpoint]
        if len(breakpoints) > ANTHROPIC_MAX_BREAKPOINTS:
            raise CacheRuleError(
                f"A maximum of {ANTHROPIC_MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {len(breakpoints)}."
            )
        store, now, minimum = self._store(model), self._clock(), self.min_tokens_for(model)
        keys: list[bytes] = []
        ends: list[int] = []  # ends[i]: token length of the prefix ending with block i
        prev, length = b"", 0
        for block in blocks:
            prev = _chain(prev, block.tokens)
            length += len(block.tokens)
            keys.append(prev)
            ends.append(length)

        read, read_key = 0, None
        for bp in breakpoints:
            for j in range(bp, max(bp - ANTHROPIC_LOOKBACK, -1), -1):
                if ends[j] < minimum:
                    break  # earlier prefixes are shorter still: never cached
                if self._live(store, keys[j], now):
                    if ends[j] > read:
                        read, read_key = ends[j], keys[j]
                    break

        write = 0
        if breakpoints and ends[breakpoints[-1]] >= minimum:
            write = ends[breakpoints[-1]] - read
            for bp in breakpoints:
                if ends[bp] >= minimum:
                    store.entries[keys[bp]] = now
        if read_key is not None:
            store.entries[read_key] = now  # a hit refreshes the entry's TTL
        return Usage("anthropic", length, cache_read=read, cache_write=write)
