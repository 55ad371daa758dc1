"""What explicit capture costs a request, apart from what the memory it writes costs.

In process, ``Middleware.prepare`` over 60 conversations of 20 turns; every fourth turn says
something to remember ("Remember that the payments review for ticket 3 is due on day 7."), so
capture writes about 290 memories. Between requests the script sleeps ``--gap`` seconds (the
model's answer): a real client leaves the worker that much idle time. Three runs, from the same
store, in interleaved rounds:

- ``off``: capture off, the store as seeded;
- ``auto``: capture on, the store growing as it captures;
- ``off, grown``: capture off, from the store ``auto`` ends with: the cost of the memory alone.

``auto`` against ``off, grown`` is what capture itself costs the request path; ``off, grown``
against ``off`` is what a bigger store costs (more to search, more injected).

    python benchmarks/capture.py [--rounds 3] [--gap 0.003]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from memwire import MemoryStore, Middleware

TOPICS = ["payments", "invoices", "refunds", "reporting", "schema", "migrations", "deploys", "alerts"]


def seed(path: Path) -> None:
    MemoryStore(path).add_many([f"The {t} service is owned by team {i} and deploys on day {i}"
                                for i, t in enumerate(TOPICS * 8)])


def run(capture: str, path: Path, gap: float) -> tuple[float, float, int]:
    store = MemoryStore(path)
    mw = Middleware(store=store, mode="contextPerTurn", capture=capture)
    mw.warm_up()
    times: list[float] = []
    for conv in range(60):
        messages: list[dict[str, str]] = [{"role": "system", "content": "You are careful. " * 50}]
        for turn in range(20):
            topic = TOPICS[(conv + turn) % len(TOPICS)]
            text = f"What did we decide about {topic} for the billing move?"
            if turn % 4 == 3:
                text += f" Remember that the {topic} review for ticket {conv} is due on day {turn}."
            messages.append({"role": "user", "content": text})
            start = time.perf_counter()
            mw.prepare(messages, session_id=f"c{conv}")
            times.append((time.perf_counter() - start) * 1000)
            time.sleep(gap)
            messages.append({"role": "assistant", "content": "Use PostgreSQL 16 and move payments first."})
    mw.flush()
    times.sort()
    return times[len(times) // 2], times[int(len(times) * 0.99)], len(store)


def copy(src: Path, work: Path, name: str) -> Path:
    dst = work / name
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".ledger"))
    return dst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gap", type=float, default=0.003, help="seconds between requests (the model's answer)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="memwire-capture-") as tmp:
        work = Path(tmp)
        seed(work / "seed")
        run("auto", copy(work / "seed", work, "grown"), args.gap)  # the store capture ends with
        results: dict[str, list[tuple[float, float, int]]] = {}
        variants = [("off", "off", "seed"), ("auto", "auto", "seed"), ("off, grown", "off", "grown")]
        for r in range(args.rounds):
            for name, capture, src in (variants if r % 2 == 0 else variants[::-1]):
                results.setdefault(name, []).append(run(capture, copy(work / src, work, "run"), args.gap))
    print(f"prepare() in process, 1,200 requests per run, {args.rounds} rounds, {args.gap * 1000:.0f} ms between "
          f"requests; {os.cpu_count()} CPUs\n")
    print(f"{'variant':<12} {'p50 (each round)':<28} {'p99 (each round)':<28} memories at the end")
    for name, runs in results.items():
        p50 = " ".join(f"{r[0]:.2f}" for r in runs)
        p99 = " ".join(f"{r[1]:.2f}" for r in runs)
        print(f"{name:<12} {p50 + ' ms':<28} {p99 + ' ms':<28} {runs[-1][2]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
