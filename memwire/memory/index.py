"""An incremental BM25 index: rank-bm25's scoring, without rescoring or rebuilding everything.

Scores are exactly those of ``rank_bm25.BM25Okapi(corpus, k1=K1, b=B, epsilon=EPSILON)`` over all
indexed documents (``tests/memory/test_index.py`` checks it), but only documents that share a term
with the query are scored: an inverted index maps each term to its postings (document -> term
frequency). Adding or removing a document updates its postings, the document length, the total
length and the document-frequency histogram; idf and the average document length are derived at
query time, so nothing is ever rebuilt.

Scores returned by ``search`` are *normalized*: the BM25 score divided by the query's ideal score,
the sum of the idf of its terms (an unseen term counts as a term seen in no document). A memory
that contains every term of the query once, at average length, scores 1.0; one that matches only
the query's commonest word scores near 0. Dividing every score of a query by the same positive
number keeps the ranking identical to BM25's, and makes one threshold (``min_score``) mean the
same thing for short and long queries: "the memory covers at least this share of what the query
is about". ``DEFAULT_MIN_SCORE`` is the default.

Threading: mutations and scoring take one lock, but text analysis (the slow part) runs outside it
and bulk adds release it every ``_CHUNK`` documents, so a search waits at most a few milliseconds.
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .text import analyze

if TYPE_CHECKING:
    from ..policies.retrieval import Query

__all__ = ["BM25Index", "DEFAULT_MIN_SCORE", "K1", "B", "EPSILON", "CONTEXT_WEIGHT", "date_terms"]

# BM25Okapi parameters. Memories are one sentence long, so length normalization matters little;
# chosen on LoCoMo conversations 1-3 (see benchmarks/locomo.py).
K1 = 1.2
B = 0.75
EPSILON = 0.25  # rank-bm25's idf floor for terms in more than half the documents
CONTEXT_WEIGHT = 0.3  # a context term counts this much of a query term

# A memory must match at least this share of the query's idf mass (see the module docstring).
DEFAULT_MIN_SCORE = 0.2

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
    """BM25Okapi over memories, kept up to date one document at a time. Thread-safe."""

    def __init__(self, k1: float = K1, b: float = B, epsilon: float = EPSILON) -> None:
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self._lock = threading.Lock()
        self._slot: dict[str, int] = {}  # doc id -> slot (a row in the length array)
        self._ids: list[str | None] = []  # slot -> doc id
        self._terms: list[Counter[str] | None] = []  # slot -> term frequencies (for removal)
        self._free: list[int] = []  # slots of removed documents, reused first
        self._lens: Any = None  # numpy float64 array: slot -> document length
        self._total_len = 0
        self._postings: dict[str, dict[int, int]] = {}  # term -> {slot: tf}
        self._arrays: dict[str, tuple[Any, Any]] = {}  # term -> (slots, tfs), built lazily
        self._df_hist: Counter[int] = Counter()  # df -> number of terms with that df
        self._avg_idf: tuple[int, float] | None = None  # (version, value), cached

        self._version = 0

    # ------------------------------------------------------------------ updates

    @staticmethod
    def _analyze(text: str, date: str | None) -> Counter[str]:
        return Counter(analyze(text) + date_terms(date))

    def add(self, doc_id: str, text: str, date: str | None = None) -> None:
        """Index ``text`` as ``doc_id``, replacing what was indexed under that id."""
        tf = self._analyze(text, date)
        with self._lock:
            self._insert(doc_id, tf)

    def add_many(self, docs: Iterable[tuple[str, str, str | None]]) -> None:
        """Index many (id, text, date) documents; later duplicates of an id win."""
        batch: list[tuple[str, Counter[str]]] = []
        for doc_id, text, date in docs:
            batch.append((doc_id, self._analyze(text, date)))
            if len(batch) >= _CHUNK:
                with self._lock:
                    for d, tf in batch:
                        self._insert(d, tf)
                batch = []
        with self._lock:
            for d, tf in batch:
                self._insert(d, tf)

    def remove(self, doc_id: str) -> None:
        """Drop ``doc_id`` from the index (nothing happens if it is not there)."""
        with self._lock:
            self._delete(doc_id)

    def _insert(self, doc_id: str, tf: Counter[str]) -> None:
        np = _numpy()
        if doc_id in self._slot:
            self._delete(doc_id)
        if self._free:
            slot = self._free.pop()
        else:
            slot = len(self._ids)
            self._ids.append(None)
            self._terms.append(None)
            if self._lens is None or slot >= len(self._lens):
                grown = np.zeros(max(64, 2 * slot))
                if self._lens is not None:
                    grown[: len(self._lens)] = self._lens
                self._lens = grown
        self._slot[doc_id] = slot
        self._ids[slot] = doc_id
        self._terms[slot] = tf
        length = sum(tf.values())
        self._lens[slot] = length
        self._total_len += length
        postings, arrays, hist = self._postings, self._arrays, self._df_hist
        for term, n in tf.items():
            p = postings.get(term)
            if p is None:
                p = postings[term] = {}
            else:
                hist[len(p)] -= 1
            p[slot] = n
            hist[len(p)] += 1
            arrays.pop(term, None)
        self._version += 1

    def _delete(self, doc_id: str) -> None:
        slot = self._slot.pop(doc_id, None)
        if slot is None:
            return
        tf = self._terms[slot]
        assert tf is not None
        postings, arrays, hist = self._postings, self._arrays, self._df_hist
        for term in tf:
            p = postings[term]
            hist[len(p)] -= 1
            del p[slot]
            if p:
                hist[len(p)] += 1
            else:
                del postings[term]
            arrays.pop(term, None)
        self._total_len -= int(self._lens[slot])
        self._lens[slot] = 0.0
        self._ids[slot] = None
        self._terms[slot] = None
        self._free.append(slot)
        self._version += 1

    # ------------------------------------------------------------------ reading

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._slot

    def _average_idf(self, n: int) -> float:
        # rank-bm25 floors negative idfs at epsilon * (mean raw idf over the vocabulary); the df
        # histogram gives that mean in O(distinct df values) instead of O(vocabulary).
        cached = self._avg_idf
        if cached is not None and cached[0] == self._version:
            return cached[1]
        total = vocab = 0.0
        for df, count in self._df_hist.items():
            if count:
                total += count * (math.log(n - df + 0.5) - math.log(df + 0.5))
                vocab += count
        value = total / vocab if vocab else 0.0
        self._avg_idf = (self._version, value)
        return value

    def _idf(self, df: int, n: int) -> float:
        idf = math.log(n - df + 0.5) - math.log(df + 0.5)
        if idf < 0:
            return self.epsilon * self._average_idf(n)
        return idf

    def _weights(self, query: "Query | str") -> tuple[Counter[str], Counter[str]]:
        """Query term weights: each occurrence in the text counts 1 (as in rank-bm25, where a
        repeated query word is scored twice); a context term counts CONTEXT_WEIGHT, once."""
        if isinstance(query, str):
            return Counter(analyze(query)), Counter()
        text = Counter(analyze(query.text))
        ctx: Counter[str] = Counter()
        for term in {t for c in query.context for t in analyze(c)}:
            ctx[term] = CONTEXT_WEIGHT
        return text, ctx

    def _score(self, query: "Query | str") -> tuple[Any, Any, float]:
        """(candidate slots, their raw BM25 scores, the query's ideal score). Call under lock."""
        np = _numpy()
        text, ctx = self._weights(query)
        n = len(self._slot)
        empty = np.zeros(0, dtype=np.int64)
        if n == 0 or not (text or ctx):
            return empty, np.zeros(0), 0.0
        k1, b = self.k1, self.b
        avgdl = self._total_len / n
        unseen = math.log(n + 0.5) - math.log(0.5)  # idf of a term no document has
        acc = np.zeros(len(self._lens))
        hit = np.zeros(len(self._lens), dtype=bool)
        ideal = {"text": 0.0, "ctx": 0.0}
        weights = Counter(text)
        weights.update(ctx)
        for term, w in weights.items():
            p = self._postings.get(term)
            share = text.get(term, 0)
            idf = self._idf(len(p), n) if p else unseen
            ideal["text"] += share * idf
            ideal["ctx"] += ctx.get(term, 0.0) * idf
            if not p:
                continue
            arrs = self._arrays.get(term)
            if arrs is None:
                arrs = self._arrays[term] = (
                    np.fromiter(p.keys(), dtype=np.int64, count=len(p)),
                    np.fromiter(p.values(), dtype=np.float64, count=len(p)),
                )
            slots, tfs = arrs
            # the same expression, in the same order, as rank_bm25.BM25Okapi.get_scores
            part = idf * (tfs * (k1 + 1) / (tfs + k1 * (1 - b + b * self._lens[slots] / avgdl)))
            acc[slots] += part if w == 1 else w * part
            hit[slots] = True
        cand = np.flatnonzero(hit)
        # normalize by the text's ideal score; context only when the text has no terms at all
        norm = ideal["text"] or ideal["ctx"]
        return cand, acc[cand], norm

    def scores(self, query: "Query | str") -> dict[str, float]:
        """Raw BM25 scores of every document sharing a term with the query (for tests and
        diagnostics; ``search`` is the fast path)."""
        with self._lock:
            cand, raw, _ = self._score(query)
            return {self._ids[s]: float(v) for s, v in zip(cand.tolist(), raw.tolist())}  # type: ignore[misc]

    def search(
        self, query: "Query | str", k: int = 5, min_score: float | None = None
    ) -> list[tuple[str, float]]:
        """The ``k`` best (doc id, normalized score) pairs, best first, ties by id ascending.

        Only documents with a normalized score >= ``min_score`` (default ``DEFAULT_MIN_SCORE``)
        are returned; pass 0 to rank every document that shares a term with the query."""
        if k <= 0:
            return []
        cut = DEFAULT_MIN_SCORE if min_score is None else min_score
        np = _numpy()
        with self._lock:
            cand, raw, norm = self._score(query)
            if norm <= 0 or len(cand) == 0:
                return []
            score = raw / norm
            keep = score >= cut
            if len(cand) > k:
                # the k-th best score; everything tied with it is kept so ids can break the tie
                kth = np.partition(score, len(score) - k)[len(score) - k]
                keep &= score >= kth
            ids = self._ids
            found = [(ids[s], v) for s, v in zip(cand[keep].tolist(), score[keep].tolist())]
        found.sort(key=lambda x: (-x[1], x[0]))
        return found[:k]  # type: ignore[return-value]
