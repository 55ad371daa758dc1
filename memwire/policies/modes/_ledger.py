"""The replay ledger: per session, the block memwire inserted before each user message, the
session's profile block and the other modes' turn memos, the source of truth for every process.

- entries: one per user message (its ledger key, see ``_replay``), the first request of a turn to
  commit wins, so every request of that turn, in any thread or any process serving the directory,
  gets the same bytes (:class:`Ledger`);
- storage: one JSON Lines file per session under the memory directory (``.ledger/<hash of the
  session>.jsonl``: found in O(1)), the source of truth for every process (``memwire proxy
  --workers N``): a process checks it with one ``lstat`` per request and reads only what was
  appended since; a commit locks the file, reads its tail and appends a line (see :class:`Ledger`).
  The files are bounded in entries, number and age; the directory is pruned now and then on a
  background thread, never per session. The other modes' turn memos live in the same file. On
  PostgreSQL the same ledger is kept as rows (``_ledger_pg``).

Symlinks: memwire never follows one out of the memory directory. When ``.ledger`` or a session's
ledger file is a symlink (or not a plain directory / file), that ledger is kept in memory only, for
this process, and a warning is logged once; nothing is read, written, pruned or deleted through
it. A rewritten ledger file keeps its permissions.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
import stat
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import _paths
from ..._errors import MemoryFileError
from ..._json import dump_json
from ...memory._protocol import Store
from .._tokens import count_tokens
from ._render import render_lines

__all__ = ["MEMO_PREFIX", "PROFILE_KEY", "Ledger", "LedgerEntry", "flush", "ledger_path"]

log = logging.getLogger("memwire")

LEDGER_DIR = ".ledger"
MAX_ENTRIES = 500          # per session; the oldest go first (a compaction)
MAX_FILES = 1000           # sessions kept per memory directory
MAX_AGE_S = 30 * 24 * 3600  # sessions untouched this long are pruned
MAX_LINES = 2 * MAX_ENTRIES  # lines in a ledger file before it is rewritten with its newest entries
PRUNE_EVERY_FILES = 100     # new ledgers one process creates between prunes of the directory ...
PRUNE_EVERY_S = 3600        # ... or seconds since any process last pruned it
MEMO_PREFIX = "memo:"       # the turn memos of the other modes (``_memo.Memo``) share the file
_VERSION = 3  # keys by message identity (2: raw JSON); a JSON Lines file: a header line, then one entry per line
PROFILE_KEY = "profile"  # the profile's line in a ledger file (message keys are "<hash>#<n>")


@dataclass(frozen=True)
class LedgerEntry:
    """The block inserted before one user message ("" when that turn got none)."""

    key: str
    ids: tuple[str, ...] = ()
    lines: tuple[str, ...] = ()   # the rendered memory lines, so a forgotten one can be re-rendered out
    text: str = ""
    tokens: int = 0
    skipped: str | None = None    # why that turn got no block (gate, nothing_relevant, ...)

    def without(self, gone: set[str], model: str | None) -> LedgerEntry:
        """This entry with the memories in ``gone`` rendered out of its block."""
        # strict=False: an entry read from a ledger file may hold fewer lines than ids (cut or edited by
        # hand); the ids without a line are dropped with the rest
        kept = [(mid, line) for mid, line in zip(self.ids, self.lines, strict=False) if mid not in gone]
        if not kept:
            return LedgerEntry(self.key)
        lines = tuple(line for _, line in kept)
        text = render_lines(lines)
        return LedgerEntry(self.key, tuple(mid for mid, _ in kept), lines, text, count_tokens(text, model))

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> LedgerEntry:
        return cls(str(d["key"]), tuple(d.get("ids", ())), tuple(d.get("lines", ())), str(d.get("text", "")),
                   int(d.get("tokens", 0)), d.get("skipped"))


class _Entries(tuple):  # type: ignore[type-arg]
    """Entries of the session, and the ledger generation they were read at (or a new turn's
    changes to them, computed from that generation): a commit keeps another writer's change to an
    entry made since (see ``Ledger.commit``). ``shown``: of the ledger's entries at ``gen``, those
    that hold a block (ids or text), by key, in turn order (None: not known; never changed)."""

    gen: int = -1
    shown: Mapping[str, LedgerEntry] | None = None
    ids: frozenset[str] = frozenset()  # the memory ids ``shown`` holds


def _holds(e: LedgerEntry) -> bool:
    return bool(e.ids or e.text)


class Ledger:
    """One session's ledger: the replay entries in turn order, the profile, and the turn memos of
    the other modes. Thread-safe.

    The file is the source of truth for every process serving the directory; this object is this
    process's view of it. ``sync()`` costs one ``lstat`` when nothing changed and reads only what
    other processes appended since. A commit takes the file's lock (``flock``), reads the tail,
    keeps the first writer of a turn (or of the profile), and appends one line per changed entry,
    synchronously (a few microseconds, no fsync). A line is an entry; a later line of the same key
    replaces it in place. The file is rewritten (atomically) only when it was not a valid ledger
    of this session, or holds more than ``MAX_LINES`` lines: then the newest ``MAX_ENTRIES``
    entries (and memos) are kept."""

    def __init__(self, path: Path | None, session: str = "", entries: Sequence[LedgerEntry] = (),
                 profile: LedgerEntry | None = None) -> None:
        self.path = path
        # the memory directory the ledger is under: no component below it may be a symlink (_paths)
        self.root = path.parent if path is not None else Path(".")
        self.session = session
        self._entries: dict[str, LedgerEntry] = {e.key: e for e in entries}
        self._memos: dict[str, LedgerEntry] = {}  # startup / drop / systemPromptPerTurn (``_memo.Memo``)
        self.profile = profile
        self._tuple: _Entries | None = None  # the entries as a tuple, at ``gen``
        # kept as entries change, so that a new turn handles its own entry, not every earlier one:
        self._shown: dict[str, LedgerEntry] = {}  # the entries that hold a block, in turn order (bounded
        #                                           by compaction: ``replay_max_tokens``)
        self._ids: dict[str, int] = {}            # memory id -> how many of them show it
        self._unverified: set[str] = set()        # ids shown since ``gone`` last looked
        self._verified: tuple[weakref.ref[Store], int] | None = None  # (store, version) it looked at
        self._gone: set[str] = set()              # ids missing from the store at that version
        self._reindex()
        self._lock = threading.RLock()
        self._file: tuple[int, int] | None = None  # (st_dev, st_ino) of the file this view has read
        self._header = b""    # its first line: an inode number is reused, a header (its "saved") is not
        self._sig: tuple[int, int, int, int] | None = None  # (dev, ino, size, mtime) when read to the end
        self._st: os.stat_result | None = None  # the locked file's, as the commit read it
        self._offset = 0      # bytes of it read (complete lines only)
        self._lines = 0       # lines after the header
        self._valid = True    # the file is this session's ledger (else the next commit rewrites it)
        self.gen = 0          # bumped by every change this view sees
        self._changed: dict[str, int] = {}  # key -> generation it last changed at
        self._reset = 0       # generation of the last full read (every key may have changed)

    @classmethod
    def load(cls, directory: Path, session: str, root: Path | None = None) -> Ledger:
        """The ledger of ``session`` in the memory directory ``directory`` (a store's, under the
        tree ``root`` a person named: ``directory`` itself when not given)."""
        path = ledger_path(directory, session)
        ledger = cls(path, session)
        ledger.root = directory if root is None else root
        if _unsafe(ledger.root, path):  # a symlink (or worse) where the ledger goes: kept in memory
            ledger.path = None
        ledger.sync()
        return ledger

    # ---------------------------------------------------------------- reading

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        return self.snapshot()

    def snapshot(self) -> _Entries:
        """The entries, the generation they are at and those that hold a block, together."""
        t = self._tuple
        if t is None or t.gen != self.gen:
            with self._lock:
                t = self._tuple
                if t is None or t.gen != self.gen:
                    t = _Entries(self._entries.values())
                    t.gen, t.shown, t.ids = self.gen, dict(self._shown), frozenset(self._ids)
                    self._tuple = t
        return t

    def get(self, key: str) -> LedgerEntry | None:
        return self._entries.get(key)

    def memo(self, key: str) -> LedgerEntry | None:
        return self._memos.get(key)

    def sync(self) -> None:
        """Read what other processes wrote since this view last looked (one lstat if nothing)."""
        path = self.path
        if path is None:
            return
        try:
            st = os.lstat(path)
        except OSError:  # no file yet (or none any more: pruned): what this view holds stands
            return
        if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == self._sig:
            return
        if not stat.S_ISREG(st.st_mode):  # became a symlink: never read or write through it
            if _unsafe(self.root, path):
                self.path = None
            return
        with self._lock:
            fd = _open(self.root, path, os.O_RDONLY)
            if fd is None:
                return
            try:
                self._read(fd)
            finally:
                os.close(fd)

    def _read(self, fd: int, st: os.stat_result | None = None) -> None:
        """Apply what the open file ``fd`` (``st``: its stat, if just taken) holds beyond what this
        view has read. Another file (the ledger was rewritten, or pruned and started anew) replaces
        this view once its header is read."""
        st = self._st = os.fstat(fd) if st is None else st
        if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == self._sig:
            return  # nothing changed since this view read or wrote it
        if (st.st_dev, st.st_ino) != self._file or st.st_size < self._offset or not self._same_header(fd):
            self._file, self._offset, self._lines, self._valid = (st.st_dev, st.st_ino), 0, 0, True
        self._sig = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if st.st_size <= self._offset or not self._valid:
            return
        os.lseek(fd, self._offset, os.SEEK_SET)
        data = _read_all(fd, st.st_size - self._offset)
        end = data.rfind(b"\n") + 1  # a line still being written (or cut short by a crash) waits
        if not end:
            return
        lines = data[:end].split(b"\n")[:-1]
        if self._offset == 0:
            self._start_over()
            if not self._header_ok(lines[0]):
                log.warning("memwire: ledger %s is not this session's ledger; starting a new one", self.path)
                self._valid, self._offset = False, st.st_size
                return
            self._header = lines[0] + b"\n"
            lines = lines[1:]
        self._offset += end
        self._lines += len(lines)
        for raw in lines:
            try:
                entry = LedgerEntry.from_json(json.loads(raw))
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # a torn line (a crash mid-write, a full disk) is skipped, not trusted
            self._apply(entry)

    def _start_over(self) -> None:
        """Forget every entry: what follows is the whole ledger (a full read)."""
        self._entries, self._memos, self.profile, self._tuple, self._changed = {}, {}, None, None, {}
        self._reindex()
        self.gen += 1
        self._reset = self.gen

    def _same_header(self, fd: int) -> bool:
        """Whether the file still starts with the header this view read (else it is another file
        that got the old one's inode number)."""
        if not self._offset or not self._valid:
            return True
        os.lseek(fd, 0, os.SEEK_SET)
        return _read_all(fd, len(self._header)) == self._header

    def _header_ok(self, raw: bytes) -> bool:
        try:
            meta = json.loads(raw)
        except ValueError:
            return False
        return isinstance(meta, dict) and meta.get("version") == _VERSION and meta.get("session") == self.session

    def _apply(self, entry: LedgerEntry) -> None:
        key = entry.key
        if key == PROFILE_KEY:
            self.profile = entry
        elif key.startswith(MEMO_PREFIX):
            self._memos[key] = entry
        else:
            old = self._entries.get(key)
            self._entries[key] = entry  # a key seen before keeps its place (turn order)
            self._tuple = None
            self._index(key, old, entry)
        self.gen += 1
        self._changed[key] = self.gen

    def _index(self, key: str, old: LedgerEntry | None, entry: LedgerEntry) -> None:
        """Keep ``_shown`` and ``_ids`` as ``entry`` replaces ``old`` (already in ``_entries``)."""
        shown, ids = self._shown, self._ids
        if old is not None and key in shown:
            for mid in old.ids:
                n = ids[mid] - 1
                if n:
                    ids[mid] = n
                else:
                    del ids[mid]
            if not _holds(entry):
                del shown[key]
                return
            shown[key] = entry  # keeps its place
        elif not _holds(entry):
            return
        elif old is None or next(reversed(self._entries)) == key:
            shown[key] = entry  # the newest entry: last in turn order
        else:  # an earlier entry gets a block (a turn that found nothing, filled): rare
            shown[key] = entry
            self._shown = {k: e for k, e in self._entries.items() if k in shown}
        for mid in entry.ids:
            n = ids.get(mid, 0)
            ids[mid] = n + 1
            if not n:
                self._unverified.add(mid)

    def _reindex(self) -> None:
        """Rebuild ``_shown`` and ``_ids`` from the entries (after a full read or a rewrite)."""
        self._shown = {k: e for k, e in self._entries.items() if _holds(e)}
        self._ids = {}
        for e in self._shown.values():
            for mid in e.ids:
                self._ids[mid] = self._ids.get(mid, 0) + 1
        self._unverified, self._verified, self._gone = set(self._ids), None, set()

    def gone(self, store: Store, since: _Entries, wait: bool = True) -> set[str]:
        """The memory ids the entries of ``since`` (a ``snapshot``) show that the store no longer
        has (as last read: ``store.missing(refresh=False)``). Asks the store only about ids shown
        since it last asked, unless the store's memory set changed since (its ``version``)."""
        with self._lock:
            if since.gen != self.gen or since.shown is None:  # changed meanwhile (another thread): ask about all
                return store.missing({mid for e in (since.shown or {}).values() for mid in e.ids}
                                     if since.shown is not None else {mid for e in since for mid in e.ids},
                                     refresh=False, wait=wait)
            version = store.version
            checked = self._verified
            same = checked is not None and checked[0]() is store and checked[1] == version
            todo = self._unverified if same else set(self._ids)
            found = store.missing(todo, refresh=False, wait=wait) if todo else set()
            gone = self._gone | found if same else found
            self._gone = {mid for mid in gone if mid in self._ids}
            self._unverified, self._verified = set(), (weakref.ref(store), version)
            return set(self._gone)

    def _changed_since(self, key: str, gen: int) -> bool:
        return max(self._changed.get(key, 0), self._reset) > gen

    # ---------------------------------------------------------------- writing

    def commit(self, key: str, entries: Sequence[LedgerEntry], persist: bool = True, relook: bool = False) -> bool:
        """Merge ``entries`` (the session's entries as a new turn left them; they hold ``key``) unless
        another request of the same turn committed first, in any process. Returns whether this
        call's entry was stored. Another writer's change to an entry made after ``entries`` were
        computed (``snapshot().gen``) is kept over this call's. ``persist=False`` keeps the change
        in this process only (after a failed retrieval: the memory directory may be broken).
        ``relook``: the turn's entry may be replaced while it holds no block (nothing was sent)."""
        base = getattr(entries, "gen", -1)

        def changes() -> list[LedgerEntry] | None:
            existing = self._entries.get(key)
            if existing is not None and (existing.ids or not relook):
                return None
            return [e for e in entries if self._entries.get(e.key) != e
                    and (e.key == key or base < 0 or not self._changed_since(e.key, base))]

        return self._commit(changes, persist)

    def set_profile(self, entry: LedgerEntry) -> LedgerEntry:
        """Keep ``entry`` as the session's profile unless one is kept already; returns the kept one."""
        self._commit(lambda: None if self.profile is not None else [entry])
        return self.profile or entry

    def settle_memo(self, entry: LedgerEntry) -> LedgerEntry:
        """Keep ``entry`` as its key's memo unless one that holds a block (or a reason other than
        "nothing relevant") is kept already; returns the kept one."""

        def changes() -> list[LedgerEntry] | None:
            old = self._memos.get(entry.key)
            if old is None or (old != entry and not old.ids and old.skipped == "nothing_relevant"):
                return [entry]
            return None

        self._commit(changes)
        return self._memos.get(entry.key) or entry

    def _commit(self, changes: Callable[[], list[LedgerEntry] | None], persist: bool = True) -> bool:
        with self._lock:
            locked = _lock_file(self.root, self.path) if persist and self.path is not None else None
            fd = locked[0] if locked is not None else None
            try:
                if locked is not None:
                    self._read(*locked)  # under the lock: what every other process committed
                new = self._take(changes)
                if new is None:
                    return False
                if fd is not None and new:
                    self._write(fd, new)
                return True
            finally:
                if fd is not None:
                    os.close(fd)  # releases the lock

    def _take(self, changes: Callable[[], list[LedgerEntry] | None]) -> list[LedgerEntry] | None:
        """Apply what ``changes()`` gives to this view (call with the lock held); None: nothing to
        commit (another writer of the turn came first)."""
        new = changes()
        for e in new or ():
            self._apply(e)
        return new

    def _write(self, fd: int, new: list[LedgerEntry]) -> None:
        """Append ``new`` to the locked file ``fd``; a new file gets everything this view holds (a
        session whose file was pruned keeps its turns); see the class for rewrites."""
        assert self.path is not None
        try:
            st = self._st  # as _read found it, under this lock
            assert st is not None
            if st.st_size == 0:
                self._offset = 0
                new = [*([self.profile] if self.profile is not None else []), *self._entries.values(),
                       *self._memos.values()]
                data = self._head() + b"".join(_line(e) for e in new)
                _pruner.created(self.root, self.path.parent)
            elif not self._valid or self._offset == 0 or self._lines + len(new) > MAX_LINES:  # 0: no header
                self._rewrite(stat.S_IMODE(st.st_mode))
                return
            else:
                data = b"".join(_line(e) for e in new)
                if st.st_size > self._offset:  # a line a crash cut short: end it, readers skip it
                    data = b"\n" + data
                    self._lines += 1
            _write_all(fd, data)
            self._offset = st.st_size + len(data)
            self._lines += len(new)
            if st.st_size == 0:
                self._header = data[: data.index(b"\n") + 1]
            st = os.fstat(fd)
            self._sig = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError as exc:  # the ledger is an optimization: never fail a call over it
            log.warning("memwire: could not save ledger %s (%s)", self.path, exc)

    def _head(self) -> bytes:
        head = {"version": _VERSION, "session": self.session, "saved": time.time(), "file": secrets.token_hex(8)}
        return (json.dumps(head) + "\n").encode()

    def _compact(self) -> list[LedgerEntry]:
        """Keep only the newest ``MAX_ENTRIES`` entries (and memos); returns what a rewritten
        ledger holds: the profile, the entries, the memos."""
        entries = list(self._entries.values())[-MAX_ENTRIES:]
        memos = list(self._memos.values())[-MAX_ENTRIES:]
        self._entries, self._memos, self._tuple = {e.key: e for e in entries}, {e.key: e for e in memos}, None
        self._reindex()
        return ([self.profile] if self.profile is not None else []) + entries + memos

    def _rewrite(self, mode: int) -> None:
        """Write the newest entries to a temp file and rename it over the ledger (which this process
        has locked: a waiter sees the new file once it holds the old one's lock, and retries)."""
        assert self.path is not None
        kept = self._compact()
        self._header = self._head()
        data = self._header + b"".join(_line(e) for e in kept)
        fd, tmp = _paths.mkstemp(self.root, self.path.parent, prefix=".ledger.")
        try:
            os.fchmod(fd, mode)  # a rewrite keeps the file's permissions (a new ledger is private)
            _write_all(fd, data)
            st = os.fstat(fd)
            os.close(fd)
            fd = -1
            _paths.replace(self.root, tmp, self.path)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._file, self._offset, self._lines, self._valid = (st.st_dev, st.st_ino), len(data), len(kept), True
        self._sig = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        self.gen += 1
        self._reset = self.gen


def ledger_path(root: Path, session: str) -> Path:
    """Where ``session``'s ledger lives under the memory directory ``root``: found in O(1)."""
    return root / LEDGER_DIR / (hashlib.sha256(session.encode("utf-8", "surrogatepass")).hexdigest()[:24] + ".jsonl")


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def _open(root: Path, path: Path, flags: int, plain: bool = True) -> int | None:
    """An fd of the plain file ``path`` (never through a symlink, at any component below the memory
    directory ``root``; never blocking on a FIFO), or None. ``plain=False``: the caller checks it
    is a plain file (``_is_plain``), from a stat of its own."""
    try:
        fd = os.open(_paths.under(root, path), flags | _NOFOLLOW, 0o600)
    except FileNotFoundError:
        return None
    except (OSError, MemoryFileError) as exc:
        if not _unsafe(root, path):
            what = "save" if flags & (os.O_WRONLY | os.O_RDWR) else "read"
            log.warning("memwire: could not %s ledger %s (%s)", what, path, exc)
        return None
    if plain and not _is_plain(root, fd, path, os.fstat(fd)):
        return None
    return fd


def _is_plain(root: Path, fd: int, path: Path, st: os.stat_result) -> bool:
    """Whether ``st`` (of ``fd``, open at ``path``) is a plain file; if not, ``fd`` is closed and
    ``path`` refused (``_unsafe``: a warning, once)."""
    if stat.S_ISREG(st.st_mode):
        return True
    os.close(fd)
    _unsafe(root, path)
    return False


def _lock_file(root: Path, path: Path) -> tuple[int, os.stat_result] | None:
    """The session's ledger file, created if missing, open and locked (``flock``: released when
    the fd is closed, or the process dies), with its stat as locked. None when it cannot be (then
    the change stays in memory, with a warning)."""
    for _ in range(100):  # a rewrite renames a new file over the one just locked: lock that one
        # the file is there: O_NOFOLLOW guards it (what it is, the stat under the lock says)
        fd = _open(root, path, os.O_RDWR | os.O_APPEND, plain=False)
        if fd is None:  # a new session (or a refused file): create it where it is safe to
            if _unsafe(root, path):
                return None
            try:
                _paths.makedirs(root, path.parent)
            except OSError as exc:
                log.warning("memwire: could not save ledger %s (%s)", path, exc)
                return None
            fd = _open(root, path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        if fd is None:
            return None
        try:
            _flock(fd)
            st = os.fstat(fd)  # one stat: a plain file? which one? its size and mtime, as locked
            if not _is_plain(root, fd, path, st):
                return None
            with contextlib.suppress(FileNotFoundError):  # pruned meanwhile: create it again
                now = os.lstat(path)
                if (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino):
                    return fd, st
        except OSError as exc:
            os.close(fd)
            log.warning("memwire: could not save ledger %s (%s)", path, exc)
            return None
        os.close(fd)
    return None


if sys.platform == "win32":
    import msvcrt

    def _flock(fd: int) -> None:
        """Lock the file's first byte (released when the fd is closed, like flock)."""
        while True:
            try:
                msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
                return
            except OSError:  # LK_LOCK gives up after ten seconds: keep waiting
                continue
else:
    import fcntl

    def _flock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)


def _read_all(fd: int, n: int) -> bytes:
    chunks = []
    while n > 0:
        chunk = os.read(fd, n)
        if not chunk:
            break
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


_warned: set[Path] = set()
_warned_lock = threading.Lock()


def _unsafe(root: Path, path: Path) -> bool:
    """Whether a component of ``path`` below the memory directory ``root`` is a symlink, or the
    ledger directory or file is not a plain directory / file (a FIFO would block a read). Logs a
    warning once per path."""
    try:
        _paths.under(root, path)
    except MemoryFileError as exc:
        with _warned_lock:  # once per refused component, not per session
            # the memory directory itself: retrieval's own warning names it already
            first = Path(exc.path) not in _warned and Path(exc.path) != root
            _warned.add(Path(exc.path))
        if first:
            log.warning("memwire: %s; replay ledgers stay in memory for this process", exc)
        return True
    for p, kind in ((path.parent, stat.S_ISDIR), (path, stat.S_ISREG)):
        try:
            mode = os.lstat(p).st_mode
        except FileNotFoundError:
            return False  # created by memwire, as a directory and a file, when first saved
        except OSError:
            continue  # unreadable: loading and saving say so
        if not kind(mode):
            with _warned_lock:
                first = p not in _warned
                _warned.add(p)
            if first:
                plain = "directory" if p == path.parent else "file"
                what = "a symlink" if stat.S_ISLNK(mode) else f"not a plain {plain}"
                log.warning("memwire: %s is %s; memwire does not read or write ledgers through it: replay "
                            "ledgers stay in memory for this process", p, what)
            return True
    return False


def _line(e: LedgerEntry) -> bytes:
    d = {"key": e.key, "ids": list(e.ids), "lines": list(e.lines), "text": e.text, "tokens": e.tokens,
         "skipped": e.skipped}
    return dump_json(d) + b"\n"


class _Pruner:
    """Prunes a ledger directory now and then, on a background thread: when this process has
    created ``PRUNE_EVERY_FILES`` ledgers there since, or when no process has pruned it for
    ``PRUNE_EVERY_S`` (the ``.pruned`` file's mtime says when one last did). Never per session."""

    def __init__(self) -> None:
        self._created: dict[Path, int] = {}
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def created(self, root: Path, directory: Path) -> None:
        with self._lock:
            n = self._created[directory] = self._created.get(directory, 0) + 1
            if n < PRUNE_EVERY_FILES and not self._stale(directory):
                return
            self._created[directory] = 0
            self._threads = [t for t in self._threads if t.is_alive()]
            t = threading.Thread(target=self._run, args=(root, directory), name="memwire-ledger-prune", daemon=True)
            self._threads.append(t)
        t.start()

    @staticmethod
    def _stale(directory: Path) -> bool:
        try:
            return time.time() - os.lstat(directory / ".pruned").st_mtime > PRUNE_EVERY_S
        except OSError:
            return True

    @staticmethod
    def _run(root: Path, directory: Path) -> None:
        marker = _open(root, directory / ".pruned", os.O_WRONLY | os.O_CREAT)
        if marker is not None:
            with contextlib.suppress(OSError):
                os.utime(marker)
            os.close(marker)
        _prune(root, directory)

    def flush(self) -> None:
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join()


_pruner = _Pruner()


def flush() -> None:
    """Wait for a background prune of the ledger directories to finish (writes are synchronous)."""
    _pruner.flush()


def _prune(root: Path, directory: Path) -> None:
    """Drop ledgers older than MAX_AGE_S, then the oldest beyond MAX_FILES. Only plain files in a
    plain directory: never a symlink, nor anything through one."""
    try:
        if not stat.S_ISDIR(_paths.lstat(root, directory).st_mode):
            return
    except (OSError, MemoryFileError):
        return
    now = time.time()
    files = []
    for p in directory.glob("*.jsonl"):
        with contextlib.suppress(OSError):
            st = os.lstat(p)
            if not stat.S_ISREG(st.st_mode):
                continue
            m = st.st_mtime
            if now - m > MAX_AGE_S:
                p.unlink()
            else:
                files.append((m, p))
    files.sort()
    for _, p in files[: max(0, len(files) - MAX_FILES)]:
        with contextlib.suppress(OSError):
            p.unlink()
