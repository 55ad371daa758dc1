from __future__ import annotations

import random
import threading
from collections import Counter

import pytest
from rank_bm25 import BM25Plus

from memwire.memory import _index as index_mod
from memwire.memory import _index_data, _index_scoring
from memwire.memory._index import (
    CONTEXT_WEIGHT,
    DEFAULT_MIN_SCORE,
    NEIGHBOR_WEIGHT,
    BM25Index,
    date_terms,
)
from memwire.memory._text import analyze
from memwire.policies._query import Query

VOCAB = [f"word{i}" for i in range(80)]
ZIPF = [1 / (i + 1) for i in range(len(VOCAB))]


def random_text(rng: random.Random) -> str:
    return " ".join(rng.choices(VOCAB, weights=ZIPF, k=rng.randint(1, 14)))


def reference(docs: dict[str, str]) -> tuple[list[str], BM25Plus]:
    ids = sorted(docs)
    bm = BM25Plus([analyze(docs[i]) for i in ids], k1=index_mod.K1, b=index_mod.B, delta=index_mod.DELTA)
    return ids, bm


def assert_same_as_rank_bm25(idx: BM25Index, docs: dict[str, str], queries: list[str]) -> None:
    ids, bm = reference(docs)
    for q in queries:
        ref = dict(zip(ids, bm.get_scores(analyze(q)).tolist()))
        got = idx.scores(q)
        terms = set(analyze(q))
        assert set(got) == {i for i in ids if terms & set(analyze(docs[i]))}
        for doc_id, score in got.items():
            assert score == pytest.approx(ref[doc_id], rel=1e-9, abs=1e-9)
        # rank-bm25 gives every other document the same baseline, below every match
        rest = {ref[i] for i in ids if i not in got}
        if rest and got:
            assert max(rest) - min(rest) < 1e-9 and max(rest) < min(got.values())


def check_ranking(idx: BM25Index, docs: dict[str, str], q: str) -> None:
    """search() ranks like rank-bm25 scoring the expanded query, plus NEIGHBOR_WEIGHT times the
    better neighbor's score, ties by id ascending (asked for every memory, the pool holds them
    all: tests/memory/test_index_pruning.py checks the pool)."""
    ids, bm = reference(docs)
    weights = idx.expand(q, min_score=0, k=len(docs))
    own = {i: 0.0 for i in ids}
    for term, w in weights.items():
        scores = bm.get_scores([term]).tolist()
        base = bm.idf.get(term, 0.0) * index_mod.DELTA  # BM25Plus gives every document this
        for i, s in zip(ids, scores):
            own[i] += w * (s - base)
    ref = {}
    for i in ids:
        near = [own[n] for n in idx.neighbors(i) if n is not None]
        ref[i] = own[i] + NEIGHBOR_WEIGHT * max(near, default=0.0)
    found = [d for d, _ in idx.search(q, k=len(docs), min_score=0)]
    terms = set(analyze(q))
    assert set(found) == {i for i in ids if terms & set(analyze(docs[i]))}
    for a, b in zip(found, found[1:]):
        assert ref[a] > ref[b] - 1e-9
        if abs(ref[a] - ref[b]) <= 1e-9:
            assert a < b


def test_scores_equal_rank_bm25_on_a_random_corpus_through_adds_and_removes() -> None:
    rng = random.Random(7)
    docs = {f"d{i:03d}": random_text(rng) for i in range(250)}
    idx = BM25Index()
    idx.add_many((d, t, None) for d, t in docs.items())
    queries = [random_text(rng) for _ in range(15)] + ["word0", "word79 word0 word0", "nothing"]
    assert_same_as_rank_bm25(idx, docs, queries)

    for d in rng.sample(sorted(docs), 80):  # removes
        idx.remove(d)
        del docs[d]
    for i in range(40):  # adds, one at a time
        docs[f"n{i:03d}"] = random_text(rng)
        idx.add(f"n{i:03d}", docs[f"n{i:03d}"])
    for d in rng.sample(sorted(docs), 30):  # replacements keep the id
        docs[d] = random_text(rng)
        idx.add(d, docs[d])
    idx.remove("absent")  # no-op
    assert len(idx) == len(docs) and all(d in idx for d in docs) and "absent" not in idx
    assert_same_as_rank_bm25(idx, docs, queries)
    for q in queries[:8]:
        check_ranking(idx, docs, q)


def test_context_terms_count_context_weight_once() -> None:
    rng = random.Random(3)
    docs = {f"d{i:02d}": random_text(rng) for i in range(60)}
    idx = BM25Index()
    idx.add_many((d, t, None) for d, t in docs.items())
    ids, bm = reference(docs)
    query = Query("word3 word10", ("word1 word1 word20", "word20 word50"))
    got = idx.scores(query)
    ref = bm.get_scores(["word3", "word10"])
    for term in {"word1", "word20", "word50"}:
        ref = ref + CONTEXT_WEIGHT * bm.get_scores([term])
    for i, s in zip(ids, ref.tolist()):
        if i in got:
            assert got[i] == pytest.approx(s, rel=1e-9)


def test_empty_index_and_empty_query() -> None:
    idx = BM25Index()
    assert idx.search("anything") == [] and len(idx) == 0
    idx.add("a", "some text")
    assert idx.search("") == [] and idx.search("the and of") == [] and idx.search("text", k=0) == []


def test_one_memory_store_finds_it() -> None:
    idx = BM25Index()
    idx.add("m1", "Alice likes kubernetes dashboards")
    [(doc, score)] = idx.search("kubernetes")
    assert doc == "m1" and score > DEFAULT_MIN_SCORE


def test_ties_are_broken_by_id_and_results_are_deterministic() -> None:
    idx = BM25Index()
    for d in ["e", "c", "a", "d", "b"]:
        idx.add(d, "deploy to staging on fridays")
    idx.add("z", "unrelated note about lunch")
    assert [d for d, _ in idx.search("staging deploy", k=3)] == ["a", "b", "c"]
    first = idx.search("staging deploy", k=5)
    assert all(idx.search("staging deploy", k=5) == first for _ in range(5))


def test_scores_are_normalized_and_sorted() -> None:
    idx = BM25Index()
    idx.add_many([
        ("full", "the staging database runs postgres", None),
        ("half", "postgres tuning notes", None),
        ("none", "lunch is at noon", None),
    ])
    hits = idx.search("staging database postgres", k=5, min_score=0)
    assert [d for d, _ in hits] == ["full", "half"]
    assert hits[0][1] >= 1.0 > hits[1][1] > 0  # a memory with every query term scores >= 1


SOFTWARE_MEMORIES = [
    "User prefers tabs over spaces in Python code",
    "The project uses PostgreSQL 15 for the main database",
    "Deploys go through GitHub Actions to the staging server first, then production",
    "API keys live in .env and must never be committed",
    "Run the test suite with pytest -q before pushing",
    "The frontend is a React app built with Vite",
    "Code review needs one approval from the backend team",
    "We use ruff for linting and black formatting is disabled",
    "Database migrations are written with Alembic",
    "Logs are shipped to Datadog; use structured JSON logging",
    "The mobile app release train is every second Tuesday",
    "Prefer small pull requests under 400 lines",
]


@pytest.fixture()
def software() -> BM25Index:
    idx = BM25Index()
    idx.add_many((f"m{i:02d}", t, None) for i, t in enumerate(SOFTWARE_MEMORIES))
    return idx


@pytest.mark.parametrize(
    "prompt",
    ["What's the weather in Paris?", "Tell me a joke", "What is the capital of France?",
     "Can you recommend a good restaurant for dinner tonight?",
     # these share one common word with a memory ("make", "work", "write", "long"/"take")
     "How do I make a good first impression?", "How do vaccines work?",
     "Write me a poem about the sea", "How long does it take to boil an egg?"],
)
def test_unrelated_prompt_returns_nothing(software: BM25Index, prompt: str) -> None:
    assert software.search(prompt, k=5) == []


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [("Which database do we use?", "m01"), ("how do I run the tests", "m04"),
     ("can I commit my api key?", "m03"), ("when is the next mobile release?", "m10"),
     ("tabs or spaces?", "m00")],
)
def test_related_prompt_finds_the_memory(software: BM25Index, prompt: str, expected: str) -> None:
    assert software.search(prompt, k=3)[0][0] == expected


def test_min_score_cut(software: BM25Index) -> None:
    everything = software.search("which database do we use for logging", k=20, min_score=0)
    strict = software.search("which database do we use for logging", k=20, min_score=0.5)
    assert len(strict) < len(everything)
    assert [d for d, _ in strict] == [d for d, _ in everything][: len(strict)]
    assert all(s >= 0.5 for _, s in strict)


def test_date_terms_and_date_aware_search() -> None:
    assert date_terms("1:56 pm on 8 May, 2023") == analyze("may 2023")
    assert date_terms("2024-02-29") == analyze("february 2024")
    assert date_terms("Sept. 3rd") == analyze("september")
    assert date_terms(None) == [] and date_terms("someday") == []
    idx = BM25Index()
    idx.add("a", "we chose the blue logo", date="2023-05-08")
    idx.add("b", "we chose the green logo", date="2024-01-10")
    assert idx.search("which logo did we choose in May 2023?", k=1)[0][0] == "a"


def test_feedback_only_reorders_matching_memories() -> None:
    idx = BM25Index()
    idx.add_many([
        ("q", "Do you have any pets at home?", None),
        ("a", "Two cats and a dog, all rescued", None),
        ("x", "pets are allowed in the office", None),
    ])
    found = [d for d, _ in idx.search("pets", k=5, min_score=0)]
    assert set(found) == {"q", "x"}  # "a" shares no word with the query


def test_concurrent_adds_removes_and_searches() -> None:
    rng = random.Random(11)
    idx = BM25Index()
    base = {f"b{i:03d}": random_text(rng) for i in range(300)}
    idx.add_many((d, t, None) for d, t in base.items())
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(n: int) -> None:
        r = random.Random(n)
        try:
            for i in range(300):
                idx.add(f"w{n}-{i}", random_text(r))
                if i % 3 == 0:
                    idx.remove(f"w{n}-{i // 2}")
            idx.add_many((f"bulk{n}-{i}", random_text(r), None) for i in range(1500))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader(n: int) -> None:
        r = random.Random(100 + n)
        try:
            while not stop.is_set():
                hits = idx.search(random_text(r), k=5, min_score=0)
                assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    writers = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    readers = [threading.Thread(target=reader, args=(n,)) for n in range(3)]
    for t in writers + readers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert not errors
    # the index ends up exactly as if built in one go from the surviving documents
    fresh = BM25Index()
    data = idx._data
    survivors = {d: data.terms_of(s) for d, s in data.slot.items()}
    assert len(survivors) == len(idx)
    fresh.add_many((d, " ".join(data.lex.terms[t] for t, c in tf.items() for _ in range(c)), None) for d, tf in survivors.items())
    q = "word1 word2 word30"
    got, want = idx.search(q, k=20, min_score=0), fresh.search(q, k=20, min_score=0)
    assert [d for d, _ in got] == [d for d, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9)


def test_neighbors_are_consecutive_memories_of_one_date() -> None:
    idx = BM25Index()
    idx.add_many([
        ("u", "a note without a date", None),
        ("a", "first turn", "1:56 pm on 8 May, 2023"),
        ("b", "second turn", "1:56 pm on 8 May, 2023"),
        ("c", "third turn", "1:56 pm on 8 May, 2023"),
        ("d", "next session", "2:00 pm on 9 May, 2023"),
    ])
    idx.add("e", "a later add of the same session", "2:00 pm on 9 May, 2023")
    idx.add("f", "undated", None)
    assert idx.neighbors("u") == (None, None) and idx.neighbors("f") == (None, None)
    assert idx.neighbors("a") == (None, "b") and idx.neighbors("b") == ("a", "c")
    assert idx.neighbors("c") == ("b", None)  # a new date starts a new session
    assert idx.neighbors("d") == (None, "e") and idx.neighbors("e") == ("d", None)
    idx.remove("b")  # its neighbors join up
    assert idx.neighbors("a") == (None, "c") and idx.neighbors("c") == ("a", None)
    idx.add("a", "first turn, edited", "1:56 pm on 8 May, 2023")  # same id: keeps its place
    assert idx.neighbors("a") == (None, "c") and idx.neighbors("c") == ("a", None)
    idx.remove("f")
    idx.remove("e")
    idx.add("g", "after the removals", "2:00 pm on 9 May, 2023")  # follows the session's last one
    assert idx.neighbors("g") == ("d", None)


def test_a_neighbor_share_reorders_but_adds_nothing() -> None:
    day = "2023-05-08"
    idx = BM25Index()
    idx.add_many([
        ("q1", "Nate: How long have you had your turtles?", day),
        ("q2", "Joanna: Three years now, they are great company.", day),
        ("q3", "Nate: Joanna, did you finish the screenplay?", day),
        ("x", "Joanna: I love my turtles and my screenplay", "2023-06-01"),
        ("y", "Joanna: Three cats and two dogs", "2023-06-01"),
        ("z", "Joanna: my cat sleeps all day", "2023-06-01"),
    ])
    # q2 shares only "joanna" with the question, but it answers q1, which matches it best
    found = [d for d, _ in idx.search("How long has Joanna had her turtles?", k=6, min_score=0)]
    assert found[0] == "q1"
    assert found.index("q2") < found.index("y")  # same own score; q2's neighbor lifts it
    assert set(found) == {"q1", "q2", "q3", "x", "y", "z"}  # all share "joanna"
    # neighbors only reorder: no memory without a shared term, and the cut is on own terms
    assert "q2" not in [d for d, _ in idx.search("turtles", k=6, min_score=0)]
    assert idx.search("quantum chromodynamics lecture", k=6, min_score=0) == []
    assert [d for d, _ in idx.search("turtles", k=6)] == ["q1", "x"]


def test_ranking_with_neighbors_through_adds_and_removes() -> None:
    rng = random.Random(5)
    docs = {f"d{i:03d}": random_text(rng) for i in range(120)}
    idx = BM25Index()
    idx.add_many((d, t, f"session {i // 7}") for i, (d, t) in enumerate(docs.items()))
    for d in rng.sample(sorted(docs), 30):
        idx.remove(d)
        del docs[d]
    for i in range(20):
        docs[f"n{i:03d}"] = random_text(rng)
        idx.add(f"n{i:03d}", docs[f"n{i:03d}"], f"session {rng.randrange(20)}")
    for d in sorted(docs):  # the links are a set of chains: symmetric, each of one date
        before, after = idx.neighbors(d)
        assert before is None or idx.neighbors(before)[1] == d
        assert after is None or idx.neighbors(after)[0] == d
    assert any(idx.neighbors(d) != (None, None) for d in docs)
    for _ in range(8):
        check_ranking(idx, docs, random_text(rng))


def test_the_forward_index_through_compactions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each memory's term ids stay right when removals leave holes and the array is compacted
    (the snapshot's export too): the index answers as one built from the survivors."""
    monkeypatch.setattr(_index_data, "_FWD_SLACK", 8)
    rng = random.Random(4)
    docs: dict[str, str] = {}
    idx = BM25Index()
    for step in range(600):
        d = f"d{rng.randrange(120):03d}"
        if rng.random() < 0.35:
            idx.remove(d)
            docs.pop(d, None)
        else:
            docs[d] = random_text(rng)
            idx.add(d, docs[d])
        if step % 100 == 99:
            live = sum(len(analyze(t)) for t in docs.values())
            data = idx._data
            assert data.fend - data.fdead == live and data.fend <= 2 * live + 8 + 14  # compacted as it went
            for doc, text in docs.items():
                assert data.terms_of(data.slot[doc]) == {data.lex.term_id[t]: c for t, c in Counter(analyze(text)).items()}
    restored = BM25Index()
    restored.restore(idx.export())
    fresh = BM25Index()
    fresh.add_many((d, t, None) for d, t in docs.items())
    for _ in range(20):
        q = random_text(rng)
        want = [d for d, _ in fresh.search(q, k=10, min_score=0)]
        assert [d for d, _ in idx.search(q, k=10, min_score=0)] == want
        assert [d for d, _ in restored.search(q, k=10, min_score=0)] == want


def test_the_idf_cache_changes_no_result(monkeypatch: pytest.MonkeyPatch) -> None:
    """Searches read idf from a cache kept until the index changes (``Scorer._idfs``): emptied when full
    or by an add or a removal, it gives what a fresh index gives."""
    rng = random.Random(11)
    docs = {f"d{i}": random_text(rng) for i in range(120)}
    queries = [Query(random_text(rng), (random_text(rng),)) for _ in range(15)]

    def built() -> BM25Index:
        idx = BM25Index()
        idx.add_many((d, t, None) for d, t in docs.items())
        return idx

    expected = [built().search(q, k=8, min_score=0) for q in queries]  # each on an empty cache
    monkeypatch.setattr(_index_scoring, "_IDFS", 5)  # emptied on almost every search
    idx = built()
    assert [idx.search(q, k=8, min_score=0) for q in queries] == expected
    idx.add("extra", "an extra memory about the garden", None)
    idx.remove("d3")
    docs["extra"] = "an extra memory about the garden"
    del docs["d3"]
    assert [idx.search(q, k=8, min_score=0) for q in queries] == [built().search(q, k=8, min_score=0) for q in queries]
