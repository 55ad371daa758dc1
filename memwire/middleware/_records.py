"""Per request, what memwire did and what the provider reported: the live figures behind
``/metrics``, ``memwire stats --requests`` and the proxy's page.

A :class:`Record` is made when a reply is over (its usage is in its last bytes) from the request's
:class:`~memwire.middleware._core.Injection` and the reply's :class:`~memwire.middleware._usage.Usage`.
:class:`Records` keeps the latest ``size`` in memory (a ring buffer: an operator's page and the
metrics need recent traffic, not all of it) and, when given a path, appends each as one JSON line
(bounded like memwire's other logs). Never message text, never credentials: ids, counts and times.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..memory._logfile import append_jsonl, read_jsonl

if TYPE_CHECKING:
    from ._core import Injection
    from ._usage import Usage

__all__ = ["Record", "Records", "record_of", "read_records", "RECORDS_SIZE"]

log = logging.getLogger("memwire")

RECORDS_SIZE = 2000  # requests kept in memory


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

    @property
    def injected(self) -> int:
        """Memories in this turn's block."""
        return len(self.memory_ids)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Record":
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        kw["memory_ids"] = tuple(kw.get("memory_ids") or ())
        return cls(**kw)


def record_of(injection: "Injection | None", api: str, model: str, status: int, usage: "Usage | None",
              at: float | None = None) -> Record:
    """The record of one request (``injection`` None: memwire passed it through untouched)."""
    inj: dict[str, Any] = {}
    if injection is not None:
        inj = {"namespace": injection.namespace, "session": injection.session, "mode": injection.mode,
               "memory_ids": injection.memory_ids if injection.injected else (), "replayed": injection.replayed,
               "block_tokens": injection.tokens if injection.injected else 0,
               "profile_tokens": injection.profile_tokens, "skipped": injection.skipped,
               "added_ms": round(injection.elapsed_ms, 3)}
    got: dict[str, Any] = {}
    if usage is not None:
        got = {"prompt_tokens": usage.prompt_tokens, "cached_tokens": usage.cached_tokens,
               "cache_write_tokens": usage.cache_write_tokens, "output_tokens": usage.output_tokens}
    return Record(at=time.time() if at is None else at, api=api, model=model, status=status,
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
            except Exception as exc:  # noqa: BLE001 - figures never fail a call
                log.warning("memwire: request figures not counted (%s: %s)", type(exc).__name__, exc)
        if self.path is not None:
            try:
                append_jsonl(self.path, asdict(record))
            except OSError as exc:
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
    for d in read_jsonl(path):
        try:
            out.append(Record.from_json(d))
        except TypeError:
            continue
    return out
