"""The capture queue: explicit statements that were read and are waiting to be written.

Capture reads what a person asked to remember on the request path (``policies/_capture``: a
regex on the human text) and writes it later, on its worker. In between a statement waits here,
on disk beside the memories, so that neither a backlog nor a restart loses it: a statement is
never dropped, only written late.

A markdown store's queue is ``DIR/.capture-queue.jsonl``, one JSON line per entry (``key``,
``kind``, ``text``, ``session``, ``turn``, ``at``), appended whole by :meth:`FileQueue.put`: one
``write`` on an ``O_APPEND`` descriptor opened with ``O_NOFOLLOW``, under a shared ``flock``, then
``fdatasync``. The consumer (:meth:`FileQueue.drain`; one at a time per directory, across threads
and processes: the lock file ``DIR/.capture-queue.lock``) takes the file whole by renaming it to
``DIR/.capture-queue.work.jsonl`` under an exclusive ``flock`` of it (an appender that opened it
before the rename sees, once it holds its lock, that the path names another file, and appends to
the new one), applies the entries in order and appends ``{"done": KEY}`` after each; the work file
goes once every entry is done. A consumer that died (a ``kill -9``, a power cut) leaves the work
file: the next one, in any process, finishes it first, skipping the done keys and telling
``apply`` that the others are replayed (``replayed=True``): one may have been applied just before
the consumer died, so ``apply`` checks by the entry's key that it was not (see
``middleware/_capture``). Each entry is applied once.

``apply`` raising ``Retry`` (the store cannot be written now: a full disk, a database outage)
stops the drain with the entry and those after it kept, for the next drain.

A PostgreSQL store's queue is the table ``memwire_capture_queue`` (:class:`PgQueue`), a row per
entry, shared by the replicas: ``put`` inserts (a key already queued is not queued twice); a drain
holds the namespace's advisory lock, marks each row claimed (committed) before applying it and
deletes it after; a claimed row found again was being applied by a consumer that died, and is
``replayed``. :class:`MemoryQueue` (this process's memory) holds what a queue could not take (a
full disk, an outage) until it can: never dropped while the process lives.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: appends are whole lines; the claim by rename is not guarded
    fcntl = None  # type: ignore[assignment]

from .. import _paths
from .._errors import MemoryFileError
from .._locks import write_lock

__all__ = ["LOCK_NAME", "QUEUE_NAME", "WORK_NAME", "FileQueue", "MemoryQueue", "PgQueue", "Retry", "queue_files"]

QUEUE_NAME = ".capture-queue.jsonl"
WORK_NAME = ".capture-queue.work.jsonl"
LOCK_NAME = ".capture-queue.lock"
_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_READ = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)

Apply = Callable[[Mapping[str, Any], bool], None]  # (entry, replayed)


class Retry(Exception):
    """Raised by ``apply``: the entry cannot be written now; keep it (and those after it)."""


def _sync(fd: int) -> None:
    (os.fdatasync if hasattr(os, "fdatasync") else os.fsync)(fd)


def queue_files(directory: Path, root: Path | None = None) -> bool:
    """Whether ``directory`` (under the memory directory ``root``) holds a queue or a work file
    (entries may be waiting); a symlink on the way holds none."""
    try:
        return any(_paths.under(root or directory, directory / name) and os.path.lexists(directory / name)
                   for name in (QUEUE_NAME, WORK_NAME))
    except MemoryFileError:
        return False


def _lines(entries: Sequence[Mapping[str, Any]]) -> bytes:
    return b"".join((json.dumps(dict(e), ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
                    for e in entries)


def _read(root: Path, path: Path) -> list[dict[str, Any]]:
    """The records of ``path`` ([] if missing); a torn or unreadable line is skipped."""
    try:
        fd = _paths.open_fd(root, path, _READ)
    except FileNotFoundError:
        return []
    with os.fdopen(fd, "rb") as fh:
        data = fh.read()
    out = []
    for line in data.split(b"\n"):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


class FileQueue:
    """A markdown directory's capture queue (see the module)."""

    durable = True

    def __init__(self, directory: Path, root: Path | None = None) -> None:
        self.directory = Path(directory)
        # the memory directory a person named: no path below it is used through a symlink (_paths)
        self.root = Path(root) if root is not None else self.directory
        self.path = self.directory / QUEUE_NAME
        self.work = self.directory / WORK_NAME
        self.lock = self.directory / LOCK_NAME

    def put(self, entries: Sequence[Mapping[str, Any]]) -> None:
        """Append ``entries`` durably (on disk when this returns); ``OSError`` if it cannot."""
        data = _lines(entries)
        while True:
            try:
                fd = _paths.open_fd(self.root, self.path, _FLAGS)
            except FileNotFoundError:  # the directory is created lazily, on first write
                _paths.makedirs(self.root, self.directory)
                fd = _paths.open_fd(self.root, self.path, _FLAGS)
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_SH)
                    try:
                        same = os.fstat(fd).st_ino == os.stat(self.path, follow_symlinks=False).st_ino
                    except FileNotFoundError:
                        same = False
                    if not same:  # a consumer took this file meanwhile: append to the new one
                        continue
                written = os.write(fd, data)
                if written != len(data):  # a short write (a full disk): the torn line is skipped on read
                    raise OSError(28, os.strerror(28), str(self.path))
                _sync(fd)
                return
            finally:
                os.close(fd)

    def pending(self) -> bool:
        return queue_files(self.directory, self.root)

    def drain(self, apply: Apply) -> int:
        """Apply every waiting entry, in order (the work file left by a consumer that died first);
        returns how many were applied. ``Retry`` from ``apply`` stops it (the rest is kept)."""
        if not self.pending():
            return 0
        applied = 0
        with write_lock(_paths.under(self.root, self.lock)):
            while True:
                replayed = os.path.lexists(self.work)
                if not replayed and not self._claim():
                    return applied
                applied += self._apply_work(apply, replayed)

    def _claim(self) -> bool:
        """Rename the queue file to the work file (False: nothing is waiting)."""
        try:
            fd = _paths.open_fd(self.root, self.path, _READ)
        except FileNotFoundError:
            return False
        try:
            if os.fstat(fd).st_size == 0:
                return False
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)  # appenders in the middle of a line finish first
            _paths.replace(self.root, self.path, self.work)
            return True
        finally:
            os.close(fd)

    def _apply_work(self, apply: Apply, replayed: bool) -> int:
        records = _read(self.root, self.work)
        done = {r["done"] for r in records if "done" in r}
        applied = 0
        for entry in records:
            key = entry.get("key")
            if not isinstance(key, str) or key in done:
                continue
            apply(entry, replayed)  # Retry: the work file stays, with what is done marked
            done.add(key)
            applied += 1
            try:
                with open(_paths.open_fd(self.root, self.work, _FLAGS), "ab") as fh:
                    fh.write(_lines([{"done": key}]))
            except (OSError, MemoryFileError):  # a full disk: a replay finds the entry applied by its key
                pass
        _paths.unlink(self.root, self.work)
        return applied


class MemoryQueue:
    """The queue of a store without a directory (PostgreSQL): in this process's memory."""

    durable = False

    def __init__(self) -> None:
        self._entries: list[dict[str, Any]] = []
        self._tried: set[int] = set()  # entries whose apply raised Retry (they may be partly applied)
        self._lock = threading.Lock()

    def put(self, entries: Sequence[Mapping[str, Any]]) -> None:
        with self._lock:
            self._entries.extend(dict(e) for e in entries)

    def pending(self) -> bool:
        return bool(self._entries)

    def drain(self, apply: Apply) -> int:
        """As :meth:`FileQueue.drain`; an entry whose ``apply`` raised is ``replayed`` next time."""
        applied = 0
        while True:
            with self._lock:
                if not self._entries:
                    return applied
                entry = self._entries[0]
            try:
                apply(entry, id(entry) in self._tried)
            except Retry:
                self._tried.add(id(entry))  # it stays first
                raise
            with self._lock:
                self._entries.pop(0)
                self._tried.discard(id(entry))
            applied += 1


_PG_TABLE = """CREATE TABLE IF NOT EXISTS memwire_capture_queue (
    seq bigserial PRIMARY KEY,
    namespace text NOT NULL,
    key text NOT NULL,
    entry jsonb NOT NULL,
    claimed timestamptz,
    UNIQUE (namespace, key)
)"""
# advisory lock class of the capture queues ("memwcapt"); the namespace's hash is the key
_PG_LOCK = 0x6D656D77_63617074
_pg_ready: set[str] = set()  # database URLs whose table this process made sure of
_pg_ready_lock = threading.Lock()


class PgQueue:
    """A PostgreSQL namespace's capture queue (see the module). ``store``: a ``PgStore``."""

    durable = True
    BATCH = 100

    def __init__(self, store: Any) -> None:
        self.store = store
        self.namespace: str = store.namespace

    def _connection(self) -> Any:
        db = self.store.db
        if db.url not in _pg_ready:
            with _pg_ready_lock, db.connection() as conn:
                if db.url not in _pg_ready:
                    with conn.transaction():
                        conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (_PG_LOCK & 0x7FFFFFFF,))
                        conn.execute(_PG_TABLE)
                    _pg_ready.add(db.url)
        return db.connection()

    def put(self, entries: Sequence[Mapping[str, Any]]) -> None:
        from psycopg.types.json import Jsonb

        with self._connection() as conn, conn.cursor() as cur:
            cur.executemany("INSERT INTO memwire_capture_queue (namespace, key, entry) VALUES (%s, %s, %s) "
                            "ON CONFLICT (namespace, key) DO NOTHING",
                            [(self.namespace, e["key"], Jsonb(dict(e))) for e in entries])

    def namespaces(self) -> list[str]:
        """The namespaces of this database with entries waiting (what a restart left)."""
        with self._connection() as conn:
            return [r[0] for r in conn.execute("SELECT DISTINCT namespace FROM memwire_capture_queue").fetchall()]

    def pending(self) -> bool:
        with self._connection() as conn:
            row = conn.execute("SELECT EXISTS (SELECT 1 FROM memwire_capture_queue WHERE namespace = %s)",
                               (self.namespace,)).fetchone()
            return bool(row[0])  # EXISTS: always one row

    def drain(self, apply: Apply) -> int:
        applied = 0
        with self._connection() as conn:
            conn.commit()
            lock = (_PG_LOCK & 0x7FFFFFFF, self.namespace)
            conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", lock)  # one consumer per namespace
            conn.commit()
            try:
                while True:
                    rows = conn.execute("SELECT seq, entry, claimed IS NOT NULL FROM memwire_capture_queue "
                                        "WHERE namespace = %s ORDER BY seq LIMIT %s",
                                        (self.namespace, self.BATCH)).fetchall()
                    conn.commit()
                    if not rows:
                        return applied
                    for seq, entry, claimed in rows:
                        if not claimed:  # committed before the entry is applied: a replay knows
                            conn.execute("UPDATE memwire_capture_queue SET claimed = now() WHERE seq = %s", (seq,))
                            conn.commit()
                        apply(entry, bool(claimed))  # Retry: the row stays, claimed
                        conn.execute("DELETE FROM memwire_capture_queue WHERE seq = %s", (seq,))
                        conn.commit()
                        applied += 1
            finally:
                try:
                    conn.rollback()
                    conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", lock)
                    conn.commit()
                except Exception:
                    pass
