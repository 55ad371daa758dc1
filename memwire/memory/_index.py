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

from ._text import analyze, common_terms, is_bigram

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

_CHUNK = 1000  # bulk adds release the lock this often

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


class BM25Index:
    """BM25 (rank-bm25's BM25Plus) over memories, updated one document at a time. Thread-safe."""

    def __init__(self, k1: float = K1, b: float = B, delta: float = DELTA) -> None:
        self.k1, self.b, self.delta = k1, b, delta
        self._lock = threading.Lock()
        self._slot: dict[str, int] = {}  # doc id -> slot (a row in the length array)
        self._ids: list[str | None] = []  # slot -> doc id
        self._terms: list[Counter[str] | None] = []  # slot -> term frequencies (for removal)
        self._free: list[int] = []  # slots of removed documents, reused first
        self._lens: Any = None  # numpy float64 array: slot -> document length
        self._dates: list[str | None] = []  # slot -> the date it was indexed with
        # conversation neighbors (see the module docstring): slot -> previous / next slot, -1 none
        self._prev: Any = None  # numpy int64 arrays, grown with _lens
        self._next: Any = None
        self._tails: dict[str, int] = {}  # date -> its last slot: a new memory follows it
        self._links = 0  # how many prev/next links exist (none: searches skip the neighbor pass)
        self._total_len = 0
        self._postings: dict[str, dict[int, int]] = {}  # term -> {slot: tf}
        self._arrays: dict[str, tuple[Any, Any]] = {}  # term -> (slots, tfs), built lazily

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
            self._insert(doc_id, tf, date, patch=True)

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
            self._delete(doc_id, patch=True)

    def _insert(
        self, doc_id: str, tf: Counter[str], date: str | None = None, patch: bool = False
    ) -> None:
        """Index one document. ``patch``: update the cached term arrays in place (a memcpy, fast
        for one document) rather than dropping them (cheaper when many documents come)."""
        np = _numpy()
        old = self._slot.get(doc_id)
        # a replacement of the same date keeps its slot, so it keeps its neighbors
        keep = old is not None and self._dates[old] == date
        if old is not None:
            self._delete(doc_id, patch, unlink=not keep)
        if keep:
            slot = self._free.pop()  # the slot just freed
            assert slot == old
        elif self._free:
            slot = self._free.pop()
        else:
            slot = len(self._ids)
            self._ids.append(None)
            self._terms.append(None)
            self._dates.append(None)
            if self._lens is None or slot >= len(self._lens):
                size = max(64, 2 * slot)
                grown = np.zeros(size)
                prev = np.full(size, -1, dtype=np.int64)
                nxt = np.full(size, -1, dtype=np.int64)
                if self._lens is not None:
                    grown[: len(self._lens)] = self._lens
                    prev[: len(self._prev)] = self._prev
                    nxt[: len(self._next)] = self._next
                self._lens, self._prev, self._next = grown, prev, nxt
        self._slot[doc_id] = slot
        self._ids[slot] = doc_id
        self._terms[slot] = tf
        self._dates[slot] = date
        if date and not keep:
            tail = self._tails.get(date)
            if tail is not None and self._next[tail] < 0:
                self._prev[slot], self._next[tail] = tail, slot
                self._links += 1
            self._tails[date] = slot
        length = sum(tf.values())
        self._lens[slot] = length
        self._total_len += length
        postings, arrays = self._postings, self._arrays
        for term, n in tf.items():
            p = postings.get(term)
            if p is None:
                p = postings[term] = {}
            p[slot] = n
            cached = arrays.pop(term, None)  # dropped arrays are rebuilt by the next search
            if patch and cached is not None:
                arrays[term] = (np.append(cached[0], slot), np.append(cached[1], float(n)))

    def _delete(self, doc_id: str, patch: bool = False, unlink: bool = True) -> None:
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
        tf = self._terms[slot]
        assert tf is not None
        postings, arrays = self._postings, self._arrays
        for term in tf:
            p = postings[term]
            del p[slot]
            if not p:
                del postings[term]
            cached = arrays.pop(term, None)
            if patch and cached is not None and p:
                keep = cached[0] != slot
                arrays[term] = (cached[0][keep], cached[1][keep])
        self._total_len -= int(self._lens[slot])
        self._lens[slot] = 0.0
        self._ids[slot] = None
        self._terms[slot] = None
        self._dates[slot] = None
        self._free.append(slot)

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

    def _weights(self, query: "Query | str") -> tuple[Counter[str], dict[str, float]]:
        """Query term weights: each occurrence in the text counts 1 (as in rank-bm25, where a
        repeated query word is scored twice); a context term counts CONTEXT_WEIGHT, once."""
        if isinstance(query, str):
            return Counter(analyze(query)), {}
        text = Counter(analyze(query.text))
        ctx = {t: CONTEXT_WEIGHT for c in query.context for t in analyze(c)}
        return text, ctx

    def _accumulate(
        self, weights: Mapping[str, float], acc: Any, hit: Any, common_acc: Any = None
    ) -> None:
        """Add each term's weighted BM25 contribution to ``acc`` (and, for common words, to
        ``common_acc`` too). Call under the lock."""
        np = _numpy()
        common = common_terms()
        n = len(self._slot)
        k1, b = self.k1, self.b
        avgdl = self._total_len / n
        for term, w in weights.items():
            p = self._postings.get(term)
            if not p:
                continue  # rank-bm25 scores an unknown term 0
            arrs = self._arrays.get(term)
            if arrs is None:
                arrs = self._arrays[term] = (
                    np.fromiter(p.keys(), dtype=np.int64, count=len(p)),
                    np.fromiter(p.values(), dtype=np.float64, count=len(p)),
                )
            slots, tfs = arrs
            idf = self._idf(len(p), n)
            # rank_bm25.BM25Plus.get_scores without its `delta` term (see the module docstring)
            part = idf * ((tfs * (k1 + 1)) / (k1 * (1 - b + b * self._lens[slots] / avgdl) + tfs))
            part = part if w == 1 else w * part
            acc[slots] += part
            hit[slots] = True
            if common_acc is not None and term in common:
                common_acc[slots] += part

    def _ideal(self, terms: Mapping[str, float], common_weight: float = 1.0) -> float:
        """The normalizer: the weighted idf of the query's IDEAL_TERMS most specific terms
        (an unseen term counting as df=0.5), so a long prompt is judged by its specific words.
        ``common_weight`` scales the common words (text.COMMON_WORDS)."""
        n = len(self._slot)
        unseen = self._idf(0.5, n)  # more specific than any word the store has
        common = common_terms()
        halves: list[float] = []
        for term, w in terms.items():
            p = self._postings.get(term)
            scale = common_weight if term in common else 1.0
            if not p and term in common:
                # A common word is unseen only because the store is small (in LoCoMo's, the
                # common words of a question are in ~3% of memories, half an unseen word's idf);
                # at full unseen weight, "want", "learn", "start" outweighed "rust" in "I want to
                # learn more Rust, where should I start?" and no Rust memory was returned.
                scale = min(scale, COMMON_WEIGHT)
            part = (self._idf(len(p), n) if p else unseen) * w * scale
            # A CJK bigram is half a word: a run of n characters makes n - 1 bigrams but holds
            # about n / 2 words, and a memory sharing one word shares about one bigram. At full
            # weight, "部署" was 1/5 of "什么时候部署？" ("when do we deploy?") and the memory
            # "部署在每周二进行" was cut. So a bigram counts half, also toward IDEAL_TERMS.
            halves += [part / 2] if is_bigram(term) else [part / 2, part / 2]
        halves.sort(reverse=True)
        return sum(halves[: 2 * IDEAL_TERMS])

    def _top(self, cand: Any, score: Any, k: int) -> Any:
        """Indexes into ``cand`` of the k best scores, best first, ties by doc id."""
        np = _numpy()
        idx = np.arange(len(cand))
        if len(cand) > k:
            # the k-th best score; everything tied with it stays so ids can break the tie
            kth = np.partition(score, len(score) - k)[len(score) - k]
            idx = idx[score >= kth]
        ids = self._ids
        order = sorted(idx.tolist(), key=lambda i: (-score[i], ids[cand[i]]))
        return order[:k]

    def _feedback(self, cand: Any, score: Any, exclude: Mapping[str, float]) -> dict[str, float]:
        """Pseudo-relevance feedback (RM3-like): the terms that best characterize the top
        FEEDBACK_DOCS hits, weighted up to FEEDBACK_WEIGHT. They find memories that answer the
        query in other words than it uses (the top hit often states the topic, the next memory
        the answer). Call under the lock."""
        n = len(self._slot)
        mass: dict[str, float] = {}
        for i in self._top(cand, score, FEEDBACK_DOCS):
            tf = self._terms[int(cand[i])]
            assert tf is not None
            share = float(score[i]) / sum(tf.values())  # score x term's share of the memory
            for term, c in tf.items():
                if term not in exclude:
                    mass[term] = mass.get(term, 0.0) + share * c
        ranked = sorted(
            ((m * self._idf(len(self._postings[t]), n), t) for t, m in mass.items()),
            key=lambda x: (-x[0], x[1]),
        )[:FEEDBACK_TERMS]
        if not ranked or ranked[0][0] <= 0:
            return {}
        top = ranked[0][0]
        # a term under a tenth of the strongest barely moves a score, but a common one (in every
        # memory, idf ~ 0) would still cost a pass over its whole postings list
        return {t: FEEDBACK_WEIGHT * v / top for v, t in ranked if v >= 0.1 * top}

    def _with_neighbors(self, cand: Any, acc: Any) -> Any:
        """The scores of ``cand`` plus NEIGHBOR_WEIGHT times the better of their conversation
        neighbors' scores (``acc``: every slot's score). Call under the lock."""
        np = _numpy()
        own = acc[cand]
        if not self._links:
            return own
        prev, nxt = self._prev[cand], self._next[cand]
        near = np.maximum(
            np.where(prev >= 0, acc[np.maximum(prev, 0)], 0.0),
            np.where(nxt >= 0, acc[np.maximum(nxt, 0)], 0.0),
        )
        return own + NEIGHBOR_WEIGHT * near

    def neighbors(self, doc_id: str) -> tuple[str | None, str | None]:
        """The previous and next conversation neighbors of ``doc_id`` (for tests and
        diagnostics)."""
        with self._lock:
            slot = self._slot[doc_id]
            p, n = int(self._prev[slot]), int(self._next[slot])
            return (self._ids[p] if p >= 0 else None), (self._ids[n] if n >= 0 else None)

    def _run(
        self, query: "Query | str", cut: float, feedback: bool
    ) -> tuple[Any, Any, float, dict[str, float]]:
        """Score the query. Returns the slots of the documents sharing a term with it whose
        normalized score is >= ``cut``, their raw scores (with feedback terms when
        ``feedback``, and with their neighbors' share), the normalizer and the term weights
        used. Call under the lock."""
        np = _numpy()
        text, ctx = self._weights(query)
        weights: dict[str, float] = dict(text)
        for t, w in ctx.items():
            weights[t] = weights.get(t, 0) + w
        if not self._slot or not weights:
            return np.zeros(0, dtype=np.int64), np.zeros(0), 0.0, weights
        # normalize by the text's ideal score; by the context's when the text has no terms
        base = text if text else ctx
        norm = self._ideal(base)
        acc = np.zeros(len(self._lens))
        hit = np.zeros(len(self._lens), dtype=bool)
        common_acc = np.zeros(len(self._lens))
        self._accumulate(weights, acc, hit, common_acc)
        cand = np.flatnonzero(hit)
        if cut > 0:
            # the cut is on the query's own terms, twice: as scored, and with common words
            # counting COMMON_WEIGHT, so a match on "make" or "work" alone is not enough
            spec = acc[cand] - (1 - COMMON_WEIGHT) * common_acc[cand]
            spec_norm = self._ideal(base, COMMON_WEIGHT)
            cand = cand[(acc[cand] >= cut * norm) & (spec >= cut * spec_norm)]
        if feedback and FEEDBACK_TERMS and len(cand):
            extra = self._feedback(cand, self._with_neighbors(cand, acc), weights)
            # feedback reorders the memories that match the query; it adds none (the recall it
            # buys on LoCoMo comes from reordering, and an added memory would not match at all)
            self._accumulate(extra, acc, hit)
            weights.update(extra)
        # neighbors reorder too: a memory is scored with a share of its neighbors' scores
        return cand, self._with_neighbors(cand, acc), norm, weights

    def expand(self, query: "Query | str", min_score: float | None = None) -> dict[str, float]:
        """The weighted terms ``search`` scores with: the query's, its context's and the
        feedback terms (for tests and diagnostics)."""
        cut = DEFAULT_MIN_SCORE if min_score is None else min_score
        with self._lock:
            return self._run(query, cut, feedback=True)[3]

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
                weights = self._run(query, 0.0, feedback=False)[3]
            acc = np.zeros(len(self._lens))
            hit = np.zeros(len(self._lens), dtype=bool)
            self._accumulate(weights, acc, hit)
            n = len(self._slot)
            base = sum(
                w * self._idf(len(self._postings[t]), n) * self.delta
                for t, w in weights.items()
                if t in self._postings
            )
            ids = self._ids
            return {str(ids[s]): base + float(acc[s]) for s in np.flatnonzero(hit).tolist()}

    def search(
        self, query: "Query | str", k: int = 5, min_score: float | None = None, exclude: Collection[str] = ()
    ) -> list[tuple[str, float]]:
        """The ``k`` best (doc id, normalized score) pairs, best first, ties by id ascending.

        Only documents with a normalized score >= ``min_score`` (default ``DEFAULT_MIN_SCORE``)
        are returned; pass 0 to rank every document that shares a term with the query. Ids in
        ``exclude`` (memories the model already sees) are scored as usual, feedback included, but
        not returned: the k are the best of the others."""
        if k <= 0:
            return []
        cut = DEFAULT_MIN_SCORE if min_score is None else min_score
        with self._lock:
            cand, raw, norm, _ = self._run(query, cut, feedback=True)
            ids = self._ids
            if exclude and len(cand):
                keep = _numpy().fromiter((ids[int(s)] not in exclude for s in cand), dtype=bool, count=len(cand))
                cand, raw = cand[keep], raw[keep]
            if norm <= 0 or len(cand) == 0:
                return []
            score = raw / norm
            return [(str(ids[int(cand[i])]), float(score[i])) for i in self._top(cand, score, k)]
