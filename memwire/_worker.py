"""One background thread that runs jobs in order, bounded: what capture and telemetry use to keep
their work off the caller's path.

Off the path is not enough when the CPU is the bottleneck: a proxy serving as many requests as
its cores allow has no idle time to give a capture's parsing, search and write, so each one would
delay requests. A worker given a :class:`Traffic` gauge therefore starts each job only once the
caller's path has been quiet for ``quiet_s`` (no request prepared meanwhile), and never holds a
job longer than ``max_defer_s``: under sustained saturation the work runs anyway, late.

Work that comes one item per request (capture's turns, telemetry's replies, the request log's
records) is ``offer``-ed instead: the items waiting are handed over together, so a deferred backlog
costs one thread hand-off (and one append to each log), not one per request.

What a worker drops past its bound is counted by kind (``telemetry``, ``records``, ``replies``;
capture's distillation counts its own) and told to each function given to :func:`on_dropped`: the
proxy's ``/metrics`` (``memwire_capture_dropped_total{kind}``). Only work that may be shed goes to a
worker: explicit captures never do (``middleware/_capture``: a durable queue)."""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from ._logs import describe

__all__ = ["MAX_DEFER_S", "QUIET_S", "Traffic", "Worker", "dropped", "on_dropped"]

QUIET_S = 0.02      # a request leaves within a few ms of prepare(); a provider takes 100s of ms to answer
MAX_DEFER_S = 5.0   # a job waits for a quiet moment at most this long


class Traffic:
    """When the caller's path last did work (one float written per request: no lock needed)."""

    def __init__(self) -> None:
        self.last = 0.0

    def touch(self) -> None:
        self.last = time.monotonic()

    def wait_quiet(self, quiet_s: float, until: float) -> None:
        """Sleep until nothing touched this gauge for ``quiet_s`` seconds, or until ``until``."""
        while (now := time.monotonic()) < until:
            quiet_at = self.last + quiet_s
            if now >= quiet_at:
                return
            time.sleep(min(quiet_at, until) - now)

log = logging.getLogger("memwire")

_listeners: list[Callable[[], Any]] = []  # each returns the listener (None: it is gone)
_listeners_lock = threading.Lock()


def on_dropped(listen: Callable[[str, int], None]) -> None:
    """Call ``listen(kind, count)`` whenever work of ``kind`` is shed (a bound method is held
    weakly: a metrics object that is gone stops being told)."""
    ref: Any = weakref.WeakMethod(listen) if hasattr(listen, "__self__") else (lambda: listen)
    with _listeners_lock:
        _listeners.append(ref)


def dropped(kind: str, count: int = 1) -> None:
    """``count`` items of ``kind`` were shed: tell the listeners (never raises)."""
    with _listeners_lock:
        refs = list(_listeners)
    dead = []
    for ref in refs:
        listen = ref()
        if listen is None:
            dead.append(ref)
            continue
        try:
            listen(kind, count)
        except Exception as exc:
            log.debug("memwire: a drop listener failed (%s)", describe(exc))
    if dead:
        with _listeners_lock:
            for ref in dead:
                if ref in _listeners:
                    _listeners.remove(ref)


class Worker:
    """Runs ``submit``-ted jobs one at a time, in order, on a thread started on first use. At most
    ``max_pending`` jobs wait: a worker that cannot keep up must not grow without bound, so past
    it a job is dropped, said once per backlog as "memwire: {what} is N {unit} behind", and counted
    (``dropped``) as ``kind`` (default: ``name`` less its ``memwire-`` prefix)."""

    def __init__(self, name: str, what: str, unit: str, max_pending: Callable[[], int],
                 traffic: Traffic | None = None, quiet_s: float = QUIET_S, max_defer_s: float = MAX_DEFER_S,
                 kind: str | None = None) -> None:
        self.name, self.what, self.unit = name, what, unit
        self.kind = kind or name.removeprefix("memwire-")
        self.traffic, self.quiet_s, self.max_defer_s = traffic, quiet_s, max_defer_s
        self._max_pending = max_pending  # read per submit: a module constant tests may lower
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._last: concurrent.futures.Future[None] | None = None
        self._lock = threading.Lock()
        self._pending = 0
        self._behind = False
        self._batches: dict[Callable[[list[Any]], None], list[Any]] = {}  # handler -> items not handed over yet

    def _admit(self) -> bool:
        """Count one more pending job or item, unless ``max_pending`` wait already (call locked)."""
        if self._pending >= self._max_pending():
            if not self._behind:
                log.warning("memwire: %s is %d %s behind; %s are not read until it catches up",
                            self.what, self._pending, self.unit, self.unit)
            self._behind = True
            return False
        self._behind = False
        self._pending += 1
        return True

    def _queue(self, fn: Callable[..., None], args: tuple[Any, ...], count: int) -> None:
        """Hand ``fn(*args)`` to the thread (call locked); ``count``: pending items it settles."""
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=self.name)
        self._last = self._pool.submit(self._run, fn, args, time.monotonic(), count)

    def submit(self, fn: Callable[..., None], *args: Any) -> bool:
        """Queue ``fn(*args)``; False when it was dropped. A job's exceptions are its own to log."""
        with self._lock:
            admitted = self._admit()
            if admitted:
                self._queue(fn, args, 1)
        if not admitted:
            dropped(self.kind)
        return admitted

    def offer(self, handle: Callable[[list[Any]], None], item: Any) -> bool:
        """Queue ``item`` for ``handle``, which is called with every item offered to it since it
        last started, in order (one job however many wait: it may run before jobs ``submit``-ted
        after its first item); False when it was dropped. Each item counts toward ``max_pending``."""
        with self._lock:
            admitted = self._admit()
            if admitted:
                items = self._batches.get(handle)
                if items is not None:  # a job for them is queued and not started: it takes this one too
                    items.append(item)
                else:
                    self._batches[handle] = [item]
                    self._queue(self._hand_over, (handle,), 0)
        if not admitted:
            dropped(self.kind)
        return admitted

    def _hand_over(self, handle: Callable[[list[Any]], None]) -> None:
        with self._lock:
            items = self._batches.pop(handle)
        try:
            handle(items)
        finally:
            with self._lock:
                self._pending -= len(items)

    def _run(self, fn: Callable[..., None], args: tuple[Any, ...], submitted: float, count: int) -> None:
        try:
            if self.traffic is not None:
                self.traffic.wait_quiet(self.quiet_s, submitted + self.max_defer_s)
            fn(*args)
        finally:
            if count:
                with self._lock:
                    self._pending -= count

    def flush(self, timeout: float | None = None) -> None:
        """Wait until the jobs submitted so far are done."""
        last = self._last
        if last is not None:
            concurrent.futures.wait([last], timeout)
