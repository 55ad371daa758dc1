"""Explicit captures under load: are they all stored?

Three processes on 127.0.0.1: the fake OpenAI upstream of ``benchmarks/proxy.py`` (canned replies,
``--upstream-ms`` to answer), ``memwire proxy --workers 1`` (capture on, a seeded store of 200
memories) and this client. ``--clients`` keep-alive connections send new turns as fast as the proxy
answers them (every request a new user message: capture reads each one), while one more client
sends ``--statements`` distinct "Remember that ..." at ``--rate`` per second, each in a new
conversation. When the statements are sent the load stops; the script then waits (at most
``--settle`` s) for the store to hold them and prints how many it holds, how long the last took,
the load's req/s, the statements' request latency, what the proxy logged about capture falling
behind or dropping work, and ``memwire_capture_dropped_total`` from ``/metrics``.

    python benchmarks/capture_load.py [--clients 32] [--statements 100] [--rate 4] [--upstream-ms 0]
    git archive REV memwire | tar -x -C /tmp/old && python benchmarks/capture_load.py --memwire-path /tmp/old
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

import proxy as bench  # noqa: E402


def statement(run: str, n: int) -> str:
    return f"Remember that the batch job {run}-{n} runs on host node{n}.example.internal at {n % 24:02d}:15."


def stored(memory: Path, run: str) -> set[int]:
    """Which statements the store holds (its markdown, read as a person would)."""
    found: set[int] = set()
    for path in memory.glob("*.md"):
        found |= {int(m) for m in re.findall(rf"batch job {run}-(\d+) runs", path.read_text(encoding="utf-8"))}
    return found


async def load(port: int, clients: int, stop: asyncio.Event, done: list[int]) -> None:
    bodies = bench.new_turn_bodies(clients * 4000, False, "load")
    size = len(bodies) // clients

    async def client(i: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for body in bodies[i * size:(i + 1) * size]:
                if stop.is_set():
                    return
                writer.write(bench.request_bytes(f"127.0.0.1:{port}", "sk-upstream-fake", body))
                if await bench._read_response(reader) != 200:
                    raise RuntimeError("load request failed")
                done[0] += 1
        finally:
            writer.close()

    await asyncio.gather(*(client(i) for i in range(clients)))


async def statements(port: int, run: str, count: int, rate: float, latencies: list[float]) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60, trust_env=False) as client:
        start = time.perf_counter()

        async def one(n: int) -> None:
            body = {"model": bench.MODEL, "messages": [
                {"role": "system", "content": bench.SYSTEM},
                {"role": "user", "content": f"{statement(run, n)} (conversation {run}/{n})"}]}
            t = time.perf_counter()
            r = await client.post("/v1/chat/completions", json=body, headers={"authorization": "Bearer sk-upstream-fake"})
            latencies.append((time.perf_counter() - t) * 1000)
            if r.status_code != 200:
                raise RuntimeError(f"statement {n}: HTTP {r.status_code}")

        tasks = []
        for n in range(count):  # sent on schedule, whether or not the previous one was answered
            await asyncio.sleep(max(0.0, start + n / rate - time.perf_counter()))
            tasks.append(asyncio.create_task(one(n)))
        await asyncio.gather(*tasks)


async def scenario(port: int, args: argparse.Namespace, run: str) -> tuple[int, float, list[float]]:
    stop, done, latencies = asyncio.Event(), [0], []
    loader = asyncio.create_task(load(port, args.clients, stop, done))
    await asyncio.sleep(2)  # the load is on before the first statement
    start, n0 = time.perf_counter(), done[0]
    await statements(port, run, args.statements, args.rate, latencies)
    took, count = time.perf_counter() - start, done[0] - n0
    stop.set()
    await loader
    return count, took, latencies


def start_memwire(workdir: Path, upstream: str, port: int, path: str | None) -> subprocess.Popen[bytes]:
    """``memwire proxy --workers 1``, capture on, on a store of 200 memories; ``path``: a checkout
    whose ``memwire`` package runs instead of the installed one (``git archive REV memwire | tar -x``)."""
    from memwire import MemoryStore

    memory = workdir / "memory-replay-auto"
    MemoryStore(memory).add_many(bench.memories())
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMWIRE_")},
           "MEMWIRE_HOME": str(workdir / "home"), "MEMWIRE_CAPTURE": "auto"}
    if path:
        env["PYTHONPATH"] = path
    with open(workdir / "memwire-replay-auto.log", "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "memwire.cli", "proxy", "--port", str(port), "--openai-upstream", upstream,
             "--dir", str(memory), "--mode", "contextPerTurn", "--workers", "1"],
            cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--statements", type=int, default=100)
    p.add_argument("--rate", type=float, default=4.0, help="statements per second")
    p.add_argument("--upstream-ms", type=float, default=0.0, help="the fake provider's time to answer")
    p.add_argument("--settle", type=float, default=60.0, help="seconds to wait for the store after the load")
    p.add_argument("--memwire-path", help="run the proxy from this checkout (a directory holding memwire/)")
    args = p.parse_args()
    run = secrets.token_hex(3)
    with tempfile.TemporaryDirectory(prefix="memwire-capture-load-") as tmp:
        workdir = Path(tmp)
        up = bench.free_port()
        procs: list[subprocess.Popen[bytes]] = [subprocess.Popen(
            [sys.executable, str(Path(bench.__file__)), "--serve-upstream", str(up), "--upstream-ms", str(args.upstream_ms)])]
        try:
            bench.wait_ready(f"http://127.0.0.1:{up}/health", procs[0], 30)
            port = bench.free_port()
            procs.append(start_memwire(workdir, f"http://127.0.0.1:{up}", port, args.memwire_path))
            bench.wait_ready(f"http://127.0.0.1:{port}/memwire/healthz", procs[1], 90)
            memory = workdir / "memory-replay-auto"
            count, took, latencies = bench._run_client(scenario(port, args, run))
            load_end = time.perf_counter()
            have: set[int] = set()
            while time.perf_counter() - load_end < args.settle:
                have = stored(memory, run)
                if len(have) == args.statements:
                    break
                time.sleep(0.2)
            settled = time.perf_counter() - load_end
            metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10, trust_env=False).text
        finally:
            for proc in reversed(procs):
                bench.stop(proc)
        log = (workdir / "memwire-replay-auto.log").read_text(errors="replace")
    dropped = [ln for ln in metrics.splitlines() if ln.startswith("memwire_capture_dropped_total")]
    behind = [ln for ln in log.splitlines() if re.search(r"behind|dropped|shed|capture failed", ln)]
    print(f"memwire from {args.memwire_path or 'the installed package'}")
    print(f"memwire proxy --workers 1, {os.cpu_count()} CPUs shared with the client and the upstream; fake upstream "
          f"answering in {args.upstream_ms:g} ms; {args.clients} clients sending new turns for {took:.1f} s "
          f"({count / took:.0f} req/s) while one more sent {args.statements} distinct 'Remember that ...' at "
          f"{args.rate:g}/s")
    print(f"stored: {len(have)} of {args.statements} ({'all' if len(have) == args.statements else 'missing ' + str(sorted(set(range(args.statements)) - have)[:20])})"
          f"; the last {settled:.1f} s after the load ended")
    lat = sorted(latencies)
    print(f"statement requests: p50 {bench.pct(lat, 0.5):.1f} ms, p99 {bench.pct(lat, 0.99):.1f} ms, max {lat[-1]:.1f} ms")
    print("metrics: " + ("; ".join(dropped) if dropped else "no memwire_capture_dropped_total"))
    print("log lines about capture falling behind or dropping work: " + (str(len(behind)) if behind else "none"))
    for ln in behind[:5]:
        print("  " + ln[:200])
    return 0 if len(have) == args.statements else 1


if __name__ == "__main__":
    sys.exit(main())
