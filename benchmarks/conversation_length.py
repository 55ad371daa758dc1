"""prepare() cost by conversation length: contextPerTurn (replay, drop) at 1k memories.

    python benchmarks/conversation_length.py [--lengths 20 200 1000 1200] [--sessions 4] [--window 20]
                                             [--history replay drop] [--memories 1000] [--same-objects]
                                             [--counters]

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

``--counters`` (Linux, where ``perf_event_open`` is allowed) also prints p50 user-space instructions
and CPU cycles of each prepare() (the thread's hardware counters, in millions) and their ratios to
the first length's. Other processes do not change the instructions a request runs: their ratio is
the one figure here that a busy machine reprints; cycles add what the request waits for memory,
which other processes sharing the caches make worse.
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
from typing import Any, ClassVar

from memwire import MemoryStore, Middleware

sys.path.insert(0, str(Path(__file__).resolve().parent))
from overhead import SUBJECTS, THINGS, make_memory  # noqa: E402 - the same memories as overhead.py


class Counters:
    """This thread's user-space instructions and cycles (``perf_event_open``; Linux x86-64 and arm64)."""

    _SYSCALL: ClassVar[dict[str, int]] = {"x86_64": 298, "aarch64": 241}
    _INSTRUCTIONS, _CYCLES = 1, 0  # PERF_TYPE_HARDWARE configs

    def __init__(self) -> None:
        import ctypes
        import os
        import platform
        import struct

        class Attr(ctypes.Structure):  # struct perf_event_attr, the fields up to config2 (size 112)
            _fields_ = [("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("config", ctypes.c_uint64),
                        ("sample_period", ctypes.c_uint64), ("sample_type", ctypes.c_uint64),
                        ("read_format", ctypes.c_uint64), ("flags", ctypes.c_uint64),
                        ("wakeup_events", ctypes.c_uint32), ("bp_type", ctypes.c_uint32),
                        ("config1", ctypes.c_uint64), ("config2", ctypes.c_uint64)]

        number = self._SYSCALL.get(platform.machine())
        if number is None:
            raise OSError(f"no perf_event_open number for {platform.machine()}")
        libc = ctypes.CDLL(None, use_errno=True)
        self._fds = []
        for config in (self._INSTRUCTIONS, self._CYCLES):
            attr = Attr(type=0, size=ctypes.sizeof(Attr), config=config, flags=(1 << 5) | (1 << 6))  # no kernel, no hv
            fd = libc.syscall(number, ctypes.byref(attr), 0, -1, -1, 0)  # this thread, any CPU
            if fd < 0:
                raise OSError(ctypes.get_errno(), "perf_event_open (kernel.perf_event_paranoid?)")
            self._fds.append(fd)
        self._read = lambda fd: struct.unpack("Q", os.read(fd, 8))[0]

    def read(self) -> tuple[int, int]:
        """(instructions, cycles) so far."""
        return self._read(self._fds[0]), self._read(self._fds[1])


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
            same_objects: bool, counters: Counters | None = None) -> dict[int, tuple[list[float], ...]]:
    """(wall ms, CPU ms of this thread[, M instructions, M cycles]) of each timed request, by length."""
    rng = random.Random(7)
    by_length: dict[int, tuple[list[float], ...]] = {n: ([], [], [], []) for n in lengths}
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

        def step(lane: tuple[int, int]) -> tuple[float, ...]:
            conv, turn = convs[lane], turns[lane]
            conv.append(user_message(rng, lane[1], turn))
            msgs = conv if same_objects else json.loads(json.dumps(conv))
            i0, y0 = counters.read() if counters else (0, 0)
            c0, t0 = time.thread_time(), time.perf_counter()
            mw.prepare(msgs, session_id=f"{history}-{lane}", model="gpt-4o")
            wall, cpu = (time.perf_counter() - t0) * 1000, (time.thread_time() - c0) * 1000
            i1, y1 = counters.read() if counters else (0, 0)
            conv.extend(replies(rng, turn))
            turns[lane] = turn + 1
            return wall, cpu, (i1 - i0) / 1e6, (y1 - y0) / 1e6

        for lane in lanes:
            while len(convs[lane]) + 1 < lane[0]:
                step(lane)
        while True:
            todo = [lane for lane in lanes if len(convs[lane]) + 1 < lane[0] + window]
            if not todo:
                break
            for lane in todo:
                for column, value in zip(by_length[lane[0]], step(lane), strict=True):
                    column.append(value)
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
    ap.add_argument("--counters", action="store_true", help="also instructions and cycles (Linux perf_event_open)")
    args = ap.parse_args()
    try:
        counters = Counters() if args.counters else None
    except OSError as exc:  # no hardware counters here (a VM, perf_event_paranoid): say so, no traceback
        ap.exit(2, f"conversation_length.py: --counters: this machine gives no hardware counters ({exc}); "
                   "run without --counters\n")
    lengths = sorted(args.lengths)
    print(f"contextPerTurn, {args.memories} memories, {args.sessions} sessions, "
          f"{'same objects' if args.same_objects else 'fresh JSON'} per request")
    extra = f" {'M instr':>8} {'M cycles':>8} {'instr / first':>14} {'cycles / first':>15}" if counters else ""
    print(f"{'history':>8} {'messages':>9} {'requests':>9} {'p50 ms':>8} {'p99 ms':>8} {'cpu p50':>8} "
          f"{'p50 / first':>12} {'cpu / first':>12}{extra}")
    for history in args.history:
        got = measure(history, lengths, args.sessions, args.window, args.memories, args.same_objects, counters)
        base, cpu_base, instr_base, cycles_base = (statistics.median(t) for t in got[lengths[0]])
        for n in lengths:
            times, cpu, instr, cycles = got[n]
            p50, c50 = statistics.median(times), statistics.median(cpu)
            line = (f"{history:>8} {n:>9} {len(times):>9} {p50:>8.3f} {pct(times, 0.99):>8.3f} {c50:>8.3f} "
                    f"{p50 / base:>12.2f} {c50 / cpu_base:>12.2f}")
            if counters:
                i50, y50 = statistics.median(instr), statistics.median(cycles)
                line += f" {i50:>8.3f} {y50:>8.3f} {i50 / instr_base:>14.2f} {y50 / cycles_base:>15.2f}"
            print(line)


if __name__ == "__main__":
    main()
