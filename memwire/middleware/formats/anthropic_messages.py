"""Anthropic messages (``POST /v1/messages``, ``/v1/messages/count_tokens``): a top-level
``system`` and ``messages`` of user and assistant turns; tool results arrive as ``user`` messages
of ``tool_result`` blocks, which must directly follow their ``tool_use``.

Usage: ``input_tokens`` counts only what was neither read from nor written to the cache, so the
prompt is ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``; streamed,
``message_start`` carries the input side and ``message_delta`` cumulative figures (a field it holds
replaces the earlier one: :func:`merged`).

Reply: the text blocks, end to end; streamed, ``content_block_start`` / ``content_block_delta``
text, ended by ``message_stop``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..._errors import RequestFormatError
from ._base import Format, ReplyText, Scan, Usage, _append_content, count, get, index_of, kind, listed, text_of

__all__ = ["AnthropicMessages", "merged"]


class AnthropicMessages(Format):
    api = "anthropic.messages"
    paths = ("/v1/messages", "/v1/messages/count_tokens")
    upstream = "anthropic"
    # "system" inside messages: mid-conversation system messages (a beta Claude Code 2.1 uses);
    # they are neither the human's nor the top-level system prompt
    roles = frozenset({"user", "assistant", "system"})
    system_roles = frozenset()
    human_types = frozenset({"text", "image", "document"})

    def system_text(self, body: Mapping[str, Any], items: list[Any]) -> str:
        system = body.get("system")
        if system is not None and not isinstance(system, (str, list)):
            raise RequestFormatError(f"{self.api}: 'system' must be a string or a list of blocks, got {type(system).__name__}")
        return text_of(system, self.text_types)

    def _system_text(self, body: Mapping[str, Any], scan: "Scan") -> str:
        return self.system_text(body, [])  # the top-level system field only

    def memory_item(self, text: str, role: str) -> dict[str, Any]:
        return {"role": "user", "content": [{"type": "text", "text": text}]}  # Anthropic has no other place

    def adds_item(self, items: list[Any], index: int) -> bool:
        # tool results must directly follow their tool_use: the block then goes inside, after them
        content = items[index].get("content") if index < len(items) else None
        return not (isinstance(content, list) and any(isinstance(p, Mapping) and p.get("type") == "tool_result" for p in content))

    def insert(self, body: Mapping[str, Any], index: int, text: str, role: str) -> dict[str, Any]:
        if not self.adds_item(self.items(body), index):
            return self.merge(body, index, text)
        return super().insert(body, index, text, role)

    def _kept_first(self, parts: list[Any]) -> int:
        # tool results must come first in their message, right after the tool_use they answer
        n = 0
        while n < len(parts) and isinstance(parts[n], Mapping) and parts[n].get("type") == "tool_result":
            n += 1
        return n

    def append_system(self, body: Mapping[str, Any], text: str, role: str = "system") -> dict[str, Any]:
        return {**body, "system": _append_content(body.get("system"), text, "text")}

    # ---- the provider's answer

    def usage(self, usage: Any) -> Usage | None:
        if usage is None:
            return None
        fresh = count(usage, "input_tokens")
        read = count(usage, "cache_read_input_tokens") or 0
        written = count(usage, "cache_creation_input_tokens") or 0
        if fresh is None:
            return None
        return Usage(fresh + read + written, read, written, count(usage, "output_tokens") or 0)

    def read_reply(self, out: ReplyText, body: Any) -> None:
        out.usage = get(body, "usage")
        for i, block in enumerate(listed(get(body, "content"))):
            if kind(block) == "text":
                out.add(i, get(block, "text"))

    def read_event(self, out: ReplyText, event: Any) -> None:
        what = kind(event)
        if what == "message_start":
            out.usage = merged(None, get(get(event, "message"), "usage"))
        elif what == "message_delta":
            out.usage = merged(out.usage, get(event, "usage"))
        elif what == "content_block_start":
            block = get(event, "content_block")
            if kind(block) == "text":
                out.add(index_of(event), get(block, "text"))
        elif what == "content_block_delta":
            delta = get(event, "delta")
            if kind(delta) == "text_delta":
                out.add(index_of(event), get(delta, "text"))
        elif what == "message_stop":
            out.done = True


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
