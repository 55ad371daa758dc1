"""prepare() cost by conversation length: contextPerTurn (replay, drop) at 1k memories.

    python benchmarks/conversation_length.py [--lengths 20 200 1000 1200] [--sessions 4] [--window 20]
                                             [--history replay drop] [--memories 1000] [--same-objects]

For each length ``L``, ``--sessions`` conversations are played one turn at a time (a user
message, then the assistant's reply; every third turn also a tool call and its result) up to ``L``
messages, untimed; then all of them take turns, timed, while they grow by ``--window`` messages, so
every length is measured over the same period (the machine's noise falls on all alike). Each timed
request is a new turn of its session (nothing comes from the turn memo). Prints prepare() p50 / p99
wall time, p50 CPU time of the calling thread (less sensitive to other processes), in
milliseconds, and the ratio of each p50 to the first length's.

By default every request is a fresh copy of the messages (``json.loads``, outside the timing), as
the proxy sees them: object identity never helps. ``--same-objects`` passes the same message
dicts again, as an SDK caller that appends to its list does.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from memwire import MemoryStore, Middleware

sys.path.insert(0, str(Path(__file__).resolve().parent))
from overhead import SUBJECTS, THINGS, make_memory  # noqa: E402 - the same memories as overhead.py


def user_message(rng: random.Random, session: int, turn: int) -> dict[str, Any]:
    return {"role": "user", "content": f"Session {session} turn {turn}: how does the {rng.choice(SUBJECTS)} "
                                       f"setup use {rng.choice(THINGS)} and {rng.choice(THINGS)} now?"}


def replies(rng: random.Random, turn: int) -> list[dict[str, Any]]:
    """What follows a user message: a tool call and its result every third turn, then the answer."""
    out: list[dict[str, Any]] = []
    if turn % 3 == 0:
        call = f"call_{turn}"
        out.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call, "type": "function", "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/{turn}.py"})}}]})
        out.append({"role": "tool", "tool_call_id": call, "content": " ".join(rng.choice(THINGS) for _ in range(60))})
    out.append({"role": "assistant", "content": "Looked at it: " + " ".join(rng.choice(THINGS) for _ in range(40)) + "."})
    return out


def pct(times: list[float], q: float) -> float:
    times = sorted(times)
    return times[min(len(times) - 1, int(len(times) * q))]


def measure(history: str, lengths: list[int], sessions: int, window: int, memories: int,
            same_objects: bool) -> dict[int, tuple[list[float], list[float]]]:
    """(wall ms, CPU ms of this thread) of each timed request, by length."""
    rng = random.Random(7)
    by_length: dict[int, tuple[list[float], list[float]]] = {n: ([], []) for n in lengths}
    with tempfile.TemporaryDirectory() as d:
        MemoryStore(d).add_many(make_memory(rng, i) for i in range(memories))
        mw = Middleware(store=MemoryStore(d), mode="contextPerTurn", history=history, timeout_ms=60_000,
                        capture="off")
        warm = [{"role": "system", "content": "You are a coding agent."}, user_message(rng, -1, 0)]
        for _ in range(20):  # load + index + token encoding
            mw.prepare(warm, session_id="warm-up", model="gpt-4o")
        # one lane (conversation) per length and session; each is first played, untimed, up to its
        # length, then all lanes take turns, timed, so every length is measured over the same period
        lanes = [(n, s) for n in lengths for s in range(sessions)]
        convs = {lane: [{"role": "system", "content": f"You are a coding agent (project {lane})."}] for lane in lanes}
        turns = dict.fromkeys(lanes, 0)

        def step(lane: tuple[int, int]) -> tuple[float, float]:
            conv, turn = convs[lane], turns[lane]
            conv.append(user_message(rng, lane[1], turn))
            msgs = conv if same_objects else json.loads(json.dumps(conv))
            c0, t0 = time.thread_time(), time.perf_counter()
            mw.prepare(msgs, session_id=f"{history}-{lane}", model="gpt-4o")
            wall, cpu = (time.perf_counter() - t0) * 1000, (time.thread_time() - c0) * 1000
            conv.extend(replies(rng, turn))
            turns[lane] = turn + 1
            return wall, cpu

        for lane in lanes:
            while len(convs[lane]) + 1 < lane[0]:
                step(lane)
        while True:
            todo = [lane for lane in lanes if len(convs[lane]) + 1 < lane[0] + window]
            if not todo:
                break
            for lane in todo:
                wall, cpu = step(lane)
                by_length[lane[0]][0].append(wall)
                by_length[lane[0]][1].append(cpu)
        mw.flush()  # the replay ledgers are written before the directory goes
    return by_length


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", type=int, nargs="+", default=[20, 200, 1000, 1200])
    ap.add_argument("--sessions", type=int, default=4, help="conversations played side by side")
    ap.add_argument("--window", type=int, default=20, help="messages of growth timed at each length")
    ap.add_argument("--history", nargs="+", default=["replay", "drop"], choices=["replay", "drop"])
    ap.add_argument("--memories", type=int, default=1000)
    ap.add_argument("--same-objects", action="store_true", help="pass the same message dicts again (SDK caller)")
    args = ap.parse_args()
    lengths = sorted(args.lengths)
    print(f"contextPerTurn, {args.memories} memories, {args.sessions} sessions, "
          f"{'same objects' if args.same_objects else 'fresh JSON'} per request")
    print(f"{'history':>8} {'messages':>9} {'requests':>9} {'p50 ms':>8} {'p99 ms':>8} {'cpu p50':>8} "
          f"{'p50 / first':>12} {'cpu / first':>12}")
    for history in args.history:
        got = measure(history, lengths, args.sessions, args.window, args.memories, args.same_objects)
        base, cpu_base = (statistics.median(t) for t in got[lengths[0]])
        for n in lengths:
            times, cpu = got[n]
            p50, c50 = statistics.median(times), statistics.median(cpu)
            print(f"{history:>8} {n:>9} {len(times):>9} {p50:>8.3f} {pct(times, 0.99):>8.3f} {c50:>8.3f} "
                  f"{p50 / base:>12.2f} {c50 / cpu_base:>12.2f}")


if __name__ == "__main__":
    main()
