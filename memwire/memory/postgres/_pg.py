"""PostgreSQL plumbing for the memory store: per database URL and process, one connection pool and
one LISTEN thread; the schema and its migrations; outages.

Pools are made on first use and closed at exit. A forked child (``memwire proxy --workers N``) makes
its own pool and listener: the parent's are left alone (never used, never closed: closing them would
end the parent's sessions). psycopg is an extra (``memwire[postgres]``), imported here on first use.

Migrations: ``MIGRATIONS[n - 1]`` is the SQL that takes the schema from version ``n - 1`` to ``n``;
the version is the one row of ``memwire_schema``. Before the first pool of a URL, the pending steps
run in order, in one transaction, under ``pg_advisory_xact_lock`` (replicas starting together: the
second waits, then finds nothing to do). A database whose version is newer than this code knows is
refused with a clear error. To change the schema, append a step: never edit one that shipped.

Changes: a write notifies ``CHANNEL`` with its namespace (``pg_notify`` in its transaction, sent at
commit). The listener counts the notifications per namespace (``Database.token``); a store compares
the token with the one it last refreshed at. When the LISTEN connection is down, ``listening`` is
False and the stores poll instead (see ``_store``); on each (re)connection the token's epoch
moves, so whatever was missed meanwhile is looked at once.

Outages: connections time out after ``CONNECT_TIMEOUT_S``, the pool after ``POOL_TIMEOUT_S``. After a
failure, calls fail at once for ``RETRY_S`` (a down database costs one timeout per pause, not one
per request), and the outage is logged once, with the database named (no password).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..._errors import ConfigError, MissingDependencyError, StoreUnavailableError

if TYPE_CHECKING:
    import psycopg

__all__ = ["CHANNEL", "MIGRATIONS", "SCHEMA_TABLE", "Database", "close", "database", "migrate", "redacted"]

log = logging.getLogger("memwire")

CHANNEL = "memwire_changed"
CONNECT_TIMEOUT_S = 2  # libpq's connect_timeout (whole seconds, 2 at least)
POOL_TIMEOUT_S = 2.0  # waiting for a pooled connection
POOL_MAX_SIZE = 4  # connections per process and URL (reads are served from the cache)
RETRY_S = 1.0  # after a failure, calls fail at once for this long
LISTEN_TICK_S = 0.5  # the listener looks at its stop flag this often
LISTEN_RETRY_S = 1.0  # the listener connects again after this long
_LOCK_KEY = 0x6D656D77_69726531  # pg_advisory_xact_lock key of the migrations ("memwire1")

SCHEMA_TABLE = """CREATE TABLE IF NOT EXISTS memwire_schema (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    version integer NOT NULL
)"""

MIGRATIONS: list[str] = [
    # 1: memories, their metadata and the event logs, per namespace
    """
    CREATE TABLE memwire_namespaces (
        namespace text PRIMARY KEY,
        version bigint NOT NULL DEFAULT 0,       -- bumped by every change of the namespace's memories
        meta_version bigint NOT NULL DEFAULT 0   -- bumped by every save of its lifecycle metadata
    );
    CREATE SEQUENCE memwire_position;
    CREATE TABLE memwire_memories (
        namespace text NOT NULL,
        kind text NOT NULL CHECK (kind IN ('memories', 'archive', 'inbox')),
        id text COLLATE "C" NOT NULL,            -- byte order: an id prefix is a range of the key
        text text NOT NULL,
        tags text[] NOT NULL DEFAULT '{}',
        pinned boolean NOT NULL DEFAULT false,
        topic text NOT NULL,
        date text,
        position bigint NOT NULL,                -- the order of first adds (a file's order)
        created_at timestamptz NOT NULL DEFAULT now(),
        version bigint NOT NULL,                 -- the namespace version that last changed the row
        deleted boolean NOT NULL DEFAULT false,  -- a tombstone: replicas learn of removals by version
        PRIMARY KEY (namespace, kind, id)
    );
    CREATE INDEX memwire_memories_changes ON memwire_memories (namespace, kind, version);
    CREATE TABLE memwire_lifecycle (
        namespace text NOT NULL,
        id text NOT NULL,
        created timestamptz NOT NULL,
        reinforced timestamptz NOT NULL,
        evidence integer NOT NULL,
        cue text NOT NULL,
        uses integer NOT NULL DEFAULT 0,
        injected integer NOT NULL DEFAULT 0,
        forgotten timestamptz,
        version bigint NOT NULL,                 -- the namespace meta_version that last changed the row
        PRIMARY KEY (namespace, id)
    );
    CREATE INDEX memwire_lifecycle_changes ON memwire_lifecycle (namespace, version);
    CREATE TABLE memwire_events (
        seq bigserial PRIMARY KEY,
        namespace text NOT NULL,
        log text NOT NULL,
        at timestamptz NOT NULL DEFAULT now(),
        record jsonb NOT NULL
    );
    CREATE INDEX memwire_events_log ON memwire_events (namespace, log, seq);
    """,
    # 2: the replay ledgers (memwire/policies/modes/_ledger_pg.py): a row per session, a row per entry
    """
    CREATE TABLE memwire_ledger_sessions (
        namespace text NOT NULL,
        session text NOT NULL,
        epoch bigint NOT NULL DEFAULT 1,
        touched timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (namespace, session)
    );
    CREATE INDEX memwire_ledger_sessions_touched ON memwire_ledger_sessions (touched);
    CREATE TABLE memwire_ledger_lines (
        namespace text NOT NULL,
        session text NOT NULL,
        seq bigserial NOT NULL,
        entry jsonb NOT NULL,
        PRIMARY KEY (namespace, session, seq)
    );
    """,
    # 3: how a memory relates to others (issue 33: supersedes, superseded_by, conflicts, merged_into, merged)
    """
    ALTER TABLE memwire_lifecycle ADD COLUMN links jsonb;
    """,
]


def _psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool  # noqa: F401 - checked here, used by Database
    except ImportError as exc:
        raise MissingDependencyError(
            "the PostgreSQL memory store needs psycopg 3 and psycopg_pool, which are not installed: "
            "pip install 'memwire[postgres]'", name=exc.name) from None
    return psycopg


def redacted(url: str) -> str:
    """``url`` without its password, for messages."""
    if "://" not in url:  # key=value form
        return re.sub(r"password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", "password=***", url)
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.split(':', 1)[0]}@{host}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "password"])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def migrate(conn: psycopg.Connection[Any], upto: int | None = None, *, shown: str = "the database") -> int:
    """Bring the schema to version ``upto`` (default: the newest) and return the version it has.
    One transaction, under an advisory lock: concurrent runners apply each step once."""
    target = len(MIGRATIONS) if upto is None else upto
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        conn.execute(SCHEMA_TABLE)
        row = conn.execute("SELECT version FROM memwire_schema").fetchone()
        current = row[0] if row else 0
        if current > len(MIGRATIONS):
            raise StoreUnavailableError(
                f"{shown}: its memwire schema is version {current}, newer than this memwire knows "
                f"({len(MIGRATIONS)}); upgrade memwire on every replica that uses it")
        for step in range(current + 1, target + 1):
            conn.execute(MIGRATIONS[step - 1])
        if target > current:
            conn.execute("INSERT INTO memwire_schema (version) VALUES (%s) "
                         "ON CONFLICT (one) DO UPDATE SET version = excluded.version", (target,))
    return max(current, target)


_EPOCHS = itertools.count(1)  # never the same twice in a process, nor in a forked child (it continues)


class _Listener:
    """The LISTEN connection of one URL in this process, on its own thread: counts notifications
    per namespace. ``epoch`` moves on every (re)connection (anything may have been missed)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._gens: dict[str, int] = {}
        self._lock = threading.Lock()
        self.epoch = 0
        self.listening = False
        self.backend_pid: int | None = None  # the server process of the LISTEN connection
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memwire-pg-listen", daemon=True)
        self._thread.start()

    def token(self, namespace: str) -> tuple[int, int]:
        return self.epoch, self._gens.get(namespace, 0)

    def bump(self, namespace: str) -> None:
        with self._lock:
            self._gens[namespace] = self._gens.get(namespace, 0) + 1

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        psycopg = _psycopg()
        lost = False
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._db.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                                     keepalives=1, keepalives_idle=10, keepalives_interval=5, keepalives_count=3,
                                     application_name="memwire-listen") as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self.backend_pid = conn.info.backend_pid
                    with self._lock:  # listening from now on; what came before is looked at once
                        self.epoch = next(_EPOCHS)
                    self.listening = True
                    if lost:
                        log.info("memwire: listening to %s again", self._db.shown)
                        lost = False
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=LISTEN_TICK_S):
                            self.bump(note.payload)
            except Exception as exc:
                if not lost and not self._stop.is_set():
                    log.info("memwire: not listening to %s (%s: %s); stores poll it every second meanwhile",
                             self._db.shown, type(exc).__name__, exc)
                lost = True
            finally:
                self.listening = False
            self._stop.wait(LISTEN_RETRY_S)


class Database:
    """One PostgreSQL database as this process uses it (``database(url)``): migrations, a pool,
    a listener, and the outage state."""

    def __init__(self, url: str) -> None:
        psycopg = _psycopg()
        try:
            psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.Error:
            raise ConfigError(f"not a PostgreSQL connection URL (postgresql://user@host:port/database): "
                              f"{redacted(url)[:200]!r}") from None
        self.url = url
        self.shown = redacted(url)
        self._pool: Any = None
        self._listener: _Listener | None = None
        self._lock = threading.Lock()
        self._retry_at = -1.0
        self._down: str | None = None  # why, during an outage
        self._closed = False

    # ------------------------------------------------------------------ changes

    def _listening(self) -> _Listener:
        if self._listener is None:
            with self._lock:
                if self._listener is None:
                    self._listener = _Listener(self)
        return self._listener

    @property
    def listening(self) -> bool:
        """Whether notifications arrive (else the stores poll)."""
        return self._listening().listening

    def token(self, namespace: str) -> tuple[int, int]:
        """Moves whenever ``namespace`` may have changed (a notification, a reconnection, a write
        of this process)."""
        return self._listening().token(namespace)

    def touch(self, namespace: str) -> None:
        """This process changed ``namespace``: its other stores look at once (not when the
        notification comes back)."""
        self._listening().bump(namespace)

    # ------------------------------------------------------------------ connections

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection (committed at the end of the block, rolled back on an error). An
        unreachable database raises ``StoreUnavailableError`` naming it; so does every call during
        the ``RETRY_S`` after a failure."""
        psycopg = _psycopg()
        if self._closed:
            raise StoreUnavailableError(f"the memory database {self.shown} is closed in this process")
        if time.monotonic() < self._retry_at:
            raise StoreUnavailableError(f"the memory database {self.shown} is unavailable ({self._down})")
        try:
            pool = self._pooled()
        except psycopg.Error as exc:  # cannot connect, or not allowed to create the tables
            self._failed(exc)
            raise StoreUnavailableError(f"the memory database {self.shown} is unavailable ({self._down})") from exc
        try:
            with pool.connection() as conn:
                yield conn
        except psycopg.OperationalError as exc:  # lost, timed out (other errors are the caller's)
            self._failed(exc)
            raise StoreUnavailableError(f"the memory database {self.shown} is unavailable ({self._down})") from exc
        self._ok()

    def _pooled(self) -> Any:
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    from psycopg_pool import ConnectionPool

                    psycopg = _psycopg()
                    # migrations on a connection of their own: an unreachable server fails at once,
                    # where a pool would wait for its timeout
                    with psycopg.connect(self.url, connect_timeout=CONNECT_TIMEOUT_S) as conn:
                        migrate(conn, shown=self.shown)
                    pool = ConnectionPool(self.url, min_size=1, max_size=POOL_MAX_SIZE, timeout=POOL_TIMEOUT_S,
                                          kwargs={"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "memwire"},
                                          check=ConnectionPool.check_connection, open=False, name="memwire")
                    pool.open(wait=False)
                    self._pool = pool
        return self._pool

    def _failed(self, exc: BaseException) -> None:
        self._retry_at = time.monotonic() + RETRY_S
        with self._lock:  # the next call after RETRY_S makes a new pool, which connects at once: the
            pool, self._pool = self._pool, None  # old one's reconnections back off (minutes after a long outage)
        if pool is not None:  # closing waits for the pool's workers: not on the caller's time
            threading.Thread(target=pool.close, name="memwire-pool-close", daemon=True).start()
        why = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        if self._down is None:
            log.warning("memwire: the memory database %s is unavailable (%s); searches find nothing new and "
                        "writes are refused until it is back", self.shown, why)
        self._down = why

    def _ok(self) -> None:
        if self._down is not None:
            log.warning("memwire: the memory database %s is back", self.shown)
            self._down = None

    def close(self) -> None:
        self._closed = True
        if self._listener is not None:
            self._listener.stop()
        if self._pool is not None:
            with contextlib.suppress(Exception):
                self._pool.close(timeout=1.0)
            self._pool = None


class _Flushes(Protocol):
    """A PostgreSQL store's lifecycle (``_store_meta.PgLifecycle``): counts waiting for the database of
    ``url`` until ``flush``."""

    url: str

    def flush(self) -> None: ...


# the lifecycles of this process's PostgreSQL stores (``opened``): ``close`` saves their counts first
_LIFECYCLES: weakref.WeakSet[_Flushes] = weakref.WeakSet()
_DATABASES: dict[str, Database] = {}
_ORPHANS: list[Database] = []  # a forked child keeps its parent's objects alive, unused: never closed
_pid = os.getpid()
_registry_lock = threading.Lock()


def database(url: str) -> Database:
    """This process's ``Database`` of ``url`` (made on first use; a forked child makes its own)."""
    global _pid
    db = _DATABASES.get(url)
    if db is not None and _pid == os.getpid():
        return db
    with _registry_lock:
        if _pid != os.getpid():
            _ORPHANS.extend(_DATABASES.values())
            _DATABASES.clear()
            _pid = os.getpid()
        db = _DATABASES.get(url)
        if db is None:
            db = _DATABASES[url] = Database(url)
    return db


def opened(lifecycle: _Flushes) -> None:
    """Count ``lifecycle`` among those ``close`` of its URL flushes first."""
    _LIFECYCLES.add(lifecycle)


def close(url: str) -> None:
    """Close this process's pool and listener of ``url``, once the metadata counts waiting for it
    are saved (the next use makes new ones)."""
    if _pid != os.getpid() or url not in _DATABASES:
        return
    for lc in list(_LIFECYCLES):
        if lc.url == url:
            with contextlib.suppress(Exception):
                lc.flush()
    with _registry_lock:
        db = _DATABASES.pop(url, None)
    if db is not None:
        db.close()


@atexit.register
def _close_all() -> None:
    """At exit, each database's pending metadata counts, then its pool (atexit runs this before
    ``_lifecycle``'s own hook, registered earlier, which would find the pools closed)."""
    if _pid != os.getpid() or not _DATABASES:
        return
    for url in list(_DATABASES):
        close(url)
