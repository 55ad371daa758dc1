"""What the provider says a call cost: prompt tokens, how many of them it read from its prompt
cache, how many it wrote to it, and output tokens, from a reply of any of the three APIs.

The fields differ by API; :class:`Usage` is one shape for all of them:

- OpenAI chat completions: ``usage.prompt_tokens`` (cached included) and
  ``usage.prompt_tokens_details.cached_tokens`` (DeepSeek-style servers:
  ``prompt_cache_hit_tokens``); streamed, in the last chunk when the caller asked for it
  (``stream_options.include_usage``);
- Anthropic messages: ``input_tokens`` counts only what was neither read from nor written to the
  cache, so the prompt is ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``;
  streamed, ``message_start`` carries the input side and ``message_delta`` cumulative figures
  (a field it holds replaces the earlier one);
- OpenAI Responses: ``usage.input_tokens`` (cached included) and
  ``usage.input_tokens_details.cached_tokens``; streamed, in ``response.completed``.

Servers that send none leave ``Usage`` unknown (None), never zeros that would read as "no cache".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Usage", "usage_of"]


@dataclass(frozen=True)
class Usage:
    """Tokens of one call as the provider reported them."""

    prompt_tokens: int
    cached_tokens: int = 0        # read from the provider's prompt cache (part of prompt_tokens)
    cache_write_tokens: int = 0   # written to it (Anthropic's cache_creation_input_tokens)
    output_tokens: int = 0

    @property
    def cached_share(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


def _int(obj: Any, *path: str) -> int | None:
    for key in path:
        obj = _get(obj, key)
        if obj is None:
            return None
    return obj if isinstance(obj, int) and not isinstance(obj, bool) and obj >= 0 else None


def usage_of(api: str, usage: Any) -> Usage | None:
    """The :class:`Usage` of an API's ``usage`` object (a dict or an SDK object), or None when it
    says nothing about the prompt."""
    if usage is None:
        return None
    if api == "anthropic.messages":
        fresh = _int(usage, "input_tokens")
        read = _int(usage, "cache_read_input_tokens") or 0
        written = _int(usage, "cache_creation_input_tokens") or 0
        if fresh is None:
            return None
        return Usage(fresh + read + written, read, written, _int(usage, "output_tokens") or 0)
    if api == "openai.responses":
        prompt = _int(usage, "input_tokens")
        if prompt is None:
            return None
        cached = _int(usage, "input_tokens_details", "cached_tokens") or 0
        return Usage(prompt, min(cached, prompt), 0, _int(usage, "output_tokens") or 0)
    prompt = _int(usage, "prompt_tokens")
    if prompt is None:
        return None
    cached = _int(usage, "prompt_tokens_details", "cached_tokens")
    if cached is None:
        cached = _int(usage, "prompt_cache_hit_tokens") or 0
    return Usage(prompt, min(cached, prompt), 0, _int(usage, "completion_tokens") or 0)


def merged(earlier: Mapping[str, Any] | None, later: Any) -> dict[str, Any]:
    """Anthropic's streamed usage: ``later``'s fields (cumulative) over ``earlier``'s."""
    out = dict(earlier or {})
    if isinstance(later, Mapping):
        out.update({k: v for k, v in later.items() if v is not None})
    elif later is not None:
        for key in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
            if (value := getattr(later, key, None)) is not None:
                out[key] = value
    return out
