"""Real coding agents through `memwire proxy`: Claude Code and Codex CLI (from npm), end to end.

    python benchmarks/clients.py [--npm-dir DIR] [--install] [--clients claude-code,claude-code-suggestions,codex]
                                 [--samples /tmp/e2e-samples] [--facts] [--json]
                                 [--proxy-args "--history drop"] [--claude-args "..."] [--codex-args "..."]

The scenario and the checks are the ones `tests/e2e/test_real_clients.py` asserts (they live in
`tests/e2e/harness.py`): per client, session A's turn 1 (a tool loop), a memory added, session B
opened with the same prompt, session A resumed for turn 2 (another tool loop); every request
recorded as the client sent it (a tap in front of the proxy) and as it reached the fake upstream.
`claude-code-suggestions` is Claude Code with prompt suggestions on (`--output-format stream-json
--prompt-suggestions true`): after each turn it makes a side request with the agent's tools.

Printed per client: turn 1 got its memory (yes/no); every earlier block byte-identical in every
later request of its session (yes/no); the shared-prefix ratio of consecutive requests through
memwire relative to the client's own (min and median; the check wants >= 0.98); the two sessions
kept their own blocks (yes/no); the most cache_control breakpoints in an Anthropic request that
left the proxy; the main requests per phase and the side requests (with how many got a memory
block of their own: they should get none).

The clients are installed with npm into --npm-dir (default $E2E_MEMWIRE_NPM_DIR or
~/.cache/memwire-e2e/npm) when --install is given. Nothing reaches a real provider: everything
runs on 127.0.0.1, the clients get dummy keys and a proxy variable pointing at a refused port.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the harness lives with the tests

from tests.e2e.harness import (
    CLIENTS,
    client_facts,
    evaluate,
    format_figures,
    install_clients,
    missing_reason,
    npm_dir,
    run_scenario,
    save_samples,
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--npm-dir", help="npm prefix holding the clients (default $E2E_MEMWIRE_NPM_DIR or "
                                      "~/.cache/memwire-e2e/npm)")
    ap.add_argument("--install", action="store_true", help="npm install the clients into --npm-dir first")
    ap.add_argument("--clients", default=",".join(CLIENTS), help=f"comma-separated, of {', '.join(CLIENTS)}")
    ap.add_argument("--samples", type=Path, help="save every recorded request body and header here")
    ap.add_argument("--facts", action="store_true", help="also print what each client's requests look like")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--proxy-args", default="", help="extra `memwire proxy` arguments (diagnostics)")
    ap.add_argument("--claude-args", default="", help="extra claude arguments for both Claude Code runs "
                                                      "(diagnostics), e.g. '--tools Bash'")
    ap.add_argument("--codex-args", default="", help="extra codex exec arguments (diagnostics)")
    args = ap.parse_args()

    directory = npm_dir(args.npm_dir)
    if args.install:
        install_clients(directory)
    extra = {name: shlex.split(args.codex_args if name == "codex" else args.claude_args) for name in CLIENTS}
    figures, facts = [], []
    for name in [n.strip() for n in args.clients.split(",") if n.strip()]:
        if name not in CLIENTS:
            ap.error(f"unknown client {name!r}; known: {', '.join(CLIENTS)}")
        reason = missing_reason(CLIENTS[name], directory)
        if reason:
            print(f"{name}: skipped: {reason}", file=sys.stderr)
            continue
        result = run_scenario(name, directory, proxy_args=shlex.split(args.proxy_args), client_args=extra[name])
        figures.append(evaluate(result))
        facts.append(client_facts(result))
        if args.samples:
            save_samples(result, args.samples)
        print(f"{name}: {len(result.exchanges)} requests in {result.seconds:.1f} s", file=sys.stderr)
    if not figures:
        print("no client ran", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([{**dataclasses.asdict(f), "min_relative": f.min_relative,
                           "median_relative": f.median_relative} for f in figures], indent=2))
    else:
        print(format_figures(figures))
    if args.facts:
        print(json.dumps(facts, indent=1, default=str))
    if args.samples:
        print(f"samples: {args.samples}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
