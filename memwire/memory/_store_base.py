"""What the two stores share, written once: the reads (``search``, ``get``, ``known``, ``missing``,
...), ``add``, ``forget``'s checks, ``restore`` and ``archive_copy``, over a few primitives each
backend implements (the markdown directory: ``_store.MemoryStore``; PostgreSQL:
``postgres._store.PgStore``).

The contract is ``_protocol.Store``: this base is how both backends meet its shared part. A new
backend subclasses ``StoreBase`` and implements the primitives marked abstract below (how a read is
brought up to date and locked, the ids it holds, a memory's handle, kind and build, the write
primitives ``_add_many`` and ``_forget``), plus the rest of ``Store`` (``pin``, the event logs,
namespaces, ledgers, the capture queue).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any

from .._errors import MemoryNotFoundError
from ..policies._query import Query
from . import _supersede
from ._inbox import is_merge
from ._index import BM25Index
from ._lifecycle import Lifecycle
from ._model import Hit, Memory
from ._store_checks import ARCHIVE_REASONS, archived, cue_of
from ._store_names import full_id
from ._supersede import Plan, links_of
from ._table import Kind

__all__ = ["Found", "StoreBase", "index_hits", "with_prior"]

_PRIOR_POOL = 5  # the stability prior reorders the k best and this many more

#: a hit before its Memory is built: its id, its index score, and the store's handle of it (what
#: ``index_hits``' ``find`` returned: ``Merged.at``'s (table, row), or PgStore's Memory)
Found = tuple[str, float, Any]


def index_hits(index: BM25Index, find: Callable[[str], Any], query: str, k: int, cut: float | None,
               context: Sequence[str], exclude: Collection[str]) -> list[Found]:
    """What the index finds for ``query`` (``k`` and the prior's pool), with ``find``'s handle of
    each memory the store still holds (None: gone): the first step of ``search`` (then
    ``with_prior``)."""
    found = index.search(Query(query, tuple(context)), k + _PRIOR_POOL, cut, exclude)
    return [(mid, score, h) for mid, score in found if (h := find(mid)) is not None]


def with_prior(found: list[Found], k: int, track: bool, lifecycle: Callable[[], Lifecycle],
               kind: Callable[[Any], Kind], build: Callable[[str, Any], Memory]) -> list[Hit]:
    """The k best of ``found`` (``k + _PRIOR_POOL`` found by the index), reordered by the small
    stability prior (see ``Scoring.prior``) when the store records metadata. The priors are read
    from each handle's ``kind``; only the k kept are built (``build``)."""
    if track and len(found) > 1:
        lc = lifecycle()
        if lc.scoring.rank_prior:
            priors = lc.priors([f[0] for f in found], [kind(f[2]) for f in found])
            found = sorted([(mid, score * p, h) for (mid, score, h), p in zip(found, priors, strict=True)], key=_rank)
    return [Hit(build(mid, h), score) for mid, score, h in found[:k]]


def _rank(f: Found) -> tuple[float, str]:
    return -f[1], f[0]  # best first, ties by id


class StoreBase(ABC):
    """The shared half of a store (see the module). Members of ``Store`` are documented there."""

    track: bool
    min_score: float | None
    _index: BM25Index  # the memories' BM25 index, kept current by the backend

    # ---------------------------------------------------------------- primitives

    @abstractmethod
    def _reading(self, refresh: bool, wait: bool, strict: bool = False) -> AbstractContextManager[None]:
        """The store's lock for a read, the cache brought up to date first when ``refresh`` (or never
        loaded). ``wait=False`` raises ``StoreBusyError`` rather than wait for another thread;
        ``strict``: raise rather than answer from a cache that could not be brought up to date."""

    @abstractmethod
    def _ids(self) -> Collection[str]:
        """The ids of the memories as last read (inside ``_reading``)."""

    @abstractmethod
    def _at(self, mid: str) -> Any:
        """The store's handle of memory ``mid``, None when it holds none (inside ``_reading``)."""

    @abstractmethod
    def _kind(self, handle: Any) -> Kind:
        """The (tags, pinned, topic, date) of a handle, without building its memory."""

    @abstractmethod
    def _build(self, mid: str, handle: Any) -> Memory:
        """The memory of a handle, shown with id ``mid`` (callable after ``_reading`` is left)."""

    @abstractmethod
    def _add_many(self, memories: Iterable[Memory | str], cue: str, replaces: str | None = None,
                  restored: bool = False) -> list[Memory]:
        """Write ``memories`` (checked, ``_checked``; settled against the active ones, ``_supersede``,
        where ``settles``). ``restored``: memories back from the archive, kept as they were (no date
        rewritten from today: ``_checked(dates=False)``), never merged into a look-alike, and their
        own date never making them the older value of what had replaced them (``_settling``)."""

    @abstractmethod
    def _forget(self, mid: str, reason: str | None) -> Memory:
        """Remove memory ``mid`` (a unique prefix), into the archive tagged ``reason`` (a checked
        one) unless None."""

    @property
    @abstractmethod
    def location(self) -> str: ...

    @property
    @abstractmethod
    def lifecycle(self) -> Lifecycle: ...

    @property
    @abstractmethod
    def archive(self) -> StoreBase: ...

    @property
    @abstractmethod
    def inbox(self) -> StoreBase: ...

    @abstractmethod
    def memories(self, *, refresh: bool = True, wait: bool = True) -> list[Memory]: ...

    @abstractmethod
    def append_events(self, log: str, records: Sequence[Mapping[str, Any]]) -> None: ...

    def _found(self, query: str, k: int, cut: float | None, context: Sequence[str],
               exclude: Collection[str]) -> list[Found]:
        """What ``search`` ranks (inside ``_reading``): the index's hits; a backend with a second
        retrieval adds its own here."""
        return index_hits(self._index, self._at, query, k, cut, context, exclude)

    # ---------------------------------------------------------------- reading

    def __iter__(self) -> Iterator[Memory]:
        return iter(self.memories())

    def __len__(self) -> int:
        with self._reading(True, True):
            return len(self._ids())

    def __contains__(self, mid: object) -> bool:
        with self._reading(True, True):
            return mid in self._ids()

    def missing(self, ids: Iterable[str], *, refresh: bool = True, wait: bool = True) -> set[str]:
        """The ids in ``ids`` that no longer name a memory (forgotten, or edited into another id).
        ``refresh=False``: as of the last read, for a caller that just searched."""
        with self._reading(refresh, wait):
            have = self._ids()
            return {mid for mid in ids if mid not in have}

    def known(self, ids: Iterable[str]) -> list[Memory]:
        """The memories of these full ids as last read (no re-read; ids no longer there are left out).
        Only found under the lock; built after it, so a search waits the less for a background
        thread's read."""
        with self._reading(False, True):
            found = [(mid, h) for mid in ids if (h := self._at(mid)) is not None]
        return [self._build(mid, h) for mid, h in found]

    def get(self, mid: str) -> Memory:
        """The memory with id ``mid`` (or a unique prefix of it). Raises rather than answer from a
        cache it could not bring up to date (``StoreUnavailableError`` for a database)."""
        with self._reading(True, True, strict=True):
            full = full_id(self._ids(), mid)  # an ambiguous prefix raises its own error
            found = self._at(full)
            if found is None:
                raise MemoryNotFoundError(f"no memory with id {mid!r} in {self.location}")
            return self._build(full, found)

    def pinned(self) -> list[Memory]:
        return [m for m in self if m.pinned]

    @property
    def index(self) -> BM25Index:
        return self._index

    def similarities(self, query: str, k: int, exclude: Collection[str] = ()) -> dict[str, float] | None:
        return None  # BM25 only; a backend with a vector side says what it finds

    def search(
        self, query: str, k: int = 5, *, min_score: float | None = None, context: Sequence[str] = (),
        exclude: Collection[str] = (), refresh: bool = True, wait: bool = True,
    ) -> list[Hit]:
        """The memories most relevant to ``query``, best first (score, then id); ids in ``exclude``
        are left out of the k (the replay strategy's memories already in front of the model).
        ``refresh=False`` searches the memories as last read; ``wait=False`` raises
        ``StoreBusyError`` rather than wait for another thread. A database store never raises for
        the database: unreachable, it searches its cache."""
        with self._reading(refresh, wait):
            found = self._found(query, k, min_score if min_score is not None else self.min_score, context, exclude)
        # built after the lock: a handle's memory never changes
        return with_prior(found, k, self.track, self._lifecycle_of, self._kind, self._build)

    def _lifecycle_of(self) -> Lifecycle:
        return self.lifecycle

    # ---------------------------------------------------------------- writing

    def add(
        self,
        text: str,
        tags: Sequence[str] = (),
        pinned: bool = False,
        *,
        topic: str | None = None,
        date: str | None = None,
        cue: str = "explicit",
        replaces: str | None = None,
    ) -> Memory:
        """Write one memory (a markdown store: to ``MEMORY.md``, under ``## topic``). Adding a text
        that is already stored returns the stored memory (with the new tags and pin merged in) and
        reinforces it. What is returned is what reads back: text that cannot be stored exactly
        raises ``InvalidMemoryError``. ``cue`` says how it got in (``explicit``: a person;
        ``captured``, ``distilled``, ``imported``): it weighs in its stability (see ``lifecycle``).

        Memory stays true (``_supersede``): a new value of an active memory's subject supersedes
        it (archived as ``superseded``, linked both ways), the same thing in other words reinforces
        the memory that says it (and is what is returned), a doubtful pair is kept and marked in
        conflict. ``replaces`` (an id or a unique prefix): this memory supersedes that one, whatever
        the words (an edit, a correction)."""
        return self._add_many([Memory.create(text, tuple(tags), pinned, topic, date)], cue, replaces)[0]

    def add_many(self, memories: Iterable[Memory | str], *, cue: str = "explicit") -> list[Memory]:
        """Write many memories in one write (each settled as ``add`` says)."""
        return self._add_many(memories, cue)

    def _settling(self, fresh: Sequence[Memory], restored: bool, here: Callable[[Memory], bool]) -> Plan:
        """What writing ``fresh`` (memories the store does not hold) does to the active ones
        (``_supersede.plan``; ``here``: whether a look-alike may be removed). A restored memory is
        weighed without its date (restoring an old value is going back to it now, not a value older
        than the one that replaced it) and never merged into a look-alike (the restore asked for it)."""
        plan = _supersede.plan([replace(m, date=None) for m in fresh] if restored else fresh,
                               _supersede.candidates(self.search), here)
        if restored:
            plan.duplicates.clear()
        return plan

    def _conflicts_of(self, mid: str) -> list[str]:
        return list(self.lifecycle.links(mid).get("conflicts", ()))

    def _record_write(self, result: Sequence[Memory], new: Collection[str], gone: Sequence[Memory], plan: Plan,
                      cue: str) -> None:
        """A write's lifecycle records (both backends' ``_add_many`` end with it): ``new`` added with
        ``cue``, the rest of ``result`` reinforced (said again), ``gone`` forgotten (superseded),
        and the supersession links of ``plan``."""
        if not self.track:
            return
        self.lifecycle.added([m for m in result if m.id in new], cue)
        self.lifecycle.reinforce([m.id for m in result if m.id not in new])
        if gone:
            self.lifecycle.forgotten([m.id for m in gone])
        self.lifecycle.link(links_of(plan, result, self._conflicts_of))

    def forget(self, mid: str, *, reason: str | None = "forgotten") -> Memory:
        """Remove a memory, into the archive tagged ``reason`` (written there first: a crash in
        between leaves a copy, never a loss). ``reason=None`` deletes it outright (what moves
        between the inbox and the store). Returns what was removed. ``mid`` may be a unique prefix
        of the id."""
        if reason is not None and reason not in ARCHIVE_REASONS:
            raise ValueError(f"reason must be one of {', '.join(ARCHIVE_REASONS)}, got {reason!r}")
        return self._forget(mid, reason)

    def archive_copy(self, mems: Iterable[Memory], reason: str) -> None:
        """Write ``mems`` to the archive in one write, each tagged with why (only the latest why)
        and with its own date; the caller removes them where they were."""
        self.archive.add_many([archived(m, reason) for m in mems])

    def restore(self, mid: str) -> Memory:
        """Bring a memory back from the archive (``mid``: its id or a unique prefix), without the
        archive's reason tag, as it was: its text (relative dates not made absolute from today)
        and the date it was said. It counts as said again (its metadata goes on where it was).
        A rejected merge proposal (``_inbox.is_merge``) is no memory: it goes back to the inbox,
        to be approved or rejected again."""
        was = self.archive.get(mid)
        back = Memory.create(was.text, [t for t in was.tags if t not in ARCHIVE_REASONS], was.pinned, was.topic,
                             was.date)
        if is_merge(back):
            back = self.inbox._add_many([back], cue_of(was), restored=True)[0]
        else:
            # never merged into a look-alike (the archived copy goes next); a value it had been replaced
            # by is superseded by it in turn (archived, linked): restoring an old value is going back to it
            back = self._add_many([back], cue_of(was), restored=True)[0]
        self.archive.forget(was.id, reason=None)
        return back

    # ---------------------------------------------------------------- event logs

    def append_event(self, log: str, record: Mapping[str, Any]) -> None:
        """Append one record to an event log (``EVENT_LOGS``), bounded by the backend."""
        self.append_events(log, (record,))
