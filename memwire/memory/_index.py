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
them (see ``_index_topn.best``), so a search costs what the query's rarer words hold, not the store's size;
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
seen, ``COMMON_WEIGHT`` of that: see ``Scorer.ideal``). A memory holding every term
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

Abstaining: the cut judges each memory; with a cut, the query itself is judged first
(``_index_relevance``): a query whose specific words are mostly unknown to the store, a name of
which it holds no word counting as several ("What did Caroline research?" in a store that never
mentions Caroline; "How do I undo the last commit in git?" in a store knowing only "commit"),
gets nothing, however well a memory matches its other words. ``abstains`` says why.

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

The index is this module's ``BM25Index`` (text in, ranked ids out, the lock, the two steps of a
search) over its data (``_index_data``: the memories, their forward index and links, and the
postings of ``_index_postings``), scored by ``_index_scoring`` (BM25 parts, idf, the cut, feedback,
the neighbors' share) and searched by ``_index_topn`` (the pool, an exact top-N).
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ._index_data import IndexData
from ._index_postings import load_numpy, member
from ._index_relevance import abstains, code_weights, names, parts
from ._index_scoring import Scorer, passes, top
from ._index_topn import best, pool
from ._text import analyze, recent_terms

if TYPE_CHECKING:
    from ..policies._query import Query

__all__ = [
    "CONTEXT_WEIGHT",
    "DEFAULT_MIN_SCORE",
    "DELTA",
    "K1",
    "NEIGHBOR_WEIGHT",
    "B",
    "BM25Index",
    "date_terms",
]

# BM25Plus parameters. Memories are about one sentence long, so length normalization matters
# little (low b); chosen on LoCoMo conversations 1-3 (see benchmarks/locomo.py).
K1 = 1.2
B = 0.2
DELTA = 1.0  # BM25Plus's delta: adds the same to every document in rank-bm25, ranking unchanged
CONTEXT_WEIGHT = 0.3  # a context term counts this much of a query term

# The pool: feedback and the neighbors' share re-rank only the POOL best memories on the query's
# own terms (at least the k asked for), and those of their neighbors that pass the cut, so the
# first pass is an exact top-N that skips most postings (see ``_index_topn``). Chosen on LoCoMo:
# 100 keeps every recall figure (30 and 50 lose up to 1.3 points of multi-hop recall@10).
POOL = 100

# Conversation neighbors: a memory also scores NEIGHBOR_WEIGHT times the better of its two
# neighbors' scores (see the module docstring). Chosen on LoCoMo conversations 1-3 (0.15-0.3 all
# give +3 to +5 points of recall@10 there and on the held-out 4-5). Read at each search
# (benchmarks/locomo.py --neighbor-weight sets it).
NEIGHBOR_WEIGHT = 0.2

# A memory must cover at least this share of the query's idf mass (see the module docstring).
# 0.2: about one of the query's five most specific words.
DEFAULT_MIN_SCORE = 0.2

_CHUNK = 1000  # bulk adds release the lock this often
# a store of up to this many slots is scored whole, every memory from its own terms (the forward
# index) in a few array operations, rather than pruned: there the pruning's few hundred numpy calls
# on small arrays cost more than it saves (see ``Scorer.score_all``; results are identical)
_DENSE = 2000

_MONTHS = [
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
]
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


class BM25Index:
    """BM25 (rank-bm25's BM25Plus) over memories, updated one document at a time. Thread-safe."""

    def __init__(self, k1: float = K1, b: float = B, delta: float = DELTA) -> None:
        self.k1, self.b, self.delta = k1, b, delta
        self._lock = threading.Lock()
        self._data = IndexData()  # the memories, their terms and links, the postings
        self._scorer = Scorer(self._data, k1, b)

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
            self._data.insert(doc_id, tf, date)

    def add_many(self, docs: Iterable[tuple[str, str, str | None]]) -> None:
        """Index many (id, text, date) documents, in conversation order (consecutive documents
        of one date are neighbors); later duplicates of an id win."""
        batch: list[tuple[str, Counter[str], str | None]] = []
        for doc_id, text, date in docs:
            batch.append((doc_id, self._analyze(text, date), date))
            if len(batch) >= _CHUNK:
                with self._lock:
                    for d, tf, dt in batch:
                        self._data.insert(d, tf, dt)
                batch = []
        with self._lock:
            for d, tf, dt in batch:
                self._data.insert(d, tf, dt)

    def remove(self, doc_id: str) -> None:
        """Drop ``doc_id`` from the index (nothing happens if it is not there)."""
        with self._lock:
            self._data.delete(doc_id)

    # ------------------------------------------------------------------ snapshot

    def export(self) -> dict[str, Any]:
        """The index's whole state as arrays and lists of strings (see ``_snapshot``)."""
        with self._lock:
            return self._data.export()

    def restore(self, state: dict[str, Any]) -> None:
        """Take the state ``export`` gave (into an empty index). Checks its shape, not its sense:
        ``_snapshot`` only restores what it verified against the files."""
        IndexData.check(state)
        with self._lock:
            if self._data.slot:
                raise ValueError("restore into an empty index only")
            self._data.restore(state)

    # ------------------------------------------------------------------ reading

    def __len__(self) -> int:
        return len(self._data.slot)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._data.slot

    def neighbors(self, doc_id: str) -> tuple[str | None, str | None]:
        """The previous and next conversation neighbors of ``doc_id`` (for tests and
        diagnostics)."""
        with self._lock:
            return self._data.neighbors(doc_id)

    def _weights(self, query: Query | str) -> tuple[Counter[str], dict[str, float]]:
        """Query term weights: each occurrence in the text counts 1 (as in rank-bm25, where a
        repeated query word is scored twice); a context term counts CONTEXT_WEIGHT, once."""
        if isinstance(query, str):
            return Counter(analyze(query)), {}
        text = Counter(recent_terms(query.text))
        ctx = {t: CONTEXT_WEIGHT for c in query.context for t in recent_terms(c)}
        return text, ctx

    def expand(self, query: Query | str, min_score: float | None = None, k: int = 5) -> dict[str, float]:
        """The weighted terms a search of the ``k`` best scores with: the query's, its context's
        and the feedback terms (for tests and diagnostics)."""
        cut = DEFAULT_MIN_SCORE if min_score is None else min_score
        with self._lock:
            return self._run(query, cut, k, feedback=True)[3]

    def scores(self, query: Query | str | Mapping[str, float]) -> dict[str, float]:
        """rank_bm25.BM25Plus scores, without feedback, of every document sharing a term with the
        query (every other document scores ``delta * sum(weight * idf)`` of the known terms). A
        mapping is taken as analyzed terms and their weights. For tests and diagnostics."""
        np = load_numpy()
        with self._lock:
            data, sc = self._data, self._scorer
            if not data.slot:
                return {}
            if isinstance(query, Mapping):
                weights = dict(query)
            else:
                text, ctx = self._weights(query)
                weights = dict(text)
                for t, w in ctx.items():
                    weights[t] = weights.get(t, 0) + w
            n = len(data.slot)
            avgdl = data.total_len / n
            terms = sc.terms(weights)
            sc.quantum = sc.quantum_for((x.w * x.idf for x in terms), n)
            acc = np.zeros(len(data.ids))
            held = np.zeros(len(data.ids), dtype=bool)
            for x in terms:
                slots = x.p.slots[: x.p.n]
                x.coef = x.w * x.idf * (self.k1 + 1) * sc.quantum
                acc[slots] += sc.parts(data.lens[slots], x.p.tfs[: x.p.n], x.coef, avgdl)
                held[slots] = True
            base = sum(x.w * x.idf * self.delta for x in terms)
            ids = data.ids
            return {str(ids[s]): base + float(acc[s]) for s in np.flatnonzero(held).tolist()}

    def search(
        self, query: Query | str, k: int = 5, min_score: float | None = None, exclude: Collection[str] = ()
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
            ids = self._data.ids
            if norm <= 0 or len(cand) == 0:
                return []
            score = raw / norm
            return [(str(ids[int(cand[i])]), float(score[i])) for i in top(ids, cand, score, k)]

    def abstains(self, query: Query | str) -> str | None:
        """Why a search with a score cut gives ``query`` nothing whatever the memories' scores:
        "unknown name", "unknown topic" (see ``_index_relevance``), or None: the score cut judges."""
        text, _ = self._weights(query)
        with self._lock:
            return self._abstains(query, text) if self._data.slot and text else None

    def _abstains(self, query: Query | str, text: Mapping[str, float],
                  named: tuple[tuple[tuple[str, ...], ...], ...] | None = None) -> str | None:
        """``abstains`` for the query's own ``text`` terms (``named``: its ``names``, when known)."""
        raw = query if isinstance(query, str) else query.text
        if named is None:
            named = names(raw)
        asked = parts(raw)
        # one part, the whole text (the usual case): its terms are known already
        judged: list[tuple[Mapping[str, float], tuple[tuple[tuple[str, ...], ...], ...]]] = (
            [(text, named)] if asked == (raw,) else [(Counter(recent_terms(p)), names(p)) for p in asked])
        if asked != (raw,):
            # the sentences that only tell are context the question leans on ("The refund tests are
            # failing. Can you find out why?"): the whole text is one more part, about the store
            # when it is, whatever the asking sentence alone names
            judged.append((text, named))
        return abstains(self._data.lex, len(self._data.slot), judged)

    def _run(
        self, query: Query | str, cut: float, k: int, feedback: bool, exclude: Collection[str] = ()
    ) -> tuple[Any, Any, float, dict[str, float]]:
        """Score the query for a search of the ``k`` best. Returns the slots of the memories that
        may be returned (ascending), their scores (feedback and neighbors' share included), the
        normalizer and the term weights used (feedback terms included). Call under the lock.

        The ranking is in two steps (see the module docstring): the pool, the best
        ``max(POOL, k)`` memories on the query's own terms that pass the cut (``_index_topn``:
        exact top-N, pruned), then feedback and the neighbors' share re-rank the pool and those of
        its neighbors that pass the cut (``Scorer.rerank``). Ids in ``exclude`` are scored as usual
        (they count for feedback and as neighbors) but not returned, and the pool counts ``POOL``
        others.
        """
        np = load_numpy()
        own, ctx = self._weights(query)
        text: Mapping[str, float] = own
        named = None  # the query's names: read once, for the code weights and the abstention
        if cut > 0 and self._data.slot:  # an unknown file or function name weighs one word at most
            named = names(query if isinstance(query, str) else query.text)
            text = code_weights(self._data.lex, named, own)
        weights: dict[str, float] = dict(text)
        for t, w in ctx.items():
            weights[t] = weights.get(t, 0) + w
        empty = np.zeros(0, dtype=np.int64)
        data, sc = self._data, self._scorer
        if not data.slot or not weights:
            return empty, np.zeros(0), 0.0, weights
        if cut > 0 and self._abstains(query, own, named) is not None:  # about nothing the store knows
            return empty, np.zeros(0), 0.0, weights
        # normalize by the text's ideal score; by the context's when the text has no terms
        norm, norm_common = sc.ideal(text if text else ctx)
        cuts = (cut * norm, cut * norm_common) if cut > 0 else None
        n = len(data.slot)
        avgdl = data.total_len / n
        terms = sc.terms(weights)
        sc.quantum = sc.quantum_for((x.w * x.idf for x in terms), n)
        for x in terms:
            x.coef = x.w * x.idf * (self.k1 + 1) * sc.quantum
        xs = data.slots_of(exclude) if exclude else None
        if xs is not None and not len(xs):
            xs = None
        scored = sc.score_all(terms, cuts, avgdl) if len(data.ids) <= _DENSE else None
        if scored is not None:
            at, _, own, common, hits = scored
            ok = passes(own, common, hits, cuts)
            cand, own = at[ok], own[ok]
        else:
            cand, own = best(sc, terms, max(POOL, k), cuts, xs, avgdl)
        if not len(cand):
            return empty, np.zeros(0), norm, weights
        chosen = pool(data.ids, cand, own, max(POOL, k), xs)
        cand, score, extra = sc.rerank(chosen, terms, cuts, avgdl, feedback, scored, NEIGHBOR_WEIGHT)
        weights.update(extra)
        if xs is not None:
            keep = ~member(cand, xs)
            cand, score = cand[keep], score[keep]
        return cand, score, norm, weights

