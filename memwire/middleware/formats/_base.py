"""What every wire format shares: the :class:`Format` base (reading a body into a :class:`View`,
message identity, inserting a block), the per-item :class:`Scan`, and the shapes a format's reply
and usage parsers fill (:class:`ReplyText`, :class:`Usage`).

Each format reads a request body without changing it and builds new bodies with the block placed.
Only the containers on the path to a change are copied; untouched messages are shared, never
mutated. Validation errors name the problem and its position. What differs by wire API lives in
that API's own module (``openai_chat``, ``anthropic_messages``, ``openai_responses``).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import islice
from typing import Any

from ..._errors import RequestFormatError
from ...policies._human_text import MIN_REPEATED_CHARS, drop_repeated, human_text, strip_wrappers
from ...policies._query import CONTEXT_MESSAGES

__all__ = ["Format", "ReplyText", "Scan", "Usage", "View", "text_of"]


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
    scan: Scan | None = field(default=None, repr=False, compare=False)  # the per-item facts it was read from
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
    def empty(cls) -> Scan:
        return cls([], [], [], [])

    def copy(self) -> Scan:
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

    def prefix(self, n: int) -> Scan:
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
# None: an item without a role (Responses tool calls), kept as it is
_ROLE_NAMES: dict[str | None, str | None] = {
    r: r for r in ("system", "developer", "user", "assistant", "tool", "function")
}


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


@dataclass(frozen=True)
class Usage:
    """Tokens of one call as the provider reported them (``Format.usage``)."""

    prompt_tokens: int
    cached_tokens: int = 0        # read from the provider's prompt cache (part of prompt_tokens)
    cache_write_tokens: int = 0   # written to it (Anthropic's cache_creation_input_tokens)
    output_tokens: int = 0

    @property
    def cached_share(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def get(obj: Any, key: str) -> Any:
    """A field of a JSON object or of an SDK object (litellm's responses and stream chunks)."""
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


def count(obj: Any, *path: str) -> int | None:
    """The non-negative int at ``path`` in ``obj`` (dicts or SDK objects), else None."""
    for key in path:
        obj = get(obj, key)
        if obj is None:
            return None
    return obj if isinstance(obj, int) and not isinstance(obj, bool) and obj >= 0 else None


def kind(obj: Any) -> str | None:
    """The ``type`` of an object or event, as a plain string (litellm's are enums)."""
    value = get(obj, "type")
    value = getattr(value, "value", value)
    return value if isinstance(value, str) else None


def listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def index_of(obj: Any, key: str = "index") -> int:
    i = get(obj, key)
    return i if isinstance(i, int) and not isinstance(i, bool) else 0


class ReplyText:
    """A reply's text as a format reads it (``Format.read_reply``, ``Format.read_event``): pieces by
    place (choice, content block, output part)."""

    def __init__(self, sep: str) -> None:
        self.sep = sep
        self.pieces: dict[Any, list[str]] = {}
        self.size = 0
        self.final: str | None = None  # the whole reply, as a stream's last event repeats it (Responses)
        self.done = False              # the stream's end marker was read
        self.usage: Any = None         # the API's usage object, as last reported (``Format.usage``)

    def add(self, place: Any, piece: Any) -> None:
        if isinstance(piece, str) and piece:
            self.pieces.setdefault(place, []).append(piece)
            self.size += len(piece)

    def text(self) -> str:
        return self.final or self.sep.join("".join(self.pieces[p]) for p in sorted(self.pieces))


class Format:
    """One wire API: everything memwire knows about it. A new API is a subclass in its own module,
    registered in ``formats/__init__.py`` (docs/architecture.md, "A new wire format")."""

    api: str
    paths: tuple[str, ...] = ()   # the proxy's POST routes whose bodies are in this format
    upstream: str = ""            # the proxy's upstream for them ("openai", "anthropic")
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
            raise RequestFormatError(f"{self.api}: {self.items_key}[{i}] has unknown role {role!r}; "
                                     f"expected one of {', '.join(sorted(self.roles))}")
        content = item.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise RequestFormatError(f"{self.api}: {self.items_key}[{i}].content must be a string or a list of parts, "
                                     f"got {type(content).__name__}")
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
        the human text (wrapper blocks, and paragraphs repeated from ``system_text``), and so are
        short paragraphs made of whole lines of ``system_text`` (aider's "Reply in English."):
        clients re-serialize, move cache breakpoints, and send a message with their rules appended
        once and without them in the history (aider), or restored from a file with a trailing "  \\n"."""
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
        if not system_text:
            return joined
        return _drop_short_system_lines(drop_repeated(joined, [system_text]).strip(), system_text)

    def system_text(self, body: Mapping[str, Any], items: list[Any]) -> str:
        return "\n".join(self.text(m) for m in items if isinstance(m, Mapping) and m.get("role") in self.system_roles)

    def _system_text(self, body: Mapping[str, Any], scan: Scan) -> str:
        """``system_text`` from the texts the scan kept (no pass over the items)."""
        return "\n".join(t for _, t in scan.system)

    def scan(self, items: list[Any], start: Scan | None = None) -> Scan:
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

    def view(self, body: Mapping[str, Any], scan: Scan | None = None) -> View:
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

    def _recent_texts(self, items: list[Any], end: int, scan: Scan) -> list[str]:
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

    # ---- the provider's answer (``_reply``: what a reply's text is, and which bodies are read)

    reply_sep: str = ""  # between the answers of several choices

    def read_reply(self, out: ReplyText, body: Any) -> None:
        """Read a whole reply (parsed JSON, or an SDK object) into ``out``: its text and usage."""
        raise NotImplementedError

    def read_event(self, out: ReplyText, event: Any) -> None:
        """Read one event of a streamed reply into ``out`` (set ``out.done`` at its end marker)."""
        raise NotImplementedError

    def usage(self, usage: Any) -> Usage | None:
        """The :class:`Usage` of this API's ``usage`` object (a dict or an SDK object), or None when
        it says nothing about the prompt."""
        raise NotImplementedError

    # ---- a distillation call through this API's upstream (``_distill.upstream_complete``)

    def distill_call(self, model: str, messages: list[dict[str, str]]) -> tuple[str, dict[str, Any]]:
        """The path and body of a distillation call to this API's upstream: ``messages`` is the
        distiller's system prompt (first) and its question."""
        raise NotImplementedError

    def distill_text(self, data: Any) -> str:
        """The text of that call's reply (parsed JSON)."""
        raise NotImplementedError

    # ---- the provider's prompt cache

    def cache_breakpoint(self, body: dict[str, Any], injection: Any) -> dict[str, Any]:
        """``body`` with the marks this API's prompt cache needs around the memory (the proxy's
        ``anthropic_cache_breakpoint``); ``body`` itself when it needs none (the default)."""
        return body

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
        content: Any = msg.get("content")  # a string or a list of parts (the scan validated it)
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
        while (v_lead < len(items) and isinstance(items[v_lead], Mapping)
               and items[v_lead].get("role") in self.system_roles):
            v_lead += 1
        if v_lead == 0:
            items.insert(0, {"role": role, "content": text})
        else:
            msg = items[v_lead - 1]
            items[v_lead - 1] = {**msg, "content": _append_content(msg.get("content"), text, self.text_types[0])}
        return {**body, self.items_key: items}


_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


@lru_cache(maxsize=16)
def _lines_of(system_text: str) -> frozenset[str]:
    """The stripped lines of a system text (a conversation's requests share one: read once)."""
    return frozenset(line.strip() for line in system_text.splitlines())


def _drop_short_system_lines(text: str, system_text: str) -> str:
    """``text`` without its short paragraphs (under the human-text floor, which the paragraph rule
    keeps) whose every line is a whole line of the system text: harness lines such as aider's
    "Reply in English." that a client appends to the message it sends and leaves out of the
    history it sends next. For identity only: the same turn stays the same turn. ``text`` itself
    when nothing would be left."""
    if len(text) < MIN_REPEATED_CHARS and "\n" not in text:
        return text  # one short paragraph: all there is, kept whole
    lines = _lines_of(system_text)
    kept: list[str] = []
    dropped = False
    for p in _PARAGRAPH_BREAK.split(text):
        p = p.strip()
        if p and len(p) < MIN_REPEATED_CHARS and all(line.strip() in lines for line in p.splitlines()):
            dropped = True
        elif p:
            kept.append(p)
    return "\n\n".join(kept) if dropped and kept else text


def _append_content(content: Any, text: str, part_type: str) -> Any:
    if isinstance(content, list):
        return [*content, {"type": part_type, "text": text}]
    if isinstance(content, str) and content:
        return content + "\n\n" + text
    return text
