"""A compact id -> number map for the store's tables and the index (see ``IdMap``).

A dict of a million ids costs ~59 bytes an entry: its entry (hash, key, value: 24 bytes, a third
of them spare) and an ``int`` object per value (28 bytes). Both the store's tables (id -> row) and
the index (id -> slot) already keep the ids in a list by number, so the map only needs to find a
number: an open-addressing table of 32-bit numbers (linear probing, at most 2/3 full), its slot
chosen by the id string's own hash (cached in the string) and a match confirmed by comparing the
id with ``keys[number]``. That is 4 bytes a slot, 8-16 bytes an id; a lookup is a few Python
operations (~0.2-0.3 µs against a dict's 0.03-0.13), a dozen per search.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["IdMap"]

_EMPTY = -1
_MIN_SIZE = 8
_NUMPY_FROM = 512  # ids: a table of fewer is built one id at a time


class IdMap:
    """id -> number, where ``keys[number]`` is the id (``keys``: the owner's list, shared, not
    copied; a number whose id is gone holds None there). The owner sets ``keys[number]`` before
    ``put`` and clears it after ``pop``."""

    __slots__ = ("_keys", "_mask", "_n", "_tab")

    def __init__(self, keys: Sequence[str | None]) -> None:
        self._keys = keys
        self._tab = array("i", [_EMPTY]) * _MIN_SIZE
        self._mask = _MIN_SIZE - 1
        self._n = 0

    @classmethod
    def of(cls, keys: Sequence[str | None]) -> IdMap:
        """The map of every id in ``keys`` (None: no id) to its position; an id twice raises
        ``ValueError``. A large one is built with numpy, without a Python loop per id."""
        out = cls(keys)
        out._build(_size_for(len(keys)))
        return out

    def __len__(self) -> int:
        return self._n

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[str]:
        """The ids, in the order of their numbers."""
        return (k for k in self._keys if k is not None)

    def items(self) -> Iterator[tuple[str, int]]:
        return ((k, i) for i, k in enumerate(self._keys) if k is not None)

    def get(self, key: str, default: Any = None) -> Any:
        """The number of ``key``, or ``default``."""
        tab, keys = self._tab, self._keys
        mask = len(tab) - 1  # not self._mask: a reader in another thread may see a new table
        i = hash(key) & mask
        while True:
            v = tab[i]
            if v < 0:
                return default
            if keys[v] == key:
                return v
            i = (i + 1) & mask

    def __getitem__(self, key: str) -> int:
        v = self.get(key)
        if v is None:
            raise KeyError(key)
        return v  # type: ignore[no-any-return]

    def numbers(self, keys: Sequence[str | None]) -> Any:
        """``get`` of each of ``keys`` (None: no id), -1 for none, as a numpy int64 array:
        all at once, a probe step at a time."""
        import numpy as np

        tab = np.frombuffer(self._tab, dtype=np.int32)
        mask = len(tab) - 1
        hashes = np.fromiter(map(hash, keys), dtype=np.int64, count=len(keys))
        out = np.full(len(keys), -1, dtype=np.int64)
        todo = np.flatnonzero(hashes != hash(None))  # the ids (an id with None's hash: looked up alone)
        for i in np.flatnonzero(hashes == hash(None)).tolist():
            out[i] = -1 if keys[i] is None else self.get(keys[i], -1)
        at = hashes.view(np.uint64)[todo] & np.uint64(mask)
        mine = self._keys
        while len(todo):
            v = tab[at]
            todo, v, at = todo[v >= 0], v[v >= 0], at[v >= 0]
            same = np.fromiter((mine[a] == keys[b] for a, b in zip(v.tolist(), todo.tolist(), strict=True)), dtype=bool,
                               count=len(todo))
            out[todo[same]] = v[same]
            todo, at = todo[~same], (at[~same] + np.uint64(1)) & np.uint64(mask)
        return out

    def put(self, key: str, number: int) -> None:
        """Map ``key`` (already at ``keys[number]``) to ``number``, replacing its old number."""
        tab, keys, mask = self._tab, self._keys, self._mask
        i = hash(key) & mask
        while True:
            v = tab[i]
            if v < 0:
                break
            if v == number or keys[v] == key:
                tab[i] = number
                return
            i = (i + 1) & mask
        tab[i] = number
        self._n += 1
        if 3 * self._n > 2 * len(tab):
            self._build(2 * len(tab))

    __setitem__ = put

    def pop(self, key: str, default: Any = None) -> Any:
        """Remove ``key`` (still at ``keys[number]``): its number, or ``default``. The entries
        after it in its run move back (no tombstones: a lookup stops at the first hole)."""
        tab, keys, mask = self._tab, self._keys, self._mask
        i = hash(key) & mask
        while True:
            v = tab[i]
            if v < 0:
                return default
            if keys[v] == key:
                break
            i = (i + 1) & mask
        self._n -= 1
        hole, j = i, i
        while True:
            j = (j + 1) & mask
            w = tab[j]
            if w < 0:
                break
            home = hash(keys[w]) & mask
            # w may fill the hole when its home is not cyclically in (hole, j]
            if (j - home) & mask >= (j - hole) & mask:
                tab[hole] = w
                hole = j
        tab[hole] = _EMPTY
        return v

    def _build(self, size: int) -> None:
        """Fill a table of ``size`` slots (a power of two) with every id of ``keys``: sorted by
        home slot, each goes to the first free slot from its home on (a running maximum); the few
        that run past the end wrap around, one by one."""
        keys = self._keys
        if len(keys) < _NUMPY_FROM:  # small: one by one (and no numpy), then swapped in
            fresh = IdMap(keys)
            fresh._tab, fresh._mask = array("i", [_EMPTY]) * size, size - 1
            for number, key in enumerate(keys):
                if key is not None:
                    fresh.put(key, number)
            if fresh._n < len(keys) - keys.count(None):
                raise ValueError(f"id {next(k for k in keys if k is not None and keys.count(k) > 1)!r} twice")
            self._tab, self._mask, self._n = fresh._tab, fresh._mask, fresh._n
            return
        import numpy as np

        hashes = np.fromiter(map(hash, keys), dtype=np.int64, count=len(keys))
        numbers = np.arange(len(keys))
        maybe = np.flatnonzero(hashes == hash(None))  # free numbers (or, once in 2**64, an id)
        if len(maybe):
            free = [i for i in maybe.tolist() if keys[i] is None]
            numbers, hashes = np.delete(numbers, free), np.delete(hashes, free)
        hashes = hashes.view(np.uint64)
        bits = size.bit_length() - 1
        # rotated so that the home slot (the low bits) sorts first, and equal hashes end up adjacent
        rot = (hashes >> np.uint64(bits)) | (hashes << np.uint64(64 - bits)) if bits else hashes
        order = np.argsort(rot, kind="stable")
        rot = rot[order]
        same = np.flatnonzero(rot[1:] == rot[:-1])
        if len(same):  # an id twice has one hash: among the (few) ids sharing theirs
            clash = [keys[i] for i in numbers[order[np.union1d(same, same + 1)]].tolist()]
            if len(set(clash)) < len(clash):
                raise ValueError(f"id {next(k for k in clash if clash.count(k) > 1)!r} twice")
        home = (rot >> np.uint64(64 - bits)).astype(np.int64) if bits else np.zeros(len(rot), dtype=np.int64)
        steps = np.arange(len(home))
        pos = np.maximum.accumulate(home - steps) + steps if len(home) else home
        tab = np.full(size, _EMPTY, dtype=np.int32)
        fits = pos < size
        tab[pos[fits]] = numbers[order[fits]]
        self._tab = array("i")
        self._tab.frombytes(tab.tobytes())
        self._mask = size - 1
        self._n = int(fits.sum())
        for number in numbers[order[~fits]].tolist():  # past the end: wrap to the start
            self.put(keys[number], number)


def _size_for(n: int) -> int:
    """The table's size for ``n`` ids: a power of two at least twice ``n``."""
    size = _MIN_SIZE
    while size < 2 * n:
        size *= 2
    return size
