"""The pruned search (``BM25Index.prune``: the postings of terms too weak to reach the score cut are
not walked) against scoring every posting, on random corpora and queries: the same ids, in the
same order, with the same scores bit for bit (ties included, broken by id), through adds,
replacements and removes, with neighbors, context, exclusions, every k and several cuts."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memwire.memory._index import BM25Index
from memwire.policies._query import Query

# a few common words and many rare ones, so that some terms are weak and memories tie often
COMMON = ["alpha", "beta", "gamma"]
RARE = [f"rare{i}" for i in range(14)]
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


def searches(idx: BM25Index, queries: list[tuple[str, list[str], float, int, set[int]]]) -> list[object]:
    out: list[object] = []
    for q, ctx, cut, k, ex in queries:
        exclude = {f"d{i}" for i in ex}
        out.append(idx.search(Query(q, tuple(ctx)), k=k, min_score=cut, exclude=exclude))
        out.append(idx.search(q, k=k, min_score=cut))
        out.append(idx.expand(Query(q, tuple(ctx)), min_score=cut))
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    docs=st.lists(st.tuples(text, date), min_size=1, max_size=40),
    ops=st.lists(st.one_of(add, remove), max_size=25),
    queries=st.lists(query, min_size=1, max_size=5),
)
def test_pruned_search_is_exhaustive_search(
    docs: list[tuple[str, str | None]],
    ops: list[tuple[str, int, str, str | None]],
    queries: list[tuple[str, list[str], float, int, set[int]]],
) -> None:
    idx = BM25Index()
    idx.add_many((f"d{i}", t, d) for i, (t, d) in enumerate(docs))
    for step, (op, i, t, d) in enumerate(ops):
        if op == "add":
            idx.add(f"d{i}", t, d)
        else:
            idx.remove(f"d{i}")
        if step % 8 == 7 or step == len(ops) - 1:  # and between the changes
            pruned = searches(idx, queries)
            idx.prune = False
            full = searches(idx, queries)
            idx.prune = True
            assert pruned == full
    pruned = searches(idx, queries)
    idx.prune = False
    assert pruned == searches(idx, queries)
