"""The BM25 index's inverted side: each term's postings (the memories holding it, as slots, and how
often), kept in levels by frequency and, for a common word, as 2-bit codes per slot; the lookups of
memories in them; and the lexicon (term -> term id -> postings) that holds them.

A memory is a *slot*: a row of the index's per-memory arrays (see ``_index_data``). Everything
here is numpy arrays over slots, read by the top-N search (``_index_topn``) and changed by adds and
removals; nothing here scores.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

__all__ = ["UNBOUNDED", "Lexicon", "Postings", "Run", "empty_postings", "find", "held", "load_numpy", "member"]

# a term with up to this many postings per memory to look it up in is merged with the memories
# rather than binary-searched (see find; on this 2-core VM merging two sorted runs is the faster
# up to 2-3 postings per memory, in a 100k store as in a 1M one; 2 was 1% faster than 4 in searches)
_MERGE = 2
# a term held by at least this share of the slots gets codes (made when first looked up in): each
# slot's frequency in two bits, 0 to 3 (3: three times or more), so a lookup of many memories in it
# reads their frequencies at once, not binary searches of large arrays (at 1M, a common word's
# lookups ~8x faster; codes rather than a bitmap of the slots and lookups of the memories held twice
# and more: ~20 numpy calls less a lookup, at 100k 6% of a search). Codes cost a quarter byte a slot:
# in benchmarks/store_scale.py's stores, ~8 B a memory once all 33 such words were looked up (as a
# bitmap, 1/16 was 4% slower at 1M than 1/32)
_CODES = 1 / 32
UNBOUNDED = 1 << 30  # a frequency bound that bounds nothing (``held``; ``Term.thr`` before a walk)

_np: Any = None


def load_numpy() -> Any:
    # imported on first use: numpy costs ~60 ms and `import memwire` should stay light
    global _np
    if _np is None:
        import numpy

        _np = numpy
    return _np


class Run:
    """Postings: slots ascending and a frequency for each, in numpy arrays with room to grow (an
    add appends; a reused slot or a removal shifts, both rare)."""

    __slots__ = ("n", "slots", "tfs")

    def __init__(self, slots: Any = None, tfs: Any = None) -> None:
        np = load_numpy()
        self.slots = np.empty(2, dtype=np.int32) if slots is None else slots
        self.tfs = np.empty(2, dtype=np.uint16) if tfs is None else tfs
        self.n = 0 if slots is None else len(slots)

    def add(self, slot: int, tf: int) -> None:
        np = load_numpy()
        n = self.n
        if n == len(self.slots):
            size = max(4, 2 * n)
            slots, tfs = np.empty(size, dtype=np.int32), np.empty(size, dtype=np.uint16)
            slots[:n], tfs[:n] = self.slots[:n], self.tfs[:n]
            self.slots, self.tfs = slots, tfs
        if n == 0 or slot > self.slots[n - 1]:
            self.slots[n], self.tfs[n] = slot, tf
        else:  # a reused slot: keep the order
            at = int(np.searchsorted(self.slots[:n], slot))
            self.slots[at + 1 : n + 1] = self.slots[at:n].copy()
            self.tfs[at + 1 : n + 1] = self.tfs[at:n].copy()
            self.slots[at], self.tfs[at] = slot, tf
        self.n = n + 1

    def remove(self, slot: int) -> None:
        n = self.n
        at = int(load_numpy().searchsorted(self.slots[:n], slot))
        if at < n and self.slots[at] == slot:
            self.slots[at : n - 1] = self.slots[at + 1 : n].copy()
            self.tfs[at : n - 1] = self.tfs[at + 1 : n].copy()
            self.n = n - 1


_EMPTY: list[Postings] = []


def empty_postings() -> Postings:
    """One shared empty postings, never written to: a tier no memory fills, and a feedback term's
    (its postings are never read). A new one allocates two arrays: ~2 us each time."""
    if not _EMPTY:
        _EMPTY.append(Postings())
    return _EMPTY[0]


class Postings(Run):
    """One term's postings, and apart those of the memories holding it at least twice (``hi2``)
    and at least three times (``hi3``): the top-N search bounds what a common word adds to most
    memories by what it adds at frequency 1 (see ``_index_topn``). For a common word, each slot's
    frequency up to 3 in two bits (``codes``, see ``_CODES``), kept in step once made."""

    __slots__ = ("codes", "hi2", "hi3", "maxtf")

    def __init__(self, slots: Any = None, tfs: Any = None, hi2: Run | None = None, hi3: Run | None = None) -> None:
        super().__init__(slots, tfs)
        self.maxtf = int(self.tfs[: self.n].max()) if self.n else 0  # only grows: a bound
        self.hi2, self.hi3 = hi2, hi3
        self.codes: Any = None

    def coded(self, slots: Any, size: int) -> Any:
        """How often each of ``slots`` (ascending, under ``size``) holds the term, 0 to 3 (3:
        three times or more), read from the codes (made or grown to ``size`` slots first): slot
        ``s`` is bits ``2 * (s % 4)`` and up of byte ``s // 4``."""
        np = load_numpy()
        if self.codes is None:
            tf = np.zeros(size + (-size % 4), dtype=np.uint8)
            tf[self.slots[: self.n]] = np.minimum(self.tfs[: self.n], 3)
            four = tf.reshape(-1, 4)
            self.codes = four[:, 0] | four[:, 1] << 2 | four[:, 2] << 4 | four[:, 3] << 6
        elif len(slots) and int(slots[-1]) >> 2 >= len(self.codes):
            self._room(size)
        return (self.codes.take(slots >> 2) >> ((slots & 3) << 1)) & 3

    def _room(self, size: int) -> None:
        """Codes for at least ``size`` slots (the new ones 0)."""
        np = load_numpy()
        grown = np.zeros(max(2 * len(self.codes), (size + 3) >> 2), dtype=np.uint8)
        grown[: len(self.codes)] = self.codes
        self.codes = grown

    def _code(self, slot: int, tf: int) -> None:
        """Set ``slot``'s code to ``tf`` (up to 3)."""
        if slot >> 2 >= len(self.codes):
            self._room(slot + 1)
        shift = (slot & 3) << 1
        self.codes[slot >> 2] = (int(self.codes[slot >> 2]) & ~(3 << shift)) | (min(tf, 3) << shift)

    @classmethod
    def of(cls, slots: Any, tfs: Any) -> Postings:
        """Postings of these slots (ascending) and frequencies (arrays it keeps), with their
        tiers."""
        np = load_numpy()
        p = cls(slots, tfs)
        for least in (2, 3) if p.maxtf >= 2 else ():  # most terms are held once by each memory
            many = np.flatnonzero(tfs >= least)
            if len(many):
                setattr(p, f"hi{least}", Run(slots.take(many), tfs.take(many)))
        return p

    def add(self, slot: int, tf: int) -> None:
        tf = min(tf, 65535)  # a memory is at most 4,000 characters: never reached
        super().add(slot, tf)
        self.maxtf = max(self.maxtf, tf)
        if tf >= 2:
            if self.hi2 is None:
                self.hi2 = Run()
            self.hi2.add(slot, tf)
        if tf >= 3:
            if self.hi3 is None:
                self.hi3 = Run()
            self.hi3.add(slot, tf)
        if self.codes is not None:
            self._code(slot, tf)

    def remove(self, slot: int) -> None:
        super().remove(slot)
        for run in (self.hi2, self.hi3):
            if run is not None:
                run.remove(slot)
        if self.codes is not None:
            self._code(slot, 0)

    def at_least(self, tf: int) -> Run:
        """The postings of frequency ``tf`` (1, 2 or 3) or more (read only)."""
        run = self if tf <= 1 else self.hi2 if tf == 2 else self.hi3
        return run if run is not None else empty_postings()


# ---- lookups of memories in postings


def member(values: Any, xs: Any) -> Any:
    """Whether each of ``values`` is in ``xs`` (sorted, distinct): ``np.isin`` for the few slots
    a search excludes, without its ~30 us of choosing a method."""
    np = load_numpy()
    if not len(xs):
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(xs.searchsorted(values), len(xs) - 1)
    return xs.take(at) == values


def find(run: Run, slots: Any) -> tuple[Any, Any]:
    """Where in ``slots`` (distinct, ascending) ``run`` has postings, ascending, and their
    frequencies. Few slots are binary-searched; many (``run`` holding up to ``_MERGE`` times
    as many postings) are merged with the postings: a stable sort of the two sorted runs,
    where a slot held follows its posting."""
    np = load_numpy()
    have, n = run.slots[: run.n], run.n
    if n > _MERGE * len(slots):
        at = np.minimum(have.searchsorted(slots), n - 1)
        found = (have[at] == slots).nonzero()[0]
        return found, run.tfs[at[found]]
    both = np.concatenate((have, slots))
    order = both.argsort(kind="stable")
    same = (both[order[1:]] == both[order[:-1]]).nonzero()[0]
    return order[same + 1] - n, run.tfs[order[same]]


def _find_coded(p: Postings, slots: Any, below: int, size: int) -> tuple[Any, Any]:
    """``find`` in a common word's postings, by its codes (``_CODES``; ``size`` slots): where in
    ``slots`` ``p`` has postings of frequency under ``below`` and those frequencies (only the few
    held 3 times or more are searched for, when ``below`` counts them)."""
    tfs = p.coded(slots, size)
    at = ((tfs != 0) & (tfs < below)).nonzero()[0]
    tfs = tfs.take(at)
    if below > 3:
        many = (tfs == 3).nonzero()[0]
        if len(many):
            i, n = find(p.at_least(3), slots.take(at.take(many)))
            tfs[many.take(i)] = n
    return at, tfs


def held(p: Postings, slots: Any, below: int, size: int) -> tuple[Any, Any]:
    """Where in ``slots`` (distinct, ascending) ``p`` has postings of frequency under ``below``
    (``UNBOUNDED``: any), and those frequencies; a common word's (held by ``_CODES`` of the
    ``size`` slots or more) read from its codes."""
    if p.codes is not None or p.n >= _CODES * size:
        return _find_coded(p, slots, below, size)
    at, tfs = find(p, slots)
    if below != UNBOUNDED:
        few = tfs < below
        at, tfs = at[few], tfs[few]
    return at, tfs


# ---- the lexicon


class Lexicon:
    """The terms: term -> term id, term id -> term, and each term's postings. After a restore a
    term's postings are None until first used (``post``), made then from the snapshot's flat
    arrays: most terms are rare and never asked for, and a ``Postings`` with its arrays is ~300 B,
    the flat arrays 6 B a posting."""

    __slots__ = ("flat", "postings", "term_id", "terms")

    def __init__(self) -> None:
        self.term_id: dict[str, int] = {}
        self.terms: list[str] = []  # term id -> term
        self.postings: list[Postings | None] = []  # term id -> postings (None: see ``flat``)
        self.flat: tuple[Any, Any, Any] | None = None  # the restored postings: offsets by term id, slots, tfs

    def add(self, slot: int, tf: Counter[str]) -> list[int]:
        """Post memory ``slot`` holding each term of ``tf`` so often; its term ids, one per
        occurrence (a term's consecutive). Call under the lock."""
        ids, term_id, postings = [], self.term_id, self.postings
        for term, n in tf.items():
            tid = term_id.get(term)
            if tid is None:
                tid = term_id[term] = len(self.terms)
                self.terms.append(term)
                postings.append(Postings())
            self.post(tid).add(slot, n)
            ids += [tid] * n
        return ids

    def post(self, tid: int) -> Postings:
        """The postings of term ``tid``, made from the restored arrays on first use. Call under
        the lock."""
        p = self.postings[tid]
        if p is None:
            assert self.flat is not None
            slots, tfs = self._flat_run(tid)
            p = self.postings[tid] = Postings.of(slots, tfs)
        return p

    def _flat_run(self, tid: int) -> tuple[Any, Any]:
        off, slots, tfs = self.flat  # type: ignore[misc]
        a, b = int(off[tid]), int(off[tid + 1])
        return slots[a:b], tfs[a:b]

    def count(self, tid: int) -> int:
        """How many memories hold term ``tid`` (without making its postings)."""
        p = self.postings[tid]
        if p is not None:
            return p.n
        off = self.flat[0]  # type: ignore[index]
        return int(off[tid + 1] - off[tid])

    def counts(self, tids: list[int]) -> list[int]:
        """``count`` of each of ``tids``, the restored ones' read at once."""
        ps = self.postings
        if self.flat is None or len(self.flat[0]) < 2:
            return [ps[t].n for t in tids]  # type: ignore[union-attr]
        np = load_numpy()
        off = self.flat[0]
        # a term added since the restore has its postings made (its count is theirs): clipped here
        at = np.minimum(np.asarray(tids, dtype=np.int64), len(off) - 2)
        restored = (off.take(at + 1) - off.take(at)).tolist()
        return [c if (p := ps[t]) is None else p.n for t, c in zip(tids, restored, strict=True)]

    def df(self, term: str) -> int:
        tid = self.term_id.get(term)
        return 0 if tid is None else self.count(tid)

    def arrays(self, tid: int) -> tuple[Any, Any]:
        """Term ``tid``'s posting slots and frequencies (views; without making its postings)."""
        p = self.postings[tid]
        return (p.slots[: p.n], p.tfs[: p.n]) if p is not None else self._flat_run(tid)

    def restore(self, terms: list[str], off: Any, slots: Any, tfs: Any) -> None:
        """Take the terms and flat postings of a snapshot (see ``IndexData.restore``)."""
        np = load_numpy()
        self.terms = list(terms)
        self.term_id = {t: i for i, t in enumerate(terms)}
        slots, tfs = slots.astype(np.int32, copy=False), tfs.astype(np.uint16, copy=False)
        self.flat = (np.asarray(off, dtype=np.int64), slots, tfs)
        self.postings = [None] * len(terms)  # each made when first used (``post``)
