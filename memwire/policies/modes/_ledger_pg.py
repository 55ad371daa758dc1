"""The replay ledger on PostgreSQL: one session's ledger shared by every replica.

The same ledger as the file (``_ledger.Ledger``: entries in turn order, the profile, the other
modes' turn memos; the first request of a turn to commit wins), kept as rows instead of lines:

- ``memwire_ledger_lines``: one row per committed entry (``seq`` orders them, as a line's place in
  the file does; a later row of the same key replaces it in place);
- ``memwire_ledger_sessions``: one row per session: its ``epoch`` (bumped when the session's rows
  are rewritten by a compaction: every replica then reads the whole ledger again) and its lines.

A replica's view reads only the rows after the last ``seq`` it holds (one indexed query per
request). A commit runs in one transaction under the session's advisory lock, reads the rows other
replicas committed since, keeps the first writer of a turn and inserts one row per changed entry:
two replicas racing on one turn settle on one block. The ledger is an optimization: when the
database cannot be reached the view goes on in memory for this process (one warning), and looks
again after ``RETRY_S``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from ..._errors import StoreUnavailableError
from ._ledger import MAX_AGE_S, MAX_LINES, PRUNE_EVERY_S, Ledger, LedgerEntry, _line

__all__ = ["RETRY_S", "PgLedger"]

log = logging.getLogger("memwire")

RETRY_S = 5.0  # after a failure the database is not asked again for this long (requests go on in memory)

_READ = """
SELECT s.epoch, l.seq, l.entry FROM memwire_ledger_sessions s
LEFT JOIN memwire_ledger_lines l ON l.namespace = s.namespace AND l.session = s.session AND l.seq > %(after)s
WHERE s.namespace = %(ns)s AND s.session = %(session)s ORDER BY l.seq
"""


class PgLedger(Ledger):
    """A session's ledger in PostgreSQL (see the module). ``connect()`` gives a connection of the
    store's pool as a context manager."""

    def __init__(self, connect: Callable[[], AbstractContextManager[Any]], namespace: str, session: str) -> None:
        super().__init__(None, session)
        self._connect = connect
        self.namespace = namespace
        self._epoch: int | None = None  # the epoch this view has read (None: nothing read yet)
        self._seq = 0                   # the last row it has read
        self._down_until = 0.0          # monotonic time before which the database is not asked

    @classmethod
    def open(cls, connect: Callable[[], AbstractContextManager[Any]], namespace: str, session: str) -> PgLedger:
        ledger = cls(connect, namespace, session)
        ledger.sync()
        return ledger

    def _usable(self) -> bool:
        return time.monotonic() >= self._down_until

    def _failed(self, what: str, exc: Exception) -> None:
        if self._usable() and not isinstance(exc, StoreUnavailableError):  # an outage: the database says it once
            log.warning("memwire: could not %s the ledger of a session in PostgreSQL (%s: %s); "
                        "going on in memory", what, type(exc).__name__, exc)
        self._down_until = time.monotonic() + RETRY_S

    def sync(self) -> None:
        """Read what other replicas committed since this view last looked (one query)."""
        if not self._usable():
            return
        try:
            with self._lock, self._connect() as conn:
                self._read_rows(conn)
        except Exception as exc:
            self._failed("read", exc)

    def _read_rows(self, conn: Any) -> None:
        rows = conn.execute(_READ, {"after": self._seq, "ns": self.namespace, "session": self.session}).fetchall()
        if not rows:
            return  # no ledger yet: what this view holds stands
        epoch = rows[0][0]
        if epoch != self._epoch:
            if self._epoch is not None or self._seq:  # rewritten by a compaction: read it whole
                self._seq, self._lines = 0, 0
                rows = conn.execute(_READ, {"after": 0, "ns": self.namespace, "session": self.session}).fetchall()
            self._epoch = epoch
            self._start_over()
        for _, seq, entry in rows:
            if seq is None:
                continue  # the session's row alone: no entry after ``after``
            self._seq = max(self._seq, seq)
            self._lines += 1
            try:
                self._apply(LedgerEntry.from_json(entry))
            except (KeyError, TypeError, ValueError, AttributeError):
                continue  # a row some other version wrote badly is skipped, not trusted

    def _commit(self, changes: Callable[[], list[LedgerEntry] | None], persist: bool = True) -> bool:
        with self._lock:
            if not (persist and self._usable()):
                return self._take(changes) is not None
            try:
                with self._connect() as conn, conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                                 (f"memwire-ledger:{self.namespace}:{self.session}",))
                    self._read_rows(conn)  # under the lock: what every other replica committed
                    new = self._take(changes)
                    if new is None:
                        return False
                    if new:
                        self._write_rows(conn, new)
                    return True
            except Exception as exc:
                self._failed("save", exc)
                self._epoch, self._seq = None, 0  # the next read starts over from what was committed
                return self._take(changes) is not None

    def _write_rows(self, conn: Any, new: list[LedgerEntry]) -> None:
        if self._epoch is None:  # a new session: its row, then everything this view holds
            self._epoch = conn.execute(
                "INSERT INTO memwire_ledger_sessions (namespace, session) VALUES (%s, %s) "
                "ON CONFLICT (namespace, session) DO UPDATE SET touched = now() RETURNING epoch",
                (self.namespace, self.session)).fetchone()[0]
            profile = [self.profile] if self.profile is not None else []
            new = [*profile, *self._entries.values(), *self._memos.values()]
            _prune_now_and_then(self._connect)
        elif self._lines + len(new) > MAX_LINES:
            new = self._compact()
            self._epoch = conn.execute(
                "UPDATE memwire_ledger_sessions SET epoch = epoch + 1, touched = now() "
                "WHERE namespace = %s AND session = %s RETURNING epoch", (self.namespace, self.session)).fetchone()[0]
            conn.execute("DELETE FROM memwire_ledger_lines WHERE namespace = %s AND session = %s",
                         (self.namespace, self.session))
            self._lines = 0
            self.gen += 1
            self._reset = self.gen
        else:
            conn.execute("UPDATE memwire_ledger_sessions SET touched = now() WHERE namespace = %s AND session = %s",
                         (self.namespace, self.session))
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memwire_ledger_lines (namespace, session, entry) VALUES (%s, %s, %s::jsonb) RETURNING seq",
                [(self.namespace, self.session, _line(e).decode()) for e in new], returning=True)
            seqs: list[int] = []
            while True:
                seqs.extend(r[0] for r in cur.fetchall())
                if not cur.nextset():
                    break
        self._seq = max([self._seq, *seqs])
        self._lines += len(new)


_last_prune = [0.0]  # monotonic time this process last pruned (or started to)
_prune_lock = threading.Lock()


def _prune_now_and_then(connect: Callable[[], AbstractContextManager[Any]]) -> None:
    """When a session starts and this process has not pruned for ``PRUNE_EVERY_S``: prune on a
    background thread (never on the request's path)."""
    with _prune_lock:
        if time.monotonic() - _last_prune[0] < PRUNE_EVERY_S:
            return
        _last_prune[0] = time.monotonic()

    def run() -> None:
        try:
            with connect() as conn:
                prune(conn, MAX_AGE_S)
        except Exception as exc:
            log.warning("memwire: could not prune old ledgers in PostgreSQL (%s: %s)", type(exc).__name__, exc)

    threading.Thread(target=run, name="memwire-ledger-prune", daemon=True).start()


def prune(conn: Any, max_age_s: float) -> int:
    """Remove the ledgers of sessions untouched for ``max_age_s``; returns how many."""
    with conn.transaction():
        cur = conn.execute("DELETE FROM memwire_ledger_sessions WHERE touched < now() - make_interval(secs => %s) "
                           "RETURNING namespace, session", (max_age_s,))
        gone = cur.fetchall()
        if gone:
            conn.execute("DELETE FROM memwire_ledger_lines l USING unnest(%s::text[], %s::text[]) AS g(ns, s) "
                         "WHERE l.namespace = g.ns AND l.session = g.s", ([g[0] for g in gone], [g[1] for g in gone]))
    return len(gone)
