"""What the profile block's budget costs on the demo's conversation: `contextPerTurn + profile` at
several ``startup_max_tokens``, against `contextPerTurn (replay)` alone and no memory, both providers.

    python benchmarks/profile_budget.py [--budgets 1200 600 300]

The demo's own script and simulator (``memwire demo``), with one setting changed. It says whether
token counts are exact (tiktoken's files found) or estimated (a plain install: 4 characters a
token), as ``memwire demo`` does: the two give different figures.
"""

from __future__ import annotations

import argparse
import functools

from memwire._config_model import Config
from memwire._sim import demo
from memwire.policies import _tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", type=int, nargs="+", default=[1200, 600, 300], help="startup_max_tokens values")
    args = ap.parse_args()
    by_label = {c.label: c for c in demo.CONFIGS}
    base = [by_label["no memory"], by_label["contextPerTurn (replay)"]]
    profile = by_label["contextPerTurn + profile"]
    for provider in ("openai", "anthropic"):
        plain = demo.run_demo(provider, configs=base)
        none, replay = plain.results
        print(f"{provider}: replay alone {replay.recalled}/{replay.needed} recalled at {replay.cost_vs_none:.2f}x")
        for budget in args.budgets:
            demo.Config = functools.partial(Config, startup_max_tokens=budget)  # type: ignore[misc]
            try:
                r = demo.run_mode(profile, provider, plain.model)
            finally:
                demo.Config = Config  # type: ignore[misc]
            print(f"  profile, startup_max_tokens {budget:>5}: {r.recalled}/{r.needed} recalled at "
                  f"{r.cost / none.cost:.2f}x ({r.cached_ratio:.1%} cached)")
        estimated = _tokens.get_encoder(plain.model).name == "estimate"
        print(f"  tokens: {'estimated at 4 characters each (no tiktoken file)' if estimated else 'exact'}")


if __name__ == "__main__":
    main()
