"""The markdown memory store: files on disk are the source of truth, an index is kept beside them.

Every read first checks the files' (mtime, size, inode); only a changed file is parsed again and
only the memories that changed are re-indexed, so hand edits show up on the next call and nothing
is re-read when nothing changed. Writes hold an inter-process lock (``.lock`` in the directory):
an add appends to the file when its topic is the last one (``O_APPEND``: a hand edit appending at
the same moment is never lost; without reading the file when the cache is current), else the file
is replaced atomically (temp file + rename, the file's permissions kept), and bytes a hand edit
appended meanwhile are carried over.

The first load starts from the index snapshot ``.index`` when it matches the files (see
``_snapshot``): a large store then opens without parsing or indexing anything. In memory, each
file's memories are kept as columns and a ``Memory`` is built when asked for (see ``_table``).

Locks, always in this order: the directory's file lock (writers only), then the store's thread
lock, held only for in-memory work and re-reading changed files. A reader never takes the file
lock, so a reader never waits on a writer's disk I/O.

Symlinks: every path below the memory directory (``root``: the one a person named; a namespace's,
the archive's and the inbox's stores keep their tree's root) goes through ``memwire._paths``: a
symlink at any component is never read, written, renamed or removed through. A memory file that is
a symlink is not read (reported as a problem); a write through one raises ``MemoryFileError``.

Here: the store, its reads and its keeping current. Its parts: ``_store_files`` (a directory's
files and the byte-level helpers of writes), ``_store_write`` (the write path), ``_store_names``
(namespaces, event logs, id prefixes) and ``_store_checks`` (what a new memory must be).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import stat
import threading
import weakref
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _paths
from .._errors import MemoryFileError, NamespaceError, StoreBusyError
from . import _snapshot
from ._capture_queue import FileQueue, queue_files
from ._index import DEFAULT_MIN_SCORE, BM25Index
from ._lifecycle import Lifecycle, Scoring
from ._logfile import append_jsonl_many, read_jsonl
from ._model import Memory
from ._protocol import CaptureQueue, LedgerKinds, LedgerT

# re-exported (``X as X``): what other modules and the tests import from here
from ._store_base import _PRIOR_POOL as _PRIOR_POOL
from ._store_base import Found as Found
from ._store_base import index_hits as index_hits
from ._store_base import with_prior as with_prior
from ._store_checks import ARCHIVE_REASONS as ARCHIVE_REASONS
from ._store_checks import DEFAULT_TOPIC as DEFAULT_TOPIC
from ._store_checks import MAX_MEMORY_CHARS as MAX_MEMORY_CHARS
from ._store_checks import MAX_TOPIC_CHARS as MAX_TOPIC_CHARS
from ._store_checks import _checked as _checked
from ._store_checks import archived as archived
from ._store_checks import cue_of as cue_of
from ._store_files import _DIR_TICK_NS as _DIR_TICK_NS
from ._store_files import _FINE_TICK_NS as _FINE_TICK_NS
from ._store_files import MAIN_FILE as MAIN_FILE
from ._store_files import _Dir as _Dir
from ._store_files import _read_all as _read_all
from ._store_files import fine_tick_ns as fine_tick_ns
from ._store_names import EVENT_LOGS as EVENT_LOGS
from ._store_names import MIN_ID_PREFIX as MIN_ID_PREFIX
from ._store_names import _case_twin, namespace_dirs
from ._store_names import event_log_name as event_log_name
from ._store_names import fold_namespace as fold_namespace
from ._store_names import full_id as full_id
from ._store_names import validate_namespace as validate_namespace
from ._store_write import MarkdownWrites
from ._table import Kind, Merged, Table

__all__ = [
    "ARCHIVE_REASONS",
    "EVENT_LOGS",
    "MAIN_FILE",
    "MemoryStore",
    "archived",
    "cue_of",
    "event_log_name",
    "fold_namespace",
    "full_id",
    "index_hits",
    "validate_namespace",
    "with_prior",
]

if TYPE_CHECKING:
    from ._embed_side import SemanticSide

log = logging.getLogger("memwire")

ARCHIVE_DIR = "archive"
INBOX_DIR = "inbox"
# a read that must not wait (a search on the event loop) still waits this long for the lock: a
# background thread's read holds it for tens of microseconds, a hop to a worker thread costs more
BUSY_WAIT_S = 0.002


class MemoryStore(MarkdownWrites):
    """Memories kept as markdown files in a directory, searchable with BM25.

    ``MemoryStore(dir)`` reads and writes ``dir``. With ``global_dir`` it also reads that
    directory (the user's global scope); a memory with the same id in both comes from ``dir``
    (the project wins). Writes always go to ``dir``, except forgetting or pinning a memory that
    only the global scope holds.
    """

    remote = False  # reads are local file work (a PostgreSQL store's are not: see PgStore.remote)

    def __init__(
        self,
        dir: str | os.PathLike[str],
        *,
        global_dir: str | os.PathLike[str] | None = None,
        min_score: float | None = None,
        scoring: Scoring | None = None,
        track: bool = True,
        root: str | os.PathLike[str] | None = None,
        timezone: str | None = None,
        retrieval: str = "bm25",
        embedding_model: str | os.PathLike[str] | None = None,
    ) -> None:
        self.path = Path(dir)
        self.timezone = timezone  # the day a dateless new memory was said, for its relative dates
        # the memory directory a person named (``dir`` itself, unless this is a namespace's, the
        # archive's or the inbox's store): no path below it is read or written through a symlink
        self.root = Path(root) if root is not None else self.path
        self.scoring = scoring
        self.track = track  # record lifecycle metadata (the inbox and the archive do not)
        self.screens = True  # refuse what may never be stored (the archive takes copies as they were)
        # new memories supersede, reinforce or conflict with active ones (not in the archive, the inbox)
        self.settles = True
        self._lifecycle: Lifecycle | None = None
        self._archive: MemoryStore | None = None
        self._inbox: MemoryStore | None = None
        self._dirs = [_Dir(self.path, self.root)]
        if global_dir is not None and Path(global_dir).resolve() != self.path.resolve():
            self._dirs.insert(0, _Dir(Path(global_dir), Path(global_dir)))  # global first: the project overrides it
        self.min_score = min_score
        self._index = BM25Index()
        # retrieval = "hybrid": a vector side beside the index (``_embed_side``); None when the
        # model or the extra is missing (one warning, then BM25 alone)
        if retrieval not in ("bm25", "hybrid"):
            raise ValueError(f"retrieval must be 'bm25' or 'hybrid', not {retrieval!r}")
        self.retrieval, self.embedding_model = retrieval, embedding_model
        self._semantic: SemanticSide | None = None
        if retrieval == "hybrid":
            from ._embed_side import open_side  # numpy: only with hybrid (start-up stays light)

            self._semantic = open_side(embedding_model)
        self._merged = Merged()  # what readers see, by id (see _table)
        self._lock = threading.RLock()
        self.version = 0  # bumps whenever the memory set changes
        self._snapshot_version = -1  # the version the index snapshot on disk holds
        self._loaded = False

    @classmethod
    def for_namespace(cls, root: str | os.PathLike[str], namespace: str | None, **kw: Any) -> MemoryStore:
        """The store of a namespace: ``root`` itself for the default one, else ``root/namespaces/NAME``
        (isolated: never the default namespace's files, never the global scope)."""
        if namespace in (None, "", "default"):
            return cls(root, **kw)
        kw.pop("global_dir", None)
        path = Path(root) / "namespaces" / validate_namespace(namespace)
        if not os.path.lexists(path) and (twin := _case_twin(Path(root), namespace)) is not None:
            raise NamespaceError(f"namespace {namespace!r} differs from the existing {twin!r} only in case: namespaces "
                                 f"are compared case-insensitively (NFKC case-folded); use {twin!r}")
        return cls(path, root=root, **kw)

    def namespace_store(self, namespace: str | None) -> MemoryStore:
        """The store of ``namespace`` in the same tree as this one (``for_namespace`` of its root),
        with this store's settings."""
        return MemoryStore.for_namespace(self.root, namespace, min_score=self.min_score,
                                         scoring=self.scoring, track=self.track, timezone=self.timezone,
                                         retrieval=self.retrieval, embedding_model=self.embedding_model)

    @property
    def location(self) -> str:
        """Where the memories are, for messages: the directory."""
        return str(self.path)

    def has_namespace(self, namespace: str) -> bool:
        """Whether the tree of this store holds ``namespace`` (its directory exists; one reached
        through a symlink is not one of this tree's)."""
        try:
            where = self.root / "namespaces" / validate_namespace(namespace)
            return stat.S_ISDIR(_paths.lstat(self.root, where).st_mode)
        except (FileNotFoundError, MemoryFileError):
            return False

    def count_namespaces(self) -> int:
        """How many named namespaces the tree of this store holds."""
        return len(namespace_dirs(self.root))

    def case_twin(self, namespace: str) -> str | None:
        """An existing namespace of this tree whose name folds to ``namespace``'s, when ``namespace``
        itself does not exist (two that exist already, made before this rule, keep being served)."""
        names = namespace_dirs(self.root)
        if namespace in names:
            return None
        folded = fold_namespace(namespace)
        return next((n for n in names if fold_namespace(n) == folded), None)

    def queued_namespaces(self) -> list[str]:
        """The namespaces of this tree whose capture queue files are there (entries may wait)."""
        return [n for n in namespace_dirs(self.root) if queue_files(self.root / "namespaces" / n, self.root)]

    def exists(self) -> bool:
        """Whether the memory directory is there (it is made on first write)."""
        return self.path.is_dir()

    @property
    def lifecycle(self) -> Lifecycle:
        """The memories' metadata (created, reinforced, evidence, cue, uses) and their scores."""
        if self._lifecycle is None:
            self._lifecycle = Lifecycle(self.path, scoring=self.scoring, root=self.root)
        return self._lifecycle

    @property
    def archive(self) -> MemoryStore:
        """Where forgotten, superseded, rejected and decayed memories go (``DIR/archive``): never
        injected, searchable, restorable. One store per store: it re-reads only what changed."""
        if self._archive is None:
            self._archive = MemoryStore(self.path / ARCHIVE_DIR, min_score=self.min_score, track=False, root=self.root)
            self._archive.screens = self._archive.settles = False
        return self._archive

    @property
    def inbox(self) -> MemoryStore:
        """Where captured memories wait for review (``DIR/inbox``, see ``_inbox``): never searched
        with this store."""
        if self._inbox is None:
            self._inbox = MemoryStore(self.path / INBOX_DIR, min_score=self.min_score, track=False, root=self.root,
                                      timezone=self.timezone)
            self._inbox.settles = False  # captures wait there as said; approving one settles it
        return self._inbox

    # ---------------------------------------------------------------- event logs

    def append_events(self, log: str, records: Sequence[Mapping[str, Any]]) -> None:
        """``append_event`` of each of ``records``, in order, with one open of the log:
        ``DIR/.LOG.jsonl``, bounded (see ``_logfile``), never through a symlink."""
        append_jsonl_many(self.path / f".{event_log_name(log)}.jsonl", records, root=self.root)

    def read_events(self, log: str) -> list[dict[str, Any]]:
        """The records of an event log, oldest first."""
        return read_jsonl(self.path / f".{event_log_name(log)}.jsonl", root=self.root)

    def open_ledger(self, session: str, kinds: LedgerKinds[LedgerT]) -> LedgerT:
        """The ledger file of ``session`` beside the memory files (``Store.open_ledger``)."""
        return kinds.file(self.path, session, self.root)

    def capture_queue(self) -> CaptureQueue:
        """The directory's queue file of captured statements (``Store.capture_queue``)."""
        return FileQueue(self.path, self.root)
    # ---------------------------------------------------------------- reading

    def refresh(self) -> None:
        """Pick up changed files (also done by every read). The first load starts from the index
        snapshot (``_snapshot``: only what it verifies against the files) and writes one when it
        had to parse files."""
        with self._lock:
            first = not self._loaded
            whole = first and _snapshot.restore(self)
            if whole:  # every file as recorded: the index as recorded
                self._merged = Merged.of(d.tables() for d in self._dirs)
                if self._semantic is not None:  # the vectors saved with the snapshot, else embedded now
                    self._restore_vectors()
                self.version += 1
                self._snapshot_version = self.version
            changed = False
            for d in self._dirs:
                changed = d.refresh() or changed
            if changed or (first and not whole):
                self._rebuild_merged()
            self._loaded = True
            if first:
                _LOADED.add(self)
                if not whole:
                    self._save_snapshot()
                if len(self._merged) >= _snapshot.MIN_MEMORIES:
                    _trim_heap()

    def _save_snapshot(self) -> None:
        """Write the snapshot when it would differ from the last one (call with the lock held)."""
        if self._snapshot_version == self.version:
            return
        try:
            if _snapshot.save(self):
                self._snapshot_version = self.version
                if self._semantic is not None:
                    from ._embed_side import save_vectors

                    save_vectors(self._semantic, self.root, self.path, self._vector_items())
        except Exception as exc:
            log.warning("memwire: could not write the index snapshot in %s (%s: %s)", self.path, type(exc).__name__,
                        exc)

    def ready(self) -> bool:
        """True when the files are loaded and unchanged since: a search is in-memory work only.
        A directory this process is writing to counts as unchanged: a read meanwhile sees the
        memories as they were (the write patches the cache when it is done), instead of waiting
        for the writer (the capture worker appending, say) to re-read what it wrote."""
        return self._loaded and all(d.writing or d.current() for d in self._dirs)

    @contextlib.contextmanager
    def _reading(self, refresh: bool, wait: bool, strict: bool = False) -> Iterator[None]:
        """The store's lock for a read; ``wait=False`` raises ``StoreBusyError`` instead of waiting
        more than ``BUSY_WAIT_S`` (a caller on a time budget then reads elsewhere, under its
        budget): a background thread's short read (telemetry's ``known``) is waited out, a
        re-read or a write is not. Always ``strict``: a file that cannot be read raises."""
        if not (self._lock.acquire() if wait else self._lock.acquire(timeout=BUSY_WAIT_S)):
            raise StoreBusyError(f"{self.path}: being re-read or written by another thread")
        try:
            if refresh or not self._loaded:
                self.refresh()
            yield
        finally:
            self._lock.release()

    def _vector_items(self) -> list[tuple[str, str]]:
        return [(m.id, m.search_text()) for m in self._merged.values()]

    def _restore_vectors(self) -> None:
        """The vector side at a snapshot's first load: the vectors saved beside it when they were
        made from these very memories by this model, else every memory embedded now (~50 us each)."""
        from ._embed_side import load_vectors

        assert self._semantic is not None
        items = self._vector_items()
        try:
            if load_vectors(self._semantic, self.root, self.path, items):
                return
        except Exception as exc:  # fail open: embed them instead
            log.warning("memwire: could not read the saved vectors in %s (%s)", self.path, type(exc).__name__)
        self._semantic.add_many(items)

    def _rebuild_merged(self) -> None:
        merged = Merged.of(d.tables() for d in self._dirs)
        old = self._merged
        gone = [mid for mid in old if mid not in merged]
        for mid in gone:
            self._index.remove(mid)
            if self._semantic is not None:
                self._semantic.remove(mid)
        if not len(old):  # the first load: every memory, built in file order
            fresh: Collection[str] = merged
            self._index.add_many((m.id, m.search_text(), m.date) for m in merged.values())
        else:
            fresh = [mid for mid in merged if not merged.same(mid, old)]
            self._index.add_many((mid, m.search_text(), m.date) for mid in fresh for m in (merged.get(mid),) if m)
        if self._semantic is not None:
            self._semantic.add_many((mid, m.search_text()) for mid in fresh for m in (merged.get(mid),) if m)
        self._merged = merged
        if gone or fresh:
            self.version += 1

    def _resolve(self, mid: str, old: Memory | None) -> None:
        """Show an id a write added to a table of the view (cheaper than a full merge); ``old``:
        what it showed before (from the global scope, say)."""
        table = None
        for d in self._dirs:  # the last directory holding it wins
            name = d.find(mid)
            if name is not None:
                table = d.files[name]
        assert table is not None
        mem = table.get(mid)
        assert mem is not None
        self._merged.put(mid, table)
        if mem != old:
            self._index.add(mid, mem.search_text(), mem.date)
            if self._semantic is not None:
                self._semantic.add(mid, mem.search_text())
            self.version += 1

    @property
    def problems(self) -> list[MemoryFileError]:
        """Problems found in the memory files (bad UTF-8, empty bullets, ...), with path and line."""
        self.refresh()
        return [p for d in self._dirs for ps in d.problems.values() for p in ps]

    def memories(self, *, refresh: bool = True, wait: bool = True) -> list[Memory]:
        """Every memory, in file order (the project's files after the global ones)."""
        with self._reading(refresh, wait):
            listing = self._merged.listing()
        return list(listing())  # built outside the lock (see Merged.listing)

    # the primitives of ``StoreBase``'s reads: a handle is ``Merged.at``'s (table, row)
    def _ids(self) -> Merged:
        return self._merged

    def _at(self, mid: str) -> tuple[Table, int] | None:
        return self._merged.at(mid)

    def _kind(self, handle: Any) -> Kind:
        at: tuple[Table, int] = handle
        return at[0].kind_at(at[1])

    def _build(self, mid: str, handle: Any) -> Memory:
        at: tuple[Table, int] = handle
        return at[0].memory_at(at[1], mid)  # a table's rows never change: built after the lock

    def _found(self, query: str, k: int, cut: float | None, context: Sequence[str],
               exclude: Collection[str]) -> list[Found]:
        found = super()._found(query, k, cut, context, exclude)
        if self._semantic is not None:  # hybrid: semantic hits past their cut fill in after BM25's
            from ._embed_side import fills_in  # loaded with the semantic side

            if fills_in(len(found), k, self.lifecycle.scoring.rank_prior if self.track else 0.0):
                found = self._with_semantic(found, query, k, cut, exclude)
        return found

    def similarities(self, query: str, k: int, exclude: Collection[str] = ()) -> dict[str, float] | None:
        if self._semantic is None:
            return None
        return {h.id: h.similarity for h in self._semantic.search(query, k, exclude)}

    def _with_semantic(self, found: list[Found], query: str, k: int, cut: float | None,
                       exclude: Collection[str]) -> list[Found]:
        """``found`` and, after it, what the vector side finds past its calibrated cut (``fuse``).
        Fails open: an error here leaves BM25's hits as they were."""
        from ._embed_side import fuse

        assert self._semantic is not None
        try:
            semantic = self._semantic.search(query, k, exclude)
            if not semantic:
                return found
            handles = {mid: h for mid, _, h in found}
            floor = cut if cut is not None else DEFAULT_MIN_SCORE
            fused = fuse([(mid, score) for mid, score, _ in found], semantic, len(found) + k, floor)
            out = []
            for mid, score in fused:
                h = handles[mid] if mid in handles else self._merged.at(mid)
                if h is not None:
                    out.append((mid, score, h))
            return out
        except Exception as exc:  # fail open: BM25's hits stand
            log.warning("memwire: semantic search failed in %s (%s); BM25 hits only", self.path, type(exc).__name__)
            return found

    def __repr__(self) -> str:
        return f"MemoryStore({str(self.path)!r})"


_LOADED: weakref.WeakSet[MemoryStore] = weakref.WeakSet()  # stores loaded in this process


@atexit.register
def _save_snapshots() -> None:
    """At exit, the snapshot of every store changed since its last one (adds included)."""
    for store in list(_LOADED):
        with store._lock:
            store._save_snapshot()


def _trim_heap() -> None:
    """Give the C heap's free pages back to the system after a large load: its temporaries (the
    snapshot's arrays, decoded columns, a parse's lines) leave pages that glibc keeps, ~100 bytes
    a memory of resident memory for nothing. Elsewhere (no glibc) nothing to do."""
    global _MALLOC_TRIM
    if _MALLOC_TRIM is None:
        import ctypes

        try:  # the process's own symbols: libc's where it is glibc
            _MALLOC_TRIM = ctypes.CDLL(None).malloc_trim
        except Exception:
            _MALLOC_TRIM = False
    if _MALLOC_TRIM:
        _MALLOC_TRIM(0)


_MALLOC_TRIM: Any = None  # glibc's malloc_trim, False where there is none
