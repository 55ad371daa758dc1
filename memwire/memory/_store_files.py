"""The markdown store's files: one directory's parsed memory files, re-read per file when its
(mtime, size, inode) changes (``_Dir``), and the byte-level helpers of its writes (appending
under a topic, carrying over a hand edit's late appends, reading a whole descriptor).

Every path below the memory directory (``root``) goes through ``memwire._paths``: a symlink at
any component is never read, written, renamed or removed through (see ``_store``).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import _paths
from .._errors import InvalidMemoryError, MemoryFileError
from .._locks import write_lock
from . import _snapshot
from ._markdown import format_line, parse
from ._model import Memory, normalized
from ._table import Table, longer_id

__all__ = ["MAIN_FILE", "fine_tick_ns"]

log = logging.getLogger("memwire")

MAIN_FILE = "MEMORY.md"
_Sig = tuple[int, int, int]
# A directory's timestamp tick: how long after a change its mtime may not move for another change
# (see _Dir._list). Local Linux filesystems stamp with the kernel's coarse clock, at most a jiffy
# (10 ms at HZ=100) behind, in nanoseconds; elsewhere (FAT's 2 s, a network filesystem's server
# clock, another system, whole-second stamps) 2 s is assumed.
_DIR_TICK_NS = 2_000_000_000
_FINE_TICK_NS = 20_000_000
_FINE_FILESYSTEMS = frozenset({"ext4", "xfs", "btrfs", "tmpfs", "f2fs", "overlay", "zfs", "bcachefs"})
_NEW_FILE_MODE = 0o644


class _Dir:
    """The parsed memory files of one directory, re-read per file when it changes."""

    def __init__(self, path: Path, root: Path) -> None:
        self.path = path
        self.root = root  # the memory directory a person named: nothing below it is a symlink (_paths)
        self.sigs: dict[str, _Sig | None] = {}
        self.files: dict[str, Table] = {}  # each file's memories, as columns (see _table)
        self.problems: dict[str, list[MemoryFileError]] = {}
        # each file's last header line as cached (see _last_header): an add under it appends blind
        self.heads: dict[str, bytes | None] = {}
        self.hashes: dict[str, bytes | None] = {}  # digests of the files as parsed (None: patched since)
        self._dir_sig: tuple[int, int] | None = None
        self._tick_ns: int | None = None  # the directory's filesystem's tick (fine_tick_ns), once it exists
        self.links: set[str] = set()  # memory files that are symlinks (not read)
        self.writing = 0  # writes of this process in progress (see MemoryStore.ready)
        self._writing_lock = threading.Lock()

    def _scan(self, remember: bool = True) -> dict[str, _Sig]:
        """(mtime, size, inode) of every memory file. Runs on every request, so when the directory
        itself has not changed (no file added, removed or renamed) only the known files are stat'ed.
        ``remember=False`` (a look that loads nothing) leaves the directory's signature unrecorded:
        the fast path may only trust a listing whose files were then loaded."""
        found, listed = self._list()
        if remember:
            self._dir_sig = listed
        return found

    def _list(self) -> tuple[dict[str, _Sig], tuple[int, int] | None]:
        """``_scan``'s files, and the directory's signature to trust for that listing (None: the
        fast path answered, or the directory changed too recently to be trusted)."""
        try:
            dst = _paths.lstat(self.root, self.path)
        except FileNotFoundError:
            return {}, None  # created on first write
        if not stat.S_ISDIR(dst.st_mode):
            # said as the command line says it (``_paths.not_a_directory``); the fallback: replaced meanwhile
            raise (_paths.not_a_directory(self.path)
                   or MemoryFileError(str(self.path), None, "the memory directory is not a directory"))
        dir_sig = (dst.st_mtime_ns, dst.st_ino)
        if dir_sig == self._dir_sig:
            found: dict[str, _Sig] = {}
            try:
                for name in self.sigs:  # lstat: a file replaced by a symlink changes its inode, then is refused
                    st = os.lstat(os.path.join(self.path, name))
                    found[name] = (st.st_mtime_ns, st.st_size, st.st_ino)
                return found, dir_sig
            except FileNotFoundError:
                pass  # removed in place of a rename: list the directory
        found = {}
        try:
            with _paths.scandir(self.root, self.path) as it:
                for e in it:
                    if e.name.endswith(".md") and not e.name.startswith("."):
                        if e.is_symlink():
                            self.links.add(e.name)
                        elif e.is_file(follow_symlinks=False):
                            st = e.stat(follow_symlinks=False)
                            found[e.name] = (st.st_mtime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            return {}, None
        # Trust this listing while the directory's mtime stays the same, but only if that mtime is
        # older than the filesystem's timestamp tick: a change made in the same tick as the listing
        # would not move it. (The fine tick spares the proxy a listing per request for 2 s after
        # each of the lifecycle's saves of .meta.json, every 5 s in each worker.)
        if self._tick_ns is None:
            self._tick_ns = fine_tick_ns(self.path)
        tick = self._tick_ns if dst.st_mtime_ns % 1_000_000_000 else _DIR_TICK_NS  # whole seconds: a coarse stamp
        return found, (dir_sig if time.time_ns() - dst.st_mtime_ns > tick else None)

    def current(self) -> bool:
        """Whether the cache matches the files on disk (nothing to re-read). A listing that found
        exactly the loaded files is remembered (the directory changes for other files too: the
        lifecycle's ``.meta.json`` is replaced now and then, the ledgers and logs are created)."""
        found, listed = self._list()
        if found != self.sigs:
            return False
        if listed is not None:
            self._dir_sig = listed
        return True

    def refresh(self) -> bool:
        """Re-read changed files. Returns True when anything changed."""
        found = self._scan()
        changed = False
        for name in list(self.files):
            if name not in found:
                del self.files[name], self.sigs[name]
                self.problems.pop(name, None)
                self.heads.pop(name, None)
                self.hashes.pop(name, None)
                changed = True
        for name, sig in found.items():
            if self.sigs.get(name) != sig:
                self._load(name, sig)
                changed = True
        for name in self.links - found.keys():
            if name not in self.problems:
                problem = MemoryFileError(str(self.path / name), None, _paths.SYMLINK + "; not read")
                self.problems[name] = [problem]
                log.warning("memwire: %s", problem)
        return changed

    def _load(self, name: str, sig: _Sig) -> None:
        path = self.path / name
        try:
            data = _paths.read_bytes(self.root, path)
        except MemoryFileError as exc:
            self.problems[name] = [exc]
            self.files[name], self.sigs[name] = Table(str(path)), sig
            self.heads[name] = self.hashes[name] = None
            return
        except OSError as exc:
            self.problems[name] = [MemoryFileError(str(path), None, f"cannot read: {exc}")]
            self.files[name], self.sigs[name] = Table(str(path)), sig
            self.heads[name] = self.hashes[name] = None
            return
        self.heads[name], self.hashes[name] = _last_header(data), _snapshot.digest(data)
        parsed = parse(data, str(path))
        self.files[name] = Table.of(str(path), _by_id(parsed, str(path)).values())
        self.sigs[name] = sig
        self.problems[name] = parsed.problems
        for p in parsed.problems:
            log.warning("memwire: %s", p)

    def ordered(self) -> list[str]:
        return sorted(self.files, key=lambda n: (n != MAIN_FILE, n))

    def tables(self) -> list[Table]:
        return [self.files[name] for name in self.ordered()]

    def find(self, mid: str) -> str | None:
        for name in self.ordered():
            if mid in self.files[name]:
                return name
        return None

    @contextlib.contextmanager
    def write_lock(self) -> Iterator[None]:
        _paths.makedirs(self.root, self.path)  # directories appear on first write only
        lock = _paths.under(self.root, self.path / ".lock")
        with contextlib.ExitStack() as held:
            try:
                held.enter_context(write_lock(lock))
            except OSError as exc:
                if exc.errno == errno.ELOOP or lock.is_symlink():  # ELOOP: O_NOFOLLOW; Windows: a reparse point
                    raise MemoryFileError(str(lock), None, _paths.SYMLINK) from None
                raise
            with self._writing_lock:
                self.writing += 1
            try:
                yield
            finally:
                with self._writing_lock:
                    self.writing -= 1

    def stage(self, name: str, content: str | bytes, mode: int = _NEW_FILE_MODE) -> str:
        """Write the new content of ``name`` to a temp file beside it (fsync'ed, with the file's
        permissions); ``commit`` renames it."""
        fd, tmp = _paths.mkstemp(self.root, self.path, prefix=f".{name}.")
        try:
            os.fchmod(fd, stat.S_IMODE(mode))
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
            _paths.replace(self.root, tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        st = os.lstat(target)
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def open_for_write(self, name: str, create: bool) -> int:
        """A descriptor of ``name`` for a writer: never through a symlink (``O_NOFOLLOW``)."""
        flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT if create else 0)
        return _paths.open_fd(self.root, self.path / name, flags, _NEW_FILE_MODE)

    def current_sig(self, name: str) -> _Sig | None:
        try:
            st = _paths.lstat(self.root, self.path / name)
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)


def fine_tick_ns(path: Path, mountinfo: str | None = None) -> int:
    """The timestamp tick of the filesystem holding ``path`` (see ``_DIR_TICK_NS``), from the
    mount table (``mountinfo``: its text, else ``/proc/self/mountinfo``; none outside Linux)."""
    if mountinfo is None:
        try:
            with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
                mountinfo = fh.read()
        except OSError:
            return _DIR_TICK_NS
    real = os.path.realpath(path)
    point, fstype = "", ""
    for line in mountinfo.splitlines():  # "id parent dev root MOUNT_POINT options ... - FSTYPE source ..."
        fields = line.split()
        sep = fields.index("-", 6) if "-" in fields[6:] else len(fields)
        if sep + 1 >= len(fields):
            continue
        mount = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])  # \040: a space
        inside = real == mount or real.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(point):  # the deepest mount; the later of two at one point
            point, fstype = mount, fields[sep + 1]
    return _FINE_TICK_NS if fstype in _FINE_FILESYSTEMS else _DIR_TICK_NS


def _by_id(parsed: Any, path: str) -> dict[str, Memory]:
    """A file's memories by id. Two different texts with one id (a hash collision: never seen at
    80 bits, but possible) both stay visible, the later one under a longer id, and it is reported."""
    out: dict[str, Memory] = {}
    for e in parsed.entries:
        mem, mid = e.memory, e.memory.id
        if mid in out and normalized(out[mid].text) != normalized(mem.text):
            mid = longer_id(mem, out[mid], f"{path}:{e.first_line}")
            mem = replace(mem, id=mid)
        out.setdefault(mid, mem)
    return out


def _last_header(data: bytes) -> bytes | None:
    """The file's last line that starts with ``#`` (without its newline), when a newline comes
    before and after it: while the file is unchanged, bullets under it go at the file's end."""
    start = data.rfind(b"\n#")
    end = data.find(b"\n", start + 1) if start >= 0 else -1
    return data[start + 1 : end] if end >= 0 else None


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _carry_over(old_fd: int, read: int, root: Path, new_path: Path) -> None:
    """After replacing a file: bytes appended to the old file after we read it (``echo >>`` by
    hand, which takes no lock) are appended to the new one, so a hand edit is not lost. An
    appender may have opened the old file just before the rename and not written yet: look until
    the old file has stayed the same size for two looks a few milliseconds apart."""
    done, quiet = read, 0
    while quiet < 2:
        time.sleep(0.002)
        size = os.fstat(old_fd).st_size
        if size <= done:
            quiet += 1
            continue
        quiet = 0
        os.lseek(old_fd, done, os.SEEK_SET)
        extra = os.read(old_fd, size - done)
        fd = _paths.open_fd(root, new_path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, extra)
            os.fsync(fd)
        finally:
            os.close(fd)
        done += len(extra)


def _blind_append(fd: int, sig: _Sig, cached: _Sig | None, head: bytes | None,
                  by_topic: dict[str, list[Memory]]) -> bytes | None:
    """The bytes to append for an add into one topic, without reading the file, or None when the
    file must be read (``_insert_under_topic``). Only when the file is what the cache holds and
    its last header is exactly ``## topic`` with no blank line at its end: then the lines go at
    the end, which is what ``_insert_under_topic`` does there."""
    if sig != cached or head is None or len(by_topic) != 1 or sig[1] < 2:
        return None
    topic, mems = next(iter(by_topic.items()))
    if head != b"## " + topic.encode("utf-8"):
        return None
    end = os.pread(fd, 2, sig[1] - 2)
    if end[-1:] != b"\n" or end == b"\n\n":  # no newline at the end, or a blank line: the slow path
        return None
    return ("\n".join(format_line(m) for m in {m.id: m for m in mems}.values()) + "\n").encode("utf-8")


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


def _delete_lines(lines: list[str], entry: Any) -> None:
    """``_rewrite``'s edit that removes a memory's line(s)."""
    del lines[entry.first_line - 1 : entry.last_line]


def _file_name(name: str) -> str:
    """``name`` if it names a top-level memory file (``NAME.md``, not hidden), else an error."""
    if "/" in name or os.sep in name or "\0" in name or name.startswith(".") or not name.endswith(".md"):
        raise InvalidMemoryError(f"not a memory file name: {name[:80]!r} (a top-level NAME.md of the directory)")
    return name
