"""``memwire mcp``: serve :func:`memwire.adapters.mcp.build_server` over stdio.

The ``mcp`` SDK is an extra and is imported only when the command runs, so ``memwire --help``
and ``import memwire`` never load it."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..._errors import MemwireError

if TYPE_CHECKING:  # start-up time: pydantic's Config model loads on the first config built
    from ..._config_model import Config

__all__ = ["cmd_mcp", "register"]

MISSING_EXTRA = "memwire mcp needs the mcp extra: pip install 'memwire[mcp]'"


def register(sub: Any) -> None:
    p = sub.add_parser("mcp", help="run an MCP server over stdio: memory tools for Claude Code, Codex, Cursor",
                       description="A Model Context Protocol server on stdin/stdout with the tools memory_search, "
                                   "memory_add and memory_forget over the memory directory. "
                                   "See docs/mcp.md for registering it with Claude Code and Codex.")
    p.add_argument("--dir", help="memory directory (default: $MEMWIRE_DIR or ./.memwire); "
                                 "namespace NAME uses DIR/namespaces/NAME")
    p.add_argument("--namespace", help="serve this namespace only (its own directory: DIR/namespaces/NAME)")
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"],
                   help="log level on stderr (stdout is the protocol)")
    p.set_defaults(fn=cmd_mcp)


def cmd_mcp(args: argparse.Namespace, cfg: Config) -> int:
    from ...memory._open import check_dir, open_store  # start-up time: `memwire --help` loads this module

    root = Path(cfg.dir).expanduser()  # a client's config file (Codex's TOML) passes "~" unexpanded
    if args.dir or not cfg.store:
        check_dir(root)
    # the command line's rule (cli._store): a namespace is its own scope, without the global one;
    # checked before the SDK's slow import, so a bad name fails at once
    store = open_store(cfg, args.namespace, dir=root if args.dir or not cfg.store else None)
    try:
        from ._mcp import build_server  # optional extra: the mcp SDK (memwire[mcp])
    except ImportError as exc:  # the extra is not installed: one line, no traceback
        if (exc.name or "").split(".")[0] not in ("mcp", "mcp_types"):
            raise
        raise MemwireError(MISSING_EXTRA) from None

    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server = build_server(store)
    store.memories()  # read and index the files now, not on the first call (file problems are logged)
    server.run("stdio")
    return 0
