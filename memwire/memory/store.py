"""The markdown memory store: files on disk are the source of truth, an index is kept beside them.

Every read first checks the files' (mtime, size, inode); only a changed file is parsed again and
only the memories that changed are re-indexed, so hand edits show up on the next call and nothing
is re-read when nothing changed. Writes hold an inter-process lock (``.lock`` in the directory)
and replace the file atomically (temp file + rename), so two processes adding at once lose nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import stat
import tempfile
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import MemoryFileError, MemoryNotFoundError, MemwireError, NamespaceError
from .index import BM25Index
from .markdown import PINNED_TAG, format_line, parse
from .model import Hit, Memory, memory_id

try:  # POSIX advisory locks; elsewhere only threads are serialized
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

__all__ = ["MemoryStore", "validate_namespace", "MAIN_FILE"]

log = logging.getLogger("memwire")

MAIN_FILE = "MEMORY.md"
DEFAULT_TOPIC = "Notes"
_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")  # fullmatch: "$" would let a trailing newline in
_Sig = tuple[int, int, int]
_DIR_TICK_NS = 2_000_000_000
MAX_MEMORY_CHARS = 4000  # about 1,000 tokens: more than a whole default memory block


def validate_namespace(name: str) -> str:
    """A namespace is one safe path component: letters, digits, ``._@-``, at most 128 chars."""
    if not isinstance(name, str) or not _NAMESPACE.fullmatch(name) or name in (".", "..") or ".." in name:
        shown = repr(name)[:80]
        raise NamespaceError(
            f"invalid namespace {shown}: use 1-128 letters, digits, '.', '_', '@' or '-', "
            "starting with a letter or digit (no '/', '..', NUL)"
        )
    return name


class _Dir:
    """The parsed memory files of one directory, re-read per file when it changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sigs: dict[str, _Sig | None] = {}
        self.files: dict[str, dict[str, Memory]] = {}
        self.problems: dict[str, list[MemoryFileError]] = {}
        self._dir_sig: tuple[int, int] | None = None

    def _scan(self, remember: bool = True) -> dict[str, _Sig]:
        """(mtime, size, inode) of every memory file. Runs on every request, so when the directory
        itself has not changed (no file added, removed or renamed) only the known files are stat'ed.
        ``remember=False`` (a look that loads nothing) leaves the directory's signature unrecorded:
        the fast path may only trust a listing whose files were then loaded."""
        try:
            dst = os.stat(self.path)
        except FileNotFoundError:
            return {}  # created on first write
        if not stat.S_ISDIR(dst.st_mode):
            raise NotADirectoryError(f"memory directory {self.path} is not a directory")
        dir_sig = (dst.st_mtime_ns, dst.st_ino)
        if dir_sig == self._dir_sig:
            found: dict[str, _Sig] = {}
            try:
                for name in self.sigs:
                    st = os.stat(os.path.join(self.path, name))
                    found[name] = (st.st_mtime_ns, st.st_size, st.st_ino)
                return found
            except FileNotFoundError:
                pass  # removed in place of a rename: list the directory
        found = {}
        try:
            with os.scandir(self.path) as it:
                for e in it:
                    if e.name.endswith(".md") and not e.name.startswith(".") and e.is_file():
                        st = e.stat()
                        found[e.name] = (st.st_mtime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            return {}
        # Trust this listing while the directory's mtime stays the same, but only if that mtime is
        # older than any filesystem's timestamp tick (2 s): a change made in the same tick as the
        # listing would not move it.
        if remember:
            self._dir_sig = dir_sig if time.time_ns() - dst.st_mtime_ns > _DIR_TICK_NS else None
        return found

    def current(self) -> bool:
        """Whether the cache matches the files on disk (nothing to re-read)."""
        return self._scan(remember=False) == self.sigs

    def refresh(self) -> bool:
        """Re-read changed files. Returns True when anything changed."""
        found = self._scan()
        changed = False
        for name in list(self.files):
            if name not in found:
                del self.files[name], self.sigs[name]
                self.problems.pop(name, None)
                changed = True
        for name, sig in found.items():
            if self.sigs.get(name) != sig:
                self._load(name, sig)
                changed = True
        return changed

    def _load(self, name: str, sig: _Sig) -> None:
        path = self.path / name
        try:
            data = path.read_bytes()
        except OSError as exc:
            self.problems[name] = [MemoryFileError(str(path), None, f"cannot read: {exc}")]
            self.files[name], self.sigs[name] = {}, sig
            return
        parsed = parse(data, str(path))
        self.files[name] = {e.memory.id: e.memory for e in parsed.entries}
        self.sigs[name] = sig
        self.problems[name] = parsed.problems
        for p in parsed.problems:
            log.warning("memwire: %s", p)

    def ordered(self) -> list[str]:
        return sorted(self.files, key=lambda n: (n != MAIN_FILE, n))

    def memories(self) -> dict[str, Memory]:
        out: dict[str, Memory] = {}
        for name in self.ordered():
            for mid, mem in self.files[name].items():
                out.setdefault(mid, mem)
        return out

    def find(self, mid: str) -> str | None:
        for name in self.ordered():
            if mid in self.files[name]:
                return name
        return None

    @contextlib.contextmanager
    def write_lock(self) -> Iterator[None]:
        self.path.mkdir(parents=True, exist_ok=True)  # directories appear on first write only
        if fcntl is None:  # pragma: no cover
            yield
            return
        with open(self.path / ".lock", "a+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def stage(self, name: str, content: str | bytes) -> str:
        """Write the new content of ``name`` to a temp file beside it (fsync'ed); ``commit`` renames it."""
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=self.path)
        try:
            with os.fdopen(fd, "wb") as fh:
                # surrogateescape: bytes that were not UTF-8 in a hand-written file survive a rewrite
                fh.write(content if isinstance(content, bytes) else content.encode("utf-8", errors="surrogateescape"))
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return tmp

    def commit(self, tmp: str, name: str) -> _Sig:
        """Atomically replace ``name`` with a staged temp file."""
        target = self.path / name
        try:
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        st = target.stat()
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def write(self, name: str, content: str | bytes) -> _Sig:
        """Atomically replace a file: write a temp file beside it, fsync, rename."""
        return self.commit(self.stage(name, content), name)

    def current_sig(self, name: str) -> _Sig | None:
        try:
            st = (self.path / name).stat()
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)


def _insert_under_topic(data: bytes, topic: str, lines_to_add: list[str]) -> bytes:
    """Put bullet lines at the end of the ``## topic`` section, creating it at the end if missing.
    Byte searches, not a decode and a split into lines: a store can be one file of 100,000 lines,
    and bytes that are not UTF-8 in a hand-written file pass through untouched."""
    block = ("\n".join(lines_to_add) + "\n").encode("utf-8")
    name = topic.encode("utf-8")
    if not data:
        return b"# Memory\n\n## " + name + b"\n" + block
    if not data.endswith(b"\n"):
        data += b"\n"
    exact = data.rfind(b"\n## " + name + b"\n")  # the common case, at C speed; else any spelling of it
    if exact >= 0:
        header_end = exact + len(name) + 4
    else:
        header = re.search(rb"(?im)^##[ \t]+" + re.escape(topic.strip().encode("utf-8")) + rb"[ \t]*$", data)
        if header is None:
            return data + (b"" if data.endswith(b"\n\n") else b"\n") + b"## " + name + b"\n" + block
        header_end = header.end()
    next_header = data.find(b"\n#", header_end - 1)
    end = next_header + 1 if next_header >= 0 else len(data)
    while end > header_end + 1 and data[end - 2] == 0x0A:  # keep the blank line(s) before the next header
        end -= 1
    return data[:end] + block + data[end:]


class MemoryStore:
    """Memories kept as markdown files in a directory, searchable with BM25.

    ``MemoryStore(dir)`` reads and writes ``dir``. With ``global_dir`` it also reads that
    directory (the user's global scope); a memory with the same id in both comes from ``dir``
    (the project wins). Writes always go to ``dir``, except forgetting or pinning a memory that
    only the global scope holds.
    """

    def __init__(
        self,
        dir: str | os.PathLike[str],
        *,
        global_dir: str | os.PathLike[str] | None = None,
        min_score: float | None = None,
    ) -> None:
        self.path = Path(dir)
        self._dirs = [_Dir(self.path)]
        if global_dir is not None and Path(global_dir).resolve() != self.path.resolve():
            self._dirs.insert(0, _Dir(Path(global_dir)))  # global first: the project overrides it
        self.min_score = min_score
        self._index = BM25Index()
        self._merged: dict[str, Memory] = {}
        self._lock = threading.RLock()
        self.version = 0  # bumps whenever the memory set changes
        self._loaded = False

    @classmethod
    def for_namespace(cls, root: str | os.PathLike[str], namespace: str | None, **kw: Any) -> "MemoryStore":
        """The store of a namespace: ``root`` itself for the default one, else ``root/namespaces/NAME``
        (isolated: never the default namespace's files, never the global scope)."""
        if namespace in (None, "", "default"):
            return cls(root, **kw)
        kw.pop("global_dir", None)
        return cls(Path(root) / "namespaces" / validate_namespace(namespace), **kw)

    # ---------------------------------------------------------------- reading

    def refresh(self) -> None:
        """Pick up changed files (also done by every read)."""
        with self._lock:
            changed = False
            for d in self._dirs:
                changed = d.refresh() or changed
            if changed:
                self._rebuild_merged()
            self._loaded = True

    def ready(self) -> bool:
        """True when the files are loaded and unchanged since: a search is in-memory work only."""
        return self._loaded and all(d.current() for d in self._dirs)

    def _rebuild_merged(self) -> None:
        merged: dict[str, Memory] = {}
        for d in self._dirs:
            merged.update(d.memories())
        old = self._merged
        gone = [mid for mid in old if mid not in merged]
        for mid in gone:
            self._index.remove(mid)
        fresh = [(mid, m) for mid, m in merged.items() if old.get(mid) != m]
        if fresh:
            self._index.add_many((mid, m.search_text(), m.date) for mid, m in fresh)
        self._merged = merged
        if gone or fresh:
            self.version += 1

    def _resolve(self, mid: str) -> None:
        """Re-derive one id after a write (cheaper than a full merge)."""
        mem = None
        for d in self._dirs:
            name = d.find(mid)
            if name is not None:
                mem = d.files[name][mid]
        old = self._merged.get(mid)
        if mem is None:
            if old is not None:
                del self._merged[mid]
                self._index.remove(mid)
                self.version += 1
        elif mem != old:
            self._merged[mid] = mem
            self._index.add(mid, mem.search_text(), mem.date)
            self.version += 1

    @property
    def problems(self) -> list[MemoryFileError]:
        """Problems found in the memory files (bad UTF-8, empty bullets, ...), with path and line."""
        self.refresh()
        return [p for d in self._dirs for ps in d.problems.values() for p in ps]

    def __iter__(self) -> Iterator[Memory]:
        self.refresh()
        return iter(list(self._merged.values()))

    def __len__(self) -> int:
        self.refresh()
        return len(self._merged)

    def __contains__(self, mid: object) -> bool:
        self.refresh()
        return mid in self._merged

    def missing(self, ids: Iterable[str], *, refresh: bool = True) -> set[str]:
        """The ids in ``ids`` that no longer name a memory (forgotten, or edited into another id).
        ``refresh=False``: as of the last read, for a caller that just searched."""
        if refresh:
            self.refresh()
        merged = self._merged
        return {mid for mid in ids if mid not in merged}

    def get(self, mid: str) -> Memory:
        self.refresh()
        try:
            return self._merged[mid]
        except KeyError:
            raise MemoryNotFoundError(f"no memory with id {mid!r} in {self.path}") from None

    def pinned(self) -> list[Memory]:
        return [m for m in self if m.pinned]

    def search(
        self, query: str, k: int = 5, *, min_score: float | None = None, context: Sequence[str] = (),
        exclude: Collection[str] = (),
    ) -> list[Hit]:
        """The memories most relevant to ``query``, best first (score, then id); ids in ``exclude``
        are left out of the k (the replay strategy's memories already in front of the model)."""
        from ..policies.retrieval import Query

        with self._lock:
            self.refresh()
            cut = min_score if min_score is not None else self.min_score
            found = self._index.search(Query(query, tuple(context)), k, cut, exclude)
            merged = self._merged
        return [Hit(merged[mid], score) for mid, score in found if mid in merged]

    # ---------------------------------------------------------------- writing

    def add(
        self,
        text: str,
        tags: Sequence[str] = (),
        pinned: bool = False,
        *,
        topic: str | None = None,
        date: str | None = None,
    ) -> Memory:
        """Write one memory to ``MEMORY.md`` (under ``## topic``). Adding a text that is already
        stored returns the stored memory (with the new tags and pin merged in)."""
        return self.add_many([Memory.create(text, tuple(tags), pinned, topic, date)])[0]

    def add_many(self, memories: Iterable[Memory | str]) -> list[Memory]:
        """Write many memories in one locked file replacement."""
        items: list[Memory] = []
        for m in memories:
            mem = Memory.create(m) if isinstance(m, str) else m
            text = " ".join(mem.text.split())
            if not text:
                raise MemwireError("a memory needs some text")
            if len(text) > MAX_MEMORY_CHARS:  # one memory is one fact; a pasted file would crowd every block
                raise MemwireError(f"a memory is at most {MAX_MEMORY_CHARS:,} characters, this one has {len(text):,}; "
                                   "split it, or keep the file and remember where it is")
            tags = tuple(dict.fromkeys(t.lstrip("#").strip().lower() for t in mem.tags if t.strip("# ")))
            items.append(Memory(memory_id(text), text, tuple(t for t in tags if t != PINNED_TAG),
                                mem.pinned or PINNED_TAG in tags, mem.topic, mem.date))
        d = self._dirs[-1]
        by_topic: dict[str, list[Memory]] = {}
        result: list[Memory] = []
        with d.write_lock():  # other processes (and threads) writing this directory wait here
            with self._lock:
                self.refresh()
                for mem in items:
                    existing = d.find(mem.id)
                    if existing is None:
                        by_topic.setdefault(mem.topic or DEFAULT_TOPIC, []).append(mem)
                        result.append(replace(mem, source=str(d.path / MAIN_FILE)))
                        continue
                    old = d.files[existing][mem.id]  # already stored here: merge tags and pin in place
                    if set(mem.tags) <= set(old.tags) and (old.pinned or not mem.pinned):
                        result.append(old)
                    else:
                        result.append(self._update_line(d, existing, mem.id,
                                                        tags=tuple(dict.fromkeys(old.tags + mem.tags)),
                                                        pinned=old.pinned or mem.pinned))
            if by_topic:
                self._append(d, by_topic)
        return result

    def _append(self, d: _Dir, by_topic: dict[str, list[Memory]]) -> None:
        """Rewrite MEMORY.md with the new lines. The file work happens outside the store's lock, so
        searches go on meanwhile; the lock is held only to swap the file and patch the cache."""
        before = d.current_sig(MAIN_FILE)
        try:
            data = (d.path / MAIN_FILE).read_bytes()
        except FileNotFoundError:
            data = b""
        for topic, mems in by_topic.items():
            lines = [format_line(m) for m in {m.id: m for m in mems}.values()]
            data = _insert_under_topic(data, topic, lines)
        tmp = d.stage(MAIN_FILE, data)
        with self._lock:
            sig = d.commit(tmp, MAIN_FILE)
            if before != d.sigs.get(MAIN_FILE):  # someone edited the file meanwhile: read it again
                d.refresh()
                self._rebuild_merged()
                return
            files = d.files.setdefault(MAIN_FILE, {})  # our cache was current: patch it, no re-parse
            src = str(d.path / MAIN_FILE)
            added = [replace(m, topic=t, source=src) for t, ms in by_topic.items() for m in ms]
            for m in added:
                files.setdefault(m.id, m)
            d.sigs[MAIN_FILE] = sig
            for m in added:
                self._resolve(m.id)

    def _locate(self, mid: str) -> tuple[_Dir, str]:
        self.refresh()
        for d in reversed(self._dirs):  # the project's copy first
            name = d.find(mid)
            if name is not None:
                return d, name
        raise MemoryNotFoundError(f"no memory with id {mid!r} in {self.path}")

    def _edit(self, d: _Dir, name: str, mid: str, edit: Any) -> Memory:
        """Re-read ``name`` under the lock, apply ``edit(lines, entry)`` to the entry's lines, write."""
        path = d.path / name
        data = path.read_bytes()
        parsed = parse(data, str(path))
        entry = next((e for e in parsed.entries if e.memory.id == mid), None)
        if entry is None:
            raise MemoryNotFoundError(f"no memory with id {mid!r} in {path}")
        lines = data.decode("utf-8", errors="surrogateescape").split("\n")
        edit(lines, entry)
        d.write(name, "\n".join(lines))
        d.refresh()
        self._rebuild_merged()
        return entry.memory

    def _update_line(self, d: _Dir, name: str, mid: str, *, tags: tuple[str, ...], pinned: bool) -> Memory:
        def edit(lines: list[str], entry: Any) -> None:
            i = entry.first_line - 1
            indent = re.match(r"^\s*", lines[i]).group(0)  # type: ignore[union-attr]
            new = replace(entry.memory, tags=tags, pinned=pinned)
            lines[i : entry.last_line] = [indent + format_line(new)]

        self._edit(d, name, mid, edit)
        return self._merged[mid]

    @contextlib.contextmanager
    def _locked(self, mid: str) -> Iterator[tuple[_Dir, str]]:
        """The directory and file holding ``mid`` (the project's copy first), under both locks and
        re-read under the file lock, so an edit never works from a stale view."""
        with self._lock:
            d, _ = self._locate(mid)
            with d.write_lock():
                d.refresh()
                name = d.find(mid)
                if name is None:
                    raise MemoryNotFoundError(f"no memory with id {mid!r} in {d.path}")
                yield d, name

    def pin(self, mid: str, pinned: bool = True) -> Memory:
        """Mark a memory pinned (startup mode shows pinned memories first)."""
        with self._locked(mid) as (d, name):
            mem = d.files[name][mid]
            if mem.pinned == pinned:
                return mem
            return self._update_line(d, name, mid, tags=mem.tags, pinned=pinned)

    def forget(self, mid: str) -> Memory:
        """Delete a memory's line(s) from its file. Returns what was removed."""

        def edit(lines: list[str], entry: Any) -> None:
            del lines[entry.first_line - 1 : entry.last_line]

        with self._locked(mid) as (d, name):
            removed = self._edit(d, name, mid, edit)
        if mid in self._merged:  # still visible from the other scope
            log.info("memwire: %s forgotten in %s but still present in another scope", mid, d.path)
        return removed

    def __repr__(self) -> str:
        return f"MemoryStore({str(self.path)!r})"
