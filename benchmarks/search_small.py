"""The search of a small store as the proxy runs it: 200 memories (``proxy.py``'s), every request a
new turn in the replay mode (queries with context, the already-shown ids excluded).

    python benchmarks/search_small.py [--requests 3000] [--warmup 600] [--dump FILE]

Prints the median of each timed step (µs per call, wrapped with perf_counter; a step's time
includes the steps it calls). ``--dump`` pickles every search's arguments and (id, score) results,
to compare two versions of the code."""

from __future__ import annotations

import argparse
import asyncio
import functools
import pickle
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import proxy as bench  # noqa: E402
from proxy_phases import _MEMORY_ROUTE, _timed, wrap_step  # noqa: E402

# (module, attribute path): the steps timed, outermost first
STEPS = [
    ("memwire.memory._store", "MemoryStore.search"),
    ("memwire.memory._store_base", "index_hits"),
    ("memwire.memory._store_base", "with_prior"),
    ("memwire.memory._index", "BM25Index.search"),
    ("memwire.memory._index", "BM25Index._run"),
    ("memwire.memory._index", "BM25Index._weights"),
    ("memwire.memory._index_scoring", "Scorer.ideal"),
    ("memwire.memory._index_scoring", "Scorer.terms"),
    ("memwire.memory._index_data", "IndexData.slots_of"),
    ("memwire.memory._index_scoring", "Scorer.score_all"),
    ("memwire.memory._index", "pool"),
    ("memwire.memory._index_scoring", "Scorer.rerank"),
    ("memwire.memory._index_scoring", "Scorer.feedback"),
    ("memwire.memory._index_scoring", "top"),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=600)
    parser.add_argument("--dump", help="pickle each search's query and results here")
    args = parser.parse_args()
    from memwire import MemoryStore
    from memwire._config_model import Config
    from memwire.memory import _index
    from memwire.middleware._core import Middleware

    times: dict[str, list[float]] = {}
    for module, path in STEPS:
        out: list[float] = []
        if wrap_step(module, path, functools.partial(_timed, out=out, marks=False)):
            times[path] = out
    seen: list[tuple[Any, ...]] = []
    if args.dump:  # record what the index is asked and answers (outside the timers' lists)
        inner = _index.BM25Index.search

        def search(self: Any, query: Any, k: int = 5, min_score: Any = None, exclude: Any = ()) -> Any:
            found = inner(self, query, k, min_score, exclude)
            seen.append((query.text, query.context, k, min_score, sorted(exclude), found))
            return found
        _index.BM25Index.search = search  # type: ignore[method-assign]

    with tempfile.TemporaryDirectory(prefix="memwire-small-") as tmp:
        MemoryStore(Path(tmp) / "memory").add_many(bench.memories())
        mw = Middleware(config=Config(dir=str(Path(tmp) / "memory"), home=str(Path(tmp) / "home"),
                                      mode="contextPerTurn", history="replay"))
        bodies = bench.new_turn_bodies(args.warmup + args.requests, True, "small")

        async def run() -> None:
            for i, body in enumerate(bodies):
                if i == args.warmup:
                    for values in times.values():
                        values.clear()
                await mw.aprepare_request(body, "openai.chat", headers={"authorization": "Bearer k"})
        _MEMORY_ROUTE.set(True)  # every search here is a memory route's: _timed records it
        asyncio.run(run())
    if args.dump:
        Path(args.dump).write_bytes(pickle.dumps(seen))
    print(f"{len(bench.memories())} memories, {args.requests} requests after {args.warmup} of warm-up\n")
    print(f"{'step':<28} {'median us':>10} {'calls':>7}")
    for path, values in times.items():
        if values:
            print(f"{path:<28} {statistics.median(values) * 1e6:>10.1f} {len(values):>7}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
