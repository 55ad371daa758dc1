"""The PostgreSQL store's rows (``_store.PgStore``): one write transaction of a namespace
(``Write``: its row locked, memories found, upserted, tombstoned), what writes share, and the
event logs' inserts."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from ..._errors import MemoryNotFoundError
from .._model import Memory
from .._store_names import MIN_ID_PREFIX, full_id

__all__ = ["COLUMNS", "Write", "insert_events", "locked_namespace", "no_nul"]


class _Owner(Protocol):
    """What a write asks of its store (``PgStore``)."""

    namespace: str

    def _where(self, kind: str) -> str: ...


COLUMNS = "id, text, tags, pinned, topic, date, position"  # a memory row, as the cache reads it
_UPSERT = """
INSERT INTO memwire_memories (namespace, kind, id, text, tags, pinned, topic, date, position, version)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (namespace, kind, id) DO UPDATE SET
    text = excluded.text, tags = excluded.tags, pinned = excluded.pinned, topic = excluded.topic,
    date = excluded.date, position = excluded.position, version = excluded.version, deleted = false,
    created_at = CASE WHEN memwire_memories.deleted THEN now() ELSE memwire_memories.created_at END
"""


def locked_namespace(conn: Any, namespace: str, column: str) -> int:
    """Lock the namespace's row (made if missing) until the transaction ends; its ``column``. The
    writes of a namespace wait for each other here, so its versions commit in order."""
    conn.execute("INSERT INTO memwire_namespaces (namespace) VALUES (%s) ON CONFLICT DO NOTHING", (namespace,))
    row = conn.execute(f"SELECT {column} FROM memwire_namespaces WHERE namespace = %s FOR UPDATE",
                       (namespace,)).fetchone()
    assert row is not None  # made above
    return int(row[0])


def no_nul(value: Any) -> Any:
    """PostgreSQL text and jsonb cannot hold NUL: event records lose theirs."""
    if isinstance(value, str):
        return value.replace("\0", "\ufffd")
    if isinstance(value, Mapping):
        return {no_nul(k): no_nul(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [no_nul(v) for v in value]
    return value


def insert_events(conn: Any, namespace: str, log: str, records: Sequence[Mapping[str, Any]],
                  keep: int | None) -> None:
    """Append ``records`` to the event log ``log`` of ``namespace`` (their NULs replaced); with
    ``keep``, then trim that log to its newest ``keep`` records."""
    from psycopg.types.json import Jsonb  # psycopg: the postgres extra, imported where it is used

    with conn.cursor() as cur:
        cur.executemany("INSERT INTO memwire_events (namespace, log, record) VALUES (%s, %s, %s)",
                        [(namespace, log, Jsonb(no_nul(dict(r)))) for r in records])
    if keep is not None:
        conn.execute(
            "DELETE FROM memwire_events WHERE namespace = %(ns)s AND log = %(log)s AND seq < ("
            " SELECT seq FROM memwire_events WHERE namespace = %(ns)s AND log = %(log)s"
            " ORDER BY seq DESC OFFSET %(skip)s LIMIT 1)",
            {"ns": namespace, "log": log, "skip": keep - 1})


class Write:
    """One write transaction of a namespace, its row locked (see ``PgStore._writing``)."""

    def __init__(self, store: _Owner, conn: Any, version: int) -> None:
        self.store, self.conn, self.version = store, conn, version
        self.rows: dict[str, list[tuple[Any, ...]]] = {}  # kind -> rows written (as the cache reads them)

    def rows_of(self, kind: str, ids: Collection[str]) -> dict[str, tuple[Memory, int]]:
        found = self.conn.execute(
            f"SELECT {COLUMNS} FROM memwire_memories WHERE namespace = %s AND kind = %s AND id = ANY(%s) "
            "AND NOT deleted", (self.store.namespace, kind, list(ids))).fetchall()
        return {r[0]: (Memory(r[0], r[1], tuple(r[2]), r[3], r[4], r[5]), r[6]) for r in found}

    def find(self, kind: str, mid: str) -> tuple[Memory, int]:
        """The memory of ``kind`` with id ``mid`` or a unique prefix of it, as the database has it."""
        where = self.store._where(kind)
        if len(mid) >= MIN_ID_PREFIX and mid.isascii():  # ids are hex: a prefix is the range [mid, mid+1)
            ids = [r[0] for r in self.conn.execute(
                "SELECT id FROM memwire_memories WHERE namespace = %s AND kind = %s AND id >= %s AND id < %s "
                "AND NOT deleted", (self.store.namespace, kind, mid, mid[:-1] + chr(ord(mid[-1]) + 1))
            ).fetchall()]
            mid = full_id(ids, mid)
        found = self.rows_of(kind, [mid]).get(mid)
        if found is None:
            raise MemoryNotFoundError(f"no memory with id {mid!r} in {where}")
        return found

    def put(self, kind: str, rows: list[tuple[Memory, int]]) -> None:
        ns, v = self.store.namespace, self.version
        self.conn.cursor().executemany(_UPSERT, [(ns, kind, m.id, m.text, list(m.tags), m.pinned, m.topic, m.date,
                                                  pos, v) for m, pos in rows])
        self.rows.setdefault(kind, []).extend(
            (m.id, m.text, list(m.tags), m.pinned, m.topic, m.date, pos, False) for m, pos in rows)

    def delete(self, kind: str, mid: str) -> None:
        self.conn.execute("UPDATE memwire_memories SET deleted = true, version = %s "
                          "WHERE namespace = %s AND kind = %s AND id = %s",
                          (self.version, self.store.namespace, kind, mid))
        self.rows.setdefault(kind, []).append((mid, None, None, None, None, None, None, True))

    def merge(self, kind: str, items: list[Memory]) -> tuple[list[Memory], set[str]]:
        """Add ``items`` (checked) to ``kind``: a new one at the end, one already there with its
        tags and pin merged in. Returns what is stored for each item and the ids that are new."""
        have = self.rows_of(kind, {m.id for m in items})
        fresh = len({m.id for m in items if m.id not in have})
        positions = iter(sorted(r[0] for r in self.conn.execute(
            "SELECT nextval('memwire_position') FROM generate_series(1, %s)", (fresh,)).fetchall()) if fresh else ())
        result: list[Memory] = []
        new: set[str] = set()
        changed: dict[str, tuple[Memory, int]] = {}
        for mem in items:
            old = have.get(mem.id)
            if old is None:
                have[mem.id] = changed[mem.id] = (mem, next(positions))
                new.add(mem.id)
                result.append(mem)
                continue
            stored, pos = old
            add_tags = tuple(t for t in mem.tags if t not in stored.tags)
            if not add_tags and (stored.pinned or not mem.pinned):
                result.append(stored)
                continue
            merged = replace(stored, tags=stored.tags + add_tags, pinned=stored.pinned or mem.pinned)
            have[mem.id] = changed[mem.id] = (merged, pos)
            result.append(merged)
        if changed:
            self.put(kind, list(changed.values()))
        return result, new
