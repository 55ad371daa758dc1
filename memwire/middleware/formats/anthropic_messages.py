"""Anthropic messages (``POST /v1/messages``, ``/v1/messages/count_tokens``): a top-level
``system`` and ``messages`` of user and assistant turns; tool results arrive as ``user`` messages
of ``tool_result`` blocks, which must directly follow their ``tool_use``.

Usage: ``input_tokens`` counts only what was neither read from nor written to the cache, so the
prompt is ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``; streamed,
``message_start`` carries the input side and ``message_delta`` cumulative figures (a field it holds
replaces the earlier one: :func:`merged`).

Reply: the text blocks, end to end; streamed, ``content_block_start`` / ``content_block_delta``
text, ended by ``message_stop``.

Prompt cache (the proxy's ``anthropic_cache_breakpoint``): the last block before the memory gets a
``cache_control`` mark, so the history before it is written to the cache (:func:`add_cache_breakpoint`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..._errors import RequestFormatError
from .._prepared import Injection
from ._base import Format, ReplyText, Scan, Usage, _append_content, count, get, index_of, kind, listed, text_of

__all__ = ["MAX_CACHE_BREAKPOINTS", "AnthropicMessages", "add_cache_breakpoint", "count_cache_breakpoints", "merged"]

MAX_CACHE_BREAKPOINTS = 4  # Anthropic rejects a request with more cache_control blocks


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
            raise RequestFormatError(f"{self.api}: 'system' must be a string or a list of blocks, "
                                     f"got {type(system).__name__}")
        if isinstance(system, list):
            _check_blocks(self.api, system, "system")
        return text_of(system, self.text_types)

    def role(self, item: Any, i: int) -> str | None:
        """The role, once the message has the shape Anthropic requires (a ``content``, and blocks
        that are objects with a ``type``, text blocks with a string ``text``): memwire refuses with
        a 400 in Anthropic's format what it cannot read, as the OpenAI formats do, rather than
        forward it unread (the API would refuse it too). Block types are not listed: new ones come."""
        role = super().role(item, i)  # an object, a known role, a content that is a string or a list if any
        content = item.get("content")
        if content is None:
            raise RequestFormatError(f"{self.api}: messages[{i}] has no 'content' (a string or a list of blocks)")
        if isinstance(content, list):
            _check_blocks(self.api, content, f"messages[{i}].content")
        return role

    def _system_text(self, body: Mapping[str, Any], scan: Scan) -> str:
        return self.system_text(body, [])  # the top-level system field only

    def memory_item(self, text: str, role: str) -> dict[str, Any]:
        return {"role": "user", "content": [{"type": "text", "text": text}]}  # Anthropic has no other place

    def adds_item(self, items: list[Any], index: int) -> bool:
        # tool results must directly follow their tool_use: the block then goes inside, after them
        content = items[index].get("content") if index < len(items) else None
        return not (isinstance(content, list)
                    and any(isinstance(p, Mapping) and p.get("type") == "tool_result" for p in content))

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

    # ---- a distillation call, and the prompt cache

    def distill_call(self, model: str, messages: list[dict[str, str]]) -> tuple[str, dict[str, Any]]:
        system, rest = messages[0]["content"], messages[1:]
        return "/v1/messages", {"model": model, "max_tokens": 1024, "temperature": 0, "system": system,
                                "messages": rest}

    def distill_text(self, data: Any) -> str:
        return "".join(b.get("text", "") for b in data.get("content", []) if b.get("type") == "text")

    def cache_breakpoint(self, body: dict[str, Any], injection: Any) -> dict[str, Any]:
        return add_cache_breakpoint(body, injection)


def _check_blocks(api: str, blocks: list[Any], where: str) -> None:
    """Each of ``blocks`` is an object with a string ``type``, and a text block has a string
    ``text``; else ``RequestFormatError`` naming the block (``messages[0].content[1]``)."""
    for j, block in enumerate(blocks):
        if not isinstance(block, Mapping):
            raise RequestFormatError(f"{api}: {where}[{j}] must be an object (a content block), "
                                     f"got {type(block).__name__}")
        kind_ = block.get("type")
        if not isinstance(kind_, str):
            raise RequestFormatError(f"{api}: {where}[{j}] has no 'type'")
        if kind_ == "text" and not isinstance(block.get("text"), str):
            raise RequestFormatError(f"{api}: {where}[{j}] is a text block without a string 'text'")


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


# -------------------------------------------------------------------- Anthropic prompt caching


def count_cache_breakpoints(body: Mapping[str, Any]) -> int:
    """``cache_control`` markers at the top level (automatic caching), in tools, system and messages
    (Anthropic allows 4 in all)."""

    def count(blocks: Any) -> int:
        if not isinstance(blocks, list):
            return 0
        n = 0
        for b in blocks:
            if isinstance(b, Mapping):
                n += bool(b.get("cache_control"))
                if b.get("type") == "tool_result":
                    n += count(b.get("content"))
        return n

    messages = body.get("messages")
    total = bool(body.get("cache_control")) + count(body.get("tools")) + count(body.get("system"))
    if isinstance(messages, list):
        total += sum(count(m.get("content")) for m in messages if isinstance(m, Mapping))
    return total


def add_cache_breakpoint(body: dict[str, Any], injection: Injection | None) -> dict[str, Any]:
    """Mark the last content block before the memory with ``cache_control`` so the history prefix is
    written to the cache. Returns ``body`` itself when there is nothing to do; otherwise a new body
    in which only the changed message and block are copies."""
    if injection is None or not injection.injected or injection.position is None:
        return body
    messages = body.get("messages")
    if not isinstance(messages, list) or not 0 <= injection.position < len(messages):
        return body
    target = _block_before_memory(messages, injection)
    if target is None or count_cache_breakpoints(body) >= MAX_CACHE_BREAKPOINTS:
        return body
    index, end = target
    msg = messages[index]
    content = msg["content"]
    marker = _marker(messages, index)
    if isinstance(content, str):
        new_content: list[Any] = [{"type": "text", "text": content, "cache_control": marker}]
    else:
        j = _cacheable(content[:end])
        if j is None:
            return body
        new_content = list(content)
        new_content[j] = {**content[j], "cache_control": marker}
    new_messages = list(messages)
    new_messages[index] = {**msg, "content": new_content}
    return {**body, "messages": new_messages}


def _block_before_memory(messages: list[Any], injection: Injection) -> tuple[int, int] | None:
    """(message index, number of its leading blocks) holding the content just before the memory."""
    position = injection.position
    assert position is not None
    if injection.placement == "merge":  # the block is a part of the message at position
        content = messages[position].get("content") if isinstance(messages[position], Mapping) else None
        if isinstance(content, list):
            k = next((i for i, p in enumerate(content)
                      if isinstance(p, Mapping) and p.get("text") == injection.text), 0)
            if k > 0:  # tool results come first in that message
                return position, k
    elif injection.placement != "message":  # "system": appended to the system prompt, no history split
        return None
    if position == 0 or not isinstance(messages[position - 1], Mapping):
        return None
    content = messages[position - 1].get("content")
    if isinstance(content, str):
        return (position - 1, 1) if content else None
    if isinstance(content, list) and content:
        return position - 1, len(content)
    return None


def _cacheable(blocks: Sequence[Any]) -> int | None:
    """Index of the last block that may carry cache_control; None if it already has one or none may."""
    for j in range(len(blocks) - 1, -1, -1):
        b = blocks[j]
        if not isinstance(b, Mapping):
            return None
        if b.get("cache_control"):
            return None  # already a breakpoint right there
        # Thinking blocks and empty text blocks cannot be marked (the API rejects them).
        if b.get("type") in ("thinking", "redacted_thinking") or (b.get("type") == "text" and not b.get("text")):
            continue
        return j
    return None


def _marker(messages: list[Any], index: int) -> dict[str, str]:
    """Anthropic wants longer TTLs before shorter ones: match a 1h breakpoint that comes later."""
    for m in messages[index + 1 :]:
        content = m.get("content") if isinstance(m, Mapping) else None
        if isinstance(content, list):
            for b in content:
                cc = b.get("cache_control") if isinstance(b, Mapping) else None
                if isinstance(cc, Mapping) and cc.get("ttl") == "1h":
                    return {"type": "ephemeral", "ttl": "1h"}
    return {"type": "ephemeral"}
