"""Start-up time: `import memwire`, `from memwire import Middleware` and `memwire --help`.

    python benchmarks/startup.py [--runs 10] [--importtime 15]

Each command runs ``--runs`` times, each in a fresh subprocess of this interpreter (``memwire
--help`` is the ``memwire`` console script next to it); prints the median, min and max wall time. With
``--importtime N`` it also prints the N modules that take longest to import (``-X importtime``,
cumulative microseconds) for each command, and which heavy third-party packages got loaded.

The children may write bytecode (``PYTHONDONTWRITEBYTECODE`` is dropped from their environment), as
``pip install`` compiles it for an installed package: an editable checkout would otherwise compile
every module from source on each run. ``--no-bytecode`` keeps the variable as it is.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = Path(sys.executable).parent / "memwire"  # the console script pip installed
COMMANDS: dict[str, list[str]] = {
    "import memwire": [sys.executable, "-c", "import memwire"],
    "from memwire import Middleware": [sys.executable, "-c", "from memwire import Middleware"],
    "memwire --help": [sys.executable, str(SCRIPT), "--help"],
}
# the same, as code for -X importtime
PROBES: dict[str, str] = {
    "import memwire": "import memwire",
    "from memwire import Middleware": "from memwire import Middleware",
    "memwire --help": "import sys; from memwire.cli import main; sys.argv = ['memwire', '--help']; main()",
}
HEAVY = ("pydantic", "httpx", "litellm", "starlette", "uvicorn", "numpy", "tiktoken", "anyio", "yaml", "filelock", "mcp")


ENV = dict(os.environ)


def time_once(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=ENV)
    return time.perf_counter() - start


def importtime(code: str, top: int) -> tuple[list[tuple[int, str]], list[str]]:
    """The ``top`` slowest imports (cumulative µs, module) and the heavy packages loaded."""
    probe = f"try:\n    {code}\nexcept SystemExit:\n    pass\n" \
            "import sys as _s; print('\\nLOADED', *sorted({m.split('.')[0] for m in _s.modules}))"
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", probe], capture_output=True, text=True, check=True,
                         env=ENV)
    rows = []
    for line in out.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    loaded = set(out.stdout.rsplit("LOADED", 1)[-1].split())
    return sorted(rows, reverse=True)[:top], [h for h in HEAVY if h in loaded]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--importtime", type=int, default=0, metavar="N", help="also show the N slowest imports")
    ap.add_argument("--no-bytecode", action="store_true", help="keep PYTHONDONTWRITEBYTECODE as it is")
    args = ap.parse_args()
    if not args.no_bytecode:
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
    bare = [sys.executable, "-c", "pass"]
    time_once(bare)  # warm the file cache once
    print(f"python {sys.version.split()[0]}, {args.runs} fresh processes each, "
          f"bytecode {'as the environment says' if args.no_bytecode else 'written and used'}")
    print(f"{'command':<34}{'median':>9}{'min':>9}{'max':>9}")
    for name, cmd in COMMANDS.items():
        time_once(cmd)  # warm-up run, not counted
        times = [time_once(cmd) for _ in range(args.runs)]
        print(f"{name:<34}{statistics.median(times):>8.3f}s{min(times):>8.3f}s{max(times):>8.3f}s")
    print(f"{'(bare interpreter: python -c pass)':<34}{statistics.median(time_once(bare) for _ in range(args.runs)):>8.3f}s")
    if args.importtime:
        for name, code in PROBES.items():
            rows, heavy = importtime(code, args.importtime)
            print(f"\n{name}: heavy packages loaded: {', '.join(heavy) or 'none'}")
            for us, mod in rows:
                print(f"  {us / 1000:8.1f} ms  {mod}")


if __name__ == "__main__":
    main()
