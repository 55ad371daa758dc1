"""The store contract: what the rest of memwire may ask of a memory store, whatever its backend.

Two backends implement it: the markdown directory (``MemoryStore``, ``_store``) and PostgreSQL
(``PgStore``, ``memory.postgres``). Callers (the middleware, the modes, the adapters, the server,
the command line) type a store as ``Store`` and use only what is listed here; a new backend is a
class with these members (``tests/memory/test_protocol.py`` compares every signature with both
backends', ``tests/memory/test_store.py`` runs the behaviour on both). What the two backends share
(the reads, ``add``, ``restore``, ...) is written once in ``_store_base.StoreBase`` over a few
primitives; a new backend subclasses it (that module lists the primitives).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from .._errors import MemoryFileError
from ._capture_queue import FileQueue, MemoryQueue, PgQueue
from ._index import BM25Index
from ._lifecycle import Lifecycle, Scoring
from ._model import FileEdit, Hit, Memory

__all__ = ["CaptureQueue", "LedgerKinds", "LedgerT", "Store"]

_Made_co = TypeVar("_Made_co", covariant=True)  # what a LedgerKinds makes
LedgerT = TypeVar("LedgerT")  # the ledger a caller of Store.open_ledger gets

# a store's durable queue of captured statements (``middleware._capture``): a markdown directory's
# file, a PostgreSQL namespace's table (``MemoryQueue``: what a store with neither would keep)
CaptureQueue = FileQueue | PgQueue | MemoryQueue


class LedgerKinds(Protocol[_Made_co]):
    """How the modes make a session ledger of each kind of place (``policies.modes._replay``): a
    store picks the one that is its own (``Store.open_ledger``). The ledgers live above memory, so
    the store is handed their constructors rather than importing them."""

    def file(self, directory: Path, session: str, root: Path) -> _Made_co:
        """A ledger file of ``session`` in ``directory`` (nothing below ``root`` through a symlink)."""
        ...

    def database(self, connection: Callable[[], Any], namespace: str, session: str) -> _Made_co:
        """The ledger rows of ``session`` in ``namespace`` of the database ``connection`` opens."""
        ...


@runtime_checkable
class Store(Protocol):
    """One namespace's memories (or its archive or inbox) in one backend."""

    # -- settings and identity
    remote: bool  # reads are database round trips: an async caller runs them in a thread
    track: bool  # lifecycle metadata is recorded (not for the inbox and the archive)
    # new memories settle against the active ones (supersede, reinforce, conflict: ``_supersede``);
    # not in the inbox and the archive, which take what they are given
    settles: bool
    version: int  # bumps whenever the memory set this store holds changes
    min_score: float | None
    scoring: Scoring | None
    timezone: str | None  # the day a dateless new memory was said in (its relative dates), None: the local one

    @property
    def location(self) -> str:
        """Where the memories are, for a person (a directory, a redacted URL and namespace)."""
        ...

    # -- namespaces, and the store's own archive and inbox
    def namespace_store(self, namespace: str | None) -> Store: ...

    def has_namespace(self, namespace: str) -> bool: ...

    def count_namespaces(self) -> int: ...

    def case_twin(self, namespace: str) -> str | None:
        """An existing namespace whose name folds to ``namespace``'s (``fold_namespace``), when
        ``namespace`` itself does not exist: a directory tree's names could be one directory on a
        case-insensitive filesystem; a database's never are one another's (None)."""
        ...

    def queued_namespaces(self) -> list[str]:
        """The namespaces of this store's tree or database whose capture queues hold entries (what a
        restart left; a database's own namespace left out)."""
        ...

    def exists(self) -> bool:
        """Whether the store's place is there: a markdown store's directory (made on first write), a
        database's namespace always (whether the database answers is another matter)."""
        ...

    @property
    def archive(self) -> Store: ...

    @property
    def inbox(self) -> Store: ...

    # -- reading
    def ready(self) -> bool:
        """The memories are loaded (a read would not wait for the disk or the database)."""
        ...

    def refresh(self) -> None: ...

    @property
    def problems(self) -> list[MemoryFileError]:
        """The files that could not be read (a database store has none)."""
        ...

    def memories(self, *, refresh: bool = True, wait: bool = True) -> list[Memory]: ...

    def __iter__(self) -> Iterator[Memory]: ...

    def __len__(self) -> int: ...

    def __contains__(self, mid: object) -> bool: ...

    def missing(self, ids: Iterable[str], *, refresh: bool = True, wait: bool = True) -> set[str]: ...

    def known(self, ids: Iterable[str]) -> list[Memory]: ...

    def get(self, mid: str) -> Memory: ...

    def pinned(self) -> list[Memory]: ...

    @property
    def index(self) -> BM25Index:
        """The BM25 index ``search`` ranks with, as last read (``_why`` explains a search with it)."""
        ...

    def similarities(self, query: str, k: int, exclude: Collection[str] = ()) -> dict[str, float] | None:
        """Hybrid retrieval: the similarity of each memory the vector side finds for ``query`` (its
        ``k`` best past its calibrated cut); None for a store that searches with BM25 only."""
        ...

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        min_score: float | None = None,
        context: Sequence[str] = (),
        exclude: Collection[str] = (),
        refresh: bool = True,
        wait: bool = True,
    ) -> list[Hit]: ...

    # -- writing
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
        """Write one memory; a new value of an active memory's subject supersedes it, the same thing
        in other words reinforces it, a doubtful pair is marked in conflict (``_supersede``);
        ``replaces``: the id this one supersedes, whatever the words."""
        ...

    def add_many(self, memories: Iterable[Memory | str], *, cue: str = "explicit") -> list[Memory]: ...

    def pin(self, mid: str, pinned: bool = True) -> Memory: ...

    def forget(self, mid: str, *, reason: str | None = "forgotten") -> Memory: ...

    def archive_copy(self, mems: Iterable[Memory], reason: str) -> None: ...

    def restore(self, mid: str) -> Memory:
        """Bring a memory back from the archive as it was: its text (no relative date made absolute
        from the restore's day) and the date it was said; a rejected merge proposal goes back to
        the inbox (it is no memory)."""
        ...

    def edit_file(self, name: str, edit: Callable[[str | None], str | None], *, cue: str = "explicit") -> FileEdit:
        """Replace one memory file as a whole with what ``edit`` returns for its text (the memory
        tool's way); what the edit removes or replaces is archived and linked like an add's
        (``FileEdit`` says what). A store of rows has no files: it raises ``UsageError``."""
        ...

    def rename_file(self, old: str, new: str) -> None: ...

    # -- lifecycle records and event logs
    @property
    def lifecycle(self) -> Lifecycle: ...

    def append_event(self, log: str, record: Mapping[str, Any]) -> None: ...

    def append_events(self, log: str, records: Sequence[Mapping[str, Any]]) -> None: ...

    def read_events(self, log: str) -> list[dict[str, Any]]: ...

    # -- what the middleware and the modes keep beside the memories, in the same backend
    def open_ledger(self, session: str, kinds: LedgerKinds[LedgerT]) -> LedgerT:
        """The ledger of ``session`` in this store's namespace, made by the one of ``kinds`` that is
        this backend's (a file beside the memory files, rows in the store's database)."""
        ...

    def capture_queue(self) -> CaptureQueue:
        """A new handle on this namespace's queue of captured statements (``middleware._capture``)."""
        ...
