"""Session keys, and the bounded memos that make every request of one turn get identical bytes.

Which conversation a request belongs to, first match wins (DESIGN "Session identity"):

1. the caller's ``session_id`` argument, then the ``x-memwire-session`` header;
2. a conversation id the client sends: Claude Code's ``x-claude-code-session-id`` header (with
   ``x-claude-code-agent-id`` for a subagent's own conversation), Codex's ``session-id`` /
   ``thread-id`` headers (older: ``session_id``, ``conversation_id``), ``x-session-id``, an Anthropic ``metadata.user_id`` that names a
   session (Claude Code's JSON ``{"session_id": …}`` or ``…_session_<uuid>``), the Responses
   ``conversation``;
3. a user-level signal (an Anthropic ``metadata.user_id`` without a session, OpenAI
   ``prompt_cache_key`` or ``user``) together with the derived key below: one user's
   conversations stay apart, and so do different users' conversations that open alike;
4. a key derived from the system prompt and the first user message.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, Generic, TypeVar

if TYPE_CHECKING:
    from ..memory._store import MemoryStore
    from ..policies.modes._render import Block
    from ..policies.modes._replay import Ledger

__all__ = ["resolve_session", "session_hint", "session_signals", "SESSION_HEADERS", "turn_key", "LRU", "Memo"]

# Headers that carry a client's own conversation id, in order of preference (lower case).
SESSION_HEADERS: tuple[tuple[str, str], ...] = (
    ("x-memwire-session", ""),
    ("x-claude-code-session-id", "claude-code:"),
    ("session-id", "session:"),          # Codex 0.169 (with thread-id, the same id)
    ("thread-id", "session:"),
    ("session_id", "session:"),          # Codex (older versions)
    ("conversation_id", "conversation:"),
    ("x-session-id", "session:"),
)
_NAMED_SESSION = re.compile(r"session[_-]?[0-9a-fA-F][0-9a-fA-F-]{7,}")

K = TypeVar("K")
V = TypeVar("V")


def _h(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()[:16]


def _derived(system_text: str, first_user_text: str) -> str:
    """The last resort: a hash of the system prompt and the first user message."""
    return "auto:" + _h(system_text, first_user_text)


def resolve_session(
    given: str | None, headers: Mapping[str, str] | None, body: Mapping[str, Any],
    system_text: str, first_user_text: str, signals: tuple[str, str] | None = None,
) -> str:
    """The session of a request, by the order in this module's docstring (``signals``: what
    ``session_signals`` says of it, when already asked)."""
    named, user = signals if signals is not None else session_signals(given, headers, body)
    if named:
        return named
    if user:
        return user + _h(system_text, first_user_text)
    return _derived(system_text, first_user_text)


def session_hint(signals: tuple[str, str]) -> str:
    """What the caller and the client say of the session (``session_signals``), without reading
    the messages: the session itself when they name it, else the user-level signal ("" when none)."""
    named, user = signals
    return named or user or ""


def session_signals(given: str | None, headers: Mapping[str, str] | None, body: Mapping[str, Any]) -> tuple[str, str]:
    """(the session when the caller or client names one, the user-level prefix of rule 3), "" when none."""
    if given:
        return str(given), ""
    if headers:
        lowered = {str(k).lower(): v for k, v in headers.items()}
        for name, prefix in SESSION_HEADERS:
            value = lowered.get(name)
            if isinstance(value, str) and value.strip():
                agent = lowered.get("x-claude-code-agent-id", "").strip() if prefix == "claude-code:" else ""
                # a Claude Code subagent is a conversation of its own inside the session
                return prefix + value.strip() + (f":agent:{agent}" if agent else ""), ""
    metadata = body.get("metadata")
    user_id = metadata.get("user_id") if isinstance(metadata, Mapping) else None
    if isinstance(user_id, str):
        named = _session_in_user_id(user_id)
        if named:
            return "anthropic-user:" + named, ""
    conversation = body.get("conversation")
    if isinstance(conversation, Mapping):
        conversation = conversation.get("id")
    if isinstance(conversation, str) and conversation:
        return "conversation:" + conversation, ""
    for name, value in (("user_id", user_id), ("prompt_cache_key", body.get("prompt_cache_key")),
                        ("user", body.get("user"))):
        if isinstance(value, str) and value:
            return "", f"{name}:{value}:"
    return "", ""


def _session_in_user_id(user_id: str) -> str | None:
    """The session an Anthropic ``metadata.user_id`` names: Claude Code sends a JSON object with a
    ``session_id`` (2.1) or ``user_<hash>_account_<uuid>_session_<uuid>`` (earlier versions)."""
    if user_id.startswith("{"):
        try:
            data = json.loads(user_id)
        except ValueError:
            return None
        session = data.get("session_id") if isinstance(data, dict) else None
        return f"session:{session}" if isinstance(session, str) and session else None
    return user_id if _NAMED_SESSION.search(user_id) else None


def turn_key(index: int, identity: str) -> str:
    """A turn is identified by its latest user message (its identity, see ``Format.identity``)
    and its position in the conversation."""
    return f"{index}:{_h(identity)}"


class LRU(Generic[K, V]):
    """A small thread-safe LRU map."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            if key not in self._data:
                return None
            self._data.move_to_end(key)
            return self._data[key]

    def setdefault(self, key: K, value: V, replace: Callable[[V], bool] | None = None) -> V:
        """Store ``value`` unless a value is already there (that ``replace`` does not accept);
        return the stored one (first writer wins)."""
        with self._lock:
            if key in self._data and not (replace is not None and replace(self._data[key])):
                self._data.move_to_end(key)
                return self._data[key]
            self._data[key] = value
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)
            return value

    def pop(self, key: K) -> V | None:
        with self._lock:
            return self._data.pop(key, None)

    def __len__(self) -> int:
        return len(self._data)

    def values(self) -> list[V]:
        with self._lock:
            return list(self._data.values())

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


class Memo:
    """A turn's (or a session's) block: the first block settled for a key is what every later
    request gets, unless it found nothing and the store has changed since (``may_look_again``).

    With a ``kind`` (the mode's name for this memo: "startup", "turn", ...) the block is kept in
    the session's ledger file (``_replay.Ledger``), so every process serving the memory directory
    (``memwire proxy --workers N``), and a restart, gets the same block. ``key`` is then
    ``(namespace, session, *rest)`` of the store's directory. Without a ``kind`` (a stateful call:
    the provider keeps the history) the block is kept in ``lru`` only, for this process."""

    def __init__(self, lru: LRU[tuple[str, ...], "Block"], key: tuple[str, ...], store: "MemoryStore",
                 kind: str | None = None) -> None:
        self.lru, self.key, self.store, self.kind = lru, key, store, kind

    def get(self) -> "Block | None":
        if self.kind is None:
            block = self.lru.get(self.key)
            return None if block is not None and block.may_look_again(self.store) else block
        from ..policies.modes._replay import as_block

        ledger = self._ledger()
        ledger.sync()  # what other processes settled
        entry = ledger.memo(self._entry_key())
        if entry is None:
            return None
        if entry.ids or entry.skipped != "nothing_relevant":
            return as_block(entry)
        # found nothing: kept unless the store changed since this process looked (it looks again)
        looked = self.lru.get(self.key)
        return None if looked is None or looked.ids or looked.may_look_again(self.store) else looked

    def settle(self, block: "Block") -> "Block":
        if self.kind is None:
            return self.lru.setdefault(self.key, block, replace=lambda old: old.may_look_again(self.store))
        from ..policies.modes._replay import LedgerEntry, as_block

        entry = LedgerEntry(self._entry_key(), block.ids, block.lines, block.text, block.tokens, block.skipped)
        kept = self._ledger().settle_memo(entry)
        if kept != entry:  # another request (of any process) settled first
            return as_block(kept)
        if block.looked_at is not None:  # this process looked at this store version: not again until it changes
            self.lru.setdefault(self.key, block, replace=lambda _: True)
        return block

    def _entry_key(self) -> str:
        from ..policies.modes._replay import MEMO_PREFIX

        return ":".join((MEMO_PREFIX + str(self.kind), *self.key[2:]))

    def _ledger(self) -> "Ledger":
        ledgers = _ledgers.get(self.lru)
        if ledgers is None:
            ledgers = _ledgers.setdefault(self.lru, LRU(self.lru.maxsize))
        key = (self.key[0], self.key[1])
        ledger = ledgers.get(key)
        if ledger is None:  # read once per session, then kept in step with the file (or the database)
            from ..policies.modes._replay import open_ledger

            ledger = ledgers.setdefault(key, open_ledger(self.store, self.key[1]))
        return ledger


# the ledgers of each memo table (an LRU of blocks), loaded once per session
_ledgers: "weakref.WeakKeyDictionary[LRU[Any, Any], LRU[tuple[str, str], Ledger]]" = weakref.WeakKeyDictionary()
