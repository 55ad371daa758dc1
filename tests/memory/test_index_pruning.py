"""The pruned search (``_index_topn.best``: an exact top-N that skips most postings, then the
re-ranking of the pool from the memories' own terms) against an exhaustive implementation of the
same ranking written here in plain Python: every memory scored on every term, sorted, the pool
cut, feedback and neighbors applied. The same ids, in the same order, with the same scores bit
for bit (ties included, broken by id), through adds, replacements and removes, with neighbors,
context, common words, exclusions, every k, several cuts and pool sizes.

The reference shares with the index only what is not searched for: the query's analysis and
weights (``_weights``), the normalizer (``Scorer.ideal``), idf (``_index_scoring.idf``), the
quantum (``Scorer.quantum_for``) and the conversation links (``neighbors``); parts are computed
here with the same floating-point operations, so scores match exactly."""

from __future__ import annotations

import contextlib
import random
from collections import Counter
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memwire.memory import _index as index_mod
from memwire.memory import _index_postings, _index_topn
from memwire.memory._index import BM25Index, date_terms
from memwire.memory._index_scoring import (
    COMMON_WEIGHT,
    FEEDBACK_DOCS,
    FEEDBACK_TERMS,
    FEEDBACK_WEIGHT,
    idf,
)
from memwire.memory._text import analyze, common_terms
from memwire.policies._query import Query

Docs = dict[str, tuple[str, "str | None"]]


@contextmanager
def knobs(**values: float) -> Iterator[None]:
    """The index's constants set for a while, in the module that reads each: the pool's size, and
    those that choose between equivalent paths (walk every posting of a small query or prune, walk
    levels one by one or together, binary-search terms or merge them with the memories, estimate
    the pool's last score by a probe or not)."""
    owner = {name: next(m for m in (index_mod, _index_topn, _index_postings) if hasattr(m, name)) for name in values}
    old = {name: getattr(owner[name], name) for name in values}
    for name, value in values.items():
        setattr(owner[name], name, value)
    try:
        yield
    finally:
        for name, value in old.items():
            setattr(owner[name], name, value)


def pool_size(n: int) -> contextlib.AbstractContextManager[None]:
    return knobs(POOL=n)


paths = st.fixed_dictionaries({
    "_DENSE": st.sampled_from([0, 2000]),  # 2000: every memory scored at once (these small stores)
    "_SMALL": st.sampled_from([0, 2000]),  # 0: the pruned path even for these small stores
    "_BATCH": st.sampled_from([0, 200]),
    "_MERGE": st.sampled_from([0, 2, 1000]),  # binary search, or merge with the postings
    "_PROBE_WORTH": st.sampled_from([0, 5]),
    "_REPROBE": st.sampled_from([0, 200]),
    "_CODES": st.sampled_from([0.0, 2.0]),  # 0: every lookup by codes (kept through changes), 2: none
})


@lru_cache(maxsize=None)
def terms_of(text: str, date: str | None) -> Counter[str]:
    return Counter(analyze(text) + date_terms(date))


def reference(
    idx: BM25Index, docs: Docs, query: Query | str, k: int, cut: float, exclude: Collection[str] = ()
) -> tuple[list[tuple[str, float]], dict[str, float]]:
    """What ``idx.search(query, k, cut, exclude)`` and ``idx.expand`` must return for ``docs``
    (id -> (text, date)), scoring every memory (see the index's module docstring)."""
    k1, b, nw = idx.k1, idx.b, index_mod.NEIGHBOR_WEIGHT
    tf = {d: terms_of(t, dt) for d, (t, dt) in docs.items()}
    length = {d: sum(c.values()) for d, c in tf.items()}
    text, ctx = idx._weights(query)
    weights: dict[str, float] = dict(text)
    for t, w in ctx.items():
        weights[t] = weights.get(t, 0) + w
    if not docs or not weights:
        return [], weights
    if cut > 0 and idx.abstains(query) is not None:  # the relevance rules, tested in test_relevance.py
        return [], weights
    n = len(docs)
    avgdl = sum(length.values()) / n
    df = Counter(t for c in tf.values() for t in c)
    base = text if text else ctx
    norm, spec_norm = idx._scorer.ideal(base)
    quantum = idx._scorer.quantum_for((w * idf(df[t], n) for t, w in weights.items() if df[t]), n)
    common = common_terms()

    def part(term: str, w: float, d: str) -> float:  # _parts, one float at a time
        coef = w * idf(df[term], n) * (k1 + 1) * quantum
        den = length[d] * (k1 * b / avgdl)
        den += k1 * (1 - b)
        den += tf[d][term]
        p = tf[d][term] / den
        p *= coef
        return float(round(p)) * (1.0 / quantum)

    def score(d: str, terms: dict[str, float], only_common: bool = False) -> float:
        return sum(part(t, w, d) for t, w in terms.items() if t in tf[d] and (t in common or not only_common))

    held = {d for d in docs if any(t in tf[d] for t in weights)}
    own = {d: score(d, weights) for d in held}

    def passes(d: str) -> bool:
        if d not in held:
            return False
        if cut <= 0:
            return True
        return own[d] >= cut * norm and own[d] - (1 - COMMON_WEIGHT) * score(d, weights, True) >= cut * spec_norm

    ranked = sorted((d for d in held if passes(d)), key=lambda d: (-own[d], d))
    size, pool = max(index_mod.POOL, k), []
    for d in ranked:
        if size == 0:
            break
        pool.append(d)
        size -= d not in exclude
    cand = set(pool)
    for d in pool:
        cand.update(x for x in idx.neighbors(d) if x is not None and passes(x))

    def with_neighbors(d: str, val: dict[str, float]) -> float:
        near = [val.get(x, 0.0) for x in idx.neighbors(d) if x is not None]
        return val.get(d, 0.0) + nw * max(near, default=0.0)

    if not cand:
        return [], weights
    before = {d: with_neighbors(d, own) for d in cand}
    mass: dict[str, float] = {}
    for d in sorted(cand, key=lambda d: (-before[d], d))[:FEEDBACK_DOCS]:
        share = before[d] / length[d]
        for t, c in tf[d].items():
            if t not in weights:
                mass[t] = mass.get(t, 0.0) + share * c
    terms = sorted(((m * idf(df[t], n), t) for t, m in mass.items()), key=lambda x: (-x[0], x[1]))
    terms = terms[:FEEDBACK_TERMS]
    extra: dict[str, float] = {}
    if terms and terms[0][0] > 0:
        top = terms[0][0]
        extra = {t: FEEDBACK_WEIGHT * v / top for v, t in terms if v >= 0.1 * top}
    near = {x for d in cand for x in idx.neighbors(d) if x is not None}
    total = {d: score(d, {**weights, **extra}) for d in cand | near}
    final = {d: with_neighbors(d, total) / norm for d in cand if d not in exclude}
    hits = sorted(final.items(), key=lambda x: (-x[1], x[0]))[:k]
    return hits, {**weights, **extra}


def check(idx: BM25Index, docs: Docs, query: Query | str, k: int, cut: float, exclude: Collection[str] = ()) -> None:
    want, weights = reference(idx, docs, query, k, cut, exclude)
    assert idx.search(query, k=k, min_score=cut, exclude=exclude) == want
    assert idx.expand(query, min_score=cut, k=k) == reference(idx, docs, query, k, cut)[1]


# a few words in many memories (one of them a common English word, which counts COMMON_WEIGHT in
# the cut) and many rare ones, so that some terms are weak, pools are cut and memories tie often
COMMON = ["alpha", "beta", "make"]
RARE = [f"rare{i}" for i in range(14)]
assert "make" in common_terms()
word = st.one_of(st.sampled_from(COMMON), st.sampled_from(COMMON), st.sampled_from(RARE))
text = st.lists(word, min_size=1, max_size=9).map(" ".join)
date = st.sampled_from([None, "session 1", "session 2", "2024-05-01"])

add = st.tuples(st.just("add"), st.integers(0, 40), text, date)  # id d<n>: new or a replacement
remove = st.tuples(st.just("remove"), st.integers(0, 40), st.just(""), st.just(None))
query = st.tuples(
    text,
    st.lists(text, max_size=2),  # context
    st.sampled_from([0.0, 0.05, 0.2, 0.5]),  # min_score
    st.integers(1, 12),  # k
    st.sets(st.integers(0, 40), max_size=4),  # excluded ids
)


def check_all(idx: BM25Index, docs: Docs, queries: list[tuple[str, list[str], float, int, set[int]]]) -> None:
    for q, ctx, cut, k, ex in queries:
        check(idx, docs, Query(q, tuple(ctx)), k, cut, {f"d{i}" for i in ex})
        check(idx, docs, q, k, cut)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    docs=st.lists(st.tuples(text, date), min_size=1, max_size=40),
    ops=st.lists(st.one_of(add, remove), max_size=25),
    queries=st.lists(query, min_size=1, max_size=5),
    pool=st.integers(1, 8),
    path=paths,
)
def test_pruned_search_is_exhaustive_search(
    docs: list[tuple[str, str | None]],
    ops: list[tuple[str, int, str, str | None]],
    queries: list[tuple[str, list[str], float, int, set[int]]],
    pool: int,
    path: dict[str, int],
) -> None:
    idx = BM25Index()
    model: Docs = {}
    for i, (t, d) in enumerate(docs):
        model[f"d{i}"] = (t, d)
    idx.add_many((d, t, dt) for d, (t, dt) in model.items())
    with knobs(POOL=pool, **path):
        for step, (op, i, t, d) in enumerate(ops):
            if op == "add":
                idx.add(f"d{i}", t, d)
                model.pop(f"d{i}", None)  # a replacement joins the end, as the index's ids do
                model[f"d{i}"] = (t, d)
            else:
                idx.remove(f"d{i}")
                model.pop(f"d{i}", None)
            if step % 8 == 7:  # and between the changes
                check_all(idx, model, queries)
        check_all(idx, model, queries)


@pytest.mark.parametrize("seed", range(3))
def test_pruned_search_on_a_zipf_corpus_through_adds_and_removes(seed: int) -> None:
    """Larger than the property test's corpora, with the default pool: terms in a third of the
    memories, others in a few, memories holding a word several times; every cut prunes."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(3)] + ["make", "work"] + [f"w{i}" for i in range(3, 300)]  # common words held often
    zipf = [1 / (i + 1) ** 1.1 for i in range(len(vocab))]

    def sentence(lo: int, hi: int) -> str:
        return " ".join(rng.choices(vocab, weights=zipf, k=rng.randint(lo, hi)))

    docs: Docs = {f"d{i:04d}": (sentence(2, 16), f"s{i // 7}" if seed % 2 else None) for i in range(1500)}
    idx = BM25Index()
    idx.add_many((d, t, dt) for d, (t, dt) in docs.items())
    for i in range(0, 1500, 9):
        idx.remove(f"d{i:04d}")
        del docs[f"d{i:04d}"]
    for i in range(60):
        docs[f"e{i:03d}"] = (sentence(8, 8), f"s{i // 5}")
        idx.add(f"e{i:03d}", *docs[f"e{i:03d}"])
    restored = BM25Index()  # the levels by frequency rebuilt from a snapshot's arrays
    restored.restore(idx.export())
    queries = [sentence(2, 12) for _ in range(20)]
    for i, q in enumerate(queries):
        query = Query(q, (queries[i - 1],)) if i % 4 == 0 else q
        exclude = {f"d{j:04d}" for j in range(1, 1500, 37)} if i % 3 == 0 else set()
        for cut in (0.0, 0.2, 0.5):
            want, _ = reference(idx, docs, query, 8, cut, exclude)
            assert idx.search(query, k=8, min_score=cut, exclude=exclude) == want
            # pruned, with and without a probe, with and without a second probe
            with knobs(_DENSE=0, _SMALL=0, _PROBE_WORTH=i % 2 * 5, _REPROBE=i % 4 // 2 * 200):
                assert idx.search(query, k=8, min_score=cut, exclude=exclude) == want
                assert restored.search(query, k=8, min_score=cut, exclude=exclude) == want


def test_the_pool_is_what_feedback_and_neighbors_rerank() -> None:
    """Only the pool (the best on the query's own terms) and its neighbors that pass the cut are
    re-ranked: a neighbor outside the pool can be returned, another memory outside it cannot."""
    day = "2024-05-01"
    docs: Docs = {
        "c": ("kayak kayak kayak", day),  # the best own score
        "a": ("kayak paddle", day),  # c's neighbor, third on its own
        "z": ("kayak kayak lake swim", "2024-06-01"),  # second
        "y": ("kayak trip notes", "2024-07-01"),  # fourth, nobody's neighbor
    }
    idx = BM25Index()
    idx.add_many((d, t, dt) for d, (t, dt) in docs.items())
    own = idx.scores("kayak")
    assert own["c"] > own["z"] > own["a"] > own["y"]
    with pool_size(2):
        # the pool is c and z; a joins as c's neighbor and c's share lifts it over z
        assert [d for d, _ in idx.search("kayak", k=2, min_score=0)] == ["c", "a"]
        # k widens the pool to 3 (c, z, a): y is fourth, outside it, and never returned
        assert [d for d, _ in idx.search("kayak", k=3, min_score=0)] == ["c", "a", "z"]
        assert {d for d, _ in idx.search("kayak", k=4, min_score=0)} == {"c", "a", "z", "y"}
        for k in (1, 2, 3, 4):
            check(idx, docs, "kayak", k, 0.0)


@pytest.mark.parametrize("dense", [0, 2000])  # pruned, or every memory scored at once
@pytest.mark.parametrize("pool", [3, 20])
def test_exclusions_and_ties_at_the_pool_edge(pool: int, dense: int) -> None:
    """The pool counts memories not excluded, ties at its edge are broken by id, and excluded
    memories with the best scores still count for feedback and neighbors: with the best memories
    of each query excluded, and many memories scoring alike, on the pruned path and with every
    memory scored at once."""
    rng = random.Random(pool)
    vocab = [f"v{i}" for i in range(40)]
    zipf = [1 / (i + 1) for i in range(len(vocab))]
    docs: Docs = {f"d{i:03d}": (" ".join(rng.choices(vocab, weights=zipf, k=rng.randint(2, 8))), f"s{i // 5}")
                  for i in range(300)}
    for i in range(300, 340):  # alike: ties wherever they score
        docs[f"d{i:03d}"] = ("v1 v2 v3", f"s{i // 5}")
    for i in range(340, 420):  # one word each: a term's bound is nearly what it adds
        docs[f"d{i:03d}"] = (f"v{i % 4 + 1}", f"s{i // 5}")
    idx = BM25Index()
    idx.add_many((d, t, dt) for d, (t, dt) in docs.items())
    queries = ["v1 v2 v3", "v2 v7 v11", "v1 v5", "v9 v20 v31 v2", "v1 v2", "v3 v4 v1"] + [
        " ".join(rng.choices(vocab, weights=zipf, k=rng.randint(2, 6))) for _ in range(8)]
    with knobs(POOL=pool, _DENSE=dense, _SMALL=0, _BATCH=0, _PROBE_WORTH=0):
        for q in queries:
            own = idx.scores(q)
            best = sorted(own, key=lambda d: (-own[d], d))
            for exclude in (set(best[:pool]), set(best[: pool // 2]), set(best[1:pool:2])):
                for cut in (0.0, 0.2):
                    want, _ = reference(idx, docs, q, 5, cut, exclude)
                    assert idx.search(q, k=5, min_score=cut, exclude=exclude) == want


def test_a_store_scored_whole_sees_each_change_at_once() -> None:
    """A small store's memories are read whole once and kept (``Scorer.score_all``) until the index
    changes: a search right after a removal alone, an add alone or a replacement sees it."""
    docs: Docs = {f"d{i}": (t, "2024-05-01") for i, t in enumerate(
        ["kayak paddle lake", "kayak trip notes", "mountain bike", "lake swim kayak kayak", "bike lake"])}
    idx = BM25Index()
    idx.add_many((d, t, dt) for d, (t, dt) in docs.items())
    changes = [("remove", "d0", ""), ("add", "d9", "kayak lake lake"), ("add", "d1", "bike trip"),
               ("remove", "d3", ""), ("remove", "d9", "")]
    with knobs(_DENSE=2000):
        for op, doc, text in changes:
            check(idx, docs, "kayak lake", 5, 0.0)  # the whole read is made and kept here
            if op == "add":
                idx.add(doc, text, "2024-05-01")
                docs.pop(doc, None)
                docs[doc] = (text, "2024-05-01")
            else:
                idx.remove(doc)
                del docs[doc]
            check(idx, docs, "kayak lake", 5, 0.0)


def test_a_restored_index_changes_and_searches_as_the_index_it_came_from() -> None:
    """After a restore a term's postings are made on first use (a search, an add, a removal):
    terms used and never used give, through adds, removals and replacements, what the index it
    was exported from gives, and export the same arrays."""
    rng = random.Random(7)
    vocab = [f"t{i}" for i in range(400)]
    zipf = [1 / (i + 1) for i in range(len(vocab))]

    def sentence() -> str:
        return " ".join(rng.choices(vocab, weights=zipf, k=rng.randint(2, 12)))

    idx = BM25Index()
    idx.add_many((f"d{i}", sentence(), None) for i in range(2100))  # over _DENSE: the pruned path too
    restored = BM25Index()
    restored.restore(idx.export())
    for step in range(300):
        doc = f"d{rng.randrange(2200)}"
        if rng.random() < 0.4:
            for index in (idx, restored):
                index.remove(doc)
        else:
            text = sentence()
            for index in (idx, restored):
                index.add(doc, text)
        if step % 20 == 0:
            for _ in range(5):
                q = sentence()
                assert restored.search(q, k=8, min_score=0) == idx.search(q, k=8, min_score=0)
    a, b = idx.export(), restored.export()
    assert a.keys() == b.keys()
    for key in a:
        assert (list(a[key]) == list(b[key])) if isinstance(a[key], list) else bool((a[key] == b[key]).all()), key


def test_codes_of_common_words_keep_up_with_every_change() -> None:
    """A common word's postings are looked up by its codes (``_CODES``) made on first use and kept
    in step after: through adds past its end, removals, slots reused and replacements, every
    search is the exhaustive one's. The words are in about half the memories, so the gathers of
    memories found by the rare words read them, held once, twice and three times or more."""
    rng = random.Random(3)
    common = ["alpha", "beta", "gamma", "make"]
    rare = [f"rare{i}" for i in range(60)]

    def sentence() -> str:
        words = [rng.choice(common) for _ in range(rng.randint(0, 4))] + rng.choices(rare, k=rng.randint(1, 3))
        return " ".join(rng.sample(words, len(words)))

    docs: Docs = {f"d{i:03d}": (sentence(), None) for i in range(300)}
    idx = BM25Index()
    idx.add_many((d, t, dt) for d, (t, dt) in docs.items())
    queries = [f"rare{i} rare{i + 1} alpha beta gamma make" for i in range(0, 60, 6)] + ["alpha beta rare3"]
    with knobs(_DENSE=0, _SMALL=0, _BATCH=0, _PROBE_WORTH=0, _CODES=0.3, POOL=5):
        for step in range(8):
            for q in queries:
                for cut in (0.0, 0.2):
                    check(idx, docs, q, 5, cut)
            lex = idx._data.lex
            assert all(lex.postings[lex.term_id[w]].codes is not None for w in ("beta", "gamma", "make"))
            for _ in range(40):  # removals (their slots reused next), replacements, adds past the end
                doc = f"d{rng.randrange(400):03d}"
                if rng.random() < 0.3:
                    idx.remove(doc)
                    docs.pop(doc, None)
                else:
                    docs.pop(doc, None)
                    docs[doc] = (sentence(), None)
                    idx.add(doc, docs[doc][0])


def test_codes_read_memories_added_past_their_end_as_not_holding_the_word() -> None:
    """Memories added after a word's codes were made, none holding the word, are past their end: a
    lookup of them grows it (they do not hold the word) rather than reading past it."""
    docs: Docs = {f"d{i:03d}": (f"common rare{i % 7}" + " common" * (i % 3), None) for i in range(40)}
    idx = BM25Index()
    idx.add_many((d, t, dt) for d, (t, dt) in docs.items())
    with knobs(_DENSE=0, _SMALL=0, _BATCH=1, _PROBE_WORTH=0, _CODES=0.0, POOL=3):
        check(idx, docs, "rare1 common", 3, 0.0)
        lex = idx._data.lex
        codes = lex.postings[lex.term_id["common"]].codes
        assert codes is not None and len(codes) == 10
        for i in range(40, 200):  # the rare word alone: candidates, past the codes' 40 slots
            docs[f"d{i:03d}"] = (f"rare{i % 7} rare{i % 7} other", None)
            idx.add(f"d{i:03d}", docs[f"d{i:03d}"][0])
        for q in ("rare1 common", "rare2 rare3 common", "common"):
            for cut in (0.0, 0.2):
                check(idx, docs, q, 3, cut)
