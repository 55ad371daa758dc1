"""The memos that make every request of one turn (or one session) get identical bytes: in this
process (an LRU of blocks), or in the session's ledger file when every process on the memory
directory, and a restart, must give the same block (``shared_memos``)."""

from __future__ import annotations

import weakref
from typing import Any

from ..._lru import LRU
from ...memory._protocol import Store
from ._ledger import MEMO_PREFIX, Ledger, LedgerEntry
from ._render import Block
from ._replay import as_block, open_ledger

__all__ = ["Memo"]


class Memo:
    """A turn's (or a session's) block: the first block settled for a key is what every later
    request gets, unless it found nothing and the store has changed since (``may_look_again``).

    With a ``kind`` (the mode's name for this memo: "startup", "turn", ...) the block is kept in
    the session's ledger file (``_ledger.Ledger``), so every process serving the memory directory
    (``memwire proxy --workers N``), and a restart, gets the same block. ``key`` is then
    ``(namespace, session, *rest)`` of the store's directory. Without a ``kind`` (a stateful call:
    the provider keeps the history) the block is kept in ``lru`` only, for this process."""

    def __init__(self, lru: LRU[tuple[str, ...], Block], key: tuple[str, ...], store: Store,
                 kind: str | None = None) -> None:
        self.lru, self.key, self.store, self.kind = lru, key, store, kind

    def get(self) -> Block | None:
        if self.kind is None:
            block = self.lru.get(self.key)
            return None if block is not None and block.may_look_again(self.store) else block
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

    def settle(self, block: Block) -> Block:
        if self.kind is None:
            return self.lru.setdefault(self.key, block, replace=lambda old: old.may_look_again(self.store))
        entry = LedgerEntry(self._entry_key(), block.ids, block.lines, block.text, block.tokens, block.skipped)
        kept = self._ledger().settle_memo(entry)
        if kept != entry:  # another request (of any process) settled first
            return as_block(kept)
        if block.looked_at is not None:  # this process looked at this store version: not again until it changes
            self.lru.setdefault(self.key, block, replace=lambda _: True)
        return block

    def _entry_key(self) -> str:
        return ":".join((MEMO_PREFIX + str(self.kind), *self.key[2:]))

    def _ledger(self) -> Ledger:
        ledgers = _ledgers.get(self.lru)
        if ledgers is None:
            ledgers = _ledgers.setdefault(self.lru, LRU(self.lru.maxsize))
        key = (self.key[0], self.key[1])
        ledger = ledgers.get(key)
        if ledger is None:  # read once per session, then kept in step with the file (or the database)
            ledger = ledgers.setdefault(key, open_ledger(self.store, self.key[1]))
        return ledger


# the ledgers of each memo table (an LRU of blocks), loaded once per session
_ledgers: weakref.WeakKeyDictionary[LRU[Any, Any], LRU[tuple[str, str], Ledger]] = weakref.WeakKeyDictionary()
