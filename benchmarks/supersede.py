"""Memory that stays true (issue 33): the decision table's counts, and what settling costs an add.

    python benchmarks/supersede.py [--sizes 200 2000 20000] [--adds 200] [--url postgresql://...]

1. The table of tests/memory/test_supersede.py (updates in varied wording, preference switches,
   look-alikes, duplicates in other words, unsure pairs): how many ``compare`` gets right, per kind.
2. ``store.add`` of one new memory on a store of N memories (benchmarks/index_scale.py's corpus,
   written without settling), p50 / p99 in ms: with the add path's settling (the BM25 search of
   the 8 most similar active memories and ``compare`` with each, under the write lock) and without
   (``store.settles = False``, what add cost before), alternating, on new texts each time. With
   ``--url``, the PostgreSQL store too (in a schema of its own, dropped at the end). "decision
   alone": the search and the comparisons without the write (less noisy on a busy machine).

Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from index_scale import TextGen, pct

from memwire import MemoryStore
from memwire.memory._model import Memory
from memwire.memory._supersede import candidates, compare, plan
from tests.memory.test_supersede import CASES


def table() -> None:
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    wrong = []
    for kind, old, new, expected in CASES:
        total[kind] += 1
        got = compare(new, old)
        if got == expected:
            right[kind] += 1
        else:
            wrong.append((kind, old, new, expected, got))
    names = {"update": "updates recognised", "preference": "preference switches recognised",
             "look-alike": "look-alikes kept apart", "duplicate": "duplicates merged",
             "unsure": "unsure pairs marked as conflicts"}
    print("decision table (tests/memory/test_supersede.py)")
    for kind, name in names.items():
        print(f"  {name:<34} {right[kind]:>3} / {total[kind]}")
    for kind, old, new, expected, got in wrong:
        print(f"  WRONG {kind}: {old!r} -> {new!r}: {got}, expected {expected}")


def timed_adds(store: Any, texts: list[str], settle: bool) -> list[float]:
    store.settles = settle
    out = []
    for text in texts:
        t = time.perf_counter()
        store.add(text)
        out.append(time.perf_counter() - t)
    return out


def decision(store: Any, gen: TextGen, n: int = 200) -> list[float]:
    """Seconds of the add path's decision alone (the candidates' search and ``compare``), no write."""
    out = []
    for _ in range(n):
        mem = Memory.create(gen.sentence(6, 18))
        t = time.perf_counter()
        plan([mem], candidates(store.search), lambda m: True)
        out.append(time.perf_counter() - t)
    return out


def ms(xs: list[float]) -> str:
    return f"{pct(xs, 0.5) * 1000:6.2f} / {pct(xs, 0.99) * 1000:6.2f}"


def markdown(size: int, n_adds: int) -> None:
    gen = TextGen(7)
    with tempfile.TemporaryDirectory() as d:
        store = MemoryStore(d)
        store.settles = False
        corpus = [gen.sentence(6, 18) for _ in range(size)]
        for i in range(0, size, 1000):
            store.add_many(corpus[i : i + 1000])
        store.lifecycle.flush()
        new = [gen.sentence(6, 18) for _ in range(2 * n_adds + 20)]
        timed_adds(store, new[:10], True)  # warm up
        timed_adds(store, new[10:20], False)
        on: list[float] = []
        off: list[float] = []
        for i in range(n_adds):  # alternating, so both see the same store sizes and disk state
            on += timed_adds(store, [new[20 + 2 * i]], True)
            off += timed_adds(store, [new[21 + 2 * i]], False)
        alone = decision(store, gen)
        print(f"  markdown {size:>7,}   settled {ms(on)}   not settled {ms(off)}   decision alone {ms(alone)}")


def postgres(url: str, size: int, n_adds: int) -> None:
    import psycopg

    from memwire.memory.postgres._store import PgStore
    from tests.stores import fresh_schema_name, with_search_path

    schema = fresh_schema_name()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        gen = TextGen(7)
        store = PgStore(with_search_path(url, schema), "bench")
        store.settles = False
        corpus = [gen.sentence(6, 18) for _ in range(size)]
        for i in range(0, size, 1000):
            store.add_many(corpus[i : i + 1000])
        new = [gen.sentence(6, 18) for _ in range(2 * n_adds + 20)]
        timed_adds(store, new[:10], True)  # warm up
        timed_adds(store, new[10:20], False)
        on: list[float] = []
        off: list[float] = []
        for i in range(n_adds):
            on += timed_adds(store, [new[20 + 2 * i]], True)
            off += timed_adds(store, [new[21 + 2 * i]], False)
        alone = decision(store, gen)
        print(f"  postgres {size:>7,}   settled {ms(on)}   not settled {ms(off)}   decision alone {ms(alone)}")
        store.lifecycle.flush()  # before the schema goes
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[200, 2000, 20000])
    ap.add_argument("--adds", type=int, default=200)
    ap.add_argument("--url", help="a PostgreSQL database to measure PgStore in (a schema of its own, dropped)")
    args = ap.parse_args()
    table()
    print(f"\nstore.add of one new memory, p50 / p99 ms ({args.adds} each, alternating)")
    for size in args.sizes:
        markdown(size, args.adds)
        if args.url:
            postgres(args.url, size, args.adds)


if __name__ == "__main__":
    main()
