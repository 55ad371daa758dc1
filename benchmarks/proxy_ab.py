"""Two (or more) versions of memwire's proxy side by side: added latency and CPU at one client.

Each source tree (a checkout, e.g. ``git worktree add --detach /tmp/base HEAD~1``, or ``@REV``: that
commit of this repository, which ``git archive`` unpacks into the run's temporary directory) runs
its own ``memwire proxy`` (``PYTHONPATH=TREE``) on its own copy of ``proxy.py``'s 200 memories, all in
front of one fake upstream; rounds are interleaved (the order alternates), so a machine that
slows down mid-run slows every version alike. A tree may carry environment settings for its proxy
after ``|``: ``/tmp/base|MEMWIRE_CAPTURE=off``. Per version: the median over rounds of the added
latency p50 and p99 (over calling the upstream directly, ~12 KB bodies, every request a new turn)
and of the proxy's CPU per request (its process tree, background threads included).

    python benchmarks/proxy_ab.py TREE [TREE ...] [--rounds 10] [--requests 600] [--tool-loop] [--after-load S]
    python benchmarks/proxy_ab.py @94f39b3 @HEAD --rounds 10    # two commits of this repository
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import proxy as bench


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", help="source trees to compare (TREE or 'TREE|NAME=VALUE|...'; "
                                                 "@REV: that commit of this repository)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--requests", type=int, default=600, help="requests per version and round")
    parser.add_argument("--tool-loop", action="store_true", help="an agent's tool loop instead of new turns")
    parser.add_argument("--after-load", type=float, default=0.0, metavar="S",
                        help="before each measurement, S seconds of 32 clients (the backlog of deferred work it leaves "
                             "runs during the 1-client requests)")
    args = parser.parse_args()
    from memwire import MemoryStore

    make = bench.tool_loop_bodies if args.tool_loop else (lambda n, tag: bench.new_turn_bodies(n, True, tag))
    with tempfile.TemporaryDirectory(prefix="memwire-ab-") as tmp:
        up = bench.free_port()
        procs = [subprocess.Popen([sys.executable, str(Path(bench.__file__)), "--serve-upstream", str(up)])]
        try:
            bench.wait_ready(f"http://127.0.0.1:{up}/health", procs[0], 30)
            ports = []
            for i, spec in enumerate(args.trees):
                tree, *settings = spec.split("|")
                work = Path(tmp) / f"v{i}"
                if tree.startswith("@"):
                    tree = _unpack(tree[1:], work / "src")
                MemoryStore(work / "memory").add_many(bench.memories())
                env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMWIRE_")},
                       "MEMWIRE_HOME": str(work / "home"), "MEMWIRE_HISTORY": "replay", "PYTHONPATH": tree,
                       **dict(s.split("=", 1) for s in settings)}
                ports.append(bench.free_port())
                with open(work / "proxy.log", "wb") as log:  # the child keeps its own copy of the fd
                    procs.append(subprocess.Popen(
                        [sys.executable, "-m", "memwire.cli", "proxy", "--port", str(ports[-1]), "--openai-upstream",
                         f"http://127.0.0.1:{up}", "--dir", str(work / "memory"), "--mode", "contextPerTurn",
                         "--workers", "1", "--log-level", "warning"], cwd=work, env=env, stdout=log,
                        stderr=subprocess.STDOUT))
            for i, port in enumerate(ports):
                bench.wait_ready(f"http://127.0.0.1:{port}/health", procs[i + 1], 90)
                bench.latencies(port, "k", bench.new_turn_bodies(300, True, "warm"))  # warm up
            p50: list[list[float]] = [[] for _ in ports]
            p99: list[list[float]] = [[] for _ in ports]
            cpu: list[list[float]] = [[] for _ in ports]
            for r in range(args.rounds):
                order = list(range(len(ports))) if r % 2 == 0 else list(range(len(ports)))[::-1]
                for i in order:
                    if args.after_load:
                        bench.throughput(ports[i], "k", bench.new_turn_bodies(32 * int(args.after_load * 400), False,
                                                                             f"load{r}"), 32, args.after_load)
                    bodies = make(args.requests, f"r{r}")
                    direct = bench.latencies(up, "k", bodies[: args.requests // 2])
                    c0 = bench.cpu_seconds(procs[i + 1].pid)
                    lat = bench.latencies(ports[i], "k", bodies)
                    cpu[i].append((bench.cpu_seconds(procs[i + 1].pid) - c0) / len(bodies) * 1000)
                    p50[i].append(bench.pct(lat, 0.5) - bench.pct(direct, 0.5))
                    p99[i].append(bench.pct(lat, 0.99) - bench.pct(direct, 0.99))
        finally:
            for proc in reversed(procs):
                bench.stop(proc)
    after = f", each after {args.after_load:g} s of 32 clients" if args.after_load else ""
    print(f"1 client, {args.requests} requests of ~12 KB per version and round "
          f"({'tool loop' if args.tool_loop else 'every one a new turn'}{after}), {args.rounds} interleaved rounds\n")
    print(f"{'version':<40} {'added p50':>10} {'(min)':>7} {'added p99':>10} {'CPU ms/req':>11}")
    for i, spec in enumerate(args.trees):
        print(f"{spec[:40]:<40} {statistics.median(p50[i]):>+10.2f} {min(p50[i]):>+7.2f} "
              f"{statistics.median(p99[i]):>+10.2f} {statistics.median(cpu[i]):>11.2f}")
    return 0


def _unpack(rev: str, into: Path) -> str:
    """The source tree of commit ``rev`` of the repository this script is in, unpacked in ``into``."""
    into.mkdir(parents=True)
    repo = Path(__file__).resolve().parent.parent
    archive = subprocess.run(["git", "-C", str(repo), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return str(into)


if __name__ == "__main__":
    raise SystemExit(main())
