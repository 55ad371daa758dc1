"""The ``memwire demo`` subcommand."""

from __future__ import annotations

import argparse
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from .._errors import ConfigError

if TYPE_CHECKING:  # start-up time: pydantic's Config model loads on the first config built
    from .._config_model import Config


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="show with numbers what each mode costs (no API key: a local fake provider)")
    p.add_argument("--provider", choices=["openai", "anthropic"], default="openai")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--html", metavar="FILE", help="also write the comparison as a page with a per-request "
                                                  "cached-token chart for each mode")
    p.set_defaults(fn=cmd_demo)


def cmd_demo(args: argparse.Namespace, cfg: Config) -> int:
    from .demo import render, run_demo  # start-up time: the demo loads httpx, starlette and the proxy

    page = None
    if args.html:  # opened first: a path that cannot be written fails before a half-minute run, not after
        try:
            page = open(args.html, "w", encoding="utf-8")  # noqa: SIM115 - written once the demo has run
        except OSError as exc:
            raise ConfigError(f"--html {args.html}: cannot write it ({exc.strerror or exc})") from None
    logging.getLogger("memwire").setLevel(logging.ERROR)  # the demo's own request log would drown the table
    start = time.perf_counter()
    report = run_demo(args.provider)
    if page is not None:
        from .demo_html import render_html  # start-up time: only for --html

        with page:
            page.write(render_html(report))
    if args.json:
        print(json.dumps({**report.as_json(), "seconds": round(time.perf_counter() - start, 2)}, indent=2))
    else:
        print(render(report))
        print(f"\n({time.perf_counter() - start:.1f} s)")
    return 0
