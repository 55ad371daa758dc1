"""Turn a request body into the ordered token *blocks* a provider would see.

The real providers render requests into their own chat templates; we cannot reproduce those, and we
do not need to: the cache rules only care about *which bytes stay identical from one request to the
next*. So each block is serialized as deterministic JSON (sorted keys, compact separators) and
tokenized with tiktoken. Two requests that share their first N blocks byte for byte share the token
prefix of those blocks, which is all the simulator needs.

Block order, per API:

- ``openai.chat``: each tool definition, then each message (role + content parts).
- ``openai.responses``: each tool, ``instructions``, then each input item (a string input is one
  user message).
- ``anthropic.messages``: each tool, the system prompt (one block for a string, one per block for a
  list), then each content block of each message (a string content is one text block).

``cache_control`` markers are stripped before serialization: on Anthropic they mark breakpoints,
they are not part of the cached bytes, so moving a breakpoint does not change the prefix. Inline
binary data (base64 images, documents, ``data:`` URLs) is replaced by a short digest so a picture
costs a few tokens, not thousands, and two different pictures still differ.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from memwire._errors import RequestFormatError
from memwire.policies._tokens import Encoder, get_encoder

__all__ = ["API", "APIS", "Block", "canonical_json", "count_breakpoints", "request_blocks", "serialize"]

API = str  # "openai.chat" | "openai.responses" | "anthropic.messages"
APIS = ("openai.chat", "openai.responses", "anthropic.messages")


@dataclass(frozen=True)
class Block:
    """One unit of a request: its tokens and whether it carries an Anthropic breakpoint."""

    tokens: tuple[int, ...]
    breakpoint: bool = False
    label: str = ""


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _digest(data: str) -> str:
    return "sha256:" + hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _scrub(value: Any) -> Any:
    """A copy without ``cache_control`` keys and with inline binary data replaced by a digest."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key == "cache_control":
                continue
            if key == "data" and isinstance(item, str) and len(item) > 256:
                out[key] = _digest(item)  # Anthropic base64 source, input_audio, ...
            else:
                out[key] = _scrub(item)
        return out
    if isinstance(value, str) and value.startswith("data:") and len(value) > 256:
        return _digest(value)  # OpenAI image_url / input_image data URLs
    if isinstance(value, (list, tuple)):
        return [_scrub(item) for item in value]
    return value


def _has_breakpoint(value: Any) -> bool:
    return isinstance(value, Mapping) and bool(value.get("cache_control"))


def _as_list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return list(value)
    raise RequestFormatError(f"{what} must be a list, got {type(value).__name__}")


# complexity over 15: one branch per kind of block a provider orders (system, tools, messages,
# content parts): the cases read best as one table
def serialize(  # noqa: C901
    body: Mapping[str, Any], api: API,
) -> list[tuple[Any, bool, str]]:
    """The request's parts in provider order: ``(json_value, has_breakpoint, label)`` per block."""
    if not isinstance(body, Mapping):
        raise RequestFormatError(f"request body must be a JSON object, got {type(body).__name__}")
    parts: list[tuple[Any, bool, str]] = []
    for i, tool in enumerate(_as_list(body.get("tools"), "tools")):
        parts.append(({"tool": tool}, _has_breakpoint(tool), f"tools[{i}]"))

    if api == "openai.chat":
        for i, msg in enumerate(_as_list(body.get("messages"), "messages")):
            parts.append((msg, False, f"messages[{i}]"))
    elif api == "openai.responses":
        if body.get("instructions") is not None:
            parts.append(({"instructions": body["instructions"]}, False, "instructions"))
        items = body.get("input")
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        for i, item in enumerate(_as_list(items, "input")):
            parts.append((item, False, f"input[{i}]"))
    elif api == "anthropic.messages":
        system = body.get("system")
        if isinstance(system, str):
            parts.append(({"system": system}, False, "system"))
        else:
            for i, block in enumerate(_as_list(system, "system")):
                parts.append(({"system": block}, _has_breakpoint(block), f"system[{i}]"))
        for i, msg in enumerate(_as_list(body.get("messages"), "messages")):
            if not isinstance(msg, Mapping):
                raise RequestFormatError(f"messages[{i}] must be an object")
            role, content = msg.get("role"), msg.get("content")
            if isinstance(content, str):
                parts.append(({"role": role, "content": content}, False, f"messages[{i}]"))
                continue
            for j, block in enumerate(_as_list(content, f"messages[{i}].content")):
                parts.append(({"role": role, "block": block}, _has_breakpoint(block), f"messages[{i}].content[{j}]"))
        # Automatic caching: a top-level cache_control puts a breakpoint on the last block.
        if body.get("cache_control") and parts:
            value, _, label = parts[-1]
            parts[-1] = (value, True, label)
    else:
        raise RequestFormatError(f"unknown api {api!r}; expected one of {', '.join(APIS)}")
    return parts


def count_breakpoints(body: Mapping[str, Any]) -> int:
    """Anthropic ``cache_control`` markers in a request, the top-level one included."""
    n = 1 if body.get("cache_control") else 0
    n += sum(_has_breakpoint(t) for t in _as_list(body.get("tools"), "tools"))
    system = body.get("system")
    if not isinstance(system, str):
        n += sum(_has_breakpoint(b) for b in _as_list(system, "system"))
    for msg in _as_list(body.get("messages"), "messages"):
        content = msg.get("content") if isinstance(msg, Mapping) else None
        if not isinstance(content, str):
            n += sum(_has_breakpoint(b) for b in _as_list(content, "content"))
    return n


def request_blocks(body: Mapping[str, Any], api: API, encoder: Encoder | None = None) -> list[Block]:
    """Tokenized blocks of a request; the prompt's token sequence is their concatenation."""
    enc = encoder or get_encoder(body.get("model") if isinstance(body.get("model"), str) else None)
    key: Hashable = enc  # type: ignore[assignment]  # encoders hash by identity (get_encoder caches them)
    return [Block(_tokens(key, canonical_json(_scrub(value))), bp, label) for value, bp, label in serialize(body, api)]


@lru_cache(maxsize=8192)
def _tokens(enc: Any, text: str) -> tuple[int, ...]:
    """``text``'s tokens, remembered: each request of a conversation repeats the blocks of the
    ones before it (tokenizing them again was most of a simulated request's CPU)."""
    return tuple(enc.encode(text))
