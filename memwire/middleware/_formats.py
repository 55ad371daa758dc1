"""Request formats: where the latest user message is, and how to place a memory block.

Each format reads a request body without changing it and builds new bodies with the block placed.
Only the containers on the path to a change are copied; untouched messages are shared, never
mutated. Validation errors name the problem and its position.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from .._errors import RequestFormatError
from ..policies._human_text import drop_repeated, human_text, strip_wrappers
from ..policies._query import CONTEXT_MESSAGES

__all__ = ["View", "Scan", "Format", "FORMATS", "get_format", "text_of", "APIS"]

APIS = ("openai.chat", "anthropic.messages", "openai.responses")


@dataclass
class View:
    """What the middleware needs to know about a request."""

    items: list[Any]                      # the message list (chat messages, Anthropic messages, Responses input)
    latest_user: int | None               # index of the latest user message in items
    user_text: str = ""                   # its human text (policies/human_text.py)
    previous_assistant: str | None = None  # the assistant text just before the latest user message
    earlier: list[str] = field(default_factory=list)  # the last few texts before it, oldest first
    system_text: str = ""
    first_user_text: str = ""
    leading_system: int = 0               # number of leading system-role items in items
    user_indices: list[int] = field(default_factory=list)  # every human user message, in order
    stateful: bool = False                # Responses call continuing a provider-side history
    scan: "Scan | None" = field(default=None, repr=False, compare=False)  # the per-item facts it was read from
    # ``Format.identity`` of the latest user message, once read (``_incremental.user_keys``)
    latest_identity: str | None = field(default=None, repr=False, compare=False)


@dataclass
class Scan:
    """The facts about a message list that ``Format.view`` reads item by item, each depending only
    on that item and the ones before it: the scan of a list extends to any longer list that starts
    with the same items, reading only the new ones (``_incremental``). Its lists never change once
    built: ``copy`` first (requests of one conversation may run at once); only the two memos below
    are set later, each as one new tuple.

    ``ledger`` is the replay ledger keys' state (``_incremental.user_keys``): the system text the
    user messages' identities were read with, the keys of ``users[:len(keys)]`` by index, and how
    often each identity hash occurs among them (None: to be counted from the keys)."""

    roles: list[str | None]                # the validated role of each item
    users: list[int]                       # the human user messages, in order
    user_texts: list[str]                  # the text of each (``Format.text``)
    system: list[tuple[int, str]]          # the system-role items: (index, text)
    leading: int = 0                       # how many items are leading system-role items
    ledger: tuple[str, dict[int, str], dict[str, int] | None] | None = None
    # how many user texts were joined, and their join (human text rule 2 looks in all of them)
    joined_texts: tuple[int, str] | None = None

    @classmethod
    def empty(cls) -> "Scan":
        return cls([], [], [], [])

    def copy(self) -> "Scan":
        return Scan(list(self.roles), list(self.users), list(self.user_texts), list(self.system), self.leading,
                    self.ledger, self.joined_texts)

    def joined(self, count: int) -> str:
        """A text that holds each of the first ``count`` user texts (joined by NUL), extending the
        one kept: one copy of contiguous text instead of a pass over every earlier message."""
        known = self.joined_texts
        if known is not None and known[0] <= count:
            done, text = known
            if done < count:
                text = "\x00".join([text, *self.user_texts[done:count]])
        else:
            text = "\x00".join(self.user_texts[:count])
        self.joined_texts = (count, text)  # for the conversation's next request (a string: never changed)
        return text

    def is_user(self, index: int) -> bool:
        """Whether the item at ``index`` is a human user message."""
        j = bisect_left(self.users, index)
        return j < len(self.users) and self.users[j] == index

    def prefix(self, n: int) -> "Scan":
        """The scan of the first ``n`` items (at most as many as were scanned)."""
        if n >= len(self.roles):
            return self
        u = bisect_left(self.users, n)
        leading = min(self.leading, n)
        ledger = self.ledger
        if ledger is not None and len(ledger[1]) > u:  # user messages dropped: their keys go
            keys = ledger[1]
            ledger = (ledger[0], {i: keys[i] for i in self.users[:u]}, None)
        joined = self.joined_texts if self.joined_texts is not None and self.joined_texts[0] <= u else None
        return Scan(self.roles[:n], self.users[:u], self.user_texts[:u], [(i, t) for i, t in self.system if i < n],
                    leading, ledger, joined)


_METADATA = frozenset({"cache_control"})  # block metadata that does not change what a message says
_ROLE_NAMES = {r: r for r in ("system", "developer", "user", "assistant", "tool", "function")}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def _text_parts(content: Any, text_types: tuple[str, ...]) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [p["text"] for p in content
                if isinstance(p, Mapping) and p.get("type") in text_types and isinstance(p.get("text"), str)]
    return []


def text_of(content: Any, text_types: tuple[str, ...]) -> str:
    """The text parts of a message content (a string, or a list of parts), joined by newlines."""
    return "\n".join(_text_parts(content, text_types))


class Format:
    api: str
    roles: frozenset[str]
    system_roles: frozenset[str] = frozenset({"system", "developer"})
    text_types: tuple[str, ...] = ("text",)
    human_types: frozenset[str] = frozenset({"text"})   # content parts that make a message the human's
    items_key = "messages"
    read_keys: tuple[str, ...] = ("role", "content")  # all that reading an item looks at (``_incremental``)

    # ---- reading

    def items(self, body: Mapping[str, Any]) -> list[Any]:
        if not isinstance(body, Mapping):
            raise RequestFormatError(f"{self.api}: request body must be a JSON object, got {type(body).__name__}")
        items = body.get(self.items_key)
        if items is None:
            raise RequestFormatError(f"{self.api}: request has no '{self.items_key}'")
        if not isinstance(items, list):
            raise RequestFormatError(f"{self.api}: '{self.items_key}' must be a list, got {type(items).__name__}")
        return items

    def role(self, item: Any, i: int) -> str | None:
        """The role of an item; None for items without one (Responses tool calls). Validates."""
        if not isinstance(item, Mapping):
            raise RequestFormatError(f"{self.api}: {self.items_key}[{i}] must be an object, got {type(item).__name__}")
        role = item.get("role")
        if role is None:
            raise RequestFormatError(f"{self.api}: {self.items_key}[{i}] has no 'role'")
        if not isinstance(role, str) or role not in self.roles:
            raise RequestFormatError(
                f"{self.api}: {self.items_key}[{i}] has unknown role {role!r}; expected one of {', '.join(sorted(self.roles))}"
            )
        content = item.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise RequestFormatError(
                f"{self.api}: {self.items_key}[{i}].content must be a string or a list of parts, got {type(content).__name__}"
            )
        return str(role)

    def is_human(self, item: Mapping[str, Any]) -> bool:
        """Whether a user message holds something the person wrote: text that is not only harness
        wrappers, or an image, a file, audio (tool results and reminders alone are not)."""
        content = item.get("content")
        if isinstance(content, str):
            return bool(strip_wrappers(content))
        if isinstance(content, list):
            return any(
                isinstance(p, Mapping) and p.get("type") in self.human_types
                and (p.get("type") not in self.text_types or bool(strip_wrappers(str(p.get("text") or ""))))
                for p in content
            )
        return False

    def text(self, item: Mapping[str, Any]) -> str:
        return text_of(item.get("content"), self.text_types)

    def text_parts(self, item: Mapping[str, Any]) -> list[str]:
        return _text_parts(item.get("content"), self.text_types)

    def identity(self, item: Any, system_text: str = "") -> str:
        """A message's identity (DESIGN "Message identity"): what it says, not how it is sent.

        Text parts joined, other parts as canonical JSON; ``cache_control`` and other block
        metadata ignored; a string equal to a single text block. Harness text is left out as for
        the human text (wrapper blocks, and paragraphs repeated from ``system_text``): clients
        re-serialize, move cache breakpoints, and send a message with their rules appended once and
        without them in the history (aider), or restored from a file with a trailing "  \\n"."""
        content = item.get("content") if isinstance(item, Mapping) else item
        if isinstance(content, str):
            return self._text_identity([content], system_text)
        if not isinstance(content, list):
            return _canonical(content)
        texts: list[str] = []
        others: list[str] = []
        for p in content:
            if isinstance(p, Mapping) and p.get("type") in self.text_types and isinstance(p.get("text"), str):
                texts.append(p["text"])
            elif isinstance(p, Mapping):
                others.append("\x00" + _canonical({k: v for k, v in p.items() if k not in _METADATA}))
            else:
                others.append("\x00" + _canonical(p))
        return "\n".join([self._text_identity(texts, system_text), *others])

    @staticmethod
    def _text_identity(texts: list[str], system_text: str) -> str:
        kept = [t for t in (strip_wrappers(t) for t in texts) if t]
        joined = "\n\n".join(kept)
        return drop_repeated(joined, [system_text]).strip() if system_text else joined

    def system_text(self, body: Mapping[str, Any], items: list[Any]) -> str:
        return "\n".join(self.text(m) for m in items if isinstance(m, Mapping) and m.get("role") in self.system_roles)

    def _system_text(self, body: Mapping[str, Any], scan: "Scan") -> str:
        """``system_text`` from the texts the scan kept (no pass over the items)."""
        return "\n".join(t for _, t in scan.system)

    def scan(self, items: list[Any], start: "Scan | None" = None) -> "Scan":
        """The per-item facts of ``items`` (validating each item). ``start``: the scan of a list
        that ``items`` begins with (equal items): only the items after it are read."""
        s = Scan.empty() if start is None else start.copy()
        roles, system_roles = s.roles, self.system_roles
        for i in range(len(roles), len(items)):
            item = items[i]
            role = self.role(item, i)  # raises RequestFormatError on a malformed item
            roles.append(_ROLE_NAMES.get(role, role))  # one string object per role: a later copy touches no other
            if s.leading == i and role in system_roles:
                s.leading += 1
            if isinstance(item, Mapping) and item.get("role") in system_roles:
                s.system.append((i, self.text(item)))
            if role == "user" and self.is_human(item):
                s.users.append(i)
                s.user_texts.append(self.text(item))
        return s

    def view(self, body: Mapping[str, Any], scan: "Scan | None" = None) -> View:
        """What the middleware needs to know about ``body``; ``scan``: the scan of its items, when
        the caller has it (``_incremental``), else they are all read."""
        items = self.items(body)
        if scan is None:
            scan = self.scan(items)
        roles, users = scan.roles, scan.users
        latest = users[-1] if users else None
        v = View(items, latest, leading_system=scan.leading, system_text=self._system_text(body, scan),
                 user_indices=users, scan=scan)
        if latest is None:
            return v
        earlier_users = islice(scan.user_texts, len(users) - 1)  # read only if a paragraph is found in them
        v.user_text = human_text(self.text_parts(items[latest]), earlier_users, v.system_text,
                                 scan.joined(len(users) - 1))
        v.first_user_text = scan.user_texts[0]
        v.earlier = self._recent_texts(items, latest, scan)
        for j in range(latest - 1, -1, -1):
            if roles[j] == "assistant":
                v.previous_assistant = self.text(items[j])
                break
            if roles[j] == "user" and scan.is_user(j):
                break
        return v

    def _recent_texts(self, items: list[Any], end: int, scan: "Scan") -> list[str]:
        """The last CONTEXT_MESSAGES non-empty texts before ``end``, oldest first (the query's
        context): user messages by their human text. Reads only as far back as it needs."""
        out: list[str] = []
        for j in range(end - 1, -1, -1):
            if len(out) >= CONTEXT_MESSAGES:
                break
            item = items[j]
            if not isinstance(item, Mapping):
                continue
            text = strip_wrappers(self.text(item)) if scan.is_user(j) else self.text(item)
            if text:
                out.append(text)
        out.reverse()
        return out

    # ---- writing (every method returns a new body)

    def memory_item(self, text: str, role: str) -> dict[str, Any]:
        return {"role": role, "content": text}

    def adds_item(self, items: list[Any], index: int) -> bool:
        """Whether ``insert`` before ``items[index]`` adds a message (False: it merges)."""
        return True

    def insert(self, body: Mapping[str, Any], index: int, text: str, role: str) -> dict[str, Any]:
        items = list(self.items(body))
        items.insert(index, self.memory_item(text, role))
        return {**body, self.items_key: items}

    def merge(self, body: Mapping[str, Any], index: int, text: str) -> dict[str, Any]:
        """Put the block as a content part of the user message at ``index``: the leading one, or
        after the parts that must stay first (``_kept_first``)."""
        items = list(self.items(body))
        items[index] = self._merged(items[index], text)
        return {**body, self.items_key: items}

    def _merged(self, msg: Mapping[str, Any], text: str) -> dict[str, Any]:
        """A copy of ``msg`` with the block as a content part (see ``merge``)."""
        content = msg.get("content")
        part_type = self.text_types[0]
        parts: list[Any] = [{"type": part_type, "text": content}] if isinstance(content, str) else list(content)
        n = self._kept_first(parts)
        return {**msg, "content": [*parts[:n], {"type": part_type, "text": text}, *parts[n:]]}

    def _kept_first(self, parts: list[Any]) -> int:
        """How many leading content parts a merged block goes after."""
        return 0

    def insert_blocks(
        self, body: Mapping[str, Any], blocks: Mapping[int, str], role: str, merge: bool = False
    ) -> dict[str, Any]:
        """Insert each block before the item at its index, in one pass over the list. A block merges
        into its message instead when ``merge`` is set or the format cannot add an item there
        (Anthropic tool results)."""
        items = self.items(body)
        at = dict(blocks)
        out: dict[str, Any] = dict(body)
        merged = [i for i in at if merge or not self.adds_item(items, i)]
        if not at:
            return out
        new_items = list(items)  # copied once; untouched messages are shared
        for index in merged:
            new_items[index] = self._merged(new_items[index], at.pop(index))
        if at:  # the list is cut at each insertion point: no Python loop over every message
            pieces: list[Any] = []
            start = 0
            for i in sorted(i for i in at if 0 <= i < len(new_items)):
                pieces += new_items[start:i]
                pieces.append(self.memory_item(at[i], role))
                start = i
            new_items = pieces + new_items[start:]
        out[self.items_key] = new_items
        return out

    def added_before(self, items: list[Any], blocks: Mapping[int, str], index: int, merge: bool = False) -> int:
        """How many items ``insert_blocks`` adds before ``index`` (a merged block adds none)."""
        return 0 if merge else sum(1 for i in blocks if i < index and self.adds_item(items, i))

    def append_system(self, body: Mapping[str, Any], text: str, role: str = "system") -> dict[str, Any]:
        items = list(self.items(body))
        v_lead = 0
        while v_lead < len(items) and isinstance(items[v_lead], Mapping) and items[v_lead].get("role") in self.system_roles:
            v_lead += 1
        if v_lead == 0:
            items.insert(0, {"role": role, "content": text})
        else:
            msg = items[v_lead - 1]
            items[v_lead - 1] = {**msg, "content": _append_content(msg.get("content"), text, self.text_types[0])}
        return {**body, self.items_key: items}


def _append_content(content: Any, text: str, part_type: str) -> Any:
    if isinstance(content, list):
        return [*content, {"type": part_type, "text": text}]
    if isinstance(content, str) and content:
        return content + "\n\n" + text
    return text


class OpenAIChat(Format):
    api = "openai.chat"
    roles = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
    human_types = frozenset({"text", "image_url", "input_audio", "file"})


class AnthropicMessages(Format):
    api = "anthropic.messages"
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


class OpenAIResponses(Format):
    api = "openai.responses"
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

    def view(self, body: Mapping[str, Any], scan: "Scan | None" = None) -> View:
        v = super().view(body, scan)
        v.stateful = bool(body.get("previous_response_id") or body.get("conversation"))
        return v

    def system_text(self, body: Mapping[str, Any], items: list[Any]) -> str:
        instructions = body.get("instructions")
        return (instructions if isinstance(instructions, str) else "") + "\n" + super().system_text(body, items)

    def _system_text(self, body: Mapping[str, Any], scan: "Scan") -> str:
        instructions = body.get("instructions")
        return (instructions if isinstance(instructions, str) else "") + "\n" + super()._system_text(body, scan)

    def memory_item(self, text: str, role: str) -> dict[str, Any]:
        return {"role": role, "content": [{"type": "input_text", "text": text}]}

    def append_system(self, body: Mapping[str, Any], text: str, role: str = "system") -> dict[str, Any]:
        instructions = body.get("instructions")
        return {**body, "instructions": _append_content(instructions if isinstance(instructions, str) else None, text, "input_text")}


FORMATS: dict[str, Format] = {f.api: f for f in (OpenAIChat(), AnthropicMessages(), OpenAIResponses())}


def get_format(api: str) -> Format:
    try:
        return FORMATS[api]
    except KeyError:
        raise RequestFormatError(f"unknown api {api!r}; expected one of {', '.join(APIS)}") from None
