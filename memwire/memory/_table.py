"""What a markdown store keeps in memory: each file's memories as columns, and the merged view.

Held as ``Memory`` objects in dicts, a memory cost ~700 bytes besides the index (its object, a
``__dict__``, its own copies of the date, topic and path strings, two dict entries), and a store of
a million took seconds to build them at start. A ``Table`` keeps, per memory of one file:

- its id: in a list by row (8 bytes; the string is the one the index holds), found by an
  ``IdMap`` (id -> row, 8-16 bytes: a dict would take ~60, an ``int`` object per row included);
- its text: UTF-8 in one buffer, and where it ends there (8 bytes);
- its tags, pin, topic and date: an index (4 bytes) into the file's distinct (tags, pinned, topic,
  date) tuples (the memories of one session and topic share one);

about 30-36 bytes besides the text and the id string. A table is restored from the snapshot's
arrays without an object per memory, and a ``Memory`` is built when asked for (a search returns a
few). A table only grows (an add appends to the cache); a file that changed is parsed into a new
table.

``Merged`` is the store's view by id over its directories' tables (see its docstring): with one
table (one memory file, the usual large store) it is that table and costs nothing per memory.
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence

from ._idmap import IdMap
from ._model import Memory, normalized

__all__ = ["Kind", "Merged", "Table", "kind_of", "longer_id"]

log = logging.getLogger("memwire")

Kind = tuple[tuple[str, ...], bool, "str | None", "str | None"]  # tags, pinned, topic, date
_UTF8 = ("utf-8", "surrogatepass")  # a text is valid UTF-8 (it was read or written as such); never fail on one


def kind_of(mem: Memory) -> Kind:
    """What a table keeps of ``mem`` besides its id and text."""
    return mem.tags, mem.pinned, mem.topic, mem.date


class Table:
    """One memory file's memories, by id, in file order (see the module docstring)."""

    __slots__ = ("_ends", "_ids", "_kind", "_kind_of", "_kinds", "_row", "_text", "source")

    def __init__(self, source: str) -> None:
        self.source = source  # the file's path: every memory's ``source``
        self._ids: list[str] = []  # row -> id; rows are 0, 1, ... in insertion order
        self._row = IdMap(self._ids)  # id -> row
        self._text = bytearray()
        self._ends = array("q")  # row -> where its text ends in _text
        self._kind = array("I")  # row -> index into _kinds
        self._kinds: list[Kind] = []
        self._kind_of: dict[Kind, int] | None = {}  # _kinds' inverse, built on the first append after a restore

    @classmethod
    def of(cls, source: str, memories: Iterable[Memory]) -> Table:
        table = cls(source)
        for mem in memories:
            table.append(mem)
        return table

    @classmethod
    def restore(cls, source: str, ids: Sequence[str], text: bytearray, ends: array[int], kind: array[int],
                kinds: list[Kind]) -> Table:
        """A table from its columns (``columns``), checked for shape: the snapshot holding them is
        checked against the files, but a damaged one must fail here, not in a later search."""
        n = len(ids)
        if not (len(ends) == len(kind) == n and (not n or ends[-1] == len(text))):
            raise ValueError("memory columns of different lengths")
        if n and (min(ends) < 0 or max(kind) >= len(kinds)):
            raise ValueError("memory columns out of range")
        table = cls(source)
        table._ids = list(ids)
        table._row = IdMap.of(table._ids)  # raises ValueError on an id twice
        table._text, table._ends, table._kind, table._kinds, table._kind_of = text, ends, kind, kinds, None
        return table

    def columns(self) -> tuple[list[str], bytearray, array[int], array[int], list[Kind]]:
        """Ids, text buffer, text ends, kind per row, kinds: what ``restore`` takes."""
        return list(self._ids), self._text, self._ends, self._kind, self._kinds

    def append(self, mem: Memory) -> bool:
        """Add ``mem`` as the last row under its id; an id already here is left as it is (False)."""
        if mem.id in self._row:
            return False
        kind = kind_of(mem)
        if self._kind_of is None:
            self._kind_of = {k: i for i, k in enumerate(self._kinds)}
        at = self._kind_of.get(kind)
        if at is None:
            at = self._kind_of[kind] = len(self._kinds)
            self._kinds.append(kind)
        self._text += mem.text.encode(*_UTF8)
        self._ends.append(len(self._text))
        self._kind.append(at)
        self._ids.append(mem.id)  # last: a reader that sees the id sees its columns
        self._row[mem.id] = len(self._ids) - 1
        return True

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, mid: object) -> bool:
        return mid in self._row

    def ids(self) -> Iterator[str]:
        """The ids, in file order."""
        return iter(self._ids)

    def get(self, mid: str, as_id: str | None = None) -> Memory | None:
        """The memory with id ``mid`` (shown with id ``as_id`` when given), or None."""
        row = self._row.get(mid)
        return None if row is None else self._memory(as_id or mid, row)

    def memory_at(self, row: int, mid: str) -> Memory:
        """The memory of ``row``, shown with id ``mid``."""
        return self._memory(mid, row)

    def kind_at(self, row: int) -> Kind:
        """The (tags, pinned, topic, date) of ``row``, without building its memory."""
        return self._kinds[self._kind[row]]

    def _memory(self, mid: str, row: int) -> Memory:
        tags, pinned, topic, date = self._kinds[self._kind[row]]
        start = self._ends[row - 1] if row else 0
        return Memory(mid, self._text[start : self._ends[row]].decode(*_UTF8), tags, pinned, topic, date, self.source)

    def memories(self) -> Iterator[Memory]:
        """Every memory, in file order."""
        for row, mid in enumerate(self._ids):
            yield self._memory(mid, row)

    def same(self, mid: str, other: Table, other_mid: str) -> bool:
        """Whether memory ``mid`` here equals ``other_mid`` of ``other`` (all but the id and the
        source, as ``Memory`` compares them), without building either."""
        a, b = self._row.get(mid), other._row.get(other_mid)
        if a is None or b is None:
            return a is b
        if self._kinds[self._kind[a]] != other._kinds[other._kind[b]]:
            return False
        return self._slice(a) == other._slice(b)

    def _slice(self, row: int) -> bytearray:
        # a copy, not a memoryview: a view alive would stop the buffer from growing
        return self._text[self._ends[row - 1] if row else 0 : self._ends[row]]


# the table holding a memory, or (table, its id there) when shown under another
_Ref = Table | tuple[Table, str]


def longer_id(mem: Memory, other: Memory, where: str | None) -> str:
    """The id of ``mem`` when ``other`` holds its id with another text (a hash collision: never seen
    at 80 bits, but possible): its whole hash. Both stay visible; it is reported."""
    import hashlib

    longer = hashlib.sha1(normalized(mem.text).encode("utf-8")).hexdigest()
    log.warning("memwire: %smemory id %s is shared by two different texts (%d and %d chars); the second is %s",
                f"{where}: " if where else "", mem.id, len(other.text), len(mem.text), longer)
    return longer


class Merged:
    """The memories a store shows, by id, over its directories' tables (each directory's in file
    order): within a directory the first file holding an id wins (another text under the same id
    in a later file is shown under its longer id); across directories the later one (the project)
    wins, in the place the id first had. Iteration is in that order.

    With exactly one table, the view is that table (an add to it shows at once); else a dict maps
    each id to the table holding it."""

    __slots__ = ("_owner", "_single")

    def __init__(self) -> None:
        self._single: Table | None = None
        self._owner: dict[str, _Ref] = {}

    @classmethod
    def of(cls, dirs: Iterable[Sequence[Table]]) -> Merged:
        merged = cls()
        dirs = [list(tables) for tables in dirs]
        tables = [t for ts in dirs for t in ts]
        if len(tables) == 1:
            merged._single = tables[0]
            return merged
        owner: dict[str, _Ref] = {}
        for ts in dirs:
            mine: dict[str, _Ref] = {}
            for t in ts:
                if mine.keys().isdisjoint(t._ids):  # the usual case, at C speed
                    mine.update(dict.fromkeys(t._ids, t))
                    continue
                for mid in t.ids():
                    have = mine.get(mid)
                    if have is None:
                        mine[mid] = t
                        continue
                    first, mem = _resolved(have, mid), t.get(mid)
                    assert first is not None and mem is not None
                    if normalized(first.text) != normalized(mem.text):
                        mine.setdefault(longer_id(mem, first, None), (t, mid))
            if owner:
                owner.update(mine)
            else:
                owner = mine
        merged._owner = owner
        return merged

    def ref(self, mid: str) -> tuple[Table, str] | None:
        """The table holding ``mid`` and its id there."""
        if self._single is not None:
            return (self._single, mid) if mid in self._single._row else None
        found = self._owner.get(mid)
        if found is None:
            return None
        return found if isinstance(found, tuple) else (found, mid)

    def at(self, mid: str) -> tuple[Table, int] | None:
        """The table and row showing ``mid``, or None: what ``Table.memory_at`` and ``Table.kind_at``
        read (a row never changes, so they may read it after the store's lock is released)."""
        ref = self.ref(mid)
        if ref is None:
            return None
        table, tid = ref
        row = table._row.get(tid)
        return None if row is None else (table, row)

    def rows(self, ids: Iterable[str]) -> list[tuple[Table, str, int]]:
        """Where the memories of ``ids`` are, as (table, id shown, row), those not shown left out:
        cheap under the store's lock, then ``Table.memory_at`` builds them (a row never changes)."""
        return [(table, mid, row) for mid in ids if (found := self.at(mid)) is not None for table, row in (found,)]

    def get(self, mid: str) -> Memory | None:
        if self._single is not None:
            return self._single.get(mid)
        found = self._owner.get(mid)
        return None if found is None else _resolved(found, mid)

    def __contains__(self, mid: object) -> bool:
        return mid in (self._single._row if self._single is not None else self._owner)

    def __len__(self) -> int:
        return len(self._single) if self._single is not None else len(self._owner)

    def __iter__(self) -> Iterator[str]:
        return self._single.ids() if self._single is not None else iter(self._owner)

    def values(self) -> Iterator[Memory]:
        return self.listing()()

    def listing(self) -> Callable[[], Iterator[Memory]]:
        """Every memory as of now, built when the result is called: only the ids are copied now
        (under the store's lock; building a million memories takes a second or two, and searches
        must not wait for it). A table's rows never change, so what is built later is what was
        shown now."""
        if self._single is not None:
            table, ids = self._single, list(self._single._ids)
            return lambda: map(table._memory, ids, range(len(ids)))
        items = list(self._owner.items())
        return lambda: (m for mid, found in items if (m := _resolved(found, mid)) is not None)

    def same(self, mid: str, other: Merged) -> bool:
        """Whether ``mid`` is the same memory here and in ``other`` (both missing counts)."""
        a, b = self.ref(mid), other.ref(mid)
        if a is None or b is None:
            return a is b
        if a[0] is b[0] and a[1] == b[1]:  # one table's row: tables only grow, a row never changes
            return True
        return a[0].same(a[1], b[0], b[1])

    def put(self, mid: str, table: Table) -> None:
        """Show ``mid`` from ``table`` (where its id is ``mid``), a table of the view (a new table
        makes a new view: ``of``)."""
        if self._single is table:
            return
        if self._single is not None:  # a second table: from now on by id
            self._owner, self._single = dict.fromkeys(self._single._ids, self._single), None
        self._owner[mid] = table


def _resolved(found: _Ref, mid: str) -> Memory | None:
    if isinstance(found, tuple):
        return found[0].get(found[1], as_id=mid)
    return found.get(mid)
