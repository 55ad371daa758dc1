"""An incremental BM25 index: rank-bm25's scoring, without rescoring or rebuilding everything.

The model is ``rank_bm25.BM25Plus(corpus, k1=K1, b=B, delta=DELTA)`` over all indexed documents
(``tests/memory/test_index.py`` checks the scores against it), but only documents that share a
term with the query are scored: an inverted index maps each term to its postings (document ->
term frequency). Adding or removing a document updates its postings, its length and the total
length; idf (from the postings' size) and the average length are derived at query time, so
nothing is ever rebuilt. BM25Plus rather than BM25Okapi: Okapi's idf is zero or negative for a
word in half the documents, so a store of one or two memories could find nothing. In rank-bm25's
BM25Plus every document, matching or not, gets ``delta * idf`` for each query term; that is the
same for all documents, so it changes no ranking and ``search`` leaves it out.

The query is the analyzed text (each occurrence weighs 1, as in rank-bm25), its context
(``CONTEXT_WEIGHT`` per term) and pseudo-relevance feedback: the most distinctive terms of the
best ``FEEDBACK_DOCS`` hits (up to ``FEEDBACK_WEIGHT``), which finds memories that answer a query
in other words. Every score is rank-bm25's for that weighted query (``expand`` shows it), plus
the neighbor share below.

Ranking is in two steps, as BM25 with RM3 re-ranking is. The pool is the best ``max(POOL, k)``
memories on the query's own terms (text and context) that pass the score cut, ties by id;
feedback and the neighbors' share then re-rank the pool and those of its neighbors that share a
term with the query and pass the cut on their own (feedback terms are picked from them, and
every score they use is exact). A memory outside both is not returned, however feedback or a
neighbor would have lifted it. The pool is an exact top-N over the postings, which skips most of
them (see ``_best``), so a search costs what the query's rarer words hold, not the store's size;
the re-ranking reads the few hundred memories concerned from a forward index (each memory's term
ids). ``tests/memory/test_index_pruning.py`` checks the result against scoring every memory.

Conversation neighbors: memories are often the turns of a conversation, and a turn means little
without the one it answers ("How long have you had them?" / "Three years now!"). Documents added
one after another with the same non-empty date (a session written in order: ``add_many`` in order,
or successive ``add`` calls) are linked as neighbors: a new document follows the last one still
indexed with its date. A memory without a date has none, so a store of undated facts ranks exactly
as before. A memory's score is its own plus ``NEIGHBOR_WEIGHT`` times the better of its two
neighbors' scores (after feedback; the feedback documents are also picked by this score).
``neighbors`` shows the links. Removing a memory links its two neighbors to each other; replacing a
document under the same id and date keeps its place; an edited memory (new text, new id in the
store) joins the end of its session. On LoCoMo this is worth about 5 points of recall@10, as much
on held-out conversations as on the tuning ones.

Scores returned by ``search`` are *normalized*: the BM25 score (without the delta constant) divided
by the query's ideal score, the idf sum of its ``IDEAL_TERMS`` most specific terms (a word the
store has never seen counts as df=0.5, more specific than any it has; a common word it has never
seen, ``COMMON_WEIGHT`` of that: see ``_ideal``). A memory holding every term
of a short query once, at average length, scores about 1.0, more with feedback terms and neighbors;
one matching only a common word scores near 0. Dividing every score of a query by one positive
number keeps the ranking identical to BM25's (plus neighbors) and makes one threshold mean the same
for short and long queries: ``min_score`` is "the share of what the query is about that the memory
covers". The cut is checked on the query's own terms (before feedback), a second time with common
English words (``text.COMMON_WORDS``: "make", "good", "work") counting ``COMMON_WEIGHT``, so a
memory that shares only such a word with the prompt is not returned. A CJK bigram (see ``text``)
counts half a word in the ideal, so a Chinese query is judged by its words, not its bigrams.
Feedback only reorders
memories that passed the cut, and so does the neighbors' share, so an unrelated prompt gets nothing
(and a memory sharing no term with the query is never returned, whatever its neighbors).
``DEFAULT_MIN_SCORE`` is the default.

Small stores: idf counts a store as having at least ``SMALL_STORE`` memories (the extra ones
lacking every word). In a store of a few memories, document frequencies say little about how
specific a word is, yet on a log scale they swing its weight: counted as 20 memories, a word in 3
memories weighs 0.52 of a word the store lacks, in 4 only 0.44, so one more memory about Rex in a
store of 8 made "What should I feed my dog Rex?" lose every Rex memory but the one saying "dog".
Counted as 50, the same word weighs 0.61 and 0.55, and a first Rex memory goes at 6 of 10 (when
"Rex" is in most memories, as "user" is in many stores). At ``SMALL_STORE`` memories and above
nothing changes: ranking and cut are rank-bm25's (LoCoMo's conversations have 369 to 680).

Threading: mutations and scoring take one lock, but text analysis (the slow part) runs outside it
and bulk adds release it every ``_CHUNK`` documents, so a search waits at most a few milliseconds.
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ._idmap import IdMap
from ._text import analyze, common_terms, is_bigram, recent_terms

if TYPE_CHECKING:
    from ..policies._query import Query

__all__ = [
    "BM25Index",
    "DEFAULT_MIN_SCORE",
    "K1",
    "B",
    "DELTA",
    "CONTEXT_WEIGHT",
    "NEIGHBOR_WEIGHT",
    "date_terms",
]

# BM25Plus parameters. Memories are about one sentence long, so length normalization matters
# little (low b); chosen on LoCoMo conversations 1-3 (see benchmarks/locomo.py).
K1 = 1.2
B = 0.2
DELTA = 1.0  # BM25Plus's delta: adds the same to every document in rank-bm25, ranking unchanged
CONTEXT_WEIGHT = 0.3  # a context term counts this much of a query term

# Pseudo-relevance feedback: terms of the best FEEDBACK_DOCS hits join the query, the strongest
# at FEEDBACK_WEIGHT. Chosen on LoCoMo conversations 1-3: +1 point of recall@5, +2 of recall@10.
FEEDBACK_DOCS = 5
FEEDBACK_TERMS = 20
FEEDBACK_WEIGHT = 0.5

# The pool: feedback and the neighbors' share re-rank only the POOL best memories on the query's
# own terms (at least the k asked for), and those of their neighbors that pass the cut, so the
# first pass is an exact top-N that skips most postings (see ``_best``). Chosen on LoCoMo: 100
# keeps every recall figure (30 and 50 lose up to 1.3 points of multi-hop recall@10).
POOL = 100

# Conversation neighbors: a memory also scores NEIGHBOR_WEIGHT times the better of its two
# neighbors' scores (see the module docstring). Chosen on LoCoMo conversations 1-3 (0.15-0.3 all
# give +3 to +5 points of recall@10 there and on the held-out 4-5).
NEIGHBOR_WEIGHT = 0.2

IDEAL_TERMS = 10  # a prompt's specificity is that of its 10 most specific words
COMMON_WEIGHT = 0.25  # what a common word (text.COMMON_WORDS) counts for in the score cut

# A memory must cover at least this share of the query's idf mass (see the module docstring).
# 0.2: about one of the query's five most specific words.
DEFAULT_MIN_SCORE = 0.2
# idf counts a store as having at least this many memories (see the module docstring): below it,
# the cut judges a memory as it would in a store of this size. 50: of 20, 50, 100 and 200 tried on
# small stores drawn from LoCoMo, the largest whose noise (memories returned that are not the
# evidence) stays under that of an 80-memory store, with 4-6 points more recall than 20.
SMALL_STORE = 50

_BATCH = 200  # levels of up to this many postings (together) are walked in one pass (see _best)
_SMALL = 2000  # a query whose terms hold this many postings or fewer has them all walked at once
# the pool's first estimate scores the best memories touched so far exactly (_probe) once there
# are this many times the pool's size of postings left to walk or candidates left to look up
_PROBE_WORTH = 5
# and once the walk is over, the candidates left that many times the pool's size or more are probed
# (again): their partial scores are closer to their own now (200: at 1M, the slow tail's p99 from
# 32 to 23 ms; at 100k a second probe costs more than it saves)
_REPROBE = 200
_CHUNK = 1000  # bulk adds release the lock this often
_FWD_SLACK = 1 << 16  # the forward index is compacted once its holes outnumber this and its ids
# a term with up to this many postings per memory to look it up in is merged with the memories
# rather than binary-searched (see _find; on this 2-core VM merging two sorted runs is the faster
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
# a store of up to this many slots is scored whole, every memory from its own terms (the forward
# index) in a few array operations, rather than pruned: there the pruning's few hundred numpy calls
# on small arrays cost more than it saves (see ``_score_all``; results are identical)
_DENSE = 2000
_IDFS = 1 << 16  # ``_idfs`` is emptied when it holds more (~100 B an entry)

_MONTHS = (
    "january february march april may june july august september october november december"
).split()
_MONTH_RE = re.compile(r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\b")
_ISO_RE = re.compile(r"\b((?:19|20)\d\d)-(\d\d?)(?:-\d\d?)?\b")
_YEAR_RE = re.compile(r"\b(?:19|20)\d\d\b")


def date_terms(date: str | None) -> list[str]:
    """Index terms for a memory's date: its month name and year ("8 May, 2023" -> may, 2023),
    so "what did we decide in May?" can match memories written then."""
    if not date:
        return []
    d = date.casefold()
    words: list[str] = []
    iso = _ISO_RE.search(d)
    if iso and 1 <= int(iso.group(2)) <= 12:
        words += [_MONTHS[int(iso.group(2)) - 1], iso.group(1)]
    else:
        month = _MONTH_RE.search(d)
        if month:
            words.append(_MONTHS[[m[:3] for m in _MONTHS].index(month.group(1))])
        words += _YEAR_RE.findall(d)[:1]
    return analyze(" ".join(words))


_np: Any = None


def _numpy() -> Any:
    # imported on first use: numpy costs ~60 ms and `import memwire` should stay light
    global _np
    if _np is None:
        import numpy

        _np = numpy
    return _np


class _Run:
    """Postings: slots ascending and a frequency for each, in numpy arrays with room to grow (an
    add appends; a reused slot or a removal shifts, both rare)."""

    __slots__ = ("slots", "tfs", "n")

    def __init__(self, slots: Any = None, tfs: Any = None) -> None:
        np = _numpy()
        self.slots = np.empty(2, dtype=np.int32) if slots is None else slots
        self.tfs = np.empty(2, dtype=np.uint16) if tfs is None else tfs
        self.n = 0 if slots is None else len(slots)

    def add(self, slot: int, tf: int) -> None:
        np = _numpy()
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
        at = int(_numpy().searchsorted(self.slots[:n], slot))
        if at < n and self.slots[at] == slot:
            self.slots[at : n - 1] = self.slots[at + 1 : n].copy()
            self.tfs[at : n - 1] = self.tfs[at + 1 : n].copy()
            self.n = n - 1


_EMPTY: list[_Postings] = []


def _empty() -> "_Postings":
    """One shared empty postings, never written to: a tier no memory fills, and a feedback term's
    (its postings are never read). A new one allocates two arrays: ~2 us each time."""
    if not _EMPTY:
        _EMPTY.append(_Postings())
    return _EMPTY[0]


def _member(values: Any, xs: Any) -> Any:
    """Whether each of ``values`` is in ``xs`` (sorted, distinct): ``np.isin`` for the few slots
    a search excludes, without its ~30 us of choosing a method."""
    np = _numpy()
    if not len(xs):
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(xs.searchsorted(values), len(xs) - 1)
    return xs.take(at) == values


class _Postings(_Run):
    """One term's postings, and apart those of the memories holding it at least twice (``hi2``)
    and at least three times (``hi3``): the top-N search bounds what a common word adds to most
    memories by what it adds at frequency 1 (see ``_best``). For a common word, each slot's
    frequency up to 3 in two bits (``codes``, see ``_CODES``), kept in step once made."""

    __slots__ = ("maxtf", "hi2", "hi3", "codes")

    def __init__(self, slots: Any = None, tfs: Any = None, hi2: _Run | None = None, hi3: _Run | None = None) -> None:
        super().__init__(slots, tfs)
        self.maxtf = int(self.tfs[: self.n].max()) if self.n else 0  # only grows: a bound
        self.hi2, self.hi3 = hi2, hi3
        self.codes: Any = None

    def coded(self, slots: Any, size: int) -> Any:
        """How often each of ``slots`` (ascending, under ``size``) holds the term, 0 to 3 (3:
        three times or more), read from the codes (made or grown to ``size`` slots first): slot
        ``s`` is bits ``2 * (s % 4)`` and up of byte ``s // 4``."""
        np = _numpy()
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
        np = _numpy()
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
    def of(cls, slots: Any, tfs: Any) -> "_Postings":
        """Postings of these slots (ascending) and frequencies (arrays it keeps), with their
        tiers."""
        np = _numpy()
        p = cls(slots, tfs)
        for least in (2, 3) if p.maxtf >= 2 else ():  # most terms are held once by each memory
            many = np.flatnonzero(tfs >= least)
            if len(many):
                setattr(p, f"hi{least}", _Run(slots.take(many), tfs.take(many)))
        return p

    def add(self, slot: int, tf: int) -> None:
        tf = min(tf, 65535)  # a memory is at most 4,000 characters: never reached
        super().add(slot, tf)
        self.maxtf = max(self.maxtf, tf)
        if tf >= 2:
            if self.hi2 is None:
                self.hi2 = _Run()
            self.hi2.add(slot, tf)
        if tf >= 3:
            if self.hi3 is None:
                self.hi3 = _Run()
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

    def at_least(self, tf: int) -> _Run:
        """The postings of frequency ``tf`` (1, 2 or 3) or more (read only)."""
        run = self if tf <= 1 else self.hi2 if tf == 2 else self.hi3
        return run if run is not None else _empty()


# the ``_forward`` runs of some memories: each run's memory (an index into them), term id and
# frequency, the memories' lengths, and each run's ``_saturation`` where kept (else None)
_Runs = tuple[Any, Any, Any, Any, Any]
# ``_score_all``: the live slots (ascending), their ``_forward`` runs, and ``_score_runs`` of them
_Scored = tuple[Any, _Runs, Any, Any, Any]


class BM25Index:
    """BM25 (rank-bm25's BM25Plus) over memories, updated one document at a time. Thread-safe."""

    def __init__(self, k1: float = K1, b: float = B, delta: float = DELTA) -> None:
        self.k1, self.b, self.delta = k1, b, delta
        self._lock = threading.Lock()
        self._ids: list[str | None] = []  # slot -> doc id
        self._slot = IdMap(self._ids)  # doc id -> slot (a row in the length array)
        # every memory's term ids, one per occurrence (a term's consecutive), in one array: slot s
        # holds _lens[s] of them from _foff[s]; removed memories leave holes, compacted by _fput
        self._fwd: Any = None
        self._foff: Any = None  # numpy int64, grown with _lens
        self._fend = 0  # how much of _fwd is used
        self._fdead = 0  # how much of that is holes
        self._free: list[int] = []  # slots of removed documents, reused first
        self._lens: Any = None  # numpy uint32 array: slot -> document length (0: no memory)
        self._dates: list[str | None] = []  # slot -> the date it was indexed with
        # conversation neighbors (see the module docstring): slot -> previous / next slot, -1 none
        self._prev: Any = None  # numpy int32 arrays, grown with _lens
        self._next: Any = None
        self._tails: dict[str, int] = {}  # date -> its last slot: a new memory follows it
        self._links = 0  # how many prev/next links exist (none: searches skip the neighbor pass)
        self._total_len = 0
        self._term_id: dict[str, int] = {}
        self._term: list[str] = []  # term id -> term
        # term id -> postings; after a restore None until first used (most terms are rare and never
        # asked for: a _Postings with its arrays is ~300 B, the snapshot's flat arrays 6 B a posting)
        self._postings: list[_Postings | None] = []
        self._flat: tuple[Any, Any, Any] | None = None  # the restored postings: offsets by term id, slots, tfs
        self._tcoef: Any = None  # per-query scratch: term id -> the query's coef (_score_runs), zero but there
        self._tmark: Any = None  # and whether it is one of the terms scored (bool), False but there
        self._quantum = 2.0**32  # the current query's (see _quantum_for)
        self._whole: tuple[Any, _Runs] | None = None  # _score_all's slots and runs, until a change
        # term id -> idf, until a change: feedback weighs the terms of the same few memories again
        # and again (in a small store, query after query), each a count of postings and a log
        self._idfs: dict[int, float] = {}

    # ------------------------------------------------------------------ updates

    @staticmethod
    def _analyze(text: str, date: str | None) -> Counter[str]:
        return Counter(analyze(text) + date_terms(date))

    def add(self, doc_id: str, text: str, date: str | None = None) -> None:
        """Index ``text`` as ``doc_id``, replacing what was indexed under that id (a replacement
        of the same date keeps its neighbors). A new document follows the last one added with
        the same date as its conversation neighbor (see the module docstring)."""
        tf = self._analyze(text, date)
        with self._lock:
            self._insert(doc_id, tf, date)

    def add_many(self, docs: Iterable[tuple[str, str, str | None]]) -> None:
        """Index many (id, text, date) documents, in conversation order (consecutive documents
        of one date are neighbors); later duplicates of an id win."""
        batch: list[tuple[str, Counter[str], str | None]] = []
        for doc_id, text, date in docs:
            batch.append((doc_id, self._analyze(text, date), date))
            if len(batch) >= _CHUNK:
                with self._lock:
                    for d, tf, dt in batch:
                        self._insert(d, tf, dt)
                batch = []
        with self._lock:
            for d, tf, dt in batch:
                self._insert(d, tf, dt)

    def remove(self, doc_id: str) -> None:
        """Drop ``doc_id`` from the index (nothing happens if it is not there)."""
        with self._lock:
            self._delete(doc_id)

    def _grow(self, size: int) -> None:
        """Room for ``size`` slots in the per-slot arrays. Only what is copied is written: the
        rest (a new slot's links are set by ``_insert``) stays untouched, so costs no memory
        until used."""
        np = _numpy()
        old = 0 if self._lens is None else len(self._lens)
        lens, prev, nxt = np.zeros(size, dtype=np.uint32), np.empty(size, dtype=np.int32), np.empty(size, dtype=np.int32)
        foff = np.zeros(size, dtype=np.int64)
        if old:
            lens[:old], prev[:old], nxt[:old], foff[:old] = self._lens, self._prev, self._next, self._foff
        self._lens, self._prev, self._next, self._foff = lens, prev, nxt, foff

    def _insert(self, doc_id: str, tf: Counter[str], date: str | None = None) -> None:
        np = _numpy()
        old = self._slot.get(doc_id)
        # a replacement of the same date keeps its slot, so it keeps its neighbors
        keep = old is not None and self._dates[old] == date
        if old is not None:
            self._delete(doc_id, unlink=not keep)
        if keep:
            slot = self._free.pop()  # the slot just freed
            assert slot == old
        elif self._free:
            slot = self._free.pop()
        else:
            slot = len(self._ids)
            self._ids.append(None)
            self._dates.append(None)
            if self._lens is None or slot >= len(self._lens):
                self._grow(max(64, 2 * slot))
            self._prev[slot] = self._next[slot] = -1
        self._ids[slot] = doc_id  # first: the map finds a slot by its id there
        self._slot[doc_id] = slot
        self._dates[slot] = date
        if date and not keep:
            tail = self._tails.get(date)
            if tail is not None and self._next[tail] < 0:
                self._prev[slot], self._next[tail] = tail, slot
                self._links += 1
            self._tails[date] = slot
        ids, term_id, postings = [], self._term_id, self._postings
        for term, n in tf.items():
            tid = term_id.get(term)
            if tid is None:
                tid = term_id[term] = len(self._term)
                self._term.append(term)
                postings.append(_Postings())
            self._post(tid).add(slot, n)
            ids += [tid] * n
        self._fput(slot, np.array(ids, dtype=np.uint32))
        length = sum(tf.values())
        self._lens[slot] = length
        self._total_len += length
        self._changed()

    def _changed(self) -> None:
        """Forget what is kept until the index changes (``_whole``, ``_idfs``)."""
        self._whole = None
        self._idfs.clear()

    def _fput(self, slot: int, ids: Any) -> None:
        """Store a memory's term ids at the end of ``_fwd`` (compacting it first when it is
        mostly holes: each compaction follows as many removals as there are live ids)."""
        np = _numpy()
        if self._fdead > max(_FWD_SLACK, self._fend - self._fdead):
            live = np.flatnonzero(self._lens[: len(self._ids)])  # not ``slot``: its length is not set yet
            lens = self._lens[live].astype(np.int64)
            fwd = np.empty(max(1024, 2 * int(lens.sum()) + len(ids)), dtype=np.uint32)
            fwd[: int(lens.sum())] = self._fwd[self._spans(live, lens)]
            self._foff[live] = np.cumsum(lens) - lens
            self._fwd, self._fend, self._fdead = fwd, int(lens.sum()), 0
        end = self._fend + len(ids)
        if self._fwd is None or end > len(self._fwd):
            fwd = np.empty(max(1024, 2 * end), dtype=np.uint32)
            if self._fend:
                fwd[: self._fend] = self._fwd[: self._fend]
            self._fwd = fwd
        self._fwd[self._fend : end] = ids
        self._foff[slot] = self._fend
        self._fend = end

    def _spans(self, slots: Any, lens: Any) -> Any:
        """The positions in ``_fwd`` of the term ids of ``slots`` (of lengths ``lens``), in turn."""
        np = _numpy()
        ends = np.cumsum(lens)
        return np.arange(int(ends[-1]) if len(ends) else 0) + (self._foff.take(slots) - (ends - lens)).repeat(lens)

    def _terms_of(self, slot: int) -> dict[int, int]:
        """A document's term ids and frequencies."""
        at = int(self._foff[slot])
        counts: dict[int, int] = {}
        for tid in self._fwd[at : at + int(self._lens[slot])].tolist():
            counts[tid] = counts.get(tid, 0) + 1
        return counts

    def _delete(self, doc_id: str, unlink: bool = True) -> None:
        slot = self._slot.pop(doc_id, None)
        if slot is None:
            return
        if unlink:  # its neighbors become each other's (a forgotten turn leaves the rest in order)
            before, after = int(self._prev[slot]), int(self._next[slot])
            self._links -= (before >= 0) + (after >= 0) - (before >= 0 and after >= 0)
            if before >= 0:
                self._next[before] = after
            if after >= 0:
                self._prev[after] = before
            self._prev[slot] = self._next[slot] = -1
            date = self._dates[slot]
            if date and self._tails.get(date) == slot:
                if before >= 0:
                    self._tails[date] = before
                else:
                    del self._tails[date]
        for tid in self._terms_of(slot):
            self._post(tid).remove(slot)
        self._total_len -= int(self._lens[slot])
        self._fdead += int(self._lens[slot])
        self._lens[slot] = 0
        self._ids[slot] = None
        self._dates[slot] = None
        self._free.append(slot)
        self._changed()

    # ------------------------------------------------------------------ snapshot

    def export(self) -> dict[str, Any]:
        """The index's whole state as arrays and lists of strings (see ``_snapshot``)."""
        np = _numpy()
        with self._lock:
            used = len(self._ids)
            runs = [self._arrays(tid) for tid in range(len(self._postings))]
            counts = [len(slots) for slots, _ in runs]
            lens = self._lens[:used].astype(np.int64)
            terms = self._fwd[self._spans(np.arange(used), lens)] if used else np.zeros(0, dtype=np.uint32)
            return {
                "ids": list(self._ids), "dates": list(self._dates), "terms": list(self._term),
                "tail_dates": list(self._tails), "tail_slots": np.array(list(self._tails.values()), dtype=np.int64),
                "lens": self._lens[:used].astype(np.float64),  # as the snapshot has them
                "prev": self._prev[:used].copy() if used else np.zeros(0, dtype=np.int32),
                "next": self._next[:used].copy() if used else np.zeros(0, dtype=np.int32),
                "free": np.array(self._free, dtype=np.int64),
                "scalars": np.array([self._links, self._total_len], dtype=np.int64),
                "post_off": np.concatenate(([0], np.cumsum(counts, dtype=np.int64))),
                "post_slots": np.concatenate([r[0] for r in runs] or [np.zeros(0, np.int32)]),
                "post_tfs": np.concatenate([r[1] for r in runs] or [np.zeros(0, np.uint16)]),
                "doc_off": np.concatenate(([0], np.cumsum(4 * lens))),
                "doc_terms": terms.astype("<u4").view(np.uint8),
            }

    def restore(self, state: dict[str, Any]) -> None:
        """Take the state ``export`` gave (into an empty index). Checks its shape, not its sense:
        ``_snapshot`` only restores what it verified against the files."""
        np = _numpy()
        ids, dates, terms = state["ids"], state["dates"], state["terms"]
        used, off, doc_off = len(ids), state["post_off"], state["doc_off"]
        if not (len(dates) == len(state["lens"]) == len(state["prev"]) == len(state["next"]) == used
                and len(off) == len(terms) + 1 and len(doc_off) == used + 1
                and off[-1] == len(state["post_slots"]) == len(state["post_tfs"])
                and doc_off[-1] == len(state["doc_terms"])):
            raise ValueError("index arrays of inconsistent lengths")
        if not np.array_equal(np.diff(doc_off), 4 * np.asarray(state["lens"]).astype(np.int64)):
            raise ValueError("index term ids of inconsistent lengths")
        with self._lock:
            if self._slot:
                raise ValueError("restore into an empty index only")
            self._grow(max(used, 1))  # exactly: an add grows it
            self._changed()
            self._lens[:used], self._prev[:used], self._next[:used] = state["lens"], state["prev"], state["next"]
            self._ids, self._dates = list(ids), list(dates)
            self._slot = IdMap.of(self._ids)
            raw = np.ascontiguousarray(state["doc_terms"], dtype=np.uint8)
            self._fwd = raw.view("<u4").astype(np.uint32, copy=False)
            self._fend, self._fdead = len(self._fwd), 0
            self._foff[:used] = np.asarray(doc_off[:-1]) // 4
            self._free = state["free"].tolist()
            self._tails = dict(zip(state["tail_dates"], state["tail_slots"].tolist()))
            self._links, self._total_len = (int(v) for v in state["scalars"])
            self._term = list(terms)
            self._term_id = {t: i for i, t in enumerate(terms)}
            slots, tfs = state["post_slots"].astype(np.int32, copy=False), state["post_tfs"].astype(np.uint16, copy=False)
            self._flat = (np.asarray(off, dtype=np.int64), slots, tfs)
            self._postings = [None] * len(terms)  # each made when first used (``_post``)

    def _post(self, tid: int) -> _Postings:
        """The postings of term ``tid``, made from the restored arrays on first use. Call under
        the lock."""
        p = self._postings[tid]
        if p is None:
            assert self._flat is not None
            slots, tfs = self._flat_run(tid)
            p = self._postings[tid] = _Postings.of(slots, tfs)
        return p

    def _flat_run(self, tid: int) -> tuple[Any, Any]:
        off, slots, tfs = self._flat  # type: ignore[misc]
        a, b = int(off[tid]), int(off[tid + 1])
        return slots[a:b], tfs[a:b]

    def _count(self, tid: int) -> int:
        """How many memories hold term ``tid`` (without making its postings)."""
        p = self._postings[tid]
        if p is not None:
            return p.n
        off = self._flat[0]  # type: ignore[index]
        return int(off[tid + 1] - off[tid])

    def _counts(self, tids: list[int]) -> list[int]:
        """``_count`` of each of ``tids``, the restored ones' read at once."""
        ps = self._postings
        if self._flat is None or len(self._flat[0]) < 2:
            return [ps[t].n for t in tids]  # type: ignore[union-attr]
        np = _numpy()
        off = self._flat[0]
        # a term added since the restore has its postings made (its count is theirs): clipped here
        at = np.minimum(np.asarray(tids, dtype=np.int64), len(off) - 2)
        restored = (off.take(at + 1) - off.take(at)).tolist()
        return [c if (p := ps[t]) is None else p.n for t, c in zip(tids, restored)]

    def _arrays(self, tid: int) -> tuple[Any, Any]:
        """Term ``tid``'s posting slots and frequencies (views; without making its postings)."""
        p = self._postings[tid]
        return (p.slots[: p.n], p.tfs[: p.n]) if p is not None else self._flat_run(tid)

    # ------------------------------------------------------------------ reading

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._slot

    @staticmethod
    def _idf(df: float, n: int) -> float:
        # rank_bm25.BM25Plus: log((N + 1) / df), positive even in a store of one memory (BM25Okapi's
        # idf is 0 or negative for a word in half the documents, so tiny stores found nothing).
        # N counts as at least SMALL_STORE: in a store of a few memories every stored word would
        # otherwise weigh far less than a word the store lacks (log 2 against log 4 at N = 1), and
        # the score cut would drop an obvious match ("tabs" for "Should I use tabs in this file?")
        # or drop one when a second memory shares its word (see the module docstring).
        return math.log((max(n, SMALL_STORE) + 1) / df)

    def _df(self, term: str) -> int:
        tid = self._term_id.get(term)
        return 0 if tid is None else self._count(tid)

    def _weights(self, query: "Query | str") -> tuple[Counter[str], dict[str, float]]:
        """Query term weights: each occurrence in the text counts 1 (as in rank-bm25, where a
        repeated query word is scored twice); a context term counts CONTEXT_WEIGHT, once."""
        if isinstance(query, str):
            return Counter(analyze(query)), {}
        text = Counter(recent_terms(query.text))
        ctx = {t: CONTEXT_WEIGHT for c in query.context for t in recent_terms(c)}
        return text, ctx

    def _parts(self, lens: Any, tfs: Any, coef: Any, avgdl: float) -> Any:
        """A term's weighted BM25 contribution to memories of lengths ``lens`` holding it ``tfs``
        times: rank_bm25.BM25Plus.get_scores without its ``delta`` term (see the module
        docstring), rounded to the query's quantum (``_quantum``) so that every sum of parts is
        exact. ``coef`` (``_Term.coef``, or an
        array of them) carries the term's weight, idf and the quantum."""
        return self._scaled(self._saturation(lens, tfs, avgdl), coef)

    def _saturation(self, lens: Any, tfs: Any, avgdl: float) -> Any:
        """``_parts`` up to ``coef``: tf / (k1 * (1 - b + b * len / avgdl) + tf), in a new array."""
        np = _numpy()
        k1, b = self.k1, self.b
        den = lens.astype(np.float64)  # in place, in two new arrays
        den *= k1 * b / avgdl
        den += k1 * (1 - b)
        part = tfs.astype(np.float64)
        den += part
        np.divide(part, den, out=part)
        return part

    def _scaled(self, part: Any, coef: Any) -> Any:
        """``_parts`` from its saturation ``part`` (changed in place): times ``coef``, rounded."""
        part *= coef
        _numpy().rint(part, out=part)
        part *= 1.0 / self._quantum
        return part

    def _quantum_for(self, wi: Iterable[float], n: int) -> float:
        """The query's quantum (``wi``: weight x idf of its terms): a power of two so small that
        no sum of its parts (feedback terms included: at most FEEDBACK_TERMS of weight
        FEEDBACK_WEIGHT and idf log(N + 1)) reaches 2^52 quanta, and at most 2^-32 (a part moves
        by under 1.2e-10). Parts rounded to it add up exactly in float64, in any order: a memory
        scored term by term from its postings, looked up, or from its own terms, gets the same
        bits, so ties stay ties."""
        most = (self.k1 + 1) * (sum(wi) + FEEDBACK_TERMS * FEEDBACK_WEIGHT * self._idf(1, n))
        return 2.0 ** min(32, 50 - math.ceil(math.log2(most + 1)))

    def _terms(self, weights: Mapping[str, float]) -> list["_Term"]:
        """The weighted terms the store holds, with their postings and idf."""
        common, term_id = common_terms(), self._term_id
        held = [(t, w, tid) for t, w in weights.items() if (tid := term_id.get(t)) is not None and self._count(tid)]
        idfs = self._idf_of([tid for _, _, tid in held])
        return [_Term(tid, w, self._post(tid), idf, t in common) for (t, w, tid), idf in zip(held, idfs)]

    def _bound(self, x: "_Term", tf: int, avgdl: float) -> float:
        """The most ``x`` adds to a memory holding it at most ``tf`` times (the memory is then at
        least ``tf`` terms long), plus the rounding of a part to the quantum."""
        k1, b = self.k1, self.b
        return x.w * x.idf * (tf * (k1 + 1)) / (k1 * (1 - b + b * tf / avgdl) + tf) + 1.0 / self._quantum

    def _find(self, run: _Run, slots: Any) -> tuple[Any, Any]:
        """Where in ``slots`` (distinct, ascending) ``run`` has postings, ascending, and their
        frequencies. Few slots are binary-searched; many (``run`` holding up to ``_MERGE`` times
        as many postings) are merged with the postings: a stable sort of the two sorted runs,
        where a slot held follows its posting."""
        np = _numpy()
        have, n = run.slots[: run.n], run.n
        if n > _MERGE * len(slots):
            at = np.minimum(have.searchsorted(slots), n - 1)
            found = (have[at] == slots).nonzero()[0]
            return found, run.tfs[at[found]]
        both = np.concatenate((have, slots))
        order = both.argsort(kind="stable")
        same = (both[order[1:]] == both[order[:-1]]).nonzero()[0]
        return order[same + 1] - n, run.tfs[order[same]]

    def _find_coded(self, p: _Postings, slots: Any, below: int) -> tuple[Any, Any]:
        """``_find`` in a common word's postings, by its codes (``_CODES``): where in ``slots``
        ``p`` has postings of frequency under ``below`` and those frequencies (only the few held 3
        times or more are searched for, when ``below`` counts them)."""
        tfs = p.coded(slots, len(self._ids))
        at = ((tfs != 0) & (tfs < below)).nonzero()[0]
        tfs = tfs.take(at)
        if below > 3:
            many = (tfs == 3).nonzero()[0]
            if len(many):
                i, n = self._find(p.at_least(3), slots.take(at.take(many)))
                tfs[many.take(i)] = n
        return at, tfs

    def _ideal(self, terms: Mapping[str, float]) -> tuple[float, float]:
        """The normalizer: the weighted idf of the query's IDEAL_TERMS most specific terms
        (an unseen term counting as df=0.5), so a long prompt is judged by its specific words;
        and the same with the common words (text.COMMON_WORDS) counting COMMON_WEIGHT (the cut's
        second check), from one look at each term."""
        n = len(self._slot)
        unseen = self._idf(0.5, n)  # more specific than any word the store has
        common = common_terms()
        halves: list[float] = []
        halves_common: list[float] = []  # with the common words at COMMON_WEIGHT
        for term, w in terms.items():
            df = self._df(term)
            part = (self._idf(df, n) if df else unseen) * w
            # A CJK bigram is half a word: a run of n characters makes n - 1 bigrams but holds
            # about n / 2 words, and a memory sharing one word shares about one bigram. At full
            # weight, "部署" was 1/5 of "什么时候部署？" ("when do we deploy?") and the memory
            # "部署在每周二进行" was cut. So a bigram counts half, also toward IDEAL_TERMS.
            n_halves = 1 if is_bigram(term) else 2
            if term in common:
                # A common word is unseen only because the store is small (in LoCoMo's, the
                # common words of a question are in ~3% of memories, half an unseen word's idf);
                # at full unseen weight, "want", "learn", "start" outweighed "rust" in "I want to
                # learn more Rust, where should I start?" and no Rust memory was returned.
                halves += [(part if df else part * COMMON_WEIGHT) / 2] * n_halves
                halves_common += [part * COMMON_WEIGHT / 2] * n_halves
            else:
                halves += [part / 2] * n_halves
                halves_common += [part / 2] * n_halves
        halves.sort(reverse=True)
        halves_common.sort(reverse=True)
        return sum(halves[: 2 * IDEAL_TERMS]), sum(halves_common[: 2 * IDEAL_TERMS])

    def _top(self, cand: Any, score: Any, k: int) -> Any:
        """Indexes into ``cand`` of the k best scores, best first, ties by doc id."""
        np = _numpy()
        if len(cand) > k:
            # the k-th best score; everything tied with it stays so ids can break the tie
            kth = np.partition(score, len(score) - k)[len(score) - k]
            idx = (score >= kth).nonzero()[0]
            at, vals, slots = idx.tolist(), score.take(idx).tolist(), cand.take(idx).tolist()
        else:
            at, vals, slots = range(len(cand)), score.tolist(), cand.tolist()
        # plain tuples sort as the key (-score, id) did, without a call per item (ids are distinct)
        ids = self._ids
        return [i for _, _, i in sorted(zip([-v for v in vals], [ids[s] for s in slots], at))[:k]]

    def _places(self, cand: Any, at: Any) -> tuple[Any, Any]:
        """Where ``cand`` and their conversation neighbors are in ``at`` (ascending, holding them
        all), for ``_with_neighbors``."""
        np = _numpy()
        own = np.minimum(at.searchsorted(cand), len(at) - 1)
        if not self._links or not len(cand):
            return own, None
        near = np.concatenate((self._prev.take(cand), self._next.take(cand)))
        return own, (near >= 0, np.minimum(at.searchsorted(near), len(at) - 1))

    def _with_neighbors(self, places: tuple[Any, Any], val: Any) -> Any:
        """The scores ``val`` (of the slots of ``_places``) of its memories plus NEIGHBOR_WEIGHT
        times the better of their conversation neighbors' (0 for none)."""
        np = _numpy()
        own_at, near = places
        own = val[own_at]
        if near is None:
            return own
        has, at = near
        best = np.where(has, val[at], 0.0)
        return own + NEIGHBOR_WEIGHT * np.maximum(best[: len(own)], best[len(own) :])

    def _neighbors_of(self, cand: Any) -> Any:
        np = _numpy()
        if not self._links or not len(cand):
            return np.zeros(0, dtype=np.int32)
        near = np.concatenate((self._prev.take(cand), self._next.take(cand)))
        return near[near >= 0]

    def neighbors(self, doc_id: str) -> tuple[str | None, str | None]:
        """The previous and next conversation neighbors of ``doc_id`` (for tests and
        diagnostics)."""
        with self._lock:
            slot = self._slot[doc_id]
            p, n = int(self._prev[slot]), int(self._next[slot])
            return (self._ids[p] if p >= 0 else None), (self._ids[n] if n >= 0 else None)

    def _run(
        self, query: "Query | str", cut: float, k: int, feedback: bool, exclude: Collection[str] = ()
    ) -> tuple[Any, Any, float, dict[str, float]]:
        """Score the query for a search of the ``k`` best. Returns the slots of the memories that
        may be returned (ascending), their scores (feedback and neighbors' share included), the
        normalizer and the term weights used (feedback terms included). Call under the lock.

        The ranking is in two steps (see the module docstring): the pool, the best
        ``max(POOL, k)`` memories on the query's own terms that pass the cut (``_best``: exact
        top-N, pruned), then feedback and the neighbors' share re-rank the pool and those of its
        neighbors that pass the cut (``_rerank``). Ids in ``exclude`` are scored as usual (they
        count for feedback and as neighbors) but not returned, and the pool counts ``POOL`` others.
        """
        np = _numpy()
        text, ctx = self._weights(query)
        weights: dict[str, float] = dict(text)
        for t, w in ctx.items():
            weights[t] = weights.get(t, 0) + w
        empty = np.zeros(0, dtype=np.int64)
        if not self._slot or not weights:
            return empty, np.zeros(0), 0.0, weights
        # normalize by the text's ideal score; by the context's when the text has no terms
        base = text if text else ctx
        norm, norm_common = self._ideal(base)
        cuts = (cut * norm, cut * norm_common) if cut > 0 else None
        n = len(self._slot)
        avgdl = self._total_len / n
        terms = self._terms(weights)
        self._quantum = self._quantum_for((x.w * x.idf for x in terms), n)
        for x in terms:
            x.coef = x.w * x.idf * (self.k1 + 1) * self._quantum
        xs = self._slots_of(exclude) if exclude else None
        if xs is not None and not len(xs):
            xs = None
        scored = self._score_all(terms, cuts, avgdl) if len(self._ids) <= _DENSE else None
        if scored is not None:
            at, _, own, common, hits = scored
            ok = self._passes(own, common, hits, cuts)
            cand, own = at[ok], own[ok]
        else:
            cand, own = self._best(terms, max(POOL, k), cuts, xs, avgdl)
        if not len(cand):
            return empty, np.zeros(0), norm, weights
        pool = self._pool(cand, own, max(POOL, k), xs)
        cand, score, extra = self._rerank(pool, terms, weights, cuts, avgdl, feedback, scored)
        weights.update(extra)
        if xs is not None:
            keep = ~_member(cand, xs)
            cand, score = cand[keep], score[keep]
        return cand, score, norm, weights

    # ---- the pool: the best memories on the query's own terms

    def _best(self, terms: list["_Term"], size: int, cuts: tuple[float, float] | None, xs: Any,
              avgdl: float) -> tuple[Any, Any]:
        """The memories that pass the cut and may be among the ``size`` best on ``terms`` (by
        their own score, not counting ``xs``), with their exact own scores; every memory of that
        top ``size`` is among them. Call under the lock.

        MaxScore over the terms' postings, with no store-sized work: the memories touched and
        their partial scores are kept as two sorted arrays, each walk merged into them
        (``_merge``). A term's postings are in levels by frequency (3 or more, 2, 1:
        ``_Postings``), so that what a common word can add to most memories is bounded by what
        it adds at frequency 1. Levels are walked (their parts added to the memories they hold)
        best first by what they take off the bound per posting, until what the rest can
        add together (``_bound``) cannot lift a memory that holds none of them into the top
        ``size`` nor over the cut. The ``size``-th best score is estimated from below by scoring
        exactly the memories best so far (``_probe``: once during the walk, when enough of them
        are near the cut; again after it for a slow query's many candidates). The memories
        touched that can still make it get the other terms' parts by lookups (``_gather``), term
        by term, dropping those that no longer can."""
        np = _numpy()
        # the cut counts common words COMMON_WEIGHT: their share is summed at the end, for the
        # memories left; until then the cut is judged on bounds (the share is >= 0 and <= all)
        commons = cuts is not None and any(x.common for x in terms)
        # a term's postings in levels by frequency (>= 3, 2, 1), walked highest first; until a
        # level is walked, the memories of the levels below it are bounded by its lowest frequency
        steps: list[tuple[float, _Term, int, float]] = []  # (bound shed per posting, term, level, rest after)
        for x in terms:
            p = x.p
            n2, n3 = p.at_least(2).n, p.at_least(3).n
            levels = [lv for lv, here in ((3, n3), (2, n2 - n3), (1, p.n - n2)) if here]
            x.rest = self._bound(x, p.maxtf if levels[0] == 3 else levels[0], avgdl)
            x.thr = _NONE
            rest, worth = x.rest, math.inf
            for j, lv in enumerate(levels):
                after = self._bound(x, levels[j + 1], avgdl) if j + 1 < len(levels) else 0.0
                worth = min(worth, (rest - after) / (n3 if lv == 3 else n2 if lv == 2 else p.n))
                steps.append((worth, x, lv, after))
                rest = after
        steps.sort(key=lambda st: -st[0])  # stable: a term's levels stay in order
        theta = -math.inf
        cand, a = np.zeros(0, dtype=np.int32), np.zeros(0)  # the memories touched (ascending), partial scores
        # the walked (slots, parts) not merged into them yet: merged only when a probe is considered
        pending: list[tuple[Any, Any]] = []
        batch = _BATCH if self._unwalked(steps) > _SMALL else _SMALL
        probed = batch == _SMALL  # nothing to gain
        i = 0
        while i < len(steps) and self._can(0.0, terms, theta, cuts):
            # the next level, and those after it while they hold few postings, in one pass
            pieces: list[tuple[_Term, Any, Any]] = []
            walked = 0
            while i < len(steps) and (not pieces or walked + steps[i][1].p.at_least(steps[i][2]).n <= batch):
                _, x, level, after = steps[i]
                i += 1
                run = x.p.at_least(level)
                slots, tfs = run.slots[: run.n], run.tfs[: run.n]
                walked += run.n
                if x.thr != _NONE:  # the levels above were walked
                    below = tfs < x.thr
                    slots, tfs = slots[below], tfs[below]
                x.rest, x.thr = after, level
                pieces.append((x, slots, tfs))
            if len(pieces) == 1:
                x, slots, tfs = pieces[0]
                part = self._parts(self._lens.take(slots), tfs, x.coef, avgdl)
            else:  # a memory may be in several: _merge sums them
                counts = [len(pc[1]) for pc in pieces]
                slots = np.concatenate([pc[1] for pc in pieces])
                part = self._parts(self._lens.take(slots), np.concatenate([pc[2] for pc in pieces]),
                                   np.repeat([pc[0].coef for pc in pieces], counts), avgdl)
            pending.append((slots, part))
            if (probed or i == len(steps) or sum(y.rest for y in terms) < theta
                    or self._unwalked(steps[i:]) <= _PROBE_WORTH * size):
                continue  # probed, done, the walk stops anyway, or a probe would not pay
            cand, a = self._merge(cand, a, pending)
            pending = []
            if len(cand) >= size and self._promising(a, size, cuts):
                probed = True
                theta = max(theta, self._probe(cand, a, size, terms, commons, cuts, xs, avgdl))
        cand, a = self._merge(cand, a, pending)
        left = sorted((x for x in terms if x.rest > 0), key=lambda x: -x.rest)
        if left and len(cand) > (_REPROBE if probed else _PROBE_WORTH) * size and self._promising(a, size, cuts):
            theta = max(theta, self._probe(cand, a, size, terms, commons, cuts, xs, avgdl))
        if left:
            keep = self._can(a, terms, theta, cuts)
            cand, a = cand[keep], a[keep]
        c = np.zeros(len(cand)) if commons else None  # the common words' share, of those in ``summed``
        summed: list[_Term] = []
        for x in left:
            if not len(cand):
                break
            at, part = self._gather(x, cand, x.thr, avgdl)
            a[at] += part
            if c is not None and x.common and x.thr == _NONE:  # its whole part
                c[at] += part
                summed.append(x)
            x.rest = 0.0
            # drop those that can no longer make it; one holding a term at a walked level keeps
            # that term's bound: a lookup to lift it cost more than it saved
            if x is not left[-1]:
                keep = self._can(a, terms, theta, cuts)
                if not keep.all():
                    cand, a = cand[keep], a[keep]
                    c = None if c is None else c[keep]
        if cuts is not None and len(cand):
            spec = a
            if c is not None:
                for x in terms:
                    if x.common and x not in summed:
                        at, part = self._gather(x, cand, _NONE, avgdl)
                        c[at] += part
                spec = a - (1 - COMMON_WEIGHT) * c
            ok = (a >= cuts[0]) & (spec >= cuts[1])
            cand, a = cand[ok], a[ok]
        return cand, a

    @staticmethod
    def _merge(cand: Any, a: Any, pending: list[tuple[Any, Any]]) -> tuple[Any, Any]:
        """The memories of ``cand`` (ascending and distinct) and of the ``pending`` slots (in any
        order, repeats allowed), ascending and distinct, with their scores: ``a`` plus the parts
        of each (sums of parts are exact in any order, see ``_quantum_for``). One stable sort of
        the sorted runs merges them: no scattered writes into a store-sized array, and one pass
        for however many levels were walked since the last."""
        np = _numpy()
        if not pending:
            return cand, a
        slots = np.concatenate([cand, *(sl for sl, _ in pending)])
        val = np.concatenate([a, *(part for _, part in pending)])
        order = slots.argsort(kind="stable")
        slots, val = slots.take(order), val.take(order)
        first = np.empty(len(slots), dtype=bool)
        first[:1] = True
        np.not_equal(slots[1:], slots[:-1], out=first[1:])
        at = first.nonzero()[0]
        if len(at) == len(slots):  # no memory in two of them
            return slots, val
        return slots.take(at), np.add.reduceat(val, at)

    @staticmethod
    def _unwalked(steps: list[tuple[float, "_Term", int, float]]) -> int:
        """How many postings the levels of ``steps`` hold."""
        return sum(st[1].p.at_least(st[2]).n for st in steps)

    def _can(self, a: Any, terms: list["_Term"], theta: float, cuts: tuple[float, float] | None) -> Any:
        """Whether memories of partial score ``a`` may still reach ``theta`` and pass the cut with
        what the terms can add to them yet (``_Term.rest``: floating-point sums, given a margin
        far above their rounding)."""
        up = sum(x.rest for x in terms)
        slack = 1e-9 * (1.0 + up + abs(theta if theta > -math.inf else 0.0))
        if cuts is None:
            return a + (up + slack) >= theta
        ok = a + (up + slack) >= max(cuts[0], theta)
        spec = sum(x.rest * COMMON_WEIGHT if x.common else x.rest for x in terms)
        ok &= a + (spec + slack) >= cuts[1]
        return ok

    def _theta(self, a: Any, c: Any, slots: Any, size: int, cuts: tuple[float, float] | None, xs: Any,
               slack: float = 1e-9) -> float:
        """A lower bound of the ``size``-th best own score: the ``size``-th best of the (partial)
        scores ``a`` of ``slots`` (distinct; ``c`` of it on common words, None for none) among
        those sure to pass the cut (by ``slack``, far above any rounding of the rest of the
        sum; 0 for exact scores), not counting ``xs``."""
        np = _numpy()
        ok = None
        if cuts is not None:
            margin = slack * (1.0 + abs(cuts[0]) + abs(cuts[1]))
            ok = (a >= cuts[0] + margin) & ((a if c is None else a - (1 - COMMON_WEIGHT) * c) >= cuts[1] + margin)
        if xs is not None:
            free = ~_member(slots, xs)
            ok = free if ok is None else ok & free
        if ok is not None:
            a = a[ok]
        if len(a) < size:
            return -math.inf
        return float(np.partition(a, len(a) - size)[len(a) - size])

    @staticmethod
    def _promising(a: Any, size: int, cuts: tuple[float, float] | None) -> bool:
        """Whether a probe of the memories of partial scores ``a`` may find ``size`` of them over
        the cut: at least half as many hold 90% of it already. (A probe finding fewer bounds
        nothing; at 100k, half the probes of a query with many mid-frequency words did.)"""
        return cuts is None or int(_numpy().count_nonzero(a >= 0.9 * cuts[0])) >= size // 2

    def _probe(self, slots: Any, a: Any, size: int, terms: list["_Term"], commons: bool,
               cuts: tuple[float, float] | None, xs: Any, avgdl: float) -> float:
        """A close lower bound of the ``size``-th best own score: that of the memories of
        ``slots`` (distinct) with the best partial scores ``a``, scored exactly from their own
        terms (``_forward``)."""
        np = _numpy()
        many = min(len(slots), 2 * size)
        best = np.sort(slots[np.argpartition(a, len(a) - many)[len(a) - many:]])
        own, com, _ = self._score_runs(self._forward(best), len(best), terms, avgdl, commons)
        return self._theta(own, com if commons else None, best, size, cuts, xs, slack=0.0)

    def _gather(self, x: "_Term", slots: Any, below: int, avgdl: float) -> tuple[Any, Any]:
        """``x``'s part in ``slots`` (distinct, ascending) where it is held fewer than ``below``
        times: where in ``slots`` and how much (a common word's read from its codes, see
        ``_CODES``)."""
        p = x.p
        if p.codes is not None or p.n >= _CODES * len(self._ids):
            at, tfs = self._find_coded(p, slots, below)
        else:
            at, tfs = self._find(p, slots)
            if below != _NONE:
                few = tfs < below
                at, tfs = at[few], tfs[few]
        return at, self._parts(self._lens.take(slots[at]), tfs, x.coef, avgdl)

    def _pool(self, cand: Any, own: Any, size: int, xs: Any) -> Any:
        """The slots of ``cand`` (ascending, and so returned) in their order by own score (best
        first, ties by id) down to the ``size``-th not in ``xs``."""
        np = _numpy()
        if len(cand) <= size:  # all of them, whichever are excluded
            return cand
        free = None if xs is None else ~_member(cand, xs)
        mine = own if free is None else own[free]
        if len(mine) <= size:
            return cand
        last = np.partition(mine, len(mine) - size)[len(mine) - size]
        above = own > last
        need = size - int(np.count_nonzero(above if free is None else above & free))
        ids = self._ids
        ties = sorted((own == last).nonzero()[0].tolist(), key=lambda i: ids[cand[i]])
        take = []
        for i in ties:
            if not need:
                break
            take.append(i)
            need -= free is None or bool(free[i])
        return np.sort(np.concatenate((cand[above], cand[take])), kind="stable")

    # ---- the re-ranking: feedback and neighbors, within the pool and its neighbors

    def _score_all(self, terms: list["_Term"], cuts: tuple[float, float] | None, avgdl: float) -> _Scored:
        """Every memory of a small store scored on ``terms`` from its own terms (``_forward``, kept):
        ``_best``'s exact own scores without its pruning, and, handed to ``_rerank``, what it
        would read again. Call under the lock."""
        if self._whole is None:  # read once until the index changes (which also moves avgdl)
            at = _numpy().flatnonzero(self._lens[: len(self._ids)])  # the live slots (a removed one has length 0)
            owner, tids, tfs, lens, _ = self._forward(at)
            # and every run's saturation: a small store's queries then score their runs in 3 steps, not 8
            self._whole = (at, (owner, tids, tfs, lens, self._saturation(lens.take(owner), tfs, avgdl)))
        at, runs = self._whole
        return (at, runs, *self._score_runs(runs, len(at), terms, avgdl, cuts is not None, held=True))

    @staticmethod
    def _passes(own: Any, common: Any, hits: Any, cuts: tuple[float, float] | None) -> Any:
        """Which memories of own scores ``own`` (``common`` of it on common words) holding a query
        term (``hits``) pass the cut."""
        if cuts is None:
            return hits
        return hits & (own >= cuts[0]) & (own - (1 - COMMON_WEIGHT) * common >= cuts[1])

    def _rerank(
        self, pool: Any, terms: list["_Term"], weights: Mapping[str, float],
        cuts: tuple[float, float] | None, avgdl: float, feedback: bool, scored: _Scored | None = None,
    ) -> tuple[Any, Any, dict[str, float]]:
        """Re-rank the pool and those of its neighbors that share a term with the query and pass
        the cut: their scores (feedback terms and neighbors' share included), ascending slots,
        and the feedback terms. Every memory concerned (the pool, its neighbors, and those of the
        neighbors that join) is scored from its own terms (``_forward``, in one read with the
        neighbors' neighbors whether they join or not), unless ``scored`` holds every memory's
        (``_score_all``). Call under the lock."""
        np = _numpy()
        near = self._neighbors_of(pool)
        if scored is not None:
            at, runs, own, common, hits = scored
        else:
            at = pool
            if len(near):  # and their neighbors, read now in case they join
                at = np.sort(np.concatenate((pool, near, self._neighbors_of(near))), kind="stable")
                at = at[np.concatenate(([True], at[1:] != at[:-1]))]
            runs = self._forward(at)
            own, common, hits = self._score_runs(runs, len(at), terms, avgdl, cuts is not None, held=True)
        cand = pool
        if len(near):  # the neighbors that would pass the cut on their own join the pool
            i = at.searchsorted(near)
            joined = near[self._passes(own[i], common[i], hits[i], cuts)]
            if len(joined):
                cand = np.sort(np.concatenate((pool, joined)), kind="stable")
                cand = cand[np.concatenate(([True], cand[1:] != cand[:-1]))]
        places = self._places(cand, at)
        more: list[_Term] = []
        if feedback and FEEDBACK_TERMS:
            more = self._feedback(cand, self._with_neighbors(places, own), places[0], runs, terms)
        if more:
            for x in more:
                x.coef = x.w * x.idf * (self.k1 + 1) * self._quantum
            own = own + self._score_runs(runs, len(at), more, avgdl, False)[0]
        words = self._term
        return cand, self._with_neighbors(places, own), {words[x.tid]: x.w for x in more}

    def _forward(self, slots: Any) -> _Runs:
        """Every (memory, term id, frequency) of the memories ``slots`` (the memory as an index
        into ``slots``), read from their stored term ids (a memory's occurrences of a term are
        consecutive), and the memories' lengths (``_score_runs`` scores only the runs of the
        terms it is given: most of a memory's terms are not the query's)."""
        np = _numpy()
        lens = self._lens.take(slots)
        counts = lens.astype(np.int64)
        tids = self._fwd.take(self._spans(slots, counts))
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

    def _score_runs(
        self, runs: _Runs, size: int, terms: list["_Term"], avgdl: float, common: bool,
        held: bool = False,
    ) -> tuple[Any, Any, Any]:
        """Own scores on ``terms`` of the ``size`` memories of the ``_forward`` runs: the score,
        its share on common words (when ``common``), whether each holds one of the terms (when
        ``held``, else None)."""
        np = _numpy()
        owner, tids, tfs, lens, sat = runs
        if self._tcoef is None or len(self._tcoef) < len(self._term):
            self._tcoef = np.zeros(max(1024, 2 * len(self._term)))
            self._tmark = np.zeros(len(self._tcoef), dtype=bool)
        tco, mark = self._tcoef, self._tmark
        for x in terms:
            tco[x.tid] = x.coef
            mark[x.tid] = True
        # only the runs of the terms are scored: a tenth of them or so; the others' parts would be
        # 0 and change no sum. The same operations as in _parts, the same bits. (Found by a byte a
        # term, not the coefs: an eighth of the cache lines, and no float comparison.)
        at = mark.take(tids).nonzero()[0]
        held_tids = tids.take(at)
        coef = tco.take(held_tids)
        for x in terms:
            tco[x.tid] = 0.0
            mark[x.tid] = False
        who = owner.take(at)
        if sat is None:
            part = self._parts(lens.take(who), tfs.take(at), coef, avgdl)
        else:  # kept (``_score_all``): the same bits
            part = self._scaled(sat.take(at), coef)
        own = np.bincount(who, weights=part, minlength=size)
        hits = None
        if held:
            hits = np.zeros(size, dtype=bool)
            hits[who] = True
        com = own
        if common and any(x.common for x in terms):
            for x in terms:
                tco[x.tid] = 1.0 if x.common else 0.0
            mine = tco.take(held_tids)
            for x in terms:
                tco[x.tid] = 0.0
            com = np.bincount(who, weights=part * mine, minlength=size)
        elif common:
            com = np.zeros(size)
        return own, com, hits

    def _feedback(
        self, cand: Any, score: Any, at: Any, runs: _Runs, terms: list["_Term"]
    ) -> list["_Term"]:
        """Pseudo-relevance feedback (RM3-like): the terms that best characterize the top
        FEEDBACK_DOCS of ``cand`` (by ``score``), weighted up to FEEDBACK_WEIGHT, but none of the
        query's. They find memories that answer the query in other words than it uses (the top
        hit often states the topic, the next memory the answer). ``runs``: the ``_forward`` runs,
        in which ``cand`` are the memories ``at``. Call under the lock."""
        np = _numpy()
        owner, tids, tfs, _, _ = runs
        top = self._top(cand, score, FEEDBACK_DOCS)
        where = at[top]
        lo, hi = owner.searchsorted(where).tolist(), owner.searchsorted(where + 1).tolist()
        lens = self._lens[cand[top]].tolist()
        query = {x.tid for x in terms}
        mass: dict[int, float] = {}
        for i, a, b, length in zip(top, lo, hi, lens):
            share = float(score[i]) / length  # score x term's share of the memory
            for tid, c in zip(tids[a:b].tolist(), tfs[a:b].tolist()):
                if tid not in query:
                    mass[tid] = mass.get(tid, 0.0) + share * c
        idfs = self._idf_of(list(mass))
        words = self._term
        # best first, ties by word: plain tuples (term ids are distinct), no key called per item
        ranked = sorted([(-(m * idf), words[tid], tid, idf) for (tid, m), idf in zip(mass.items(), idfs)])
        if not ranked or ranked[0][0] >= 0:
            return []
        best = -ranked[0][0]
        # a term under a tenth of the strongest barely moves a score
        # scored from the forward index only (``_score_runs``): their postings are not made
        none = _empty()
        return [_Term(tid, FEEDBACK_WEIGHT * -v / best, none, idf, False)
                for v, _, tid, idf in ranked[:FEEDBACK_TERMS] if -v >= 0.1 * best]

    def _idf_of(self, tids: list[int]) -> list[float]:
        """The idf of each of ``tids`` (terms some memory holds), from ``_idfs`` or counted."""
        idfs = self._idfs
        if len(idfs) > _IDFS:
            idfs.clear()
        new = [t for t in tids if t not in idfs]
        if new:
            log, most = math.log, max(len(self._slot), SMALL_STORE) + 1
            for t, df in zip(new, self._counts(new)):
                idfs[t] = log(most / df)  # self._idf, inline
        return [idfs[t] for t in tids]

    def _slots_of(self, ids: Collection[str]) -> Any:
        """The slots of ``ids`` that are indexed, sorted and distinct (``_member`` reads them)."""
        np = _numpy()
        # a set and sorted(): half np.unique's time for the few ids a search excludes
        return np.array(sorted(set(map(self._slot.get, ids)) - {None}), dtype=np.int64)

    def expand(self, query: "Query | str", min_score: float | None = None, k: int = 5) -> dict[str, float]:
        """The weighted terms a search of the ``k`` best scores with: the query's, its context's
        and the feedback terms (for tests and diagnostics)."""
        cut = DEFAULT_MIN_SCORE if min_score is None else min_score
        with self._lock:
            return self._run(query, cut, k, feedback=True)[3]

    def scores(self, query: "Query | str | Mapping[str, float]") -> dict[str, float]:
        """rank_bm25.BM25Plus scores, without feedback, of every document sharing a term with the
        query (every other document scores ``delta * sum(weight * idf)`` of the known terms). A
        mapping is taken as analyzed terms and their weights. For tests and diagnostics."""
        np = _numpy()
        with self._lock:
            if not self._slot:
                return {}
            if isinstance(query, Mapping):
                weights = dict(query)
            else:
                text, ctx = self._weights(query)
                weights = dict(text)
                for t, w in ctx.items():
                    weights[t] = weights.get(t, 0) + w
            n = len(self._slot)
            avgdl = self._total_len / n
            terms = self._terms(weights)
            self._quantum = self._quantum_for((x.w * x.idf for x in terms), n)
            acc = np.zeros(len(self._ids))
            held = np.zeros(len(self._ids), dtype=bool)
            for x in terms:
                slots = x.p.slots[: x.p.n]
                x.coef = x.w * x.idf * (self.k1 + 1) * self._quantum
                acc[slots] += self._parts(self._lens[slots], x.p.tfs[: x.p.n], x.coef, avgdl)
                held[slots] = True
            base = sum(x.w * x.idf * self.delta for x in terms)
            ids = self._ids
            return {str(ids[s]): base + float(acc[s]) for s in np.flatnonzero(held).tolist()}

    def search(
        self, query: "Query | str", k: int = 5, min_score: float | None = None, exclude: Collection[str] = ()
    ) -> list[tuple[str, float]]:
        """The ``k`` best (doc id, normalized score) pairs, best first, ties by id ascending.

        Only documents with a normalized score >= ``min_score`` (default ``DEFAULT_MIN_SCORE``)
        are returned; pass 0 to rank every document that shares a term with the query (within
        the pool: see the module docstring). Ids in ``exclude`` (memories the model already sees)
        are scored as usual, feedback included, but not returned: the k are the best of the
        others."""
        if k <= 0:
            return []
        cut = DEFAULT_MIN_SCORE if min_score is None else min_score
        with self._lock:
            cand, raw, norm, _ = self._run(query, cut, k, feedback=True, exclude=exclude)
            ids = self._ids
            if norm <= 0 or len(cand) == 0:
                return []
            score = raw / norm
            return [(str(ids[int(cand[i])]), float(score[i])) for i in self._top(cand, score, k)]


_NONE = 1 << 30  # _Term.thr before any of its postings are walked



class _Term:
    """A term of the query being scored: its id, weight, postings, idf, whether it is a common
    word, and ``coef`` (weight x idf x (k1 + 1) x the query's quantum, see ``_parts``)."""

    __slots__ = ("tid", "w", "p", "idf", "common", "coef", "rest", "thr")

    def __init__(self, tid: int, w: float, p: _Postings, idf: float, common: bool) -> None:
        self.tid, self.w, self.p, self.idf, self.common = tid, w, p, idf, common
        self.coef = 0.0
        self.rest = 0.0  # in _best: what it may add yet to a memory whose part is not counted
        self.thr = _NONE  # in _best: the memories holding it this often or more have their part
