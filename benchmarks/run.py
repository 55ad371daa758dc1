"""Every figure of docs/performance.md in one run, with the peers, section by section.

    python benchmarks/run.py [--locomo PATH] [--full] [--only NAME ...]

Runs, one after another (never in parallel: the machine's cores are part of what is measured):

- ``store``: benchmarks/store_scale.py — cold start, add, search and bytes per memory by store
  size, beside rank-bm25, bm25s, tantivy and SQLite FTS5 where they install;
- ``length``: benchmarks/conversation_length.py — prepare() by conversation length;
- ``overhead``: benchmarks/overhead.py — prepare() by store size (replay, drop) and the ledger;
- ``proxy``: benchmarks/proxy.py — added latency and requests/s by worker count, beside the
  Portkey gateway and the LiteLLM proxy where they install;
- ``workers``: benchmarks/proxy.py --workers 1 2 — requests/s, CPU per request (memwire's own
  work apart) and added latency on 12 KB bodies by worker count, beside a bare pass-through on the
  same parts and the Portkey gateway where npm installs it;
- ``phases``: benchmarks/proxy_phases.py — where the proxy's added latency goes, step by step;
- ``capture``: benchmarks/proxy.py --capture — the proxy's added latency with capture on and off;
- ``locomo``: benchmarks/locomo.py on ``--locomo PATH`` (LoCoMo is not shipped: CC BY-NC 4.0).

The default sizes keep the whole run to about a quarter of an hour on 2 cores; ``--full`` adds the
1M-memory store and longer proxy runs. Each section prints its own table; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def sections(full: bool, locomo: str | None) -> dict[str, list[str]]:
    out = {
        "store": ["store_scale.py", "--sizes", "1000", "10000", "100000", *(["1000000"] if full else [])],
        "length": ["conversation_length.py"],
        "overhead": ["overhead.py", "--sizes", "1000", "100000"],
        "proxy": ["proxy.py", *([] if full else ["--requests", "200", "--per-client", "10"])],
        "workers": ["proxy.py", "--workers", "1", "2", *(["--requests", "400", "--rounds", "3", "--seconds", "5"]
                                                         if full else ["--requests", "200", "--rounds", "2", "--seconds", "3"])],
        "phases": ["proxy_phases.py", *([] if full else ["--requests", "400", "--rounds", "2"])],
        "capture": ["proxy.py", "--capture", "--litellm", "off",
                    *([] if full else ["--requests", "200", "--per-client", "10"])],
    }
    if locomo:
        out["locomo"] = ["locomo.py", locomo]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--locomo", help="LoCoMo-format JSON for the retrieval-quality section")
    ap.add_argument("--full", action="store_true", help="the 1M store and longer proxy runs")
    ap.add_argument("--only", nargs="+", help="run only these sections")
    args = ap.parse_args()
    todo = sections(args.full, args.locomo)
    unknown = set(args.only or ()) - set(todo) - {"locomo"}
    if unknown:
        ap.error(f"unknown section(s) {', '.join(sorted(unknown))}; choose from {', '.join(todo)}, locomo")
    if args.only and "locomo" in args.only and not args.locomo:
        ap.error("the locomo section needs --locomo PATH")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    print(f"memwire benchmarks: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}", flush=True)
    failed = []
    for name, cmd in todo.items():
        if args.only and name not in args.only:
            continue
        print(f"\n=== {name}: python benchmarks/{' '.join(cmd)}\n", flush=True)
        start = time.perf_counter()
        code = subprocess.call([sys.executable, str(HERE / cmd[0]), *cmd[1:]], env=env)
        print(f"\n({name}: {time.perf_counter() - start:.0f} s{'' if code == 0 else f', exit {code}'})", flush=True)
        if code:
            failed.append(name)
    if failed:
        print(f"\nsections that failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
