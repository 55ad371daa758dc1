"""The PostgreSQL memory store: ``MemoryStore``'s behaviour on one database that many proxy replicas
share (``PgStore(url, namespace)``; the schema, pools and listener are in ``_pg``).

In the database, per namespace: a row of ``memwire_namespaces`` with ``version`` (bumped by every
change of the namespace's memories) and ``meta_version`` (by every save of their metadata); its
memories, archive and inbox in ``memwire_memories`` (``kind``), one row per (namespace, kind, id),
each row carrying the version that last changed it; a removal keeps the row as a tombstone
(``deleted``, with the removal's version; adding the text again reuses the row); the lifecycle
metadata in ``memwire_lifecycle`` (versioned the same way by ``meta_version``); the event logs in
``memwire_events`` (the newest ``EVENTS_KEEP`` per namespace and log).

Writes: one transaction each. It first locks the namespace's row (``SELECT ... FOR UPDATE``), so the
writes of a namespace are serialized and its versions are committed in order: a reader holding
version V that reads the rows changed after V misses nothing. Rows are upserted on their unique key
(``ON CONFLICT``): the same text added by many replicas at once settles on one row, tags and pin
merged, reinforced once per add. The transaction ends with ``pg_notify('memwire_changed', namespace)``.

What each replica caches, per store (namespace and kind): the memories in file-like order (grouped
by topic, in the order of first adds), their BM25 index, and the version they are as of; and the
metadata as of its ``meta_version``. A search reads only the cache. How it learns of changes: the
process's listener (``_pg``) counts notifications per namespace; the cache is stale when the count
moved since the last refresh (or the listener reconnected), or, while the listener is down, when
the last look is a second old. Then the next read loads in one snapshot (REPEATABLE READ) only the
rows changed since the cached versions, tombstones included, and patches the index. ``ready()``
answers from memory (no database round trip). A write patches the writer's cache at once and marks
the namespace stale for the process's other stores (its archive, say) without waiting for the
notification.

Failing open: a read that the database cannot serve (down, timed out, or in the short pause after a
failure) answers from the cache — empty if it never loaded — and the outage is logged once; writes
raise ``StoreUnavailableError`` naming the database. Metadata counts wait in memory until it is back.

Its parts: ``_store_rows`` (a write transaction's rows), ``_store_meta`` (the lifecycle metadata).
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..._errors import InvalidMemoryError, StoreBusyError, StoreUnavailableError, UsageError
from .. import _supersede
from .._capture_queue import PgQueue
from .._index import BM25Index
from .._lifecycle import Scoring
from .._model import FileEdit, Memory
from .._protocol import CaptureQueue, LedgerKinds, LedgerT
from .._store_base import StoreBase
from .._store_checks import _checked, archived
from .._store_names import event_log_name, validate_namespace
from .._table import Kind, kind_of
from . import _pg
from ._store_meta import PgLifecycle
from ._store_rows import COLUMNS, Write, insert_events, locked_namespace

__all__ = ["EVENTS_KEEP", "KINDS", "PgStore"]

log = logging.getLogger("memwire")

KINDS = ("memories", "archive", "inbox")
DEFAULT_NAMESPACE = "default"
POLL_S = 1.0  # while the listener is down, a store looks at the database at most this often
EVENTS_KEEP = 10_000  # records kept per namespace and event log
TRIM_EVERY = 100  # a store trims an event log after this many appends (and after its first)


class PgStore(StoreBase):
    """Memories of one namespace in a PostgreSQL database (see the module), searchable with BM25.

    ``PgStore(url, namespace)``: ``url`` a libpq URL (``postgresql://user@host/db``), ``namespace``
    ``None`` for the default one. ``kind`` picks the namespace's memories (searched and injected),
    its ``archive`` or its ``inbox``; ``store.archive`` and ``store.inbox`` give those. The schema is
    created or migrated on first use.
    """

    remote = True  # its session ledgers and memos are database round trips: an async caller runs it in a thread

    def __init__(self, url: str, namespace: str | None = None, *, min_score: float | None = None,
                 scoring: Scoring | None = None, track: bool = True, kind: str = "memories",
                 timezone: str | None = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        self.url = url
        self.namespace = validate_namespace(DEFAULT_NAMESPACE if namespace in (None, "") else namespace)
        self.kind = kind
        self.min_score = min_score
        self.scoring = scoring
        self.track = track  # record lifecycle metadata (the inbox and the archive do not)
        self.settles = kind == "memories"  # new memories settle against the active ones (not in the archive, the inbox)
        self.timezone = timezone  # the day a dateless new memory was said, for its relative dates
        _pg.database(url)  # checks the URL and that psycopg is installed
        self._lock = threading.RLock()  # the cache
        self._loading = threading.Lock()  # one refresh at a time (outside the cache's lock)
        self._mems: dict[str, Memory] = {}
        self._pos: dict[str, int] = {}
        self._ordered: list[Memory] | None = None
        self._index = BM25Index()
        self._held = 0  # the namespace version the cache is as of
        self._seen: tuple[int, int] | None = None  # the listener's token at the last refresh
        self._looked = -math.inf  # when the database was last asked (monotonic)
        self._loaded = False
        self.version = 0  # bumps whenever the cached memory set changes
        self._lifecycle: PgLifecycle | None = None
        self._archive: PgStore | None = None
        self._inbox: PgStore | None = None
        self._appended: dict[str, int] = {}

    @property
    def _db(self) -> _pg.Database:
        """This process's database of the URL: a store made before a fork uses the child's own."""
        return _pg.database(self.url)

    @property
    def db(self) -> _pg.Database:
        """The database (its pool): the session ledgers live there too (``policies/modes/_ledger_pg``)."""
        return self._db

    def _where(self, kind: str) -> str:
        return f"{self._db.shown} namespace {self.namespace}" + ("" if kind == "memories" else f" ({kind})")

    @property
    def location(self) -> str:
        """Where the memories are, for messages: the database (without password) and the namespace."""
        return self._where(self.kind)

    def __repr__(self) -> str:
        return f"PgStore({self._db.shown!r}, {self.namespace!r}, kind={self.kind!r})"

    # ---------------------------------------------------------------- related stores

    def has_namespace(self, namespace: str) -> bool:
        """Whether the database holds ``namespace`` (anything was ever written to it)."""
        with self._db.connection() as conn:
            row = conn.execute("SELECT EXISTS (SELECT 1 FROM memwire_namespaces WHERE namespace = %s)",
                               (validate_namespace(namespace),)).fetchone()
        assert row is not None  # EXISTS: always one row
        return bool(row[0])

    def count_namespaces(self) -> int:
        """How many namespaces other than the default one the database holds."""
        with self._db.connection() as conn:
            row = conn.execute("SELECT count(*) FROM memwire_namespaces WHERE namespace <> %s",
                               (DEFAULT_NAMESPACE,)).fetchone()
        assert row is not None  # count(*): always one row
        return int(row[0])

    def case_twin(self, namespace: str) -> str | None:
        """None: a database's namespaces are never one another's, whatever their case."""
        return None

    def queued_namespaces(self) -> list[str]:
        """The other namespaces of the database whose queue tables hold entries (a restart's)."""
        q = PgQueue(self)
        return [n for n in q.namespaces() if n != q.namespace]

    def exists(self) -> bool:
        """True: a namespace is there as soon as it is named (its rows appear on first write)."""
        return True

    def namespace_store(self, namespace: str | None) -> PgStore:
        """The store of ``namespace`` in the same database, with this store's settings."""
        return PgStore(self.url, namespace, min_score=self.min_score, scoring=self.scoring, track=self.track,
                       timezone=self.timezone)

    @property
    def archive(self) -> PgStore:
        """Where forgotten, superseded, rejected and decayed memories go: never injected, searchable,
        restorable."""
        if self.kind == "archive":
            raise UsageError(f"{self.location} is an archive: it has none of its own "
                             "(forget(id, reason=None) removes a memory from it)")
        if self._archive is None:
            self._archive = PgStore(self.url, self.namespace, min_score=self.min_score, track=False, kind="archive")
        return self._archive

    @property
    def inbox(self) -> PgStore:
        """Where captured memories wait for review: never searched with this store."""
        if self._inbox is None:
            self._inbox = PgStore(self.url, self.namespace, min_score=self.min_score, track=False, kind="inbox",
                                  timezone=self.timezone)
        return self._inbox

    @property
    def lifecycle(self) -> PgLifecycle:
        """The memories' metadata (created, reinforced, evidence, cue, uses) and their scores."""
        if self._lifecycle is None:
            with self._lock:
                if self._lifecycle is None:
                    self._lifecycle = PgLifecycle(self)
        return self._lifecycle

    # ---------------------------------------------------------------- keeping current

    def ready(self) -> bool:
        """True when the cache is loaded and nothing says it changed since: a search is in-memory
        work only. Asks nothing of the database."""
        if not self._loaded or self._db.token(self.namespace) != self._seen:
            return False
        return self._db.listening or time.monotonic() - self._looked < POLL_S

    def refresh(self) -> None:
        """Load what changed since the cached versions (nothing when ``ready()``). Raises
        ``StoreUnavailableError`` when the database cannot answer."""
        self._catch_up(wait=True)

    def _catch_up(self, wait: bool) -> None:
        if self.ready():
            return
        if not self._loading.acquire(blocking=wait):
            raise StoreBusyError(f"{self.location}: being refreshed by another thread")
        try:
            if self.ready():  # another thread just did
                return
            token = self._db.token(self.namespace)  # before reading: a change meanwhile moves it again
            self._looked = time.monotonic()
            lc = self._lifecycle if self._lifecycle is not None or not self.track else self.lifecycle
            with self._db.connection() as conn, conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                row = conn.execute("SELECT version, meta_version FROM memwire_namespaces WHERE namespace = %s",
                                   (self.namespace,)).fetchone()
                version, meta_version = row if row is not None else (0, 0)
                whole = version < self._held  # the database went back (restored): load it whole
                since = 0 if whole else self._held
                rows = conn.execute(
                    f"SELECT {COLUMNS}, deleted FROM memwire_memories WHERE namespace = %s AND kind = %s "
                    "AND version > %s AND (%s > 0 OR NOT deleted) ORDER BY position",
                    (self.namespace, self.kind, since, since)).fetchall() if version != self._held else []
                metas = lc.changed_rows(conn, meta_version) if lc is not None else None
            with self._lock:
                if whole:
                    self._forget_all()
                self._apply(rows)
                self._held = version
            if lc is not None and metas is not None:
                lc.took(metas, meta_version)
            self._seen, self._loaded = token, True
        finally:
            self._loading.release()

    def _forget_all(self) -> None:
        for mid in self._mems:
            self._index.remove(mid)
        self._mems, self._pos = {}, {}
        self._ordered = None
        self.version += 1

    def _apply(self, rows: Iterable[Sequence[Any]]) -> None:
        """Patch the cache and the index with rows as read (tombstones remove). Under the lock."""
        fresh: list[Memory] = []
        changed = False
        for mid, text, tags, pinned, topic, date, pos, deleted in rows:
            if deleted:
                if self._mems.pop(mid, None) is not None:
                    del self._pos[mid]
                    self._index.remove(mid)
                    changed = True
                continue
            mem = Memory(mid, text, tuple(tags), pinned, topic, date)
            if self._pos.get(mid) != pos:  # new, or added again after a removal: another place
                self._pos[mid] = pos
                changed = True
            if self._mems.get(mid) != mem:
                self._mems[mid] = mem
                fresh.append(mem)
                changed = True
        if not changed:
            return
        self._ordered = None
        if len(fresh) > 1:  # indexed in file order, as a reload of files would (conversation neighbors)
            rank = {m.id: i for i, m in enumerate(self._order())}
            fresh.sort(key=lambda m: rank[m.id])
        if fresh:
            self._index.add_many((m.id, m.search_text(), m.date) for m in fresh)
        self.version += 1

    def _order(self) -> list[Memory]:
        """The memories grouped by topic (topics in the order of their first memory), each group in
        the order of first adds: the order of a memory file. Under the lock."""
        if self._ordered is None:
            first: dict[str | None, int] = {}
            for mid, m in self._mems.items():
                pos = self._pos[mid]
                if first.get(m.topic, pos) >= pos:
                    first[m.topic] = pos
            self._ordered = sorted(self._mems.values(), key=lambda m: (first[m.topic], self._pos[m.id]))
        return self._ordered

    def _fresh(self, refresh: bool, wait: bool) -> None:
        """Catch up before a read that fails open: when the database cannot answer, the read serves
        the cache (empty if it never loaded); the outage is logged once, by ``_pg``."""
        if not refresh and self._loaded:
            return
        try:
            self._catch_up(wait)
        except StoreUnavailableError:
            pass
        except StoreBusyError:
            raise
        except Exception as exc:
            log.warning("memwire: reading %s failed (%s: %s); using what is cached", self.location,
                        type(exc).__name__, exc)

    @contextlib.contextmanager
    def _reading(self, refresh: bool, wait: bool, strict: bool = False) -> Iterator[None]:
        """The cache's lock for a read, caught up first (failing open unless ``strict``: then
        ``StoreUnavailableError`` rather than an answer from a cache it could not bring up to date)."""
        if strict:
            self._catch_up(wait=True)
        else:
            self._fresh(refresh, wait)
        if not self._lock.acquire(blocking=wait):
            raise StoreBusyError(f"{self.location}: being written by another thread")
        try:
            yield
        finally:
            self._lock.release()

    # ---------------------------------------------------------------- reading

    @property
    def problems(self) -> list[Any]:
        """Problems found reading the memories: none (the database holds them as written)."""
        return []

    def memories(self, *, refresh: bool = True, wait: bool = True) -> list[Memory]:
        """Every memory, in file-like order (see ``_order``)."""
        with self._reading(refresh, wait):
            return list(self._order())


    # the primitives of ``StoreBase``'s reads: a handle is the cached Memory itself
    def _ids(self) -> dict[str, Memory]:
        return self._mems

    def _at(self, mid: str) -> Memory | None:
        return self._mems.get(mid)

    def _kind(self, handle: Any) -> Kind:
        return kind_of(handle)

    def _build(self, mid: str, handle: Any) -> Memory:
        mem: Memory = handle  # a search's hits are the cache's memories
        return mem

    # ---------------------------------------------------------------- writing

    @contextlib.contextmanager
    def _writing(self) -> Iterator[Write]:
        """One write transaction, the namespace's row locked; afterwards the cache is patched and
        the namespace marked stale for this process's other stores."""
        with self._db.connection() as conn, conn.transaction():
            version = locked_namespace(conn, self.namespace, "version")
            w = Write(self, conn, version + 1)
            yield w
            if w.rows:
                conn.execute("UPDATE memwire_namespaces SET version = %s WHERE namespace = %s",
                             (w.version, self.namespace))
                conn.execute("SELECT pg_notify(%s, %s)", (_pg.CHANNEL, self.namespace))
        if w.rows:
            self._db.touch(self.namespace)
            with self._lock:
                self._apply(w.rows.get(self.kind, ()))
                if self._loaded and self._held == version:  # nothing missed in between: current
                    self._held = w.version

    def _plan(self, w: Write, items: list[Memory], replaces: str | None, restored: bool) -> _supersede.Plan:
        """What the write does to the active memories (``_supersede.plan``), in the transaction,
        the namespace locked and the cache brought up to it (``_sync``)."""
        if not self.settles or not items:
            return _supersede.Plan({}, {}, {})
        if replaces is not None:
            old, _ = w.find(self.kind, replaces)
            return _supersede.Plan({}, {items[0].id: [old]} if old.id != items[0].id else {}, {})
        have = w.rows_of(self.kind, {m.id for m in items})
        self._sync(w)
        return self._settling([m for m in items if m.id not in have], restored, lambda m: True)

    def _sync(self, w: Write) -> None:
        """Bring the cache to the version the write locked (other replicas' writes included), read
        on the write's own connection: the decision sees every memory committed before it."""
        with self._lock:
            held = self._held
        if held == w.version - 1:
            return
        rows = w.conn.execute(
            f"SELECT {COLUMNS}, deleted FROM memwire_memories WHERE namespace = %s AND kind = %s "
            "AND version > %s ORDER BY position", (self.namespace, self.kind, held)).fetchall()
        with self._lock:
            if self._held == held:
                self._apply(rows)
                self._held = w.version - 1

    def _add_many(self, memories: Iterable[Memory | str], cue: str, replaces: str | None = None,
                  restored: bool = False) -> list[Memory]:
        items = [_checked(Memory.create(m) if isinstance(m, str) else m, screen=self.kind != "archive",
                          timezone=self.timezone, dates=not restored) for m in memories]
        for m in items:
            if any("\0" in s for s in (m.text, m.topic or "", m.date or "", *m.tags)):
                raise InvalidMemoryError(f"a memory cannot hold a NUL character: {m.text[:80]!r}")
        if not items:
            return []
        if self.kind == "memories" and not self._loaded:
            self._catch_up(wait=True)  # loaded before the write's connection is taken (the pool is small)
        with self._writing() as w:
            plan = self._plan(w, items, replaces, restored)
            items = _supersede.pinned_on(plan, items)
            gone = plan.removed()
            for old in gone:  # archived and removed in the same transaction
                w.merge("archive", [_checked(archived(old, "superseded"), screen=False)])
                w.delete(self.kind, old.id)
            kept = [m for m in items if m.id not in plan.duplicates]
            stored, new = w.merge(self.kind, kept) if kept else ([], set())
        got = iter(stored)
        result = [plan.duplicates[m.id] if m.id in plan.duplicates else next(got) for m in items]
        self._record_write(result, new, gone, plan, cue)
        return result

    def pin(self, mid: str, pinned: bool = True) -> Memory:
        """Mark a memory pinned (or not). ``mid`` may be a unique prefix of the id."""
        with self._writing() as w:
            mem, pos = w.find(self.kind, mid)
            if mem.pinned == pinned:
                return mem
            mem = replace(mem, pinned=pinned)
            w.put(self.kind, [(mem, pos)])
        return mem

    def _forget(self, mid: str, reason: str | None) -> Memory:
        """``forget``: the memory removed, into the archive tagged ``reason`` in the same transaction."""
        if reason is not None and self.kind == "archive":
            raise UsageError(f"{self.location} is an archive: forget(id, reason=None) removes a memory from it")
        with self._writing() as w:
            mem, _ = w.find(self.kind, mid)
            if reason is not None:
                w.merge("archive", [_checked(archived(mem, reason), screen=False)])
            w.delete(self.kind, mem.id)
        if reason is not None and self.track:
            self.lifecycle.forgotten([mem.id])
        return mem

    def edit_file(self, name: str, edit: Any, *, cue: str = "explicit") -> FileEdit:
        raise UsageError(f"the PostgreSQL store ({self.location}) has no files: edit memories one by one "
                         "(add, forget, pin), or use a markdown directory for the memory tool's file edits")

    def rename_file(self, old: str, new: str) -> None:
        self.edit_file(old, None)

    # ---------------------------------------------------------------- event logs

    def append_events(self, log: str, records: Sequence[Mapping[str, Any]]) -> None:
        """``append_event`` of each of ``records``, in order, in one transaction."""
        if not records:
            return
        name = event_log_name(log)
        before = self._appended.get(name, 0)
        count = self._appended[name] = before + len(records)
        trim = (count - 1) // TRIM_EVERY != (before - 1) // TRIM_EVERY  # passed the 1st, 101st, ... append
        with self._db.connection() as conn:
            insert_events(conn, self.namespace, name, records, EVENTS_KEEP if trim else None)

    def read_events(self, log: str) -> list[dict[str, Any]]:
        """The records of an event log of the namespace, oldest first."""
        name = event_log_name(log)
        with self._db.connection() as conn:
            rows = conn.execute("SELECT record FROM memwire_events WHERE namespace = %s AND log = %s ORDER BY seq",
                                (self.namespace, name)).fetchall()
        return [r[0] for r in rows]

    def open_ledger(self, session: str, kinds: LedgerKinds[LedgerT]) -> LedgerT:
        """The ledger rows of ``session`` in the namespace (``Store.open_ledger``)."""
        return kinds.database(self.db.connection, self.namespace, session)

    def capture_queue(self) -> CaptureQueue:
        """The namespace's queue table of captured statements (``Store.capture_queue``)."""
        return PgQueue(self)
