"""Start-up of ``memwire proxy``: from the command to its first answer.

    python benchmarks/proxy_start.py [--runs 5] [--workers 1] [--importtime 25]

Each run starts ``python -m memwire.cli proxy`` (a fresh subprocess of this interpreter) on a free
port over an empty memory directory and asks ``GET /memwire/v1/memories`` every 10 ms until it
answers; it then stops the proxy and reads the CPU (user + sys) it and its children used. Prints
the median, min and max of the wall time to the first answer and of the CPU seconds. With
``--importtime N`` one more start runs with ``-X importtime`` and the N modules that take longest
to import (cumulative) are printed, with which heavy third-party packages got loaded.

Nothing leaves 127.0.0.1; the upstreams are never called.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pydantic", "httpx", "litellm", "starlette", "uvicorn", "numpy", "tiktoken", "anyio", "yaml",
         "prometheus_client", "rich", "click", "h11", "httptools", "psycopg", "mcp", "pygments")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def start_once(workers: int, importtime: bool = False) -> tuple[float, float, str]:
    """One start: (seconds to the first answer, CPU seconds of the proxy, its stderr)."""
    with tempfile.TemporaryDirectory(prefix="memwire-proxy-start-") as tmp:
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWIRE_")}
        env.update(MEMWIRE_HOME=str(Path(tmp) / "home"), MEMWIRE_USE_GLOBAL="false",
                   LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONPATH=str(ROOT))
        argv = [sys.executable, *(("-X", "importtime") if importtime else ()), "-m", "memwire.cli", "proxy",
                "--port", str(port), "--dir", str(Path(tmp) / "mem"), "--workers", str(workers),
                "--log-level", "warning"]
        err = Path(tmp) / "stderr"
        cpu0 = children_cpu()
        t0 = time.perf_counter()
        with open(err, "wb") as fh:
            proc = subprocess.Popen(argv, cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=fh)
        try:
            while True:
                if proc.poll() is not None:
                    raise SystemExit(f"the proxy exited ({proc.returncode}):\n{err.read_text()}")
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/memwire/v1/memories", timeout=5) as r:
                        r.read()
                    break
                except (urllib.error.URLError, ConnectionError):
                    time.sleep(0.01)
            wall = time.perf_counter() - t0
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return wall, children_cpu() - cpu0, err.read_text()


def top_imports(stderr: str, n: int) -> None:
    rows: list[tuple[int, int, str]] = []
    for line in stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if m:
            rows.append((int(m.group(2)), len(m.group(3)) // 2, m.group(4)))
    print(f"\n{n} slowest imports of one start (cumulative ms, nesting):")
    for cum, depth, name in sorted(rows, reverse=True)[:n]:
        print(f"  {cum / 1000:8.1f}  {'  ' * depth}{name}")
    loaded = {name.split(".")[0] for _, _, name in rows}
    print("heavy packages loaded:", ", ".join(h for h in HEAVY if h in loaded) or "none")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--importtime", type=int, default=0, metavar="N")
    args = ap.parse_args()
    start_once(args.workers)  # bytecode written, page cache warm: not counted
    walls, cpus = [], []
    for _ in range(args.runs):
        wall, cpu, _ = start_once(args.workers)
        walls.append(wall)
        cpus.append(cpu)
    print(f"memwire proxy --workers {args.workers}: {args.runs} starts")
    for label, xs in (("first answer (wall s)", walls), ("CPU user+sys (s)", cpus)):
        print(f"  {label:22} median {statistics.median(xs):.3f}  min {min(xs):.3f}  max {max(xs):.3f}")
    if args.importtime:
        top_imports(start_once(args.workers, importtime=True)[2], args.importtime)


if __name__ == "__main__":
    main()
