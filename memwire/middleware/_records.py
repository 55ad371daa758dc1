"""Per request, what memwire did and what the provider reported: the live figures behind
``/metrics``, ``memwire stats --requests`` and the proxy's page.

A :class:`Record` is made when a reply is over (its usage is in its last bytes) from the request's
:class:`~memwire.middleware._prepared.Injection` and the reply's :class:`~memwire.middleware._usage.Usage`.
:class:`Records` keeps the latest ``size`` in memory (a ring buffer: an operator's page and the
metrics need recent traffic, not all of it) and, when given a path, appends each as one JSON line
(bounded like memwire's other logs). Never message text, never credentials: ids, counts and times.

:class:`SharedRecords` also keeps each record in its namespace's store (the ``requests`` event log:
``DIR/.requests.jsonl``, or rows in PostgreSQL), on a background thread: the proxy's page then shows
the sessions every worker and every replica served (:func:`session_records`), not only its own.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .._errors import MemoryFileError, StoreUnavailableError
from .._worker import Traffic, Worker
from ..memory._logfile import append_jsonl, read_jsonl
from ._prepared import Injection
from ._usage import Usage

__all__ = [
    "RECORDS_SIZE",
    "REQUESTS_LOG",
    "Record",
    "Records",
    "SharedRecords",
    "read_records",
    "record_of",
    "session_records",
    "stored_records",
]

log = logging.getLogger("memwire")

RECORDS_SIZE = 2000  # requests kept in memory
REQUESTS_LOG = "requests"  # the store's event log of records (see SharedRecords)
MAX_PENDING = 5000  # records waiting for the background writer at most


_rid_prefix: str
_rid_counter: Iterator[int]


def _new_prefix() -> None:
    global _rid_prefix, _rid_counter
    _rid_prefix, _rid_counter = secrets.token_hex(5), itertools.count()


_new_prefix()  # this process's (urandom is a syscall: once, not per request)
os.register_at_fork(after_in_child=_new_prefix)  # a forked worker must not repeat its parent's ids


def next_rid() -> str:
    """A request's id: unique across processes and replicas (a random prefix, then a count)."""
    return f"{_rid_prefix}{next(_rid_counter):06x}"


@dataclass(frozen=True)
class Record:
    """One request: what memwire did (mode, memories, tokens of its block, why it skipped, the
    time it added) and what the provider reported (``None``: the reply carried no usage)."""

    at: float
    api: str
    model: str
    status: int
    namespace: str = ""
    session: str = ""
    mode: str = ""
    memory_ids: tuple[str, ...] = ()  # this turn's block (ids only: the page shows their text as it is now)
    replayed: int = 0             # earlier blocks put back (replay)
    block_tokens: int = 0
    profile_tokens: int = 0
    skipped: str | None = None
    added_ms: float = 0.0         # memwire's own time before the request left
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    output_tokens: int | None = None
    provider: str = ""            # openai | anthropic (by the API)
    reused: bool = False          # the block came from its turn's memo (a tool loop's later request)
    client: str = ""              # which client sent it, by name (claude-code, codex, openai-python...)
    rid: str = field(default_factory=lambda: next_rid(), compare=False)  # one request, wherever read

    @property
    def injected(self) -> int:
        """Memories in this turn's block."""
        return len(self.memory_ids)

    def to_json(self) -> dict[str, Any]:
        """Its fields as a dict for ``json.dumps`` (a shallow copy: ``asdict`` costs 15 times more,
        once per request)."""
        return {name: getattr(self, name) for name in _RECORD_FIELDS}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Record:
        kw = {k: v for k, v in d.items() if k in _RECORD_FIELDS}
        kw["memory_ids"] = tuple(kw.get("memory_ids") or ())
        return cls(**kw)


_RECORD_FIELDS = tuple(f.name for f in fields(Record))


def record_of(injection: Injection | None, api: str, model: str, status: int, usage: Usage | None,
              at: float | None = None, client: str = "") -> Record:
    """The record of one request (``injection`` None: memwire passed it through untouched;
    ``client``: the name of the client that sent it, never a header's value)."""
    inj: dict[str, Any] = {}
    if injection is not None:
        inj = {"namespace": injection.namespace, "session": injection.session, "mode": injection.mode,
               "memory_ids": injection.memory_ids if injection.injected else (), "replayed": injection.replayed,
               "block_tokens": injection.tokens if injection.injected else 0,
               "profile_tokens": injection.profile_tokens, "skipped": injection.skipped,
               "added_ms": round(injection.elapsed_ms, 3), "reused": injection.reused}
    got: dict[str, Any] = {}
    if usage is not None:
        got = {"prompt_tokens": usage.prompt_tokens, "cached_tokens": usage.cached_tokens,
               "cache_write_tokens": usage.cache_write_tokens, "output_tokens": usage.output_tokens}
    return Record(at=time.time() if at is None else at, api=api, model=model, status=status, client=client,
                  provider="anthropic" if api.startswith("anthropic") else "openai", **inj, **got)


class Records:
    """The latest ``size`` records in memory, each also appended to ``path`` when given; every
    ``listener`` (the metrics) sees each record as it is added. Thread-safe."""

    def __init__(self, size: int = RECORDS_SIZE, path: Path | None = None) -> None:
        self._ring: collections.deque[Record] = collections.deque(maxlen=size)
        self._lock = threading.Lock()
        self.path = path
        self.listeners: list[Callable[[Record], None]] = []

    def add(self, record: Record) -> None:
        with self._lock:
            self._ring.append(record)
        for listen in self.listeners:
            try:
                listen(record)
            except Exception as exc:
                log.warning("memwire: request figures not counted (%s: %s)", type(exc).__name__, exc)
        if self.path is not None:
            try:
                append_jsonl(self.path, record.to_json(), root=self.path.parent)  # a file the person named
            except (OSError, MemoryFileError) as exc:
                log.warning("memwire: request log %s not written (%s)", self.path, exc)

    def recent(self, n: int | None = None, *, namespace: str | None = None, session: str | None = None) -> list[Record]:
        """The latest records, oldest first (``n`` at most), of one namespace or session if given."""
        with self._lock:
            found: Iterable[Record] = list(self._ring)
        found = [r for r in found if (namespace is None or r.namespace == namespace)
                 and (session is None or r.session == session)]
        return found[-n:] if n else found


def read_records(path: Path) -> list[Record]:
    """The records a request log holds, oldest first (lines that are not records skipped)."""
    out = []
    for d in read_jsonl(path, root=path.parent):
        try:
            out.append(Record.from_json(d))
        except TypeError:
            continue
    return out


class SharedRecords:
    """Keeps every record in its namespace's store too (``requests`` event log), off the request's
    path: a listener of :class:`Records` that hands each record to one background thread."""

    def __init__(self, store_for: Callable[[str | None], Any], traffic: Traffic | None = None) -> None:
        self._store_for = store_for
        self._worker = Worker("memwire-records", "the request log", "records", lambda: MAX_PENDING, traffic)

    def offer(self, record: Record) -> None:
        self._worker.offer(self._write, record)

    def flush(self, timeout: float | None = None) -> None:
        self._worker.flush(timeout)

    def _write(self, records: list[Record]) -> None:
        """The records offered since the last call, each namespace's appended together."""
        by_namespace: dict[str, list[Record]] = {}
        for r in records:
            by_namespace.setdefault(r.namespace, []).append(r)
        for namespace, mine in by_namespace.items():
            try:
                self._store_for(namespace or None).append_events(REQUESTS_LOG, [r.to_json() for r in mine])
            except Exception as exc:
                # an outage is logged once, by the database: not once per record
                (log.debug if isinstance(exc, StoreUnavailableError) else log.warning)(
                    "memwire: requests' records not kept in the store (%d of them; %s: %s)", len(mine),
                    type(exc).__name__, exc)


def stored_records(store: Any) -> list[Record]:
    """The records ``store`` keeps (its ``requests`` log), oldest first; damaged ones skipped."""
    out = []
    for d in store.read_events(REQUESTS_LOG):
        try:
            out.append(Record.from_json(d))
        except (TypeError, ValueError):
            continue
    return out


def session_records(store: Any, records: Records, namespace: str | None, session: str | None = None) -> list[Record]:
    """The records of a namespace (one session if given), oldest first: those its store keeps (every
    worker's and replica's) and this process's own not written there yet, each request once."""
    kept: dict[str, Record] = {}
    try:
        kept = {r.rid: r for r in stored_records(store)}
    except Exception as exc:
        log.warning("memwire: the store's request log cannot be read (%s: %s)", type(exc).__name__, exc)
    for r in records.recent(namespace=namespace or ""):
        kept.setdefault(r.rid, r)
    found = [r for r in kept.values()
             if (r.namespace or "") == (namespace or "") and (session is None or r.session == session)]
    return sorted(found, key=lambda r: r.at)
