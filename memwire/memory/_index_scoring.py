"""The BM25 index's scoring: rank-bm25's BM25Plus parts rounded to a query's quantum, idf, the
normalizer and the score cut, the re-ranking of the pool (pseudo-relevance feedback and the
conversation neighbors' share) and the k best of a ranking. The model and every choice are
described in ``_index``'s module docstring.

Everything reads an ``IndexData`` (``_index_data``) and is called under the index's lock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from ._index_data import IndexData, Runs
from ._index_postings import UNBOUNDED, Postings, empty_postings, load_numpy
from ._text import common_terms, is_bigram

__all__ = [
    "COMMON_WEIGHT", "FEEDBACK_DOCS", "FEEDBACK_TERMS", "FEEDBACK_WEIGHT", "Scored", "Scorer", "Term", "idf",
    "passes", "top", "with_neighbors",
]

# Pseudo-relevance feedback: terms of the best FEEDBACK_DOCS hits join the query, the strongest
# at FEEDBACK_WEIGHT. Chosen on LoCoMo conversations 1-3: +1 point of recall@5, +2 of recall@10.
FEEDBACK_DOCS = 5
FEEDBACK_TERMS = 20
FEEDBACK_WEIGHT = 0.5

IDEAL_TERMS = 10  # a prompt's specificity is that of its 10 most specific words
COMMON_WEIGHT = 0.25  # what a common word (text.COMMON_WORDS) counts for in the score cut

# idf counts a store as having at least this many memories (see ``_index``'s docstring): below it,
# the cut judges a memory as it would in a store of this size. 50: of 20, 50, 100 and 200 tried on
# small stores drawn from LoCoMo, the largest whose noise (memories returned that are not the
# evidence) stays under that of an 80-memory store, with 4-6 points more recall than 20.
SMALL_STORE = 50

_IDFS = 1 << 16  # ``Scorer._idfs`` is emptied when it holds more (~100 B an entry)

# ``Scorer.score_all``: the live slots (ascending), their forward runs, and ``score_runs`` of them
Scored = tuple[Any, Runs, Any, Any, Any]


def idf(df: float, n: int) -> float:
    # rank_bm25.BM25Plus: log((N + 1) / df), positive even in a store of one memory (BM25Okapi's
    # idf is 0 or negative for a word in half the documents, so tiny stores found nothing).
    # N counts as at least SMALL_STORE: in a store of a few memories every stored word would
    # otherwise weigh far less than a word the store lacks (log 2 against log 4 at N = 1), and
    # the score cut would drop an obvious match ("tabs" for "Should I use tabs in this file?")
    # or drop one when a second memory shares its word (see ``_index``'s docstring).
    return math.log((max(n, SMALL_STORE) + 1) / df)


class Term:
    """A term of the query being scored: its id, weight, postings, idf, whether it is a common
    word, and ``coef`` (weight x idf x (k1 + 1) x the query's quantum, see ``Scorer.parts``)."""

    __slots__ = ("coef", "common", "idf", "p", "rest", "thr", "tid", "w")

    def __init__(self, tid: int, w: float, p: Postings, idf: float, common: bool) -> None:
        self.tid, self.w, self.p, self.idf, self.common = tid, w, p, idf, common
        self.coef = 0.0
        self.rest = 0.0  # in the top-N search: what it may add yet to a memory whose part is not counted
        self.thr = UNBOUNDED  # in the top-N search: the memories holding it this often or more have their part


class Scorer:
    """BM25 scores of the memories of ``data`` for one query at a time (``quantum``, set per
    query), and what it keeps between queries until the index changes (``_forget``)."""

    __slots__ = ("_idfs", "_tcoef", "_tmark", "_version", "_whole", "b", "data", "k1", "quantum")

    def __init__(self, data: IndexData, k1: float, b: float) -> None:
        self.data, self.k1, self.b = data, k1, b
        self.quantum = 2.0**32  # the current query's (see quantum_for)
        self._tcoef: Any = None  # per-query scratch: term id -> the query's coef (score_runs), zero but there
        self._tmark: Any = None  # and whether it is one of the terms scored (bool), False but there
        self._version = data.version  # the version of ``data`` that _whole and _idfs are of
        self._whole: tuple[Any, Runs] | None = None  # score_all's slots and runs, until a change
        # term id -> idf, until a change: feedback weighs the terms of the same few memories again
        # and again (in a small store, query after query), each a count of postings and a log
        self._idfs: dict[int, float] = {}

    def _forget(self) -> None:
        """Forget what is kept until the index changes (``_whole``, ``_idfs``): it has."""
        self._version = self.data.version
        self._whole = None
        self._idfs.clear()

    # ------------------------------------------------------------------ the query's terms

    def quantum_for(self, wi: Iterable[float], n: int) -> float:
        """The query's quantum (``wi``: weight x idf of its terms): a power of two so small that
        no sum of its parts (feedback terms included: at most FEEDBACK_TERMS of weight
        FEEDBACK_WEIGHT and idf log(N + 1)) reaches 2^52 quanta, and at most 2^-32 (a part moves
        by under 1.2e-10). Parts rounded to it add up exactly in float64, in any order: a memory
        scored term by term from its postings, looked up, or from its own terms, gets the same
        bits, so ties stay ties."""
        most = (self.k1 + 1) * (sum(wi) + FEEDBACK_TERMS * FEEDBACK_WEIGHT * idf(1, n))
        return 2.0 ** min(32, 50 - math.ceil(math.log2(most + 1)))

    def terms(self, weights: Mapping[str, float]) -> list[Term]:
        """The weighted terms the store holds, with their postings and idf."""
        lex = self.data.lex
        common, term_id = common_terms(), lex.term_id
        held = [(t, w, tid) for t, w in weights.items() if (tid := term_id.get(t)) is not None and lex.count(tid)]
        idfs = self.idf_of([tid for _, _, tid in held])
        return [Term(tid, w, lex.post(tid), idf, t in common) for (t, w, tid), idf in zip(held, idfs, strict=True)]

    def idf_of(self, tids: list[int]) -> list[float]:
        """The idf of each of ``tids`` (terms some memory holds), from ``_idfs`` or counted."""
        if self._version != self.data.version:
            self._forget()
        idfs = self._idfs
        if len(idfs) > _IDFS:
            idfs.clear()
        new = [t for t in tids if t not in idfs]
        if new:
            log, most = math.log, max(len(self.data.slot), SMALL_STORE) + 1
            for t, df in zip(new, self.data.lex.counts(new), strict=True):
                idfs[t] = log(most / df)  # idf(), inline
        return [idfs[t] for t in tids]

    def ideal(self, terms: Mapping[str, float]) -> tuple[float, float]:
        """The normalizer: the weighted idf of the query's IDEAL_TERMS most specific terms
        (an unseen term counting as df=0.5), so a long prompt is judged by its specific words;
        and the same with the common words (text.COMMON_WORDS) counting COMMON_WEIGHT (the cut's
        second check), from one look at each term."""
        n, lex = len(self.data.slot), self.data.lex
        unseen = idf(0.5, n)  # more specific than any word the store has
        common = common_terms()
        halves: list[float] = []
        halves_common: list[float] = []  # with the common words at COMMON_WEIGHT
        for term, w in terms.items():
            df = lex.df(term)
            part = (idf(df, n) if df else unseen) * w
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

    # ------------------------------------------------------------------ BM25 parts

    def parts(self, lens: Any, tfs: Any, coef: Any, avgdl: float) -> Any:
        """A term's weighted BM25 contribution to memories of lengths ``lens`` holding it ``tfs``
        times: rank_bm25.BM25Plus.get_scores without its ``delta`` term (see ``_index``'s
        docstring), rounded to the query's quantum (``quantum``) so that every sum of parts is
        exact. ``coef`` (``Term.coef``, or an array of them) carries the term's weight, idf and
        the quantum."""
        return self.scaled(self.saturation(lens, tfs, avgdl), coef)

    def saturation(self, lens: Any, tfs: Any, avgdl: float) -> Any:
        """``parts`` up to ``coef``: tf / (k1 * (1 - b + b * len / avgdl) + tf), in a new array."""
        np = load_numpy()
        k1, b = self.k1, self.b
        den = lens.astype(np.float64)  # in place, in two new arrays
        den *= k1 * b / avgdl
        den += k1 * (1 - b)
        part = tfs.astype(np.float64)
        den += part
        np.divide(part, den, out=part)
        return part

    def scaled(self, part: Any, coef: Any) -> Any:
        """``parts`` from its saturation ``part`` (changed in place): times ``coef``, rounded."""
        part *= coef
        load_numpy().rint(part, out=part)
        part *= 1.0 / self.quantum
        return part

    def bound(self, x: Term, tf: int, avgdl: float) -> float:
        """The most ``x`` adds to a memory holding it at most ``tf`` times (the memory is then at
        least ``tf`` terms long), plus the rounding of a part to the quantum."""
        k1, b = self.k1, self.b
        return x.w * x.idf * (tf * (k1 + 1)) / (k1 * (1 - b + b * tf / avgdl) + tf) + 1.0 / self.quantum

    # ------------------------------------------------------------------ own scores from the forward index

    def score_all(self, terms: list[Term], cuts: tuple[float, float] | None, avgdl: float) -> Scored:
        """Every memory of a small store scored on ``terms`` from its own terms (``IndexData.runs``,
        kept): the top-N search's exact own scores without its pruning, and, handed to ``rerank``,
        what it would read again."""
        if self._version != self.data.version:
            self._forget()
        if self._whole is None:  # read once until the index changes (which also moves avgdl)
            data = self.data
            at = load_numpy().flatnonzero(data.lens[: len(data.ids)])  # the live slots (a removed one has length 0)
            owner, tids, tfs, lens, _ = data.runs(at)
            # and every run's saturation: a small store's queries then score their runs in 3 steps, not 8
            self._whole = (at, (owner, tids, tfs, lens, self.saturation(lens.take(owner), tfs, avgdl)))
        at, runs = self._whole
        return (at, runs, *self.score_runs(runs, len(at), terms, avgdl, cuts is not None, held=True))

    def score_runs(
        self, runs: Runs, size: int, terms: list[Term], avgdl: float, common: bool, held: bool = False,
    ) -> tuple[Any, Any, Any]:
        """Own scores on ``terms`` of the ``size`` memories of the forward ``runs``: the score,
        its share on common words (when ``common``), whether each holds one of the terms (when
        ``held``, else None)."""
        np = load_numpy()
        owner, tids, tfs, lens, sat = runs
        nterms = len(self.data.lex.terms)
        if self._tcoef is None or len(self._tcoef) < nterms:
            self._tcoef = np.zeros(max(1024, 2 * nterms))
            self._tmark = np.zeros(len(self._tcoef), dtype=bool)
        tco, mark = self._tcoef, self._tmark
        for x in terms:
            tco[x.tid] = x.coef
            mark[x.tid] = True
        # only the runs of the terms are scored: a tenth of them or so; the others' parts would be
        # 0 and change no sum. The same operations as in parts, the same bits. (Found by a byte a
        # term, not the coefs: an eighth of the cache lines, and no float comparison.)
        at = mark.take(tids).nonzero()[0]
        held_tids = tids.take(at)
        coef = tco.take(held_tids)
        for x in terms:
            tco[x.tid] = 0.0
            mark[x.tid] = False
        who = owner.take(at)
        # the saturated term frequencies when kept (``score_all``): the same bits
        part = self.parts(lens.take(who), tfs.take(at), coef, avgdl) if sat is None else self.scaled(sat.take(at), coef)
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

    # ------------------------------------------------------------------ the re-ranking: feedback and neighbors

    def rerank(
        self, pool: Any, terms: list[Term], cuts: tuple[float, float] | None, avgdl: float, feedback: bool,
        scored: Scored | None, near_weight: float,
    ) -> tuple[Any, Any, dict[str, float]]:
        """Re-rank the pool and those of its neighbors that share a term with the query and pass
        the cut: their scores (feedback terms and ``near_weight`` times the better neighbor's
        score included), ascending slots, and the feedback terms. Every memory concerned (the
        pool, its neighbors, and those of the neighbors that join) is scored from its own terms
        (``IndexData.runs``, in one read with the neighbors' neighbors whether they join or not),
        unless ``scored`` holds every memory's (``score_all``)."""
        np = load_numpy()
        data = self.data
        near = data.neighbors_of(pool)
        if scored is not None:
            at, runs, own, common, hits = scored
        else:
            at = pool
            if len(near):  # and their neighbors, read now in case they join
                at = np.sort(np.concatenate((pool, near, data.neighbors_of(near))), kind="stable")
                at = at[np.concatenate(([True], at[1:] != at[:-1]))]
            runs = data.runs(at)
            own, common, hits = self.score_runs(runs, len(at), terms, avgdl, cuts is not None, held=True)
        cand = pool
        if len(near):  # the neighbors that would pass the cut on their own join the pool
            i = at.searchsorted(near)
            joined = near[passes(own[i], common[i], hits[i], cuts)]
            if len(joined):
                cand = np.sort(np.concatenate((pool, joined)), kind="stable")
                cand = cand[np.concatenate(([True], cand[1:] != cand[:-1]))]
        places = data.places(cand, at)
        more: list[Term] = []
        if feedback and FEEDBACK_TERMS:
            more = self.feedback(cand, with_neighbors(places, own, near_weight), places[0], runs, terms)
        if more:
            for x in more:
                x.coef = x.w * x.idf * (self.k1 + 1) * self.quantum
            own = own + self.score_runs(runs, len(at), more, avgdl, False)[0]
        words = data.lex.terms
        return cand, with_neighbors(places, own, near_weight), {words[x.tid]: x.w for x in more}

    def feedback(self, cand: Any, score: Any, at: Any, runs: Runs, terms: list[Term]) -> list[Term]:
        """Pseudo-relevance feedback (RM3-like): the terms that best characterize the top
        FEEDBACK_DOCS of ``cand`` (by ``score``), weighted up to FEEDBACK_WEIGHT, but none of the
        query's. They find memories that answer the query in other words than it uses (the top
        hit often states the topic, the next memory the answer). ``runs``: the forward runs, in
        which ``cand`` are the memories ``at``."""
        owner, tids, tfs, _, _ = runs
        best = top(self.data.ids, cand, score, FEEDBACK_DOCS)
        where = at[best]
        lo, hi = owner.searchsorted(where).tolist(), owner.searchsorted(where + 1).tolist()
        lens = self.data.lens[cand[best]].tolist()
        query = {x.tid for x in terms}
        mass: dict[int, float] = {}
        for i, a, b, length in zip(best, lo, hi, lens, strict=True):
            share = float(score[i]) / length  # score x term's share of the memory
            for tid, c in zip(tids[a:b].tolist(), tfs[a:b].tolist(), strict=True):
                if tid not in query:
                    mass[tid] = mass.get(tid, 0.0) + share * c
        idfs = self.idf_of(list(mass))
        words = self.data.lex.terms
        # best first, ties by word: plain tuples (term ids are distinct), no key called per item
        ranked = sorted([(-(m * idf), words[tid], tid, idf) for (tid, m), idf in zip(mass.items(), idfs, strict=True)])
        if not ranked or ranked[0][0] >= 0:
            return []
        strongest = -ranked[0][0]
        # a term under a tenth of the strongest barely moves a score
        # scored from the forward index only (``score_runs``): their postings are not made
        none = empty_postings()
        return [Term(tid, FEEDBACK_WEIGHT * -v / strongest, none, idf, False)
                for v, _, tid, idf in ranked[:FEEDBACK_TERMS] if -v >= 0.1 * strongest]


def passes(own: Any, common: Any, hits: Any, cuts: tuple[float, float] | None) -> Any:
    """Which memories of own scores ``own`` (``common`` of it on common words) holding a query
    term (``hits``) pass the cut."""
    if cuts is None:
        return hits
    return hits & (own >= cuts[0]) & (own - (1 - COMMON_WEIGHT) * common >= cuts[1])


def with_neighbors(places: tuple[Any, Any], val: Any, weight: float) -> Any:
    """The scores ``val`` (of the slots of ``IndexData.places``) of its memories plus ``weight``
    times the better of their conversation neighbors' (0 for none)."""
    np = load_numpy()
    own_at, near = places
    own = val[own_at]
    if near is None:
        return own
    has, at = near
    best = np.where(has, val[at], 0.0)
    return own + weight * np.maximum(best[: len(own)], best[len(own) :])


def top(ids: list[str | None], cand: Any, score: Any, k: int) -> list[int]:
    """Indexes into ``cand`` (slots, ``ids`` theirs) of the k best scores, best first, ties by
    doc id."""
    np = load_numpy()
    if len(cand) > k:
        # the k-th best score; everything tied with it stays so ids can break the tie
        kth = np.partition(score, len(score) - k)[len(score) - k]
        idx = (score >= kth).nonzero()[0]
        at, vals, slots = idx.tolist(), score.take(idx).tolist(), cand.take(idx).tolist()
    else:
        at, vals, slots = range(len(cand)), score.tolist(), cand.tolist()
    # plain tuples sort as the key (-score, id) did, without a call per item (ids are distinct)
    return [i for _, _, i in sorted(zip([-v for v in vals], [ids[s] for s in slots], at, strict=True))[:k]]
