"""The server side of ``memwire proxy``: HTTP/1.1 protocols with a header timeout, and the app
each worker process serves.

Header timeout: uvicorn closes idle keep-alive connections, but a connection that opens and then
sends its request headers slowly, or never finishes them, is held forever (before the proxy key is
even checked): a few hundred such connections would hold every slot. Here each request's headers
must arrive within ``header_timeout`` seconds of the connection opening, or of the previous
response; else the connection is closed. The body has its own timeout in the proxy app (a 408 in
the API's format); responses are never cut (a streamed answer may take minutes). The guard is a
mixin over uvicorn's h11 protocol and, where ``httptools`` is installed, its faster httptools one
(both keep ``cycle`` the same way: None or complete while a request's headers are awaited).

Workers: ``memwire proxy --workers N`` runs N processes with uvicorn's supervisor, which needs the
app as an import string: :func:`worker_app` builds it in each worker from the spec the command
wrote (a private file named by ``SPEC_ENV``), so every worker has the same settings, key checks,
limits and header timeout. They share nothing but the memory directory, whose files (memories,
ledgers, turn memos) are the source of truth (see ``policies/modes/_replay``). A worker exits with
its supervisor (:func:`exit_with_parent`): when the command's process is killed outright (SIGKILL,
the OOM killer), nobody else would stop its workers, and they would go on holding the port.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import json
import os
import shutil
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from ..._logs import configure_logging

__all__ = [
    "SPEC_ENV",
    "GuardedH11Protocol",
    "build_app",
    "exit_with_parent",
    "freeze_startup",
    "http_protocol",
    "protocol_with_header_timeout",
    "worker_app",
]

SPEC_ENV = "MEMWIRE_PROXY_WORKER_SPEC"


class _HeaderTimeout:
    """The header timeout, over any uvicorn HTTP/1.1 protocol (``self.cycle``: the current request)."""

    header_timeout: float = 10.0
    cycle: Any
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    logger: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None

    def _waiting_for_headers(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self._waiting_for_headers() and not self.transport.is_closing():
            self.logger.info("memwire proxy: closed a connection that sent no complete request headers in %.0f s",
                             self.header_timeout)
            self.transport.close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # BaseProtocol's signature
        super().connection_made(transport)  # type: ignore[misc]
        _no_delay(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._waiting_for_headers():
            self._arm()  # a new request begins: its headers are on the clock
        super().data_received(data)  # type: ignore[misc]
        if not self._waiting_for_headers():
            self._disarm()  # the headers are complete: the request is the app's now

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]


def _no_delay(transport: asyncio.BaseTransport) -> None:
    """TCP_NODELAY on the connection. asyncio sets it only on sockets whose ``proto`` is TCP, and
    the listening socket uvicorn hands its workers (``--workers``) comes back with ``proto`` 0:
    without it a response's second segment waits for the client's delayed ACK (~40 ms)."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class GuardedH11Protocol(_HeaderTimeout, H11Protocol):
    """uvicorn's h11 protocol with the header timeout."""


try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # httptools not installed (the `fast` extra): h11 serves
    GuardedHttpToolsProtocol: type[_HeaderTimeout] | None = None
else:
    class GuardedHttpToolsProtocol(_HeaderTimeout, HttpToolsProtocol):  # type: ignore[no-redef]
        """uvicorn's httptools protocol with the header timeout."""


def http_protocol() -> type:
    """The fastest protocol installed: httptools where it is, else h11 (both guarded)."""
    return GuardedHttpToolsProtocol or GuardedH11Protocol


def protocol_with_header_timeout(header_timeout: float, base: type | None = None) -> type:
    """A protocol class (``base``, default the fastest installed) whose connections must send
    complete headers within ``header_timeout`` s."""
    base = base or http_protocol()
    return type("Memwire" + base.__name__, (base,), {"header_timeout": float(header_timeout)})


# ------------------------------------------------------------------ the app, in the command or a worker


def build_app(spec: dict[str, Any], warm: bool = True) -> Any:
    """The proxy app of a spec written by ``memwire proxy`` (config and the command's options)."""
    # start-up time: the supervisor of ``--workers N`` loads this module for its protocols and never
    # builds the app; each worker does
    from ..._config_model import Config
    from ...middleware._core import Middleware
    from ._proxy import create_app

    cfg = Config.model_validate(spec["config"])
    mw = Middleware(config=cfg)
    if spec["memory"] and warm:
        mw.warm_up()  # load and index the default namespace, numpy and the token encodings now
    if spec["memory"]:
        mw.capture.resume(mw.store)  # statements a killed proxy had queued are written now, not on first use
    return create_app(
        mw,
        openai_upstream=spec["openai_upstream"],
        anthropic_upstream=spec["anthropic_upstream"],
        timeout=spec["timeout"],
        max_body_bytes=spec["max_body_bytes"],
        proxy_key=cfg.proxy_key,
        anthropic_cache_breakpoint=spec["cache_breakpoint"],
        memory=spec["memory"],
    )


def freeze_startup() -> None:
    """In a serving process, once its app is built and warmed: what start-up built (the index,
    token encodings, modules) lives as long as the process, so it leaves the collector's
    generations and no full collection walks it again."""
    gc.collect()
    gc.freeze()


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _parent_death_signal(sig: int) -> bool:
    """Linux: ask the kernel to send ``sig`` to this process when its parent dies (``prctl
    PR_SET_PDEATHSIG``). False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(sig), ctypes.c_ulong(0), ctypes.c_ulong(0),
                              ctypes.c_ulong(0))) == 0
    except (OSError, AttributeError):  # no libc or no prctl in it
        return False


def _watch_parent(parent: int, sig: int, every: float) -> None:
    while os.getppid() == parent:
        time.sleep(every)
    os.kill(os.getpid(), sig)


def exit_with_parent(parent: int, sig: int = signal.SIGTERM, every: float = 1.0, prctl: bool = True) -> str:
    """Send ``sig`` to this process when its parent (pid ``parent``) dies; returns how: "prctl" or
    "poll".

    On Linux the kernel does it (``PR_SET_PDEATHSIG``), and the parent is checked once more after
    the call, in case it died before: an orphan's parent is then init or a subreaper, never
    ``parent``. Elsewhere (or with ``prctl=False``) a daemon thread compares ``os.getppid()`` with
    ``parent`` every ``every`` seconds. The death signal follows the parent *thread* that started
    this process: uvicorn's supervisor starts and restarts its workers from its main thread.
    In a worker, SIGTERM is uvicorn's graceful shutdown: the listening socket is closed at once,
    requests in flight are answered.
    """
    if prctl and _parent_death_signal(sig):
        if os.getppid() != parent:
            os.kill(os.getpid(), sig)
        return "prctl"
    threading.Thread(target=_watch_parent, args=(parent, sig, every), name="memwire-parent", daemon=True).start()
    return "poll"


def _tidy_if_orphaned(app: Any, parent: int, leftovers: dict[str, str | None]) -> None:
    """When a worker stops because its supervisor died (killed outright: its own clean-up never
    ran), it removes what the supervisor would have: the spec file (it holds the proxy key) and
    the metrics directory the command made. Done after the app's own shutdown; both workers may
    try, the first one does it."""
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a: Any) -> Any:
        async with inner(a) as state:
            yield state
        if os.getppid() != parent:
            if leftovers.get("spec"):
                with contextlib.suppress(OSError):
                    os.unlink(str(leftovers["spec"]))
            if leftovers.get("figures"):
                shutil.rmtree(str(leftovers["figures"]), ignore_errors=True)

    app.router.lifespan_context = lifespan


def worker_app() -> Any:
    """The app one ``--workers`` process serves (a uvicorn factory): built from the spec file."""
    import logging

    spec = json.loads(Path(os.environ[SPEC_ENV]).read_text(encoding="utf-8"))
    if spec.get("supervisor"):  # first: the supervisor may die while this worker builds its app
        exit_with_parent(int(spec["supervisor"]))
    configure_logging(spec["log_level"], spec.get("log_format", "text"))
    for cls in (GuardedH11Protocol, GuardedHttpToolsProtocol):  # loaded by uvicorn before the app
        if cls is not None:
            cls.header_timeout = float(spec["config"]["proxy_header_timeout"])
    app = build_app(spec)
    if spec.get("supervisor"):
        _tidy_if_orphaned(app, int(spec["supervisor"]), spec.get("leftovers") or {})
    for problem in app.state.proxy.middleware.store.problems if spec["memory"] else ():
        logging.getLogger("memwire").warning("memwire: %s", problem)
    freeze_startup()
    return app
