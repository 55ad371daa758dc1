"""The PostgreSQL store's lifecycle metadata (``PgLifecycle``): ``memwire_lifecycle``'s rows of a
namespace, loaded with the store's refreshes and saved by an upsert that adds the counts, so
replicas add up."""

from __future__ import annotations

import contextlib
import datetime as _dt
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..._errors import StoreBusyError, StoreUnavailableError
from .._lifecycle import Lifecycle, Meta, Scoring, _Delta
from . import _pg
from ._store_rows import locked_namespace

__all__ = ["PgLifecycle"]


class _Owner(Protocol):
    """What the metadata asks of its store (``_store.PgStore``)."""

    url: str
    namespace: str
    scoring: Scoring | None
    _loaded: bool

    @property
    def _db(self) -> _pg.Database: ...

    def _fresh(self, refresh: bool, wait: bool) -> None: ...


_META_COLUMNS = "id, created, reinforced, evidence, cue, uses, injected, forgotten, links"
# links: this process's changes (a key set to null is removed) applied to what is saved
_META_UPSERT = """
INSERT INTO memwire_lifecycle AS l (namespace, id, created, reinforced, evidence, cue, uses, injected, forgotten,
                                    links, version)
VALUES (%(ns)s, %(id)s, %(created)s, %(reinforced)s, %(evidence)s, %(cue)s, %(uses)s, %(injected)s, %(forgotten)s,
        %(links)s, %(version)s)
ON CONFLICT (namespace, id) DO UPDATE SET
    links = CASE WHEN %(d_links)s::jsonb IS NULL THEN l.links
                 ELSE NULLIF(jsonb_strip_nulls(COALESCE(l.links, '{}'::jsonb) || %(d_links)s::jsonb), '{}'::jsonb) END,
    reinforced = GREATEST(l.reinforced, %(d_reinforced)s::timestamptz),
    evidence = l.evidence + %(d_evidence)s,
    uses = l.uses + %(d_uses)s,
    injected = l.injected + %(d_injected)s,
    forgotten = CASE WHEN %(d_forgotten)s::timestamptz IS NOT NULL THEN %(d_forgotten)s::timestamptz
                     WHEN %(d_restored)s THEN NULL ELSE l.forgotten END,
    version = excluded.version
"""


def _ts(t: float | None) -> _dt.datetime | None:
    return None if t is None else _dt.datetime.fromtimestamp(t, _dt.timezone.utc)


def _meta(row: Sequence[Any]) -> tuple[str, Meta]:
    """A row of ``_META_COLUMNS`` as (id, Meta)."""
    mid, created, reinforced, evidence, cue, uses, injected, forgotten, links = row
    return mid, Meta(created.timestamp(), reinforced.timestamp(), evidence, cue, uses, injected,
                     forgotten.timestamp() if forgotten is not None else None, links=links or None)


class PgLifecycle(Lifecycle):
    """A store's lifecycle metadata in ``memwire_lifecycle``: loaded with the store's refreshes
    (rows changed since the cached ``meta_version``), saved by merging this process's changes with
    an upsert that adds the counts, so replicas add up."""

    def __init__(self, store: _Owner) -> None:
        super().__init__("", scoring=store.scoring)  # no directory: the hooks below use the table
        self._store, self._ns = store, store.namespace
        self.url = store.url  # the database ``_pg.close`` flushes this for
        self._version = 0  # the namespace's meta_version the cache is as of
        self._pulled = False
        _pg.opened(self)

    @property
    def _db(self) -> _pg.Database:
        return self._store._db

    @property
    def where(self) -> str:
        return f"{self._db.shown} namespace {self._ns}"

    def changed_rows(self, conn: Any, meta_version: int) -> list[tuple[Any, ...]] | None:
        """The rows changed since the cached version (None when none did)."""
        if self._pulled and meta_version == self._version:
            return None
        rows: list[tuple[Any, ...]] = conn.execute(
            f"SELECT {_META_COLUMNS} FROM memwire_lifecycle WHERE namespace = %s AND version > %s",
            (self._ns, 0 if meta_version < self._version else self._version)).fetchall()
        return rows

    def took(self, rows: list[tuple[Any, ...]], meta_version: int) -> None:
        """Merge rows read by ``changed_rows`` into the cache; it is now as of ``meta_version``."""
        metas = dict(map(_meta, rows))
        with self._lock:
            self._disk = {**self._disk, **metas}
            self._version, self._pulled = meta_version, True

    def _load(self) -> dict[str, Meta] | None:
        """Kept current by the store's refreshes (``took``): here (at most once a second) the store
        catches up when it is stale, never waiting for another thread's refresh; the metadata is
        loaded here only when used before the store read anything."""
        if self._pulled:
            if self._store._loaded:  # a store that never read (a writer) is not loaded for its metadata
                with contextlib.suppress(StoreBusyError):
                    self._store._fresh(True, False)
            return None
        try:
            with self._db.connection() as conn, conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                row = conn.execute("SELECT meta_version FROM memwire_namespaces WHERE namespace = %s",
                                   (self._ns,)).fetchone()
                meta_version = row[0] if row is not None else 0
                rows = self.changed_rows(conn, meta_version) or []
        except StoreUnavailableError:
            return None  # the scores use what is cached meanwhile
        self.took(rows, meta_version)
        return None  # took() set the cache

    def _save(self, delta: Mapping[str, _Delta]) -> dict[str, Meta]:
        from psycopg.types.json import Jsonb

        now = self.clock()
        with self._db.connection() as conn, conn.transaction():
            version = locked_namespace(conn, self._ns, "meta_version") + 1
            params = []
            for mid, d in delta.items():
                new = d.apply(None, now)
                params.append({
                    "ns": self._ns, "id": mid, "created": _ts(new.created), "reinforced": _ts(new.reinforced),
                    "evidence": new.evidence, "cue": new.cue, "uses": new.uses, "injected": new.injected,
                    "forgotten": _ts(new.forgotten), "version": version, "d_reinforced": _ts(d.reinforced),
                    "d_evidence": d.evidence, "d_uses": d.uses, "d_injected": d.injected,
                    "d_forgotten": _ts(d.forgotten), "d_restored": d.restored,
                    "links": Jsonb(new.links) if new.links else None,
                    "d_links": Jsonb(d.links) if d.links else None})
            conn.cursor().executemany(_META_UPSERT, params)
            conn.execute("UPDATE memwire_namespaces SET meta_version = %s WHERE namespace = %s", (version, self._ns))
            conn.execute("SELECT pg_notify(%s, %s)", (_pg.CHANNEL, self._ns))
            rows = conn.execute(f"SELECT {_META_COLUMNS} FROM memwire_lifecycle WHERE namespace = %s AND id = ANY(%s)",
                                (self._ns, list(delta))).fetchall()
        with self._lock:
            return {**self._disk, **dict(map(_meta, rows))}
