"""``memwire proxy``: serve :func:`memwire.adapters.proxy.create_app` with uvicorn."""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import logging
import os
import shutil
import sys
import tempfile
from typing import TYPE_CHECKING, Any

from ..._config import MODES
from ..._errors import ConfigError
from ..._logs import configure_logging
from ._keys import KeyRing

if TYPE_CHECKING:  # start-up time: pydantic's Config model loads on the first config built
    from ..._config_model import Config

__all__ = ["check_bind", "cmd_proxy", "register"]

# The proxy's defaults (proxy.DEFAULT_*), repeated so that the help of `memwire` needs neither the
# proxy nor its server stack; tests/test_startup.py checks they are the same.
DEFAULT_OPENAI_UPSTREAM = "https://api.openai.com"
DEFAULT_ANTHROPIC_UPSTREAM = "https://api.anthropic.com"
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
WORKER_HEALTHCHECK_S = 60  # how long uvicorn waits for a worker's answer (a starting one's too) before replacing it


def register(sub: Any) -> None:
    p = sub.add_parser("proxy", help="run the HTTP proxy in front of OpenAI-compatible and Anthropic APIs",
                       description="Put memwire between any client and the model API. "
                                   "See docs/proxy.md for Claude Code, Codex, aider and SDK setups.")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8787, help="port (default 8787)")
    p.add_argument("--openai-upstream", default=DEFAULT_OPENAI_UPSTREAM, metavar="URL",
                   help=f"OpenAI-compatible API base URL (default {DEFAULT_OPENAI_UPSTREAM})")
    p.add_argument("--anthropic-upstream", default=DEFAULT_ANTHROPIC_UPSTREAM, metavar="URL",
                   help=f"Anthropic API base URL (default {DEFAULT_ANTHROPIC_UPSTREAM})")
    p.add_argument("--mode", help=f"one of {', '.join(MODES)} (default: the config's mode, else contextPerTurn)")
    p.add_argument("--history", choices=["replay", "drop"],
                   help="contextPerTurn: replay earlier turns' blocks in place (default) or drop them")
    p.add_argument("--capture", choices=["auto", "review", "off"],
                   help="explicit statements ('remember that ...'): store them (auto, default), hold them for "
                        "`memwire inbox` (review), or off")
    p.add_argument("--retrieval", choices=["bm25", "hybrid"],
                   help="hybrid: BM25 and a local embedding model (embedding_model, memwire[semantic]; "
                        "distil it first with `memwire embeddings`); default: the config's, else bm25")
    p.add_argument("--dir", help="memory directory; namespace NAME uses DIR/namespaces/NAME")
    p.add_argument("--store", metavar="URL", help="keep memory in PostgreSQL (postgresql://user@host/db) instead of "
                                                  "a directory: every replica on it shares memories, sessions and "
                                                  "figures (default: $MEMWIRE_STORE; needs memwire[postgres])")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow a non-loopback --host (requires --proxy-key or --keys-file)")
    p.add_argument("--proxy-key", metavar="KEY",
                   help="clients must send this in x-memwire-key (required with --allow-remote; "
                        "or set MEMWIRE_PROXY_KEY, which stays out of the process list)")
    p.add_argument("--keys-file", metavar="FILE",
                   help="client keys bound to namespaces (`memwire keys add NAMESPACE`): a client's x-memwire-key "
                        "decides its namespace; re-read when it changes (proxy_keys_file)")
    p.add_argument("--cache-breakpoint", action=argparse.BooleanOptionalAction, default=None,
                   help="Anthropic: mark the history before the memory with cache_control "
                        "(default: config key anthropic_cache_breakpoint, on)")
    p.add_argument("--max-body-mb", type=float, metavar="MIB", default=DEFAULT_MAX_BODY_BYTES / 2**20,
                   help="largest request body on the memory routes, MiB (default 32)")
    p.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                   help="upstream read timeout, seconds (default 600)")
    p.add_argument("--header-timeout", type=float, metavar="SECONDS",
                   help="seconds a client may take to send a request's headers (default 10; proxy_header_timeout)")
    p.add_argument("--body-timeout", type=float, metavar="SECONDS",
                   help="seconds a client may take to send a request body, else 408 (default 120; proxy_body_timeout)")
    p.add_argument("--max-connections", type=int, metavar="N",
                   help="open connections at most; past it requests get 503 (default 1000; proxy_max_connections)")
    p.add_argument("--new-namespaces-per-minute", type=int, metavar="N",
                   help="new namespaces the proxy key's clients (without a key: one client address) may start "
                        "per minute; past it 429 (default 60; proxy_new_namespaces_per_minute)")
    p.add_argument("--max-namespaces", type=int, metavar="N",
                   help="namespaces in the memory directory at most; past it new ones get 429 "
                        "(default 10000; proxy_max_namespaces)")
    p.add_argument("--log-format", choices=["text", "json"], default="text",
                   help="text lines, or one JSON object per line (at, level, logger, message); "
                        "never message text or credentials")
    p.add_argument("--request-log", metavar="FILE",
                   help="append each request's figures (mode, memories, tokens, cache; never message text) to this "
                        "JSON Lines file, for `memwire stats --requests --log FILE` (proxy_request_log)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="worker processes, each serving any request of any session over the one memory directory "
                        "(default: one per core; proxy_workers)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                   help="the least severe log lines shown (default info: one line per request)")
    p.set_defaults(fn=cmd_proxy)


def check_bind(host: str, allow_remote: bool, proxy_key: str | None, keys_file: object = None) -> None:
    """A non-loopback address needs --allow-remote and a key: --proxy-key or --keys-file."""
    if proxy_key is not None and not proxy_key.strip():
        raise ConfigError("--proxy-key / MEMWIRE_PROXY_KEY must not be empty or whitespace")
    if _is_loopback(host):
        return
    if not (allow_remote and (proxy_key or keys_file)):
        raise ConfigError(
            f"refusing to bind non-loopback address {host!r}: anyone who can reach it could use your "
            "provider keys and read memories; pass --allow-remote and --proxy-key KEY (or --keys-file FILE)")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


# complexity over 15: one check per option of the command, in the order its --help lists them
def cmd_proxy(args: argparse.Namespace, cfg: Config) -> int:  # noqa: C901
    # start-up time: `memwire --help` loads this module; only the proxy command needs a server
    import uvicorn
    from pydantic import ValidationError

    from ..._config_model import raise_config_error
    from ._server import SPEC_ENV, build_app, freeze_startup, http_protocol, protocol_with_header_timeout

    proxy_key = args.proxy_key or cfg.proxy_key
    if args.keys_file:
        cfg.proxy_keys_file = args.keys_file
    if cfg.proxy_keys_file is not None:  # every worker reads it by this name, whatever its directory
        cfg.proxy_keys_file = cfg.proxy_keys_file.expanduser().absolute()
        KeyRing(cfg.proxy_keys_file)  # a missing or broken file fails now, in one line
    check_bind(args.host, args.allow_remote, proxy_key, cfg.proxy_keys_file)
    if args.max_body_mb <= 0 or args.timeout <= 0:
        raise ConfigError("--max-body-mb and --timeout must be positive")
    updates = {"proxy_header_timeout": args.header_timeout, "proxy_body_timeout": args.body_timeout,
               "proxy_max_connections": args.max_connections,
               "proxy_new_namespaces_per_minute": args.new_namespaces_per_minute,
               "proxy_max_namespaces": args.max_namespaces, "proxy_workers": args.workers,
               "proxy_request_log": os.path.abspath(args.request_log) if args.request_log else None,
               "store": args.store}
    for key, value in updates.items():
        if value is not None:
            try:
                setattr(cfg, key, value)  # validated by the config model
            except ValidationError as exc:
                raise_config_error(exc, "--" + key.removeprefix("proxy_").replace("_", "-"))
    if cfg.proxy_request_log is not None:  # a log that cannot be written fails now, not once per request
        try:
            with open(cfg.proxy_request_log, "a", encoding="utf-8"):
                pass
        except OSError as exc:
            raise ConfigError(f"--request-log {cfg.proxy_request_log}: cannot write it "
                              f"({exc.strerror or exc})") from None
    workers = cfg.proxy_workers or os.cpu_count() or 1
    configure_logging(args.log_level, args.log_format)
    banner = logging.getLogger("memwire.proxy")

    def say(text: str, warning: bool = False) -> None:
        """The start-up lines: on stderr as they are, or as log records in JSON mode."""
        if args.log_format == "json":
            (banner.warning if warning else banner.info)(" ".join(text.split()))
        else:
            print(text, file=sys.stderr)
    from ...memory._open import check_dir  # start-up time: the store's modules (as for uvicorn above)

    if args.store and args.dir:
        raise ConfigError("give --dir (a memory directory) or --store (a PostgreSQL URL), not both")
    if args.dir:
        cfg.store = None  # a directory given on the command line wins over $MEMWIRE_STORE
    if cfg.store:
        from ...memory.postgres._pg import redacted  # start-up time (as above)

        memory_at = redacted(cfg.store)
    else:
        # a directory that cannot be one (a file, a file in its way, unreadable) is a mistake to
        # say now, in one line, as `memwire add` and `list` do, not a proxy serving with memory off
        check_dir(cfg.dir)
        memory_at = str(cfg.dir)
    # every process gets a turn's block from the session's ledger file, whichever served it first
    cfg.shared_memos = True
    cfg.proxy_key = proxy_key
    spec = {"config": cfg.model_dump(mode="json"), "openai_upstream": args.openai_upstream,
            "anthropic_upstream": args.anthropic_upstream, "timeout": args.timeout,
            "max_body_bytes": int(args.max_body_mb * 2**20), "cache_breakpoint": args.cache_breakpoint,
            "memory": True, "log_level": args.log_level, "log_format": args.log_format,
            "supervisor": os.getpid()}  # its workers exit when this process dies, even by SIGKILL
    server: dict[str, Any] = {
        "host": args.host, "port": args.port, "log_level": args.log_level, "access_log": False,
        "log_config": None,  # logging is configure_logging's (text or JSON), in every process
        "server_header": False, "date_header": False,  # the upstream's own server/date headers go through
        "limit_concurrency": cfg.proxy_max_connections}  # per worker
    where = (f"memwire proxy on http://{args.host}:{args.port}  mode={cfg.mode}  workers={workers}  "
             f"http={http_protocol().__name__.removeprefix('Guarded').removesuffix('Protocol').lower()}"
             + (f"  keys={cfg.proxy_keys_file}" if cfg.proxy_keys_file is not None else ""))
    upstreams = f"  OpenAI    -> {args.openai_upstream}\n  Anthropic -> {args.anthropic_upstream}"
    if workers == 1:
        app = build_app(spec)  # warmed up here, not on the first request
        mw = app.state.proxy.middleware
        for problem in mw.store.problems:
            say(f"memwire: warning: {problem}", warning=True)
        say(f"{where}  memory={mw.store.location} ({len(mw.store)} memories)\n{upstreams}")
        freeze_startup()
        uvicorn.run(app, http=protocol_with_header_timeout(cfg.proxy_header_timeout), **server)
        return 0
    # uvicorn's supervisor starts the workers (and restarts one that dies); each builds the app from
    # the spec, in a private file: it holds the proxy key
    fd, spec_path = tempfile.mkstemp(prefix="memwire-proxy-", suffix=".json")
    # /metrics adds up every worker's figures: prometheus_client's multiprocess mode, in a directory
    # of this run's (or the operator's own PROMETHEUS_MULTIPROC_DIR), set before any worker starts
    from ._metrics import MULTIPROC_ENV  # start-up time (as above)

    figures = None if os.environ.get(MULTIPROC_ENV) else tempfile.mkdtemp(prefix="memwire-metrics-")
    # what this process removes when it ends; its workers do, if it is killed outright
    spec["leftovers"] = {"spec": spec_path, "figures": figures}
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(spec, fh)
        os.environ[SPEC_ENV] = spec_path
        if figures is not None:
            os.environ[MULTIPROC_ENV] = figures
        say(f"{where}  memory={memory_at}\n{upstreams}")
        protocol = http_protocol()
        # uvicorn restarts a worker that has not answered its health check within 5 s, a starting
        # one included: on a busy machine a worker's start (imports, the app, warm-up) takes longer,
        # and every replacement was killed in turn, the proxy never served (uvicorn >= 0.37 lets it wait)
        import inspect  # start-up time (as uvicorn above)

        if "timeout_worker_healthcheck" in inspect.signature(uvicorn.run).parameters:
            server["timeout_worker_healthcheck"] = WORKER_HEALTHCHECK_S
        uvicorn.run("memwire.adapters.server._server:worker_app", factory=True, workers=workers,
                    http=f"{protocol.__module__}:{protocol.__name__}", **server)
    finally:
        os.environ.pop(SPEC_ENV, None)
        with contextlib.suppress(OSError):
            os.unlink(spec_path)
        if figures is not None:
            os.environ.pop(MULTIPROC_ENV, None)
            shutil.rmtree(figures, ignore_errors=True)
    return 0
