"""The markdown store's write path (``MemoryStore``'s half that writes): adds appended under their
topic or the file replaced, edits of one memory's line (pin, tags, forget), whole-file edits for the
Anthropic memory tool (settled like adds: ``edit_file``, ``_file_edit``). Every write holds the
directory's file lock first, then the store's thread lock only for in-memory work (see ``_store``);
late hand appends are carried over a replace.
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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _paths
from .._errors import InvalidMemoryError, MemoryFileError, MemoryNotFoundError
from . import _file_edit, _supersede
from ._markdown import ParsedFile, format_line, parse
from ._model import FileEdit, Memory
from ._store_base import StoreBase
from ._store_checks import DEFAULT_TOPIC, _checked, archived
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
        return self._settling(fresh, restored, here)

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

    def edit_file(self, name: str, edit: Callable[[str | None], str | None], *, cue: str = "explicit") -> FileEdit:
        """Change one memory file of this directory as a whole (the Anthropic memory tool edits
        files, not memories). Under the directory's write lock ``edit`` gets the file's text (None
        when there is no such file) and returns the new text, or None to remove the file; an
        exception from ``edit`` changes nothing. The file is replaced atomically, its permissions
        kept and late hand appends carried over; never read, written or removed through a symlink.

        The file is written as ``edit`` returned it, and its memories are settled like ``add``'s
        (``_settle``): what the edit removed goes to the archive first (a line rewritten in place
        ``superseded`` by its new words, linked both ways; a line taken out ``forgotten``), and a
        new line settles against the active memories of the other files: a new value of one
        supersedes it, the same thing in other words is merged into the new line (the other one
        archived ``merged``), a doubtful pair is kept and marked in conflict. ``cue`` is how the new
        memories got in (``lifecycle``). Returns what it did (``FileEdit``)."""
        d = self._dirs[-1]
        path = d.path / _file_name(name)
        with d.write_lock():
            with self._lock:
                self.refresh()  # the other files and the index as they are now: the edit settles against them
            try:
                fd: int | None = d.open_for_write(name, create=False)
            except FileNotFoundError:
                fd = None
            try:
                if fd is not None and not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise MemoryFileError(str(path), None, "not a regular file")
                data = _read_all(fd) if fd is not None else None
                new = edit(None if data is None else data.decode("utf-8", errors="surrogateescape"))
                if data is None and new is None:
                    return FileEdit()
                settled = self._settle(d, name, data, new)  # archives first: a crash after leaves a copy
                if new is None:
                    _paths.unlink(d.root, path)
                elif fd is None:
                    d.commit(d.stage(name, new), name)
                else:
                    d.commit(d.stage(name, new, os.fstat(fd).st_mode), name)
                    _carry_over(fd, len(data or b""), d.root, path)
            finally:
                if fd is not None:
                    os.close(fd)
            for old in settled.elsewhere:  # what a new line replaced or merged leaves its own file
                with self._lock:
                    where = _other_file(d, name, old.id)
                if where is not None:
                    with contextlib.suppress(MemoryNotFoundError):  # edited away by hand meanwhile
                        self._rewrite(d, where, old.id, _delete_lines)
        self._record_edit(settled, cue)
        return settled.report

    def _settle(self, d: _Dir, name: str, data: bytes | None, new: str | None) -> _Settled:
        """What an edit of file ``name`` (``data`` -> ``new``) does to the memories (see
        ``edit_file``), decided under the write lock; the memories that leave are written to the
        archive here, in one write, before the file changes. Not in the archive or the inbox (a
        store that settles nothing: their files are edited as they are)."""
        src = str(d.path / name)
        before = parse(data, src).entries if data is not None else []
        after = parse(new.encode("utf-8", errors="surrogateescape"), src).entries if new is not None else []
        change = _file_edit.diff([e.memory for e in before], [e.memory for e in after])
        if not self.settles:
            return _Settled(FileEdit(added=tuple(change.added)))
        now = {e.memory.id for e in after}
        with self._lock:
            # a memory still held by another file (or the other scope) does not leave by this edit
            held = {m.id for m in [*change.removed, *change.added]
                    if _other_file(d, name, m.id) is not None or any(o.find(m.id) for o in self._dirs[:-1])}

        def removable(old: Memory) -> bool:  # a line of another file of this directory, not pinned
            with self._lock:
                return not old.pinned and old.id not in now and _other_file(d, name, old.id) is not None

        gone = [m for m in change.removed if m.id not in held]
        left = {m.id for m in gone}
        rewritten = [(o, n) for o, n in change.rewritten if o.id in left]
        search = _supersede.candidates(self.search)
        plan = _supersede.plan([m for m in change.added if m.id not in held],
                               lambda text: [h for h in search(text) if h.memory.id not in left], removable)
        replaced = [*rewritten, *((o, _by_id(change.added, n)) for n, olds in plan.replaced.items() for o in olds)]
        taken = {o.id for o, _ in replaced}
        merged: dict[str, tuple[Memory, Memory]] = {}  # by old id: said again here in other words
        for n, old in plan.duplicates.items():
            if removable(old) and old.id not in taken:
                merged.setdefault(old.id, (old, _by_id(change.added, n)))
        removed = [m for m in gone if m.id not in taken]
        report = FileEdit(
            added=tuple(change.added), replaced=tuple(replaced), removed=tuple(removed),
            merged=tuple(merged.values()),
            conflicts=tuple((o, _by_id(change.added, n)) for n, olds in plan.conflicts.items() for o in olds))
        if report.archived:  # into the archive first: a crash in between leaves a copy, never a loss
            try:
                self.archive.add_many([*(archived(o, "superseded") for o, _ in replaced),
                                       *(archived(m, "forgotten") for m in removed),
                                       *(archived(o, "merged") for o, _ in merged.values())])
            except InvalidMemoryError as exc:
                raise InvalidMemoryError(f"{name} was not changed: the memories this edit removes could not be "
                                         f"archived ({exc})") from None
        elsewhere = [o for o, _ in replaced if o.id not in left] + [o for o, _ in merged.values()]
        return _Settled(report, elsewhere, {m.id for m in change.added if m.id not in held})

    def _record_edit(self, settled: _Settled, cue: str) -> None:
        """An edit's lifecycle records, as ``_record_write`` keeps an add's: the new memories added
        with ``cue`` (one another file already held: said again), what left forgotten, the
        supersessions and conflicts linked, each merge linked and counted as said again."""
        report = settled.report
        if not self.track or not (report.added or report.archived):
            return
        replaced: dict[str, list[Memory]] = {}
        for old, new in report.replaced:
            replaced.setdefault(new.id, []).append(old)
        conflicts: dict[str, list[Memory]] = {}
        for old, new in report.conflicts:
            conflicts.setdefault(new.id, []).append(old)
        self._record_write(report.added, settled.new, report.archived, _supersede.Plan({}, replaced, conflicts), cue)
        if report.merged:
            self.lifecycle.reinforce([new.id for _, new in report.merged])  # the other one's saying counts for it
            self.lifecycle.link_merges([(old.id, new.id) for old, new in report.merged])

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


@dataclass(frozen=True)
class _Settled:
    """``_settle``'s decision: the report, the memories of other files to remove (archived
    already), and the ids of the new memories no file held before (``_record_edit``)."""

    report: FileEdit
    elsewhere: list[Memory] = field(default_factory=list)
    new: set[str] = field(default_factory=set)


def _other_file(d: _Dir, name: str, mid: str) -> str | None:
    """The first file of ``d`` other than ``name`` that holds memory ``mid`` (under the store's lock)."""
    return next((n for n in d.ordered() if n != name and mid in d.files[n]), None)


def _by_id(mems: Sequence[Memory], mid: str) -> Memory:
    return next(m for m in mems if m.id == mid)
