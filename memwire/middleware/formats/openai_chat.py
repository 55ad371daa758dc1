"""OpenAI chat completions (``POST /v1/chat/completions``): ``messages`` with system, developer,
user, assistant, tool and function roles; the format OpenAI-compatible servers speak.

Usage: ``usage.prompt_tokens`` (cached included) and ``usage.prompt_tokens_details.cached_tokens``
(DeepSeek-style servers: ``prompt_cache_hit_tokens``); streamed, in the last chunk when the caller
asked for it (``stream_options.include_usage``).

Reply: each choice's message (a chunk: its delta) content and refusal; several choices (``n > 1``)
joined by a blank line; a stream ends with ``data: [DONE]`` (``_reply`` reads that marker).
"""

from __future__ import annotations

from typing import Any

from ._base import Format, ReplyText, Usage, count, get, index_of, listed, text_of

__all__ = ["OpenAIChat"]


class OpenAIChat(Format):
    api = "openai.chat"
    paths = ("/v1/chat/completions",)
    upstream = "openai"
    roles = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
    human_types = frozenset({"text", "image_url", "input_audio", "file"})
    reply_sep = "\n\n"

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

    def read_reply(self, out: ReplyText, body: Any, field: str = "message") -> None:
        """Each choice's message (a chunk: its delta) content and refusal; the usage (a stream's
        last chunk holds it, with no choices)."""
        if (usage := get(body, "usage")) is not None:
            out.usage = usage
        for choice in listed(get(body, "choices")):
            message = get(choice, field)
            content = get(message, "content")
            out.add(index_of(choice), content if isinstance(content, str) else text_of(content, ("text",)))
            out.add(index_of(choice), get(message, "refusal"))

    def read_event(self, out: ReplyText, event: Any) -> None:
        self.read_reply(out, event, "delta")

    def distill_call(self, model: str, messages: list[dict[str, str]]) -> tuple[str, dict[str, Any]]:
        return "/v1/chat/completions", {"model": model, "temperature": 0, "messages": messages}

    def distill_text(self, data: Any) -> str:
        return str(data["choices"][0]["message"]["content"] or "")
