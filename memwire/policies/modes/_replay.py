"""``history="replay"``: the blocks memwire inserted before earlier user messages, put back in place.

In contextPerTurn with ``history="drop"`` the block of turn N is gone at turn N+1, so the
provider's prefix cache stops matching where it stood. With ``history="replay"`` memwire keeps,
per session, the block it inserted before each earlier user message and re-inserts it,
byte-identical, at its old place on every later request: the provider sees an append-only log.

- :class:`Replay`, the history strategy of contextPerTurn: a new turn retrieves only memories no
  replayed block shows, renders forgotten or edited memories out of earlier blocks, and compacts
  once when the replayed memory passes ``replay_max_tokens`` (the oldest blocks go, down to half);
- the turn memo is the session's ledger (``_ledger``: a file, or rows on PostgreSQL,
  ``_ledger_pg``; :func:`open_ledger` picks it);
- the keys: a hash of the user message's identity (its normalized text: ``cache_control`` and other
  block metadata ignored, a string equal to one text block) and its occurrence number among the
  user messages of that same identity, so removing or editing an earlier message never moves a
  block onto another message (an edited message simply loses its block). :func:`user_keys` reads
  only the user messages the conversation's previous request did not have (``middleware/_incremental``
  keeps that request's scan);
- the session's profile block (contextPerTurn with ``profile = true``), kept in the ledger too
  (:class:`ProfileMemo`), so that a restart puts back the same bytes; it is never compacted nor
  rendered out (byte-stable for the session).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..._lru import LRU
from ...memory._protocol import Store
from ._base import RequestFormat, RequestView, Turn
from ._ledger import PROFILE_KEY, Ledger, LedgerEntry, _Entries, _holds
from ._ledger_pg import PgLedger
from ._render import Block

__all__ = [
    "Keys",
    "LedgerMemo",
    "ProfileMemo",
    "Replay",
    "as_block",
    "count_keys",
    "message_keys",
    "open_ledger",
    "user_keys",
]


def message_keys(identities: Mapping[int, str]) -> dict[int, str]:
    """Ledger keys of user messages, given their identities (``Format.identity``) by index in
    conversation order: identity hash + occurrence number among messages of the same identity."""
    return count_keys(identities, {})


# ---------------------------------------------------------------------------- the keys


def _digest(identity: str) -> str:
    return hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def count_keys(identities: Mapping[int, str], seen: dict[str, int]) -> dict[int, str]:
    """Ledger keys of user messages, given their identities by index in conversation order: the
    identity's hash and its occurrence number among messages of that identity, counting on from
    ``seen`` (hash -> occurrences before these messages; updated)."""
    keys: dict[int, str] = {}
    for i, identity in identities.items():
        h = _digest(identity)
        n = seen.get(h, 0)
        seen[h] = n + 1
        keys[i] = f"{h}#{n}"
    return keys


class Keys(dict):  # type: ignore[type-arg]
    """Ledger keys by index (``user_keys``), and ``index``: the same the other way round (key ->
    index), extended with the keys rather than rebuilt (replay looks its blocks' keys up in it).
    Never changed once made."""

    index: dict[str, int]


def _keys(keys: Mapping[int, str], added: Mapping[int, str] | None = None) -> Keys:
    """``keys`` then ``added``, with their index (the one ``keys`` has, extended)."""
    out = Keys(keys)
    index = keys.index if isinstance(keys, Keys) else dict(zip(keys.values(), keys.keys(), strict=True))
    if added:
        out.update(added)
        index = {**index, **dict(zip(added.values(), added.keys(), strict=True))}
    out.index = index
    return out


def user_keys(fmt: RequestFormat, view: RequestView) -> Keys:
    """The ledger key of each human user message of ``view``, by index (``message_keys`` of their
    identities), reading only user messages the conversation's previous request did not have."""
    scan, system, users = view.scan, view.system_text, view.user_indices
    keys: dict[int, str] = {}
    seen: dict[str, int] | None = {}
    known = scan.ledger if scan is not None else None
    if known is not None and known[0] == system:  # (identities read with another system text: all again)
        _, keys, seen = known
    if seen is None:  # the previous request had user messages this one has not: count again
        seen = _occurrences(keys)
    if len(keys) < len(users):
        seen = dict(seen)
        identities = {i: fmt.identity(view.items[i], system) for i in users[len(keys):]}
        if view.latest_user in identities:  # the turn's key (``Turn.turn_key``) reads it again
            view.latest_identity = identities[view.latest_user]
        keys = _keys(keys, count_keys(identities, seen))
    elif not isinstance(keys, Keys):  # (kept by a scan cut short: its index is made again)
        keys = _keys(keys)
    if scan is not None:
        scan.ledger = (system, keys, seen)  # for the conversation's next request; never changed again
    return keys


def _occurrences(keys: Mapping[int, str]) -> dict[str, int]:
    """hash -> occurrences so far, from keys ("<hash>#<n>")."""
    seen: dict[str, int] = {}
    for key in keys.values():
        h, n = key.rsplit("#", 1)
        seen[h] = max(seen.get(h, 0), int(n) + 1)
    return seen


class _Ledgers:
    """The ledger of each kind of place a store keeps it in (``LedgerKinds``): the store picks its own."""

    def file(self, directory: Path, session: str, root: Path) -> Ledger:
        return Ledger.load(directory, session, root)

    def database(self, connection: Callable[[], Any], namespace: str, session: str) -> Ledger:
        return PgLedger.open(connection, namespace, session)


_LEDGERS = _Ledgers()


def open_ledger(store: Store, session: str) -> Ledger:
    """The ledger of ``session`` in ``store``'s namespace: a file beside the memory files, or rows
    in the store's database (``_ledger_pg``) when the store is on PostgreSQL (``Store.open_ledger``)."""
    return store.open_ledger(session, _LEDGERS)


# ---------------------------------------------------------------------------- the strategy

Search = Callable[[bool, frozenset[str]], Block]  # (fresh, ids to leave out) -> the new block


class Replay:
    """The replay history strategy for one middleware: the sessions' ledgers, loaded from disk once
    per session and kept in an LRU of ``memo_size`` sessions."""

    name = "replay"

    def __init__(self, max_tokens: int, memo_size: int) -> None:
        self.max_tokens = max_tokens  # replayed memory per session before a compaction
        self.ledgers: LRU[tuple[str, str], Ledger] = LRU(memo_size)
        # in this process: the store version an empty turn was searched at (may look again)
        self._looked: LRU[tuple[int, str], int] = LRU(memo_size)

    def keys(self, turn: Turn) -> dict[int, str]:
        """The ledger key of each human user message of the request, by index (reading only the
        messages that are new since the conversation's previous request)."""
        return user_keys(turn.fmt, turn.view)

    def memo(self, turn: Turn, keys: Mapping[int, str]) -> LedgerMemo:
        assert turn.view.latest_user is not None
        return LedgerMemo(self._ledger(turn), keys[turn.view.latest_user], turn.store, self._looked)

    def profile_memo(self, turn: Turn) -> ProfileMemo:
        """The memo of the session's profile block: its ledger."""
        return ProfileMemo(self._ledger(turn))

    def compute(self, turn: Turn, keys: Mapping[int, str], search: Search) -> Callable[[bool], Block]:
        ledger = self._ledger(turn)
        return lambda fresh: self._new_turn(ledger, turn, keys, search, fresh)

    def earlier(self, turn: Turn, keys: Mapping[int, str], block: Block) -> dict[int, str]:
        """The blocks to put back before earlier user messages, by index: byte-identical. Reads the
        entries that hold a block (bounded by compaction), not every user message."""
        extra = block.extra
        shown = getattr(extra, "shown", None)
        if shown is None:
            shown = {e.key: e for e in extra or () if e.text}
        if not shown:
            return {}
        index, latest = _index_of(turn.view, keys), turn.view.latest_user
        found = [(i, e.text) for k, e in shown.items()
                 if e.text and (i := index.get(k, latest)) is not None and i != latest]
        return dict(sorted(found))

    def _ledger(self, turn: Turn) -> Ledger:
        key = (turn.namespace, turn.session)
        cached = self.ledgers.get(key)
        if cached is None:  # loaded from disk once per session (I/O, but only on a session's first call)
            cached = self.ledgers.setdefault(key, open_ledger(turn.store, turn.session))
        return cached

    def _new_turn(self, ledger: Ledger, turn: Turn, keys: Mapping[int, str], search: Search, fresh: bool) -> Block:
        """A new turn: refresh the earlier blocks, retrieve only new memories. The block's ``extra``
        is what the turn changes in the session's entries (see ``commit``), this turn's entry last.
        Only the entries that hold a block are read (bounded by compaction), not every turn's."""
        view = turn.view
        assert view.latest_user is not None
        latest_key = keys[view.latest_user]
        base = ledger.snapshot()  # the commit keeps what another writer changed since
        shown = base.shown
        assert shown is not None
        index = _index_of(view, keys)
        present = {k for k in shown if k in index and k != latest_key}  # the blocks before earlier messages
        # retrieval reads the files first, so the check for forgotten memories below sees them as
        # this search did (a forgotten id is not in the index anyway: excluding it changes nothing)
        if len(present) == len(shown):  # the common case: every block is in this request
            exclude = base.ids
        else:
            exclude = frozenset(mid for k, e in shown.items() if k in present for mid in e.ids)
        block = search(fresh, exclude)
        gone = ledger.gone(turn.store, base, wait=fresh)
        changed: dict[str, LedgerEntry] = {}
        compacted = False
        if gone:
            for k, e in shown.items():  # a forgotten or edited memory is rendered out of its block
                if gone.intersection(e.ids):
                    changed[k] = e.without(gone, turn.model)
                    compacted = compacted or k in present
        live = [changed.get(k, e) for k, e in shown.items() if k in present]
        live = [e for e in live if e.text]
        total = sum(e.tokens for e in live)
        if total + block.tokens > self.max_tokens:  # compact once: drop the oldest blocks down to half the cap
            budget = self.max_tokens // 2 - block.tokens
            for e in live:
                if total <= budget:
                    break
                changed[e.key] = LedgerEntry(e.key)
                total -= e.tokens
                compacted = True
        changed.pop(latest_key, None)
        new = LedgerEntry(latest_key, block.ids, block.lines, block.text, block.tokens, block.skipped)
        out = _Entries((*changed.values(), new))
        out.gen = base.gen
        # the session's blocks as this turn leaves them (``earlier``, when another request's entry
        # wins the commit but no block: this one is sent as computed)
        after = {k: changed.get(k, e) for k, e in shown.items() if k != latest_key}
        out.shown = {**{k: e for k, e in after.items() if _holds(e)}, **({latest_key: new} if _holds(new) else {})}
        return replace(block, extra=out, compacted=compacted)


def _index_of(view: RequestView, keys: Mapping[int, str]) -> Mapping[str, int]:
    """The user messages' ledger keys -> their indices (``Keys.index``, else made)."""
    index: Mapping[str, int] | None = getattr(keys, "index", None)
    if index is not None and len(index) == len(keys) == len(view.user_indices):
        return index
    return {keys[i]: i for i in view.user_indices}


def as_block(entry: LedgerEntry, **kw: Any) -> Block:
    skipped = kw.pop("skipped", None) or entry.skipped or (None if entry.ids else "nothing_relevant")
    return Block(entry.ids, entry.lines, entry.text, entry.tokens, skipped=skipped, **kw)


class ProfileMemo:
    """The session's profile block, kept in the session's ledger: the first one settled is what
    every request of the session gets, after a restart too."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def get(self) -> Block | None:
        self.ledger.sync()
        entry = self.ledger.profile
        return None if entry is None else as_block(entry)

    def settle(self, block: Block) -> Block:
        entry = LedgerEntry(PROFILE_KEY, block.ids, block.lines, block.text, block.tokens, block.skipped)
        return as_block(self.ledger.set_profile(entry))


class LedgerMemo:
    """The turn memo of replay: the session's ledger, keyed by the latest user message. An entry
    that holds no block because its search found nothing is looked at again once the store changed."""

    def __init__(self, ledger: Ledger, key: str, store: Store, looked: LRU[tuple[int, str], int]) -> None:
        self.ledger, self.key, self.store, self.looked = ledger, key, store, looked

    def _block(self, entry: LedgerEntry, entries: tuple[LedgerEntry, ...], **kw: Any) -> Block:
        return as_block(entry, extra=entries, **kw)

    def get(self) -> Block | None:
        self.ledger.sync()  # what other processes serving this directory committed
        entries = self.ledger.entries
        entry = self.ledger.get(self.key)
        if entry is None:
            return None
        found = self._block(entry, entries)
        if found.skipped == "nothing_relevant":  # no block was sent: look again if the store changed
            found = replace(found, looked_at=self.looked.get((id(self.ledger), self.key)))
            if found.looked_at is None or found.may_look_again(self.store):
                return None
        return found

    def settle(self, block: Block) -> Block:
        if block.looked_at is not None:
            self.looked.setdefault((id(self.ledger), self.key), block.looked_at, replace=lambda _: True)
        if not block.extra:  # retrieval failed: record an empty entry, keep the earlier ones as they are
            entry = LedgerEntry(self.key)
            if self.ledger.commit(self.key, (entry,), persist=False):
                return self._block(entry, self.ledger.entries, skipped=block.skipped, error=block.error)
        elif self.ledger.commit(self.key, block.extra, relook=block.looked_at is not None or bool(block.ids)):
            return replace(block, extra=self.ledger.entries)  # with what other writers changed meanwhile
        return self.get() or block
