"""The BM25 index's data: its memories (ids, slots, lengths, dates), each memory's term ids (the
forward index), the conversation links between memories, and the lexicon with every term's
postings (``_index_postings``); how an add, a removal and a snapshot change them.

A memory is a *slot*, a row of per-memory numpy arrays; a removed memory's slot is reused. The
re-ranking reads the few hundred memories it scores from the forward index (``runs``); the top-N
search reads the postings. Nothing here scores (``_index_scoring``) and nothing here locks: the
index (``_index.BM25Index``) calls everything under its lock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from typing import Any

from ._idmap import IdMap
from ._index_postings import Lexicon, load_numpy

__all__ = ["IndexData", "Runs"]

_FWD_SLACK = 1 << 16  # the forward index is compacted once its holes outnumber this and its ids

# the forward index's runs of some memories (``IndexData.runs``): each run's memory (an index into
# them), term id and frequency, the memories' lengths, and each run's saturation where kept (else
# None, see ``_index_scoring.Scorer.score_all``)
Runs = tuple[Any, Any, Any, Any, Any]


class IndexData:
    """The memories, their terms and their links, as the index holds them. Not thread-safe."""

    def __init__(self) -> None:
        self.ids: list[str | None] = []  # slot -> doc id
        self.slot = IdMap(self.ids)  # doc id -> slot (a row in the length array)
        self.lens: Any = None  # numpy uint32 array: slot -> document length (0: no memory)
        self.dates: list[str | None] = []  # slot -> the date it was indexed with
        self.free: list[int] = []  # slots of removed documents, reused first
        self.total_len = 0
        # every memory's term ids, one per occurrence (a term's consecutive), in one array: slot s
        # holds lens[s] of them from foff[s]; removed memories leave holes, compacted by _fput
        self.fwd: Any = None
        self.foff: Any = None  # numpy int64, grown with lens
        self.fend = 0  # how much of fwd is used
        self.fdead = 0  # how much of that is holes
        # conversation neighbors (see the module docstring of ``_index``): slot -> previous / next
        # slot, -1 none
        self.prev: Any = None  # numpy int32 arrays, grown with lens
        self.next: Any = None
        self.tails: dict[str, int] = {}  # date -> its last slot: a new memory follows it
        self.links = 0  # how many prev/next links exist (none: searches skip the neighbor pass)
        self.lex = Lexicon()
        self.version = 0  # counts the changes (what is kept for searches is of one version)

    # ------------------------------------------------------------------ updates

    def _grow(self, size: int) -> None:
        """Room for ``size`` slots in the per-slot arrays. Only what is copied is written: the
        rest (a new slot's links are set by ``insert``) stays untouched, so costs no memory
        until used."""
        np = load_numpy()
        old = 0 if self.lens is None else len(self.lens)
        lens = np.zeros(size, dtype=np.uint32)
        prev, nxt = np.empty(size, dtype=np.int32), np.empty(size, dtype=np.int32)
        foff = np.zeros(size, dtype=np.int64)
        if old:
            lens[:old], prev[:old], nxt[:old], foff[:old] = self.lens, self.prev, self.next, self.foff
        self.lens, self.prev, self.next, self.foff = lens, prev, nxt, foff

    def insert(self, doc_id: str, tf: Counter[str], date: str | None = None) -> None:
        """Index memory ``doc_id`` holding each term of ``tf`` so often, replacing what was
        indexed under that id (a replacement of the same date keeps its slot, so its neighbors);
        a new memory of a date follows the last one of that date (see ``_index``)."""
        np = load_numpy()
        old = self.slot.get(doc_id)
        # a replacement of the same date keeps its slot, so it keeps its neighbors
        keep = old is not None and self.dates[old] == date
        if old is not None:
            self.delete(doc_id, unlink=not keep)
        if keep:
            slot = self.free.pop()  # the slot just freed
            assert slot == old
        elif self.free:
            slot = self.free.pop()
        else:
            slot = len(self.ids)
            self.ids.append(None)
            self.dates.append(None)
            if self.lens is None or slot >= len(self.lens):
                self._grow(max(64, 2 * slot))
            self.prev[slot] = self.next[slot] = -1
        self.ids[slot] = doc_id  # first: the map finds a slot by its id there
        self.slot[doc_id] = slot
        self.dates[slot] = date
        if date and not keep:
            self._follow(slot, date)
        self._fput(slot, np.array(self.lex.add(slot, tf), dtype=np.uint32))
        length = sum(tf.values())
        self.lens[slot] = length
        self.total_len += length
        self.version += 1

    def _follow(self, slot: int, date: str) -> None:
        """Link ``slot``, a new memory of ``date``, after the last one of that date still
        indexed."""
        tail = self.tails.get(date)
        if tail is not None and self.next[tail] < 0:
            self.prev[slot], self.next[tail] = tail, slot
            self.links += 1
        self.tails[date] = slot

    def _fput(self, slot: int, ids: Any) -> None:
        """Store a memory's term ids at the end of ``fwd`` (compacting it first when it is
        mostly holes: each compaction follows as many removals as there are live ids)."""
        np = load_numpy()
        if self.fdead > max(_FWD_SLACK, self.fend - self.fdead):
            live = np.flatnonzero(self.lens[: len(self.ids)])  # not ``slot``: its length is not set yet
            lens = self.lens[live].astype(np.int64)
            fwd = np.empty(max(1024, 2 * int(lens.sum()) + len(ids)), dtype=np.uint32)
            fwd[: int(lens.sum())] = self.fwd[self.spans(live, lens)]
            self.foff[live] = np.cumsum(lens) - lens
            self.fwd, self.fend, self.fdead = fwd, int(lens.sum()), 0
        end = self.fend + len(ids)
        if self.fwd is None or end > len(self.fwd):
            fwd = np.empty(max(1024, 2 * end), dtype=np.uint32)
            if self.fend:
                fwd[: self.fend] = self.fwd[: self.fend]
            self.fwd = fwd
        self.fwd[self.fend : end] = ids
        self.foff[slot] = self.fend
        self.fend = end

    def delete(self, doc_id: str, unlink: bool = True) -> None:
        """Drop ``doc_id`` (nothing happens if it is not there); its slot is reused next.
        ``unlink``: its neighbors become each other's (else a replacement takes its place)."""
        slot = self.slot.pop(doc_id, None)
        if slot is None:
            return
        if unlink:
            self._unlink(slot)
        for tid in self.terms_of(slot):
            self.lex.post(tid).remove(slot)
        self.total_len -= int(self.lens[slot])
        self.fdead += int(self.lens[slot])
        self.lens[slot] = 0
        self.ids[slot] = None
        self.dates[slot] = None
        self.free.append(slot)
        self.version += 1

    def _unlink(self, slot: int) -> None:
        """Take ``slot`` out of its conversation: its neighbors become each other's (a forgotten
        turn leaves the rest in order)."""
        before, after = int(self.prev[slot]), int(self.next[slot])
        self.links -= (before >= 0) + (after >= 0) - (before >= 0 and after >= 0)
        if before >= 0:
            self.next[before] = after
        if after >= 0:
            self.prev[after] = before
        self.prev[slot] = self.next[slot] = -1
        date = self.dates[slot]
        if date and self.tails.get(date) == slot:
            if before >= 0:
                self.tails[date] = before
            else:
                del self.tails[date]

    # ------------------------------------------------------------------ reading

    def spans(self, slots: Any, lens: Any) -> Any:
        """The positions in ``fwd`` of the term ids of ``slots`` (of lengths ``lens``), in turn."""
        np = load_numpy()
        ends = np.cumsum(lens)
        return np.arange(int(ends[-1]) if len(ends) else 0) + (self.foff.take(slots) - (ends - lens)).repeat(lens)

    def terms_of(self, slot: int) -> dict[int, int]:
        """A document's term ids and frequencies."""
        at = int(self.foff[slot])
        counts: dict[int, int] = {}
        for tid in self.fwd[at : at + int(self.lens[slot])].tolist():
            counts[tid] = counts.get(tid, 0) + 1
        return counts

    def runs(self, slots: Any) -> Runs:
        """Every (memory, term id, frequency) of the memories ``slots`` (the memory as an index
        into ``slots``), read from their stored term ids (a memory's occurrences of a term are
        consecutive), and the memories' lengths (``Scorer.score_runs`` scores only the runs of the
        terms it is given: most of a memory's terms are not the query's)."""
        np = load_numpy()
        lens = self.lens.take(slots)
        counts = lens.astype(np.int64)
        tids = self.fwd.take(self.spans(slots, counts))
        owner = np.arange(len(slots)).repeat(counts)
        if not len(tids):
            return owner, tids, np.zeros(0, dtype=np.int64), lens, None
        start = np.empty(len(tids), dtype=bool)
        start[0] = True
        np.not_equal(tids[1:], tids[:-1], out=start[1:])
        start[1:] |= owner[1:] != owner[:-1]
        first = start.nonzero()[0]
        tfs = np.empty(len(first), dtype=np.int64)  # each run's length (np.diff of np.append: 3x slower)
        tfs[-1] = len(tids) - first[-1]
        np.subtract(first[1:], first[:-1], out=tfs[:-1])
        return owner.take(first), tids.take(first), tfs, lens, None

    def slots_of(self, ids: Collection[str]) -> Any:
        """The slots of ``ids`` that are indexed, sorted and distinct (``member`` reads them)."""
        np = load_numpy()
        # a set and sorted(): half np.unique's time for the few ids a search excludes
        return np.array(sorted(set(map(self.slot.get, ids)) - {None}), dtype=np.int64)

    def neighbors_of(self, cand: Any) -> Any:
        """The conversation neighbors of the slots ``cand`` (repeats possible)."""
        np = load_numpy()
        if not self.links or not len(cand):
            return np.zeros(0, dtype=np.int32)
        near = np.concatenate((self.prev.take(cand), self.next.take(cand)))
        return near[near >= 0]

    def places(self, cand: Any, at: Any) -> tuple[Any, Any]:
        """Where ``cand`` and their conversation neighbors are in ``at`` (ascending, holding them
        all), for ``_index_scoring.with_neighbors``."""
        np = load_numpy()
        own = np.minimum(at.searchsorted(cand), len(at) - 1)
        if not self.links or not len(cand):
            return own, None
        near = np.concatenate((self.prev.take(cand), self.next.take(cand)))
        return own, (near >= 0, np.minimum(at.searchsorted(near), len(at) - 1))

    def neighbors(self, doc_id: str) -> tuple[str | None, str | None]:
        """The ids of the previous and next conversation neighbors of ``doc_id``."""
        slot = self.slot[doc_id]
        p, n = int(self.prev[slot]), int(self.next[slot])
        return (self.ids[p] if p >= 0 else None), (self.ids[n] if n >= 0 else None)

    # ------------------------------------------------------------------ snapshot

    def export(self) -> dict[str, Any]:
        """The whole state as arrays and lists of strings (see ``_snapshot``)."""
        np = load_numpy()
        used, lex = len(self.ids), self.lex
        runs = [lex.arrays(tid) for tid in range(len(lex.postings))]
        counts = [len(slots) for slots, _ in runs]
        lens = self.lens[:used].astype(np.int64)
        terms = self.fwd[self.spans(np.arange(used), lens)] if used else np.zeros(0, dtype=np.uint32)
        return {
            "ids": list(self.ids), "dates": list(self.dates), "terms": list(lex.terms),
            "tail_dates": list(self.tails), "tail_slots": np.array(list(self.tails.values()), dtype=np.int64),
            "lens": self.lens[:used].astype(np.float64),  # as the snapshot has them
            "prev": self.prev[:used].copy() if used else np.zeros(0, dtype=np.int32),
            "next": self.next[:used].copy() if used else np.zeros(0, dtype=np.int32),
            "free": np.array(self.free, dtype=np.int64),
            "scalars": np.array([self.links, self.total_len], dtype=np.int64),
            "post_off": np.concatenate(([0], np.cumsum(counts, dtype=np.int64))),
            "post_slots": np.concatenate([r[0] for r in runs] or [np.zeros(0, np.int32)]),
            "post_tfs": np.concatenate([r[1] for r in runs] or [np.zeros(0, np.uint16)]),
            "doc_off": np.concatenate(([0], np.cumsum(4 * lens))),
            "doc_terms": terms.astype("<u4").view(np.uint8),
        }

    @staticmethod
    def check(state: dict[str, Any]) -> None:
        """Raise ValueError unless ``state`` has the shape ``export`` gives (not its sense:
        ``_snapshot`` only restores what it verified against the files)."""
        np = load_numpy()
        ids, terms = state["ids"], state["terms"]
        used, off, doc_off = len(ids), state["post_off"], state["doc_off"]
        if not (len(state["dates"]) == len(state["lens"]) == len(state["prev"]) == len(state["next"]) == used
                and len(off) == len(terms) + 1 and len(doc_off) == used + 1
                and off[-1] == len(state["post_slots"]) == len(state["post_tfs"])
                and doc_off[-1] == len(state["doc_terms"])):
            raise ValueError("index arrays of inconsistent lengths")
        if not np.array_equal(np.diff(doc_off), 4 * np.asarray(state["lens"]).astype(np.int64)):
            raise ValueError("index term ids of inconsistent lengths")

    def restore(self, state: dict[str, Any]) -> None:
        """Take the state ``export`` gave (``check``ed) into this empty data."""
        np = load_numpy()
        ids, used, doc_off = state["ids"], len(state["ids"]), state["doc_off"]
        self._grow(max(used, 1))  # exactly: an add grows it
        self.lens[:used], self.prev[:used], self.next[:used] = state["lens"], state["prev"], state["next"]
        self.ids, self.dates = list(ids), list(state["dates"])
        self.slot = IdMap.of(self.ids)
        raw = np.ascontiguousarray(state["doc_terms"], dtype=np.uint8)
        self.fwd = raw.view("<u4").astype(np.uint32, copy=False)
        self.fend, self.fdead = len(self.fwd), 0
        self.foff[:used] = np.asarray(doc_off[:-1]) // 4
        self.free = state["free"].tolist()
        self.tails = dict(zip(state["tail_dates"], state["tail_slots"].tolist(), strict=True))  # saved from one dict
        self.links, self.total_len = (int(v) for v in state["scalars"])
        self.lex.restore(state["terms"], state["post_off"], state["post_slots"], state["post_tfs"])
        self.version += 1
