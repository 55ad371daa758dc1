"""Where a loaded markdown store's resident memory goes, per memory.

    python benchmarks/store_memory.py [--sizes 100000 [1000000]]

The corpus and store are benchmarks/store_scale.py's (one ``MEMORY.md``). For each size, a fresh
process opens the store without the index snapshot (parsing and indexing, writing the snapshot),
then another opens it with the snapshot; each answers one search and prints its RSS growth per
memory and load time, then the bytes per memory of what the store holds: its tables (the id
strings, the id lists and id -> row maps, the texts, the other columns) and each attribute of the BM25 index.
Every object is counted once (a string the index shares with a table counts where it is met
first: the tables); numpy arrays count their buffers (a view, its base's). The gap between the
objects and the RSS growth is the allocators' (free pages kept) and the interpreter's.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from index_scale import _rss  # noqa: E402


class Sizer:
    """Deep sizes, each object counted once across calls."""

    def __init__(self) -> None:
        import numpy as np

        self.np = np
        self.seen: set[int] = set()

    def __call__(self, *roots: Any) -> int:
        total, stack = 0, list(roots)
        while stack:
            x = stack.pop()
            if id(x) in self.seen or isinstance(x, type):
                continue
            self.seen.add(id(x))
            total += sys.getsizeof(x)  # an ndarray: with its buffer when it owns it
            if isinstance(x, self.np.ndarray):
                if x.base is not None:
                    stack.append(x.base)
                continue
            if isinstance(x, dict):
                stack += list(x.keys()) + list(x.values())
            elif isinstance(x, (list, tuple, set, frozenset)):
                stack += list(x)
            else:  # an instance: its slots (a base class's too) and its __dict__
                names = [a for c in type(x).__mro__ for a in getattr(c, "__slots__", ())]
                stack += [getattr(x, a) for a in names if a != "__weakref__" and hasattr(x, a)]
                if hasattr(x, "__dict__"):
                    stack.append(x.__dict__)
        return total


def child(path: str, queries_file: str) -> None:
    import numpy  # noqa: F401 - imports are not the store's
    import Stemmer  # noqa: F401

    import memwire  # noqa: F401
    from memwire.memory._store import MemoryStore

    queries = json.loads(Path(queries_file).read_text(encoding="utf-8"))
    query = queries[0]
    gc.collect()
    rss0, t0 = _rss(), time.perf_counter()
    store = MemoryStore(path)
    store.search(query, k=6)
    load = time.perf_counter() - t0
    gc.collect()
    n = len(store)
    rows: list[tuple[str, int]] = [("RSS growth", int((_rss() - rss0) * 2**20))]
    # then the rest of the queries (--searches): what the searches' own state adds (before the
    # objects are sized below: sizing them allocates, and the allocator keeps its pages)
    if len(queries) > 1:
        for q in queries[1:]:
            store.search(q, k=6)
        gc.collect()
        rows.append((f"RSS growth after {len(queries)} searches", int((_rss() - rss0) * 2**20)))
    size = Sizer()
    tables = [t for d in store._dirs for t in d.files.values()]
    rows.append(("store: id strings", sum(size(mid) for t in tables for mid in t.ids())))
    rows.append(("store: id lists, id -> row maps", sum(size(t._ids, t._row) for t in tables)))
    rows.append(("store: texts (UTF-8, one buffer a file)", sum(size(t._text) for t in tables)))
    rows.append(("store: other columns (ends, kinds)", sum(size(t) for t in tables)))
    rows.append(("store: merged view", size(store._merged)))
    index = store._index
    names = list(getattr(index, "__slots__", ())) or list(vars(index))
    for name in names:
        rows.append((f"index: {name}", size(getattr(index, name))))
    objects = sum(v for k, v in rows if not k.startswith("RSS"))
    rows.append(("objects, all", objects))
    print(json.dumps({"n": n, "load_s": load, "rows": rows}))


def run(path: Path, queries: Path) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, __file__, "--child", str(path), str(queries)],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    ap.add_argument("--searches", type=int, default=1,
                    help="distinct generated queries searched; past 1 the RSS growth after them is printed too")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    from store_scale import corpus, write_store

    for size in args.sizes:
        docs, queries, _ = corpus(size, max(1, args.searches), 0)
        with tempfile.TemporaryDirectory(prefix="memwire-mem-") as tmp:
            store, asked = Path(tmp) / "store", Path(tmp) / "queries.json"
            write_store(store, docs)
            asked.write_text(json.dumps(queries), encoding="utf-8")
            first, snap = run(store, asked), run(store, asked)
        n = snap["n"]
        print(f"\n{size:,} memories: load {first['load_s']:.2f} s without the snapshot, {snap['load_s']:.2f} s with it")
        print(f"{'bytes per memory':<44} {'no snapshot':>11} {'snapshot':>9}")
        for (name, a), (_, b) in zip(first["rows"], snap["rows"]):
            if max(a, b) / n >= 0.05:  # scalars and locks: nothing per memory
                print(f"{name:<44} {a / n:>11.1f} {b / n:>9.1f}")


if __name__ == "__main__":
    main()
