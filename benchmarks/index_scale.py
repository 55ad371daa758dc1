"""BM25Index speed and memory by store size: build, search, add one memory, peak memory.

    python benchmarks/index_scale.py [--sizes 1000 10000 100000] [--queries 500] [--adds 300]
                                     [--undated]

Memories are short generated sentences: English function words mixed with a generated
vocabulary of 50,000 pseudo-words drawn with a Zipf-like distribution (weight 1/rank^1.07), so a
few content words are in a large share of the memories and most are rare, as in real text.
Queries are generated the same way (6-16 words, like a user message). Memories are dated by
session (``SESSION`` memories per date, written in order, as a conversation is), so the index
links conversation neighbors; ``--undated`` leaves dates out. Figures printed:

- build: one ``add_many`` of all memories (analysis included);
- search p50/p99: ``index.search(query, k=6)`` with the default score cut;
- search after add: a search right after an ``add`` (the changed terms' arrays are rebuilt);
- add p50/p99: ``index.add`` of one new memory into the full index (analysis included);
- peak memory: tracemalloc's peak while building (a separate build: tracing slows it down),
  and the process's RSS growth over the timed build (first, on a fresh heap).

Prints figures; asserts nothing. See also benchmarks/overhead.py for the whole prepare().
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memwire.memory._index import BM25Index  # noqa: E402

FUNCTION_WORDS = (
    "the a an and or but of to in on for with at by from about as is are was were be been it "
    "this that these those we you they he she i my our your their his her its not no do does "
    "did have has had will would should can could may might must so then than when where why "
    "how what which who all any some each every more most very just also only again still"
).split()
VOCAB_SIZE = 50_000
SESSION = 20  # memories per session date
_ONSETS = "b c d f g h j k l m n p r s t v w z br ch cl cr dr fl gr pl pr sh sl sp st th tr".split()
_VOWELS = "a e i o u ai ea ee oa oo ou".split()
_CODAS = ["", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ck", "ng"]


def make_vocab(rng: random.Random, size: int) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        syllables = rng.choice((1, 2, 2, 3, 3, 4))
        words.add("".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
                          for _ in range(syllables)))
    # shuffled from a sorted list: a set's order (string hashes) changes with each process's hash
    # seed, and with it every run's corpus and queries
    return sorted(sorted(words), key=lambda w: rng.random())


class TextGen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.vocab = make_vocab(self.rng, VOCAB_SIZE)
        weights = [1 / (r + 1) ** 1.07 for r in range(VOCAB_SIZE)]
        total = 0.0
        self.cum = []
        for w in weights:
            total += w
            self.cum.append(total)

    def sentence(self, lo: int, hi: int) -> str:
        rng = self.rng
        n = rng.randint(lo, hi)
        content = rng.choices(self.vocab, cum_weights=self.cum, k=n)
        words = [w if rng.random() < 0.6 else rng.choice(FUNCTION_WORDS) for w in content]
        return " ".join(words).capitalize() + "."


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def session_date(i: int, dated: bool) -> str | None:
    return f"session {i // SESSION}" if dated else None


def measure(size: int, n_queries: int, n_adds: int, dated: bool = True) -> dict[str, float]:
    gen = TextGen(size)
    docs = [(f"m{i:07d}", gen.sentence(6, 22), session_date(i, dated)) for i in range(size)]
    queries = [gen.sentence(6, 16) for _ in range(n_queries)]
    new_docs = [gen.sentence(6, 22) for _ in range(n_adds)]

    gc.collect()
    rss0 = _rss()
    t0 = time.perf_counter()
    index = BM25Index()
    index.add_many(docs)
    build = time.perf_counter() - t0
    rss = _rss() - rss0
    for q in queries[:50]:  # warm: term arrays are built on first use
        index.search(q, k=6)

    search = []
    hits = 0
    for q in queries:
        t = time.perf_counter()
        found = index.search(q, k=6)
        search.append((time.perf_counter() - t) * 1000)
        hits += bool(found)

    add, after_add = [], []
    for i, text in enumerate(new_docs):
        t = time.perf_counter()
        index.add(f"new{i:05d}", text, session_date(size + i, dated))
        add.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        index.search(queries[i % len(queries)], k=6)
        after_add.append((time.perf_counter() - t) * 1000)

    # peak memory of a build, traced (numpy registers its buffers with tracemalloc)
    del index
    gc.collect()
    tracemalloc.start()
    traced = BM25Index()
    traced.add_many(docs)
    traced.search(queries[0])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del traced

    return {
        "build_s": build,
        "search_p50": statistics.median(search),
        "search_p99": pct(search, 0.99),
        "after_add_p50": statistics.median(after_add),
        "after_add_p99": pct(after_add, 0.99),
        "add_p50": statistics.median(add),
        "add_p99": pct(add, 0.99),
        "peak_mb": peak / 2**20,
        "rss_mb": rss,
        "with_hits": hits / len(queries),
    }


def _rss() -> float:
    """Resident set size in MB (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--adds", type=int, default=300)
    ap.add_argument("--undated", action="store_true", help="no dates: no conversation neighbors")
    args = ap.parse_args()
    print(f"{'memories':>9} {'build s':>8} {'search p50/p99 ms':>18} {'after add p50/p99':>18} "
          f"{'add p50/p99 ms':>15} {'peak MB':>8} {'RSS MB':>7} {'queries hit':>11}")
    for size in args.sizes:
        r = measure(size, args.queries, args.adds, dated=not args.undated)
        print(f"{size:>9} {r['build_s']:>8.2f} {r['search_p50']:>8.2f} /{r['search_p99']:>7.2f}"
              f" {r['after_add_p50']:>8.2f} /{r['after_add_p99']:>7.2f}"
              f" {r['add_p50']:>6.3f} /{r['add_p99']:>6.3f} {r['peak_mb']:>8.1f} {r['rss_mb']:>7.1f}"
              f" {r['with_hits']:>10.0%}", flush=True)


if __name__ == "__main__":
    main()
