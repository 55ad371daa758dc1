"""One background thread that runs jobs in order, bounded: what capture and telemetry use to keep
their work off the caller's path."""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from typing import Any, Callable

__all__ = ["Worker"]

log = logging.getLogger("memwire")


class Worker:
    """Runs ``submit``-ted jobs one at a time, in order, on a thread started on first use. At most
    ``max_pending`` jobs wait: a worker that cannot keep up must not grow without bound, so past
    it a job is dropped, said once per backlog as "memwire: {what} is N {unit} behind"."""

    def __init__(self, name: str, what: str, unit: str, max_pending: Callable[[], int]) -> None:
        self.name, self.what, self.unit = name, what, unit
        self._max_pending = max_pending  # read per submit: a module constant tests may lower
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._last: concurrent.futures.Future[None] | None = None
        self._lock = threading.Lock()
        self._pending = 0
        self._behind = False

    def submit(self, fn: Callable[..., None], *args: Any) -> bool:
        """Queue ``fn(*args)``; False when it was dropped. A job's exceptions are its own to log."""
        with self._lock:
            if self._pending >= self._max_pending():
                if not self._behind:
                    log.warning("memwire: %s is %d %s behind; %s are not read until it catches up",
                                self.what, self._pending, self.unit, self.unit)
                self._behind = True
                return False
            self._behind = False
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=self.name)
            self._pending += 1
            self._last = self._pool.submit(self._run, fn, args)
            return True

    def _run(self, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        try:
            fn(*args)
        finally:
            with self._lock:
                self._pending -= 1

    def flush(self, timeout: float | None = None) -> None:
        """Wait until the jobs submitted so far are done."""
        last = self._last
        if last is not None:
            concurrent.futures.wait([last], timeout)
