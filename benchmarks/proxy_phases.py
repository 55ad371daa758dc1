"""Where the proxy's added latency goes: one client, ~12 KB bodies, every request a new turn.

Three servers on 127.0.0.1 beside a fake OpenAI upstream (``proxy.py``'s): ``memwire proxy`` with
wall-clock timers around its steps (this script in ``--serve-timed`` mode: the real command, its
functions wrapped), and the bare pass-through (``bare_proxy.py``), the floor of the same stack.
Printed: the added latency (p50 over calling the upstream directly) of memwire's memory route,
of its pass-through route (the same bodies to ``/v1/embeddings``: no memory work) and of the bare
proxy; then the median of each timed step of the memory route.

    python benchmarks/proxy_phases.py [--requests 800] [--rounds 3]
"""

from __future__ import annotations

import argparse
import atexit
import contextvars
import functools
import inspect
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import proxy as bench

# (module, attribute path, label): the steps of a memory route, in the order a request takes them
STEPS = [
    ("memwire.adapters.server._proxy", "_Proxy.with_memory", "handler, before the upstream call"),
    ("memwire.adapters.server._proxy", "read_all", "  read the body"),
    ("memwire.adapters.server._proxy", "_parse", "  parse it"),
    ("memwire.middleware._core", "Middleware.aprepare_request", "  prepare"),
    ("memwire.memory._store", "MemoryStore.search", "    of which the search"),
    ("memwire.adapters.server._proxy", "_Proxy._encode", "  encode"),
    ("memwire.adapters.server._proxy", "_Relay.stream_response", "relay"),
    ("memwire.adapters.server._proxy", "_Proxy._send", "  upstream call, to its headers"),
]
# set in a memory route's request (its task, and the relay's task made from it): only those are timed
_MEMORY_ROUTE: contextvars.ContextVar[bool] = contextvars.ContextVar("memory_route", default=False)


def _timed(fn: Callable[..., Any], out: list[float], marks: bool) -> Callable[..., Any]:
    """``fn`` timed into ``out`` when called for a memory route; ``marks``: it is the route's handler."""
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def run(*args: Any, **kwargs: Any) -> Any:
            if marks:
                _MEMORY_ROUTE.set(True)  # not reset: the relay that follows runs in this context
            start = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                if _MEMORY_ROUTE.get():
                    out.append(time.perf_counter() - start)
        return run

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            if _MEMORY_ROUTE.get():
                out.append(time.perf_counter() - start)
    return call


def wrap_step(module: str, path: str, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> bool:
    """Replace the function ``path`` (``name`` or ``Class.name``) of ``module`` with ``wrap`` of it;
    False when there is none (an older version of the code)."""
    import importlib

    owner: Any = importlib.import_module(module)
    *parents, name = path.split(".")
    for part in parents:
        owner = getattr(owner, part)
    if not hasattr(owner, name):
        return False
    setattr(owner, name, wrap(getattr(owner, name)))
    return True


def serve_timed(report: str, argv: list[str]) -> int:
    """``memwire proxy`` (``argv``) with its steps timed; the times go to ``report`` at exit."""
    times: dict[str, list[float]] = {label: [] for _, _, label in STEPS}
    for module, path, label in STEPS:
        wrap_step(module, path, functools.partial(_timed, out=times[label], marks=path.endswith(".with_memory")))
    atexit.register(lambda: Path(report).write_text(json.dumps(times)))
    # uvicorn hands the SIGTERM it caught back to the handler it found: this one exits through atexit
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    from memwire.cli import main

    return main(argv)


def _added(port: int, bodies: list[dict[str, Any]], direct: float, path: str = bench.CHAT) -> float:
    return bench.pct(bench.latencies(port, "sk-upstream-fake", bodies, path), 0.5) - direct


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=800, help="requests per target and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--serve-timed", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)  # child mode
    args = parser.parse_args()
    if args.serve_timed:
        return serve_timed(args.serve_timed[0], args.serve_timed[1:])
    here = Path(__file__).resolve().parent
    with tempfile.TemporaryDirectory(prefix="memwire-phases-") as tmp:
        workdir = Path(tmp)
        from memwire import MemoryStore

        MemoryStore(workdir / "memory").add_many(bench.memories())
        up_port, port, bare_port = bench.free_port(), bench.free_port(), bench.free_port()
        upstream = f"http://127.0.0.1:{up_port}"
        report = workdir / "steps.json"
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMWIRE_")},
               "MEMWIRE_HOME": str(workdir / "home"), "MEMWIRE_HISTORY": "replay"}
        procs = [subprocess.Popen([sys.executable, str(here / "proxy.py"), "--serve-upstream", str(up_port)])]
        try:
            bench.wait_ready(upstream + "/health", procs[0], 30)
            with open(workdir / "memwire.log", "wb") as log:
                procs.append(subprocess.Popen(
                    [sys.executable, __file__, "--serve-timed", str(report), "proxy", "--port", str(port),
                     "--openai-upstream", upstream, "--dir", str(workdir / "memory"), "--mode", "contextPerTurn",
                     "--workers", "1"], cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT))
            procs.append(subprocess.Popen([sys.executable, str(here / "bare_proxy.py"), str(bare_port), upstream]))
            bench.wait_ready(f"http://127.0.0.1:{port}/health", procs[1], 90)
            bench.wait_ready(f"http://127.0.0.1:{bare_port}/health", procs[2], 30)
            bench.latencies(port, "k", bench.new_turn_bodies(200, True, "warm"))  # warm up every target
            bench.latencies(bare_port, "k", bench.new_turn_bodies(100, True, "warm"))
            added: dict[str, list[float]] = {"memwire, memory route": [], "memwire, pass-through route": [],
                                             "bare pass-through": []}
            for r in range(args.rounds):
                bodies = bench.new_turn_bodies(args.requests, True, f"r{r}")
                direct = bench.pct(bench.latencies(up_port, "k", bodies[: args.requests // 2]), 0.5)
                added["memwire, memory route"].append(_added(port, bodies, direct))
                added["memwire, pass-through route"].append(_added(port, bodies, direct, bench.PASSED_THROUGH))
                added["bare pass-through"].append(_added(bare_port, bodies, direct))
        finally:
            for proc in reversed(procs):
                bench.stop(proc)  # memwire's child writes its steps' times as it exits
        steps = json.loads(report.read_text())
    print(f"1 client, {args.requests} requests of ~12 KB per target and round, every one a new turn; "
          f"{len(bench.memories())} memories; {args.rounds} rounds\n")
    print(f"{'added latency, p50 over direct':<34} {'per round (ms)':>24}")
    for name, values in added.items():
        print(f"{name:<34} {' '.join(f'{v:+.2f}' for v in values):>24}")
    print(f"\n{'memory route, step':<34} {'median ms':>10} {'p99 ms':>8} {'calls':>7}")
    for _, _, label in STEPS:
        values = steps[label][len(steps[label]) // 10:]  # the warm-up's first calls left out
        print(f"{label:<34} {statistics.median(values) * 1000:>10.3f} {bench.pct(values, 0.99) * 1000:>8.3f} "
              f"{len(values):>7}" if values else f"{label:<34} {'-':>10} {'-':>8} {0:>7}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
