"""OpenAI chat completions (``POST /v1/chat/completions``): ``messages`` with system, developer,
user, assistant, tool and function roles; the format OpenAI-compatible servers speak.

Usage: ``usage.prompt_tokens`` (cached included) and ``usage.prompt_tokens_details.cached_tokens``
(DeepSeek-style servers: ``prompt_cache_hit_tokens``); streamed, in the last chunk when the caller
asked for it (``stream_options.include_usage``).
"""

from __future__ import annotations

from typing import Any

from ._base import Format, Usage, count

__all__ = ["OpenAIChat"]


class OpenAIChat(Format):
    api = "openai.chat"
    paths = ("/v1/chat/completions",)
    upstream = "openai"
    roles = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
    human_types = frozenset({"text", "image_url", "input_audio", "file"})

    def usage(self, usage: Any) -> Usage | None:
        if usage is None:
            return None
        prompt = count(usage, "prompt_tokens")
        if prompt is None:
            return None
        cached = count(usage, "prompt_tokens_details", "cached_tokens")
        if cached is None:
            cached = count(usage, "prompt_cache_hit_tokens") or 0
        return Usage(prompt, min(cached, prompt), 0, count(usage, "completion_tokens") or 0)
