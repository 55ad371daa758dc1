"""The markdown store's write path (``MemoryStore``'s half that writes): adds appended under their
topic or the file replaced, edits of one memory's line (pin, tags, forget), whole-file edits for the
Anthropic memory tool. Every write holds the directory's file lock first, then the store's thread
lock only for in-memory work (see ``_store``); late hand appends are carried over a replace.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _paths
from .._errors import InvalidMemoryError, MemoryFileError, MemoryNotFoundError
from . import _supersede
from ._markdown import ParsedFile, format_line, parse
from ._model import Memory
from ._store_base import StoreBase, undated
from ._store_checks import DEFAULT_TOPIC, _checked
from ._store_files import (
    MAIN_FILE,
    _blind_append,
    _carry_over,
    _delete_lines,
    _Dir,
    _file_name,
    _insert_under_topic,
    _last_header,
    _read_all,
    _Sig,
)
from ._store_names import full_id
from ._table import Merged

__all__ = ["MarkdownWrites"]

log = logging.getLogger("memwire")


class MarkdownWrites(StoreBase):
    """What writes a markdown store's files (a part of ``_store.MemoryStore``)."""

    if TYPE_CHECKING:  # what MemoryStore provides
        path: Path
        screens: bool
        settles: bool
        timezone: str | None
        version: int
        _dirs: list[_Dir]
        _lock: threading.RLock
        _merged: Merged

        def refresh(self) -> None: ...

        def _resolve(self, mid: str, old: Memory | None) -> None: ...

    def _plan(self, d: _Dir, items: list[Memory], fresh: list[Memory], replaces: str | None,
              restored: bool) -> _supersede.Plan:
        """What the write does to the active memories (``_supersede.plan``), under the write lock.
        Not in the archive, the inbox or a store that settles nothing."""
        if not self.settles or not items:
            return _supersede.Plan({}, {}, {})

        def here(mem: Memory) -> bool:
            with self._lock:
                return d.find(mem.id) is not None

        if replaces is not None:
            old = self.get(replaces)
            if old.id == items[0].id:
                return _supersede.Plan({}, {}, {})
            kept = {items[0].id: [old]}
            return _supersede.Plan({}, kept, {}) if here(old) else _supersede.Plan({}, {}, kept)
        plan = _supersede.plan(undated(fresh, restored), _supersede.candidates(self.search), here)
        if restored:  # never merged into a look-alike: the restore asked for this memory
            plan.duplicates.clear()
        return plan

    def _add_many(self, memories: Iterable[Memory | str], cue: str, replaces: str | None = None,
                  restored: bool = False) -> list[Memory]:
        items = [_checked(Memory.create(m) if isinstance(m, str) else m, screen=self.screens, timezone=self.timezone,
                          dates=not restored) for m in memories]
        d = self._dirs[-1]
        by_topic: dict[str, list[Memory]] = {}
        result: list[Memory] = []
        with d.write_lock():  # other processes and threads writing this directory wait here
            with self._lock:
                self.refresh()
                found = [(mem, d.find(mem.id)) for mem in items]
            plan = self._plan(d, items, [mem for mem, name in found if name is None], replaces, restored)
            found = list(zip(_supersede.pinned_on(plan, [mem for mem, _ in found]), [n for _, n in found], strict=True))
            gone = plan.removed()
            if gone:  # into the archive first: a crash in between leaves a copy, never a loss
                self.archive_copy(gone, "superseded")
                for stale in gone:
                    with self._lock:
                        where = d.find(stale.id)
                    if where is not None:
                        self._rewrite(d, where, stale.id, _delete_lines)
            for mem, name in found:
                if mem.id in plan.duplicates:  # said again in other words: the memory that says it
                    result.append(plan.duplicates[mem.id])
                    continue
                if name is None:
                    by_topic.setdefault(mem.topic or DEFAULT_TOPIC, []).append(mem)
                    result.append(replace(mem, topic=mem.topic or DEFAULT_TOPIC, source=str(d.path / MAIN_FILE)))
                    continue
                old = d.files[name].get(mem.id)  # already stored here: merge tags and pin into its line
                assert old is not None
                new_tags = tuple(t for t in mem.tags if t not in old.tags)
                if not new_tags and (old.pinned or not mem.pinned):
                    result.append(old)
                else:
                    result.append(self._mark(d, name, old, add_tags=new_tags, pinned=old.pinned or mem.pinned))
            if by_topic:
                self._append(d, by_topic)
        self._record_write(result, {m.id for ms in by_topic.values() for m in ms}, gone, plan, cue)
        return result

    def _append(self, d: _Dir, by_topic: dict[str, list[Memory]]) -> None:
        """Add the new lines to MEMORY.md: appended in place when they go at its end (the usual
        case), else the file is replaced. When the cache is current (the file's (mtime, size,
        inode) is the one last read or written here, checked under the write lock) and the topic
        is the file's last section, the lines are appended without reading the file: the bytes
        ``_insert_under_topic`` would add at its end. The file work happens outside the store's
        lock, so searches go on meanwhile; the lock is held only to patch the cache."""
        with self._lock:
            cached, head = d.sigs.get(MAIN_FILE), d.heads.get(MAIN_FILE)
        fd = d.open_for_write(MAIN_FILE, create=True)
        try:
            st = os.fstat(fd)
            before: _Sig = (st.st_mtime_ns, st.st_size, st.st_ino)
            blind = _blind_append(fd, before, cached, head, by_topic)
            if blind is not None:
                os.write(fd, blind)
                os.fsync(fd)
                st = os.fstat(fd)
                sig: _Sig | None = (st.st_mtime_ns, st.st_size, st.st_ino)
                clean = st.st_size == before[1] + len(blind)
            else:
                data = _read_all(fd)
                new = data
                for topic, mems in by_topic.items():
                    new = _insert_under_topic(new, topic, [format_line(m) for m in {m.id: m for m in mems}.values()])
                if new.startswith(data):  # O_APPEND: lands after whatever anyone appended meanwhile
                    os.write(fd, new[len(data):])
                    os.fsync(fd)
                    st = os.fstat(fd)
                    sig = (st.st_mtime_ns, st.st_size, st.st_ino)
                    clean = st.st_size == len(new)
                else:
                    d.commit(d.stage(MAIN_FILE, new, st.st_mode), MAIN_FILE)
                    _carry_over(fd, len(data), d.root, d.path / MAIN_FILE)
                    sig, clean = d.current_sig(MAIN_FILE), os.fstat(fd).st_size == len(data)
                head = _last_header(new)
        finally:
            os.close(fd)
        with self._lock:
            if not clean or sig is None or cached != before or d.sigs.get(MAIN_FILE) != cached:
                return  # someone else changed the file too (or it is gone): the next read parses it again
            src = str(d.path / MAIN_FILE)
            table = d.files[MAIN_FILE]  # our cache was current (so it holds the file): patch it, no re-parse
            added = [replace(m, topic=t, source=src) for t, ms in by_topic.items() for m in ms]
            shown = {m.id: self._merged.get(m.id) for m in added}  # before the table shows them
            added = [m for m in added if table.append(m)]
            d.sigs[MAIN_FILE] = sig
            d.heads[MAIN_FILE], d.hashes[MAIN_FILE] = head, None
            for m in added:
                self._resolve(m.id, shown[m.id])

    def _rewrite(self, d: _Dir, name: str, mid: str, edit: Any) -> tuple[Any, ParsedFile]:
        """Under the file lock: re-read ``name``, apply ``edit(lines, entry)`` to the lines of
        memory ``mid``, replace the file (its permissions kept, late hand appends carried over).
        Returns the entry as it was and the file as written, parsed."""
        path = d.path / name
        fd = d.open_for_write(name, create=False)
        try:
            data = _read_all(fd)
            entry = next((e for e in parse(data, str(path)).entries if e.memory.id == mid), None)
            if entry is None:
                raise MemoryNotFoundError(f"no memory with id {mid!r} in {path}")
            lines = data.decode("utf-8", errors="surrogateescape").split("\n")
            edit(lines, entry)
            new = "\n".join(lines).encode("utf-8", errors="surrogateescape")
            d.commit(d.stage(name, new, os.fstat(fd).st_mode), name)
            _carry_over(fd, len(data), d.root, path)
        finally:
            os.close(fd)
        return entry, parse(new, str(path))

    def _mark(self, d: _Dir, name: str, mem: Memory, *, add_tags: Sequence[str] = (), pinned: bool) -> Memory:
        """Add tags to a memory's line and pin or unpin it, leaving the rest of the line (and any
        hand-written text on it) as it is."""

        def edit(lines: list[str], entry: Any) -> None:
            last = entry.last_line - 1
            if not pinned:
                for i in range(entry.first_line - 1, entry.last_line):
                    lines[i] = re.sub(r"(?i)(?:\s+|^)#pinned(?![\w/+-])", "", lines[i])
                lines[entry.first_line - 1] = re.sub(r"^(\s*[-*+]\s+)📌\s*", r"\1", lines[entry.first_line - 1])
            marks = "".join(f" #{t}" for t in add_tags) + (" #pinned" if pinned and not mem.pinned else "")
            date = re.search(r"\s*<!--.*-->\s*$", lines[last])  # tags go before a trailing date comment
            cut = date.start() if date else len(lines[last].rstrip())
            lines[last] = lines[last][:cut] + marks + lines[last][cut:]

        _, written = self._rewrite(d, name, mem.id, edit)
        now = next((e.memory for e in written.entries if e.memory.id == mem.id), None)
        if now is None or now.pinned != pinned or not set(add_tags) <= set(now.tags):
            raise InvalidMemoryError(f"could not mark memory {mem.id} in {d.path / name}; edit its line by hand")
        return now

    def _full_id(self, mid: str) -> str:
        return full_id(self._merged, mid)

    def _locate(self, mid: str) -> tuple[_Dir, str]:
        for d in reversed(self._dirs):  # the project's copy first
            name = d.find(mid)
            if name is not None:
                return d, name
        raise MemoryNotFoundError(f"no memory with id {mid!r} in {self.path}")

    @contextlib.contextmanager
    def _locked(self, mid: str) -> Iterator[tuple[_Dir, str, str]]:
        """The directory, file and full id of ``mid`` (the project's copy first), with that
        directory's file lock held and the files re-read under it, so an edit never works from a
        stale view. The file lock is taken first, as everywhere."""
        with self._lock:
            self.refresh()
            full = self._full_id(mid)
            d, _ = self._locate(full)
        with d.write_lock():
            with self._lock:
                self.refresh()
                name = d.find(full)
            if name is None:
                raise MemoryNotFoundError(f"no memory with id {mid!r} in {d.path}")
            yield d, name, full

    def pin(self, mid: str, pinned: bool = True) -> Memory:
        """Mark a memory pinned (startup mode shows pinned memories first). ``mid`` may be a unique
        prefix of the id."""
        with self._locked(mid) as (d, name, full):
            mem = d.files[name].get(full)
            assert mem is not None
            if mem.pinned == pinned:
                return mem
            return self._mark(d, name, mem, pinned=pinned)

    def _forget(self, mid: str, reason: str | None) -> Memory:
        """``forget``: the memory's line(s) removed from its file, into the archive first."""
        with self._locked(mid) as (d, name, full):
            if reason is not None:
                self.archive_copy([m for m in (d.files[name].get(full),) if m], reason)
            entry, _ = self._rewrite(d, name, full, _delete_lines)
        if reason is not None and self.track:
            self.lifecycle.forgotten([full])
        if full in self:  # still visible from the other scope
            log.info("memwire: %s forgotten in %s but still present in another scope", full, d.path)
        return entry.memory  # type: ignore[no-any-return]

    def edit_file(self, name: str, edit: Callable[[str | None], str | None]) -> None:
        """Change one memory file of this directory as a whole (the Anthropic memory tool edits
        files, not memories). Under the directory's write lock ``edit`` gets the file's text (None
        when there is no such file) and returns the new text, or None to remove the file; an
        exception from ``edit`` changes nothing. The file is replaced atomically, its permissions
        kept and late hand appends carried over; never read, written or removed through a symlink."""
        d = self._dirs[-1]
        path = d.path / _file_name(name)
        with d.write_lock():
            try:
                fd = d.open_for_write(name, create=False)
            except FileNotFoundError:
                new = edit(None)
                if new is not None:
                    d.commit(d.stage(name, new), name)
                return
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise MemoryFileError(str(path), None, "not a regular file")
                data = _read_all(fd)
                new = edit(data.decode("utf-8", errors="surrogateescape"))
                if new is None:
                    _paths.unlink(d.root, path)
                else:
                    d.commit(d.stage(name, new, os.fstat(fd).st_mode), name)
                    _carry_over(fd, len(data), d.root, path)
            finally:
                os.close(fd)

    def rename_file(self, old: str, new: str) -> None:
        """Rename a memory file of this directory, under its write lock. Raises FileNotFoundError
        when ``old`` is missing, FileExistsError when ``new`` exists (never overwritten), and
        ``MemoryFileError`` when ``old`` is a symlink or not a regular file."""
        d = self._dirs[-1]
        src, dst = d.path / _file_name(old), d.path / _file_name(new)
        with d.write_lock():
            if not stat.S_ISREG(_paths.lstat(d.root, src).st_mode):
                raise MemoryFileError(str(src), None, "not a regular file; memwire does not rename it")
            if os.path.lexists(dst):  # a file, or a link: never replaced (the parents were checked with src's)
                raise FileExistsError(errno.EEXIST, "a file of that name exists", str(dst))
            os.rename(src, dst)
