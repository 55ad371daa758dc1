"""Prompt-cache cost of each memory mode, on the demo's agent conversation, for both providers.

    python benchmarks/cache.py [--json]

For each mode and history strategy: the cached-token ratio the provider's cache reaches, the ideal
(what a perfect cache would read: every token already sent as a prefix of an earlier request, given
the bytes that mode must change each turn), how close the mode gets to it, and the cost units
(uncached input 1.0; OpenAI cached 0.5; Anthropic cache read 0.1, write 1.25) against no memory.
Runs the real proxy against the fake provider on 127.0.0.1; no API key.
"""

from __future__ import annotations

import argparse
import json
import logging

from memwire._sim.demo import format_table, run_demo


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    logging.getLogger("memwire").setLevel(logging.ERROR)
    reports = [run_demo(p) for p in ("openai", "anthropic")]
    if args.json:
        print(json.dumps([r.as_json() for r in reports], indent=2))
        return
    for r in reports:
        print(f"\n{r.provider} ({r.model}): {r.turns} user turns, {r.sessions} sessions, {r.memories} memories")
        print(format_table(r, ideal=True))


if __name__ == "__main__":
    main()
