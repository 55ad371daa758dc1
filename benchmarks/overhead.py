"""prepare() overhead in contextPerTurn on a 20-message conversation, by store size.

    python benchmarks/overhead.py [--sizes 1000 10000 100000] [--requests 300] [--history replay drop] [--adds 30]
    python benchmarks/overhead.py --sizes 1000 --adds 0 --history replay --ledger   # the ledger's own cost

``--ledger`` adds a row per size for replay with its ledger kept in memory only (no file): the
difference to the ``replay`` row is what saving the ledger costs a request.

Prints p50 / p99 in milliseconds, then the latency of adding a memory (from a second thread) and of
prepare() while those adds run. The store is written to a temp dir as markdown (one add_many),
then read back through MemoryStore as a user's store would be; the index is warmed before timing.
Each timed request is a new turn (a fresh latest user message), so nothing comes from the memo;
the first messages vary, so requests fall into a dozen sessions, as on a busy proxy.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import threading
import time

from memwire import MemoryStore, Middleware

SUBJECTS = "tests build deploy database cache linter formatter migrations frontend backend docker ci api auth logging".split()
VERBS = "prefers uses decided avoids needs runs configures expects documents requires".split()
THINGS = ("postgres redis ruff black pytest vite react fastapi alembic kubernetes terraform nginx celery kafka "
          "tabs spaces mypy poetry uv make tox nox sentry grafana prometheus s3 gcs lambda cron").split()


def make_memory(rng: random.Random, i: int) -> str:
    words = [rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(THINGS), rng.choice(THINGS)]
    return f"Note {i}: the {words[0]} setup {words[1]} {words[2]} with {words[3]} (ticket {rng.randint(1, 99999)})"


def conversation(rng: random.Random, turn: int) -> list[dict]:
    msgs: list[dict] = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(9):
        msgs.append({"role": "user", "content": f"step {i}: look at the {rng.choice(SUBJECTS)} config"})
        msgs.append({"role": "assistant", "content": f"Looked at it; {rng.choice(THINGS)} is set up."})
    msgs.append({"role": "user", "content": f"How does the {rng.choice(SUBJECTS)} use {rng.choice(THINGS)}? (#{turn})"})
    return msgs  # 20 messages


def pct(times: list[float], q: float) -> float:
    times = sorted(times)
    return times[min(len(times) - 1, int(len(times) * q))]


def measure_adds(store: MemoryStore, mw: Middleware, rng: random.Random, adds: int) -> tuple[float, float, float, float]:
    """Add ``adds`` memories from a second thread while prepare() runs: add p50/p99, and prepare
    p50/p99 during the adds (an add must not hold prepare up)."""
    add_times: list[float] = []
    done = threading.Event()

    def writer() -> None:
        for i in range(adds):
            t0 = time.perf_counter()
            store.add(f"Added later {i}: the {rng.choice(SUBJECTS)} setup now uses {rng.choice(THINGS)}")
            add_times.append((time.perf_counter() - t0) * 1000)
        done.set()

    thread = threading.Thread(target=writer)
    prep: list[float] = []
    thread.start()
    turn = 100_000
    while not done.is_set():
        msgs = conversation(rng, turn)
        turn += 1
        t0 = time.perf_counter()
        mw.prepare(msgs, model="gpt-4o")
        prep.append((time.perf_counter() - t0) * 1000)
    thread.join()
    return statistics.median(add_times), pct(add_times, 0.99), statistics.median(prep), pct(prep, 0.99)


def measure(size: int, requests: int, history: str, ledger_on_disk: bool = True) -> tuple[float, float, float]:
    from memwire.policies.modes import _ledger

    rng = random.Random(size)
    real_load = _ledger.Ledger.load
    if not ledger_on_disk:  # the same ledger, in memory only: what the file costs is the difference
        _ledger.Ledger.load = classmethod(  # type: ignore[method-assign]  # Ledger.load's signature
            lambda cls, directory, session, root=None: cls(None, session))
    try:
        return _measure(rng, size, requests, history)
    finally:
        _ledger.Ledger.load = real_load  # type: ignore[method-assign]


def _measure(rng: random.Random, size: int, requests: int, history: str) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as d:
        MemoryStore(d).add_many(make_memory(rng, i) for i in range(size))
        t = time.perf_counter()
        store = MemoryStore(d)
        mw = Middleware(store=store, mode="contextPerTurn", history=history, timeout_ms=60_000)
        mw.prepare(conversation(rng, -1), model="gpt-4o")  # load + index
        load = time.perf_counter() - t
        times = []
        for turn in range(-50, requests):  # the first 50 warm up (sessions' first requests, caches)
            msgs = conversation(rng, turn)
            t0 = time.perf_counter()
            mw.prepare(msgs, model="gpt-4o")
            if turn >= 0:
                times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), pct(times, 0.99), load


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--history", nargs="+", default=["replay", "drop"], choices=["replay", "drop"])
    ap.add_argument("--adds", type=int, default=30, help="memories added during prepare() per size (0: skip)")
    ap.add_argument("--ledger", action="store_true", help="also replay with its ledger in memory only (no file)")
    ap.add_argument("--rounds", type=int, default=1, help="interleaved rounds per row; p50 is their median")
    args = ap.parse_args()
    print(f"{'history':>16} {'memories':>9} {'p50 ms':>8} {'p99 ms':>8} {'load s':>8}")
    rows = [(h, True) for h in args.history] + ([("replay", False)] if args.ledger else [])
    for size in args.sizes:
        results: dict[tuple[str, bool], list[tuple[float, float, float]]] = {row: [] for row in rows}
        for _ in range(args.rounds):  # rows take turns, so background load on the machine hits them alike
            for history, on_disk in rows:
                results[(history, on_disk)].append(measure(size, args.requests, history, on_disk))
        for (history, on_disk), runs in results.items():
            p50 = statistics.median(r[0] for r in runs)
            p99 = statistics.median(r[1] for r in runs)
            load = statistics.median(r[2] for r in runs)
            name = history if on_disk else "replay (memory)"
            print(f"{name:>16} {size:>9} {p50:>8.3f} {p99:>8.3f} {load:>8.2f}")
    if args.adds:
        print(f"\nadding memories from another thread while prepare() runs ({args.adds} adds per size)")
        print(f"{'memories':>9} {'add p50':>8} {'add p99':>8} {'prepare p50':>12} {'prepare p99':>12}")
        for size in args.sizes:
            rng = random.Random(size)
            with tempfile.TemporaryDirectory() as d:
                MemoryStore(d).add_many(make_memory(rng, i) for i in range(size))
                store = MemoryStore(d)
                mw = Middleware(store=store, mode="contextPerTurn", timeout_ms=60_000)
                mw.prepare(conversation(rng, -1), model="gpt-4o")
                a50, a99, p50, p99 = measure_adds(store, mw, rng, args.adds)
            print(f"{size:>9} {a50:>8.2f} {a99:>8.2f} {p50:>12.3f} {p99:>12.3f}")


if __name__ == "__main__":
    main()
