"""What absolute dates and corrections cost (issue 33 items 2 and 4), per call, in process.

- ``absolute_dates``: the stores' add path runs it on every new memory (a text holding no hint
  word such as "day", "week", "tomorrow" costs a few substring tests);
- ``statements``: the request path reads every new latest user message with it; the retraction
  and correction words ("actually", "sorry", "wait", "back", ...) make more messages pay for a
  split into sentences;
- ``Capture._zone``: the zone a user stated, looked for once per store version.

    python benchmarks/dates_corrections.py [--n 20000] [--memories 10000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from datetime import date

from memwire import MemoryStore
from memwire.memory._model import Memory
from memwire.middleware._capture import Capture
from memwire.policies._capture import statements
from memwire.policies._dates import absolute_dates

TEXTS = [
    "The staging database listens on port 5433.",                              # no hint word
    "Deploys go out on Tuesdays only.",                                         # a hint, no phrase
    "The code freeze starts tomorrow and lasts until next Friday.",             # two phrases
    "See notes/today.md and `tomorrow()` before the review on Monday.",        # protected spans
]
MESSAGES = [
    "Fix the upload bug in api/upload.py",                                      # no trigger word
    "Can you get back to me with the numbers for the quarterly report?",        # a question
    "Sorry, wait, the tests fail with a weird error when I run them locally on my machine.",
    "Actually, forget that.",                                                   # a retraction
    "Correction: the deploy script is ship.sh, not deploy.sh.",                 # a correction
]


def per_call(fn: Callable[[str], object], arg: str, n: int) -> float:
    fn(arg)  # warm: patterns compile on first use
    t = time.perf_counter()
    for _ in range(n):
        fn(arg)
    return (time.perf_counter() - t) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--memories", type=int, default=10_000)
    args = ap.parse_args()
    day = date(2026, 11, 28)
    print("absolute_dates, us per call")
    for text in TEXTS:
        print(f"  {per_call(lambda t: absolute_dates(t, day), text, args.n):8.1f}  {text}")
    print("statements (request path), us per call")
    for text in MESSAGES:
        print(f"  {per_call(statements, text, args.n):8.1f}  {text}")
    with tempfile.TemporaryDirectory() as d:
        store = MemoryStore(d)
        store.add_many([Memory.create(f"Fact {i} about service {i % 97} on port {1000 + i}.")
                        for i in range(args.memories)])
        store.add("User's timezone is Europe/Paris.")
        capture = Capture("auto")
        t = time.perf_counter()
        capture._zone(store)
        first = (time.perf_counter() - t) * 1e3
        n = 1000
        t = time.perf_counter()
        for _ in range(n):
            capture._zone(store)
        again = (time.perf_counter() - t) / n * 1e6
        print(f"Capture._zone over {args.memories:,} memories: first {first:.1f} ms, then {again:.1f} us "
              "(until the store changes)")


if __name__ == "__main__":
    main()
