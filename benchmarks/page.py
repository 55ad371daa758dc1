"""What drawing /memwire/ui costs the proxy (issue 34, the page): each page's time to answer on
stores of N memories, through the app in process (no network), median of 5 after one warm-up.

    python benchmarks/page.py [--sizes 1000 10000]

Prints; asserts nothing. Figures depend on the machine and its load: say which when quoting them.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from starlette.testclient import TestClient

from memwire import MemoryStore, Middleware
from memwire.adapters.server._proxy import create_app
from memwire.memory._supersede import conflicts

PAGES = ("/memwire/ui", "/memwire/ui?q=service+port", "/memwire/ui?fading=1", "/memwire/ui?source=captured",
         "/memwire/ui/sessions", "/memwire/ui/archive")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    args = parser.parse_args()
    print(f"{'memories':>9}  {'page':<32} {'ms (median of 5)':>17}  KiB")
    for n in args.sizes:
        with tempfile.TemporaryDirectory() as d:
            store = MemoryStore(d)
            store.add_many([f"Fact number {i} about service s{i % 97} uses port {1000 + i}" for i in range(n)])
            client = TestClient(create_app(Middleware(store=store), openai_upstream="http://127.0.0.1:9"))
            for path in PAGES:
                client.get(path)
                times, size = [], 0
                for _ in range(5):
                    t = time.perf_counter()
                    r = client.get(path)
                    times.append((time.perf_counter() - t) * 1000)
                    size = len(r.content)
                print(f"{n:>9}  {path:<32} {statistics.median(times):>17.0f}  {size // 1024}")
            t = time.perf_counter()
            conflicts(store)
            print(f"{n:>9}  {'(of which: conflicts(store))':<32} {(time.perf_counter() - t) * 1000:>17.0f}")


if __name__ == "__main__":
    main()
