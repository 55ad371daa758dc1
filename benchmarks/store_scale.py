"""The markdown store at scale: cold start, add, search and memory per memory, with peers.

    python benchmarks/store_scale.py [--sizes 1000 10000 100000 [1000000]] [--queries 300]
                                     [--adds 100] [--no-peers]

The corpus is benchmarks/index_scale.py's (generated sentences over a Zipf vocabulary, dated by
session, ``SESSION`` memories per date), written straight into one ``MEMORY.md``: the first half
under ``## Topic N`` headers of 1,000 memories, the rest under ``## Notes``, the topic ``add``
writes to by default. Figures, per size:

- cold first / cold snap: a fresh process opening the store and answering one search (imports
  excluded), without the index snapshot (``.index/`` removed) and then with it;
- bytes/memory: that fresh process's RSS growth over the load, divided by the memories (with the
  snapshot; without it, the same figure is in the "first" run's JSON with ``--verbose``);
- add p50/p99: ``store.add(text, date=...)`` of one new memory into the loaded store (fsync
  included), after a few warm-up adds;
- search p50/p99: ``store.search(query, k=6)`` (a stat of the files included), after warm-up.

Peers, on the same texts, where they install: rank-bm25 (BM25Plus, up to 100k: its build is pure
Python), bm25s, tantivy (an on-disk index) and SQLite FTS5 (an on-disk database, the query's words
OR-ed). Their "cold" figure is reopening their on-disk index and answering one query. Peers
tokenize with their own analyzers. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from index_scale import TextGen, _rss, pct, session_date  # noqa: E402

TOPIC_SIZE = 1000


def corpus(size: int, n_queries: int, n_adds: int) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    gen = TextGen(size)
    docs = [(gen.sentence(6, 22), str(session_date(i, True))) for i in range(size)]
    queries = [gen.sentence(6, 16) for _ in range(n_queries)]
    adds = [gen.sentence(6, 22) for _ in range(n_adds)]
    return docs, queries, adds


def write_store(path: Path, docs: list[tuple[str, str]]) -> None:
    from memwire.memory._markdown import format_line
    from memwire.memory._model import Memory

    path.mkdir(parents=True, exist_ok=True)
    half = len(docs) // 2
    with open(path / "MEMORY.md", "w", encoding="utf-8") as fh:
        fh.write("# Memory\n")
        for i, (text, date) in enumerate(docs):
            if i < half and i % TOPIC_SIZE == 0:
                fh.write(f"\n## Topic {i // TOPIC_SIZE}\n")
            elif i == half:
                fh.write("\n## Notes\n")
            fh.write(format_line(Memory.create(text, (), False, None, date)) + "\n")


# ------------------------------------------------------------------ a fresh process


def child_load(path: str, query: str) -> None:
    import numpy  # noqa: F401 - imports are not the store's cold start
    import Stemmer  # noqa: F401

    import memwire  # noqa: F401
    from memwire.memory._store import MemoryStore

    gc.collect()
    rss0 = _rss()
    t0 = time.perf_counter()
    store = MemoryStore(path)
    hits = store.search(query, k=6)
    elapsed = time.perf_counter() - t0
    gc.collect()
    print(json.dumps({"load_s": elapsed, "rss_mb": _rss() - rss0, "n": len(store), "hits": len(hits)}))


def cold(path: Path, query: str) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, __file__, "--child-load", str(path), query],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


# ------------------------------------------------------------------ memwire


def timed(fn: Callable[[Any], Any], items: list[Any]) -> list[float]:
    out = []
    for item in items:
        t = time.perf_counter()
        fn(item)
        out.append((time.perf_counter() - t) * 1000)
    return out


def memwire_row(path: Path, docs: list[tuple[str, str]], queries: list[str], adds: list[str]) -> dict[str, Any]:
    from memwire.memory._store import MemoryStore

    shutil.rmtree(path / ".index", ignore_errors=True)
    first = cold(path, queries[0])
    snap = cold(path, queries[0])
    store = MemoryStore(path)
    store.search(queries[0])
    for q in queries[:30]:
        store.search(q, k=6)
    search = timed(lambda q: store.search(q, k=6), queries)
    # the same queries again: a restored index makes a term's postings on its first use
    again = timed(lambda q: store.search(q, k=6), queries)
    date = session_date(len(docs), True)
    for text in adds[:5]:
        store.add("warm " + text, date=date)
    add = timed(lambda t: store.add(t, date=date), adds[5:])
    n = first["n"]
    return {"system": "memwire", "cold_first": first["load_s"], "cold": snap["load_s"],
            "bytes": snap["rss_mb"] * 2**20 / n, "bytes_first": first["rss_mb"] * 2**20 / n,
            "add": (statistics.median(add), pct(add, 0.99)),
            "search": (statistics.median(search), pct(search, 0.99)),
            "search_again": (statistics.median(again), pct(again, 0.99)), "n": n}


# ------------------------------------------------------------------ peers


def peer_rank_bm25(texts: list[str], queries: list[str], tmp: Path) -> dict[str, Any] | None:
    if len(texts) > 100_000:
        return None
    import numpy as np
    from rank_bm25 import BM25Plus

    bm = BM25Plus([t.lower().split() for t in texts])

    def search(q: str) -> Any:
        s = bm.get_scores(q.lower().split())
        return np.argpartition(-s, 6)[:6]

    for q in queries[:5]:
        search(q)
    return {"system": "rank-bm25", "search": _p(timed(search, queries))}


def peer_bm25s(texts: list[str], queries: list[str], tmp: Path) -> dict[str, Any] | None:
    try:
        import bm25s
    except ImportError:
        return None
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)

    def search(q: str) -> Any:
        return retriever.retrieve(bm25s.tokenize([q], stopwords="en", show_progress=False), k=6, show_progress=False)

    for q in queries[:5]:
        search(q)
    return {"system": "bm25s", "search": _p(timed(search, queries))}


def peer_tantivy(texts: list[str], queries: list[str], tmp: Path) -> dict[str, Any] | None:
    try:
        import tantivy
    except ImportError:
        return None
    where = tmp / "tantivy"
    where.mkdir()
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("body", stored=False)
    sb.add_unsigned_field("rid", stored=True)
    schema = sb.build()
    index = tantivy.Index(schema, path=str(where))
    writer = index.writer()
    for i, t in enumerate(texts):
        writer.add_document(tantivy.Document(body=t, rid=i))
    writer.commit()
    writer.wait_merging_threads()

    def opened() -> Any:
        ix = tantivy.Index(schema, path=str(where))
        ix.reload()
        return ix

    def search_in(ix: Any, q: str) -> Any:
        return ix.searcher().search(ix.parse_query(q.replace(".", " "), ["body"]), 6).hits

    t0 = time.perf_counter()
    ix = opened()
    search_in(ix, queries[0])
    reopen = time.perf_counter() - t0
    for q in queries[:5]:
        search_in(ix, q)
    return {"system": "tantivy", "cold": reopen, "search": _p(timed(lambda q: search_in(ix, q), queries))}


def peer_fts5(texts: list[str], queries: list[str], tmp: Path) -> dict[str, Any] | None:
    import sqlite3

    db = tmp / "fts.db"
    con = sqlite3.connect(db)
    con.execute("CREATE VIRTUAL TABLE m USING fts5(body)")
    con.executemany("INSERT INTO m(body) VALUES (?)", ((t,) for t in texts))
    con.commit()
    con.close()

    def match(q: str) -> str:
        return " OR ".join(f'"{w}"' for w in q.replace(".", " ").split())

    def search_in(c: Any, q: str) -> Any:
        return c.execute("SELECT rowid FROM m WHERE m MATCH ? ORDER BY rank LIMIT 6", (match(q),)).fetchall()

    t0 = time.perf_counter()
    con = sqlite3.connect(db)
    search_in(con, queries[0])
    reopen = time.perf_counter() - t0
    for q in queries[:5]:
        search_in(con, q)
    row = {"system": "sqlite fts5", "cold": reopen, "search": _p(timed(lambda q: search_in(con, q), queries))}
    con.close()
    return row


def _p(values: list[float]) -> tuple[float, float]:
    return statistics.median(values), pct(values, 0.99)


# ------------------------------------------------------------------ table


def fmt(row: dict[str, Any], size: int) -> str:
    def pair(key: str) -> str:
        v = row.get(key)
        return f"{v[0]:>7.3f} /{v[1]:>7.3f}" if v else f"{'-':>16}"

    def num(key: str, spec: str) -> str:
        v = row.get(key)
        return format(v, spec) if v is not None else f"{'-':>{len(format(0.0, spec))}}"

    return (f"{size:>9} {row['system']:<12} {num('cold_first', '9.3f')} {num('cold', '9.3f')} "
            f"{pair('add')} {pair('search')} {num('bytes', '9.0f')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--adds", type=int, default=100)
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--verbose", action="store_true", help="also print each row as JSON")
    ap.add_argument("--child-load", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_load:
        child_load(*args.child_load)
        return
    print(f"{'memories':>9} {'system':<12} {'cold 1st s':>9} {'cold snap':>9} {'add p50/p99 ms':>16} "
          f"{'search p50/p99 ms':>16} {'B/memory':>9}", flush=True)
    for size in args.sizes:
        docs, queries, adds = corpus(size, args.queries, args.adds + 5)
        with tempfile.TemporaryDirectory(prefix="memwire-scale-") as tmp:
            root = Path(tmp)
            write_store(root / "store", docs)
            rows = [memwire_row(root / "store", docs, queries, adds)]
            print(fmt(rows[0], size), flush=True)
            print(f"{'':>9} memwire's same searches again (their terms' postings made): p50/p99 "
                  f"{rows[0]['search_again'][0]:.3f} / {rows[0]['search_again'][1]:.3f} ms", flush=True)
            if not args.no_peers:
                texts = [t for t, _ in docs]
                for peer in (peer_rank_bm25, peer_bm25s, peer_tantivy, peer_fts5):
                    gc.collect()
                    row = peer(texts, queries, root)
                    if row is not None:
                        rows.append(row)
                        print(fmt(row, size), flush=True)
                ratios = [f"{rows[0]['search'][0] / r['search'][0]:.1f}x {r['system']}" for r in rows[1:]
                          if r["system"] in ("tantivy", "bm25s") and r["search"][0] > 0]
                if ratios:
                    print(f"{'':>9} memwire's search p50 is " + ", ".join(ratios), flush=True)
            if args.verbose:
                for row in rows:
                    print(json.dumps(row))


if __name__ == "__main__":
    main()
