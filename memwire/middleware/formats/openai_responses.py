"""OpenAI Responses (``POST /v1/responses``): ``instructions`` and ``input`` (a string, or items:
messages, and typed items without a role such as function calls and reasoning); a call may continue
a provider-side history (``previous_response_id``, ``conversation``).

Usage: ``usage.input_tokens`` (cached included) and ``usage.input_tokens_details.cached_tokens``;
streamed, in ``response.completed``.

Reply: the output messages' ``output_text`` and ``refusal`` parts, end to end (as the SDK's
``output_text``); streamed, their deltas, and the copy of the whole reply in the end event
(``response.completed``, ``.incomplete``, ``.failed``) wins over them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._base import Format, ReplyText, Scan, Usage, View, _append_content, count, get, index_of, kind, listed
from .openai_chat import OpenAIChat

__all__ = ["OpenAIResponses"]

_PARTS = {"output_text": "text", "refusal": "refusal"}  # content part type -> its text field
_DELTAS = ("response.output_text.delta", "response.refusal.delta")
_ENDS = ("response.completed", "response.incomplete", "response.failed")
_CHAT = OpenAIChat()  # a distillation call goes to the same upstream's chat completions


class OpenAIResponses(Format):
    api = "openai.responses"
    paths = ("/v1/responses",)
    upstream = "openai"
    roles = frozenset({"system", "developer", "user", "assistant"})
    text_types = ("input_text", "output_text", "text")
    human_types = frozenset({"input_text", "input_image", "input_file", "input_audio", "text"})
    items_key = "input"
    read_keys = ("role", "content", "type")

    def items(self, body: Mapping[str, Any]) -> list[Any]:
        if isinstance(body, Mapping) and isinstance(body.get("input"), str):
            return [{"role": "user", "content": body["input"]}]
        if isinstance(body, Mapping) and body.get("input") is None:
            return []  # a prompt template, or previous_response_id / conversation only: nothing to read
        return super().items(body)

    def role(self, item: Any, i: int) -> str | None:
        if isinstance(item, Mapping) and item.get("type") not in (None, "message"):
            return None  # function_call, function_call_output, reasoning, item_reference, ...
        return super().role(item, i)

    def view(self, body: Mapping[str, Any], scan: Scan | None = None) -> View:
        v = super().view(body, scan)
        v.stateful = bool(body.get("previous_response_id") or body.get("conversation"))
        return v

    def system_text(self, body: Mapping[str, Any], items: list[Any]) -> str:
        instructions = body.get("instructions")
        return (instructions if isinstance(instructions, str) else "") + "\n" + super().system_text(body, items)

    def _system_text(self, body: Mapping[str, Any], scan: Scan) -> str:
        instructions = body.get("instructions")
        return (instructions if isinstance(instructions, str) else "") + "\n" + super()._system_text(body, scan)

    def memory_item(self, text: str, role: str) -> dict[str, Any]:
        return {"role": role, "content": [{"type": "input_text", "text": text}]}

    def append_system(self, body: Mapping[str, Any], text: str, role: str = "system") -> dict[str, Any]:
        instructions = body.get("instructions")
        old = instructions if isinstance(instructions, str) else None
        return {**body, "instructions": _append_content(old, text, "input_text")}

    # ---- the provider's answer

    def usage(self, usage: Any) -> Usage | None:
        if usage is None:
            return None
        prompt = count(usage, "input_tokens")
        if prompt is None:
            return None
        cached = count(usage, "input_tokens_details", "cached_tokens") or 0
        return Usage(prompt, min(cached, prompt), 0, count(usage, "output_tokens") or 0)

    def read_reply(self, out: ReplyText, body: Any) -> None:
        out.usage = get(body, "usage")
        for i, item in enumerate(listed(get(body, "output"))):
            if kind(item) == "message":
                for j, part in enumerate(listed(get(item, "content"))):
                    field = _PARTS.get(kind(part) or "")
                    if field:
                        out.add((i, j), get(part, field))

    def read_event(self, out: ReplyText, event: Any) -> None:
        what = kind(event)
        if what in _DELTAS:
            out.add((index_of(event, "output_index"), index_of(event, "content_index")), get(event, "delta"))
        elif what in _ENDS:
            out.done = True
            whole = ReplyText("")
            self.read_reply(whole, get(event, "response"))
            out.final, out.usage = whole.text() or None, whole.usage

    def distill_call(self, model: str, messages: list[dict[str, str]]) -> tuple[str, dict[str, Any]]:
        return _CHAT.distill_call(model, messages)

    def distill_text(self, data: Any) -> str:
        return _CHAT.distill_text(data)
