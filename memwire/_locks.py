"""Inter-process write locks, with ``filelock``: ``flock`` on POSIX, ``msvcrt.locking`` on Windows.

One lock file per protected thing (a memory directory's ``.lock``, the trust file's
``trusted.json.lock``), private (0600), left in place after release (removing it would let two
waiters lock two different files). A lock file that is a symlink is refused: filelock opens it
with ``O_NOFOLLOW`` (on Windows it refuses reparse points), and the ``OSError`` reaches the caller.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

__all__ = ["write_lock"]

# filelock waits by polling a non-blocking lock: a short interval keeps a writer that waits on
# another thread's write (a few milliseconds) from sleeping long after it was released
_POLL_SECONDS = 0.002


@contextlib.contextmanager
def write_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the exclusive lock of the lock file ``path`` (created if missing), waiting for it.

    Each call opens the file anew, so threads of one process exclude each other as processes do."""
    from filelock import FileLock  # imported by writers only: `import memwire` stays light

    lock = FileLock(os.fspath(path), mode=0o600, thread_local=False)
    lock.acquire(poll_interval=_POLL_SECONDS)
    try:
        yield
    finally:
        lock.release()
