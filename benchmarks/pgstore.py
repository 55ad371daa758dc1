"""The PostgreSQL store: load, add, search, how soon another replica sees a change, and what the
database holds per memory; the markdown store beside it on the same memories.

    python benchmarks/pgstore.py [--url postgresql://postgres@127.0.0.1:5432/test] [--sizes 200 2000 20000]
                                 [--adds 100] [--queries 300] [--changes 50]

Works in a fresh schema of the database (dropped at the end). The corpus is
benchmarks/index_scale.py's. Per size, in one namespace:

- bulk add: ``add_many`` of the whole corpus in chunks of 1,000 (one transaction each), per memory;
- cold: another replica (its own pool) opening the namespace and answering one search;
- add p50/p99: ``store.add`` of one new memory (one transaction, committed);
- search p50/p99: ``store.search(query, k=6)`` on a loaded replica that nothing changed under
  (no database round trip), and the markdown store's on the same memories;
- seen p50/p99: from an add returning on one replica until another replica's search finds it
  (LISTEN/NOTIFY, then a refresh of the rows changed); "polling" the same with the listener down;
- bytes/memory: memwire_memories and memwire_lifecycle (tables and indexes) over the memories.

Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from index_scale import TextGen, pct, session_date  # noqa: E402

import psycopg  # noqa: E402

from memwire import MemoryStore  # noqa: E402
from memwire.memory.postgres import _pg  # noqa: E402
from memwire.memory.postgres._store import PgStore  # noqa: E402
from tests.stores import fresh_schema_name, with_search_path  # noqa: E402


def timed_searches(store: Any, queries: list[str]) -> list[float]:
    """Seconds per ``store.search`` of each query, after 20 to warm up."""
    for q in queries[:20]:
        store.search(q, k=6)
    out = []
    for q in queries:
        t = time.perf_counter()
        store.search(q, k=6)
        out.append(time.perf_counter() - t)
    return out


def ms(xs: list[float]) -> str:
    return f"{pct(xs, 0.5) * 1000:.2f} / {pct(xs, 0.99) * 1000:.2f}"


def seen_after_add(writer: PgStore, reader: PgStore, texts: list[str]) -> list[float]:
    out = []
    for text in texts:
        writer.add(text)
        start = time.perf_counter()
        while not any(h.memory.text == text for h in reader.search(text, k=3)):
            if time.perf_counter() - start > 5:
                raise RuntimeError("not seen in 5 s")
            time.sleep(0.0005)
        out.append(time.perf_counter() - start)
    return out


def run(base: str, size: int, n_adds: int, n_queries: int, n_changes: int) -> dict[str, str]:
    schema = fresh_schema_name()
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = with_search_path(base, schema)
    urls = [url] + [f"{url}&application_name=replica-{i}" for i in (1, 2)]
    try:
        gen = TextGen(size)
        docs = [(gen.sentence(6, 22), str(session_date(i, True))) for i in range(size)]
        queries = [gen.sentence(6, 16) for _ in range(n_queries)]
        writer = PgStore(urls[0], "bench")
        start = time.perf_counter()
        for i in range(0, size, 1000):
            writer.add_many([_memory(t, d) for t, d in docs[i:i + 1000]])
        bulk = (time.perf_counter() - start) / size
        start = time.perf_counter()
        reader = PgStore(urls[1], "bench")
        reader.search(queries[0])
        cold = time.perf_counter() - start
        adds = []
        for _ in range(n_adds):
            t = time.perf_counter()
            writer.add(gen.sentence(6, 22))
            adds.append(time.perf_counter() - t)
        deadline = time.monotonic() + 5
        while not (reader.ready() and reader._db.listening) and time.monotonic() < deadline:
            reader.refresh()
        searches = timed_searches(reader, queries)
        with tempfile.TemporaryDirectory() as tmp:
            md = MemoryStore(Path(tmp) / "mem")
            md.add_many([_memory(t, d) for t, d in docs])
            md_searches = timed_searches(MemoryStore(Path(tmp) / "mem"), queries)
        seen = seen_after_add(writer, reader, [gen.sentence(6, 22) + f" change {i}" for i in range(n_changes)])
        third = PgStore(urls[2], "bench")
        third.search("warm up")
        listener = third._db._listening()
        _pg.LISTEN_RETRY_S = 3600.0  # keep it down
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (listener.backend_pid,))
        while third._db.listening:
            time.sleep(0.01)
        polled = seen_after_add(writer, third, [gen.sentence(6, 22) + f" polled {i}" for i in range(10)])
        _pg.LISTEN_RETRY_S = 1.0
        with psycopg.connect(url) as conn:
            count = conn.execute("SELECT count(*) FROM memwire_memories").fetchone()[0]
            total = conn.execute("SELECT pg_total_relation_size('memwire_memories') + "
                                 "pg_total_relation_size('memwire_lifecycle')").fetchone()[0]
        return {"size": f"{size:,}", "bulk add ms/mem": f"{bulk * 1000:.3f}", "cold s": f"{cold:.2f}",
                "add p50/p99 ms": ms(adds), "search p50/p99 ms": ms(searches), "markdown search": ms(md_searches),
                "seen p50/p99 ms": ms(seen), "polling p50/p99 ms": ms(polled), "bytes/memory": f"{total // count:,}"}
    finally:
        writer.lifecycle.flush()
        for u in urls:
            _pg.close(u)
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _memory(text: str, date: str):  # type: ignore[no-untyped-def]
    from memwire.memory._model import Memory

    return Memory.create(text, date=date)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default=os.environ.get("MEMWIRE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"))
    ap.add_argument("--sizes", type=int, nargs="+", default=[200, 2000, 20000])
    ap.add_argument("--adds", type=int, default=100)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--changes", type=int, default=50)
    args = ap.parse_args()
    rows = [run(args.url, n, args.adds, args.queries, args.changes) for n in args.sizes]
    cols = list(rows[0])
    widths = [max(len(c), *(len(r[c]) for r in rows)) for c in cols]
    print(" | ".join(c.ljust(w) for c, w in zip(cols, widths)))
    print("-|-".join("-" * w for w in widths))
    for r in rows:
        print(" | ".join(r[c].ljust(w) for c, w in zip(cols, widths)))
    print(f"\npython {sys.version.split()[0]}, psycopg {psycopg.__version__}")


if __name__ == "__main__":
    main()
