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
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import logging
import os
import re
import stat
import threading
import time
import unicodedata
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _paths
from .._errors import (
    InvalidMemoryError,
    MemoryFileError,
    MemoryNotFoundError,
    NamespaceError,
    StoreBusyError,
)
from .._locks import write_lock
from ..policies._dates import absolute_dates, might_hold_dates, said_day
from ..policies._query import Query
from ..policies._screen import refusal
from . import _snapshot, _supersede
from ._capture_queue import FileQueue
from ._index import DEFAULT_MIN_SCORE, BM25Index
from ._lifecycle import Lifecycle, Scoring
from ._logfile import append_jsonl_many, read_jsonl
from ._markdown import MAX_TAG_CHARS, PINNED_TAG, TAG_PATTERN, ParsedFile, format_line, parse, parse_text
from ._model import Hit, Memory, memory_id, normalized
from ._protocol import CaptureQueue, LedgerKinds, LedgerT
from ._table import Kind, Merged, Table, longer_id

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

MAIN_FILE = "MEMORY.md"
DEFAULT_TOPIC = "Notes"
_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")  # fullmatch: "$" would let a trailing newline in
_Sig = tuple[int, int, int]
# A directory's timestamp tick: how long after a change its mtime may not move for another change
# (see _Dir._list). Local Linux filesystems stamp with the kernel's coarse clock, at most a jiffy
# (10 ms at HZ=100) behind, in nanoseconds; elsewhere (FAT's 2 s, a network filesystem's server
# clock, another system, whole-second stamps) 2 s is assumed.
_DIR_TICK_NS = 2_000_000_000
_FINE_TICK_NS = 20_000_000
_FINE_FILESYSTEMS = frozenset({"ext4", "xfs", "btrfs", "tmpfs", "f2fs", "overlay", "zfs", "bcachefs"})
MAX_MEMORY_CHARS = 4000  # about 1,000 tokens: more than a whole default memory block
MAX_TOPIC_CHARS = 100
ARCHIVE_DIR = "archive"
INBOX_DIR = "inbox"
#: why a memory is in the archive (its latest reason is its tag there)
ARCHIVE_REASONS = _supersede.ARCHIVE_REASONS  # "merged": a duplicate merged into another (memwire dedupe)
# a read that must not wait (a search on the event loop) still waits this long for the lock: a
# background thread's read holds it for tens of microseconds, a hop to a worker thread costs more
BUSY_WAIT_S = 0.002
MIN_ID_PREFIX = 4  # forget/pin/get accept a unique prefix of an id this long or longer
_NEW_FILE_MODE = 0o644
_TAG_RE = re.compile(TAG_PATTERN)
_PRIOR_POOL = 5  # the stability prior reorders the k best and this many more
#: the event logs a store keeps (``append_event``): capture events, telemetry
EVENT_LOGS = ("captured", "telemetry", "requests")  # requests: the proxy's per-request records


def validate_namespace(name: str) -> str:
    """A namespace is one safe path component: letters, digits, ``._@-``, at most 128 chars."""
    if not isinstance(name, str) or not _NAMESPACE.fullmatch(name) or name in (".", "..") or ".." in name:
        shown = repr(name)[:80]
        raise NamespaceError(
            f"invalid namespace {shown}: use 1-128 letters, digits, '.', '_', '@' or '-', "
            "starting with a letter or digit (no '/', '..', NUL)"
        )
    return name


def fold_namespace(name: str) -> str:
    """How namespaces compare: NFKC case-folded (``tenA``, ``TENA`` and ``ｔｅｎａ`` are one), so
    that no two tenants' directories can be one directory on a case-insensitive filesystem."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())


def _case_twin(root: Path, name: str) -> str | None:
    """An existing namespace of ``root``'s tree spelt otherwise than ``name`` but equal folded."""
    folded = fold_namespace(name)
    try:
        with _paths.scandir(root, root / "namespaces") as it:
            return next((e.name for e in it if e.name != name and fold_namespace(e.name) == folded), None)
    except (OSError, MemoryFileError):
        return None


def event_log_name(log: str) -> str:
    """``log`` if it names one of the store's event logs (``EVENT_LOGS``), else an error."""
    if log not in EVENT_LOGS:
        raise ValueError(f"unknown event log {log!r}; one of {', '.join(EVENT_LOGS)}")
    return log


def full_id(ids: Collection[str], mid: str) -> str:
    """``mid`` itself, or the one id of ``ids`` it is a prefix of (ids of older versions were 10
    characters: prefixes of today's, so they keep working)."""
    if mid in ids or len(mid) < MIN_ID_PREFIX:
        return mid
    found = [k for k in ids if k.startswith(mid)]
    if len(found) > 1:
        raise MemoryNotFoundError(f"id prefix {mid!r} matches {len(found)} memories "
                                  f"({', '.join(sorted(found)[:3])}, ...); give more of the id")
    return found[0] if found else mid


#: a hit before its Memory is built: its id, its index score, and the store's handle of it (what
#: ``index_hits``' ``find`` returned: ``Merged.at``'s (table, row), or PgStore's Memory)
Found = tuple[str, float, Any]


def index_hits(index: BM25Index, find: Callable[[str], Any], query: str, k: int, cut: float | None,
               context: Sequence[str], exclude: Collection[str]) -> list[Found]:
    """What the index finds for ``query`` (``k`` and the prior's pool), with ``find``'s handle of
    each memory the store still holds (None: gone): the first step of both stores' ``search``
    (then ``with_prior``)."""
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


def _row_kind(at: tuple[Table, int]) -> Kind:
    return at[0].kind_at(at[1])


def _row_memory(mid: str, at: tuple[Table, int]) -> Memory:
    return at[0].memory_at(at[1], mid)


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
            raise MemoryFileError(str(self.path), None, "the memory directory is not a directory")
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


def _checked(mem: Memory, *, screen: bool = True, timezone: str | None = None) -> Memory:
    """The memory ``add`` will write, validated: it must read back as exactly this memory. With
    ``screen`` (every new memory; not a copy into the archive) what may never be stored (a secret,
    control characters: ``policies._screen``) is refused, naming the rule, never the text, and
    relative dates become absolute ones from the day it was said (its date, else today in
    ``timezone``; ``policies._dates``), the memory then dated that day."""
    text = " ".join(mem.text.split())  # one memory is one line
    if screen and might_hold_dates(text):
        day = said_day(mem.date, timezone)
        if (dated := absolute_dates(text, day)) != text:
            text, mem = dated, replace(mem, date=mem.date or day.isoformat())
    if not text:
        raise InvalidMemoryError("a memory needs some text")
    if len(text) > MAX_MEMORY_CHARS:  # one memory is one fact; a pasted file would crowd every block
        raise InvalidMemoryError(f"a memory is at most {MAX_MEMORY_CHARS:,} characters, this one has {len(text):,}; "
                                 "split it, or keep the file and remember where it is")
    if screen and (why := refusal(" ".join([text, mem.topic or "", *mem.tags]))) is not None:
        raise InvalidMemoryError(why)
    pinned, tags = mem.pinned, []
    for raw in mem.tags:
        tag = unicodedata.normalize("NFC", str(raw).strip().lstrip("#").lower())
        if tag == PINNED_TAG:
            pinned = True
        elif tag and tag not in tags:
            if len(tag) > MAX_TAG_CHARS or not _TAG_RE.fullmatch(tag):
                raise InvalidMemoryError(
                    f"invalid tag {raw!r}: a tag is a letter (any script) followed by letters, digits, "
                    f"'_', '-', '/' or '+', at most {MAX_TAG_CHARS} characters, no spaces (e.g. 'c++', 'code-style')")
            tags.append(tag)
    topic = " ".join(mem.topic.split()) if mem.topic else DEFAULT_TOPIC
    if len(topic) > MAX_TOPIC_CHARS:
        raise InvalidMemoryError(f"a topic is at most {MAX_TOPIC_CHARS} characters, this one has {len(topic)}")
    date = " ".join(mem.date.split()) if mem.date else None
    out = Memory(memory_id(text), text, tuple(tags), pinned, topic, date)
    back = parse_text(f"## {topic}\n{format_line(out)}\n").entries
    if len(back) != 1 or back[0].memory != out:
        got = back[0].memory if len(back) == 1 else None
        what = ("topic" if got.topic != topic else "date" if got.date != date else "text") if got else "line"
        raise InvalidMemoryError(f"this memory's {what} cannot be stored exactly as given "
                                 f"(it would read back differently): {text[:80]!r}")
    return out


class MemoryStore:
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
        try:
            with _paths.scandir(self.root, self.root / "namespaces") as it:
                return sum(1 for e in it if e.is_dir(follow_symlinks=False))
        except (FileNotFoundError, NotADirectoryError, MemoryFileError):
            return 0
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

    def append_event(self, log: str, record: Mapping[str, Any]) -> None:
        """Append one record to an event log (``EVENT_LOGS``): ``DIR/.LOG.jsonl``, bounded (see
        ``_logfile``), never through a symlink."""
        self.append_events(log, (record,))

    def append_events(self, log: str, records: Sequence[Mapping[str, Any]]) -> None:
        """``append_event`` of each of ``records``, in order, with one open of the log."""
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
    def _reading(self, refresh: bool, wait: bool) -> Iterator[None]:
        """The store's lock for a read; ``wait=False`` raises ``StoreBusyError`` instead of waiting
        more than ``BUSY_WAIT_S`` (a caller on a time budget then reads elsewhere, under its
        budget): a background thread's short read (telemetry's ``known``) is waited out, a
        re-read or a write is not."""
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

    def __iter__(self) -> Iterator[Memory]:
        return iter(self.memories())

    def memories(self, *, refresh: bool = True, wait: bool = True) -> list[Memory]:
        """Every memory, in file order (the project's files after the global ones)."""
        with self._reading(refresh, wait):
            listing = self._merged.listing()
        return list(listing())  # built outside the lock (see Merged.listing)

    def __len__(self) -> int:
        self.refresh()
        return len(self._merged)

    def __contains__(self, mid: object) -> bool:
        self.refresh()
        return mid in self._merged

    def missing(self, ids: Iterable[str], *, refresh: bool = True, wait: bool = True) -> set[str]:
        """The ids in ``ids`` that no longer name a memory (forgotten, or edited into another id).
        ``refresh=False``: as of the last read, for a caller that just searched."""
        with self._reading(refresh, wait):
            merged = self._merged
            return {mid for mid in ids if mid not in merged}

    def known(self, ids: Iterable[str]) -> list[Memory]:
        """The memories of these full ids as last read (no re-read; ids no longer there are left out).
        Only found under the lock; built after it (a table's rows never change), so a search
        waits the less for a background thread's read."""
        with self._reading(False, True):
            found = self._merged.rows(ids)
        return [table.memory_at(row, mid) for table, mid, row in found]

    def get(self, mid: str) -> Memory:
        """The memory with id ``mid`` (or a unique prefix of it)."""
        with self._reading(True, True):
            found = self._merged.get(self._full_id(mid))  # an ambiguous prefix raises its own error
            if found is None:
                raise MemoryNotFoundError(f"no memory with id {mid!r} in {self.path}")
            return found

    def pinned(self) -> list[Memory]:
        return [m for m in self if m.pinned]

    def search(
        self, query: str, k: int = 5, *, min_score: float | None = None, context: Sequence[str] = (),
        exclude: Collection[str] = (), refresh: bool = True, wait: bool = True,
    ) -> list[Hit]:
        """The memories most relevant to ``query``, best first (score, then id); ids in ``exclude``
        are left out of the k (the replay strategy's memories already in front of the model).
        ``refresh=False`` searches the files as last read; ``wait=False`` raises ``StoreBusyError``
        rather than wait for another thread."""
        with self._reading(refresh, wait):
            cut = min_score if min_score is not None else self.min_score
            found = index_hits(self._index, self._merged.at, query, k, cut, context, exclude)
            if self._semantic is not None:  # hybrid: semantic hits past their cut fill in after BM25's
                found = self._with_semantic(found, query, k, cut, exclude)
        # built after the lock: a table's rows never change
        return with_prior(found, k, self.track, self._lifecycle_of, _row_kind, _row_memory)

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
        """Write one memory to ``MEMORY.md`` (under ``## topic``). Adding a text that is already
        stored returns the stored memory (with the new tags and pin merged in) and reinforces it.
        What is returned is what reads back: text that cannot be stored exactly raises
        ``InvalidMemoryError``. ``cue`` says how it got in (``explicit``: a person; ``captured``,
        ``distilled``, ``imported``): it weighs in its stability (see ``lifecycle``).

        Memory stays true (``_supersede``): a new value of an active memory's subject supersedes
        it (archived as ``superseded``, linked both ways), the same thing in other words reinforces
        the memory that says it (and is what is returned), a doubtful pair is kept and marked in
        conflict. ``replaces`` (an id or a unique prefix): this memory supersedes that one, whatever
        the words (an edit, a correction)."""
        return self._add_many([Memory.create(text, tuple(tags), pinned, topic, date)], cue, replaces)[0]

    def add_many(self, memories: Iterable[Memory | str], *, cue: str = "explicit") -> list[Memory]:
        """Write many memories in one locked file write (each settled as ``add`` says)."""
        return self._add_many(memories, cue)

    def _plan(self, d: _Dir, items: list[Memory], fresh: list[Memory], replaces: str | None,
              merge: bool) -> _supersede.Plan:
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
        plan = _supersede.plan(fresh, _supersede.candidates(self.search), here)
        if not merge:
            plan.duplicates.clear()
        return plan

    def _add_many(self, memories: Iterable[Memory | str], cue: str, replaces: str | None = None,
                  merge: bool = True) -> list[Memory]:
        items = [_checked(Memory.create(m) if isinstance(m, str) else m, screen=self.screens, timezone=self.timezone)
                 for m in memories]
        d = self._dirs[-1]
        by_topic: dict[str, list[Memory]] = {}
        result: list[Memory] = []
        with d.write_lock():  # other processes and threads writing this directory wait here
            with self._lock:
                self.refresh()
                found = [(mem, d.find(mem.id)) for mem in items]
            plan = self._plan(d, items, [mem for mem, name in found if name is None], replaces, merge)
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
        if self.track:
            new = {m.id for ms in by_topic.values() for m in ms}
            self.lifecycle.added([m for m in result if m.id in new], cue)
            self.lifecycle.reinforce([m.id for m in result if m.id not in new])
            if gone:
                self.lifecycle.forgotten([m.id for m in gone])
            self.lifecycle.link(_supersede.links_of(plan, result, self._conflicts_of))
        return result

    def _conflicts_of(self, mid: str) -> list[str]:
        return list(self.lifecycle.links(mid).get("conflicts", ()))

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

    def forget(self, mid: str, *, reason: str | None = "forgotten") -> Memory:
        """Remove a memory's line(s) from its file, into the archive tagged ``reason`` (written
        there first: a crash in between leaves a copy, never a loss). ``reason=None`` deletes it
        outright (what moves between the inbox and the store). Returns what was removed. ``mid``
        may be a unique prefix of the id."""
        if reason is not None and reason not in ARCHIVE_REASONS:
            raise ValueError(f"reason must be one of {', '.join(ARCHIVE_REASONS)}, got {reason!r}")

        with self._locked(mid) as (d, name, full):
            if reason is not None:
                self.archive_copy([m for m in (d.files[name].get(full),) if m], reason)
            entry, _ = self._rewrite(d, name, full, _delete_lines)
        if reason is not None and self.track:
            self.lifecycle.forgotten([full])
        if full in self:  # still visible from the other scope
            log.info("memwire: %s forgotten in %s but still present in another scope", full, d.path)
        return entry.memory  # type: ignore[no-any-return]

    def archive_copy(self, mems: Iterable[Memory], reason: str) -> None:
        """Write ``mems`` to the archive in one write, each tagged with why (only the latest why)
        and dated today; the caller removes them where they were."""
        self.archive.add_many([archived(m, reason) for m in mems])

    def restore(self, mid: str) -> Memory:
        """Bring a memory back from the archive (``mid``: its id or a unique prefix), without the
        archive's reason tag; it counts as said again (its metadata goes on where it was)."""
        archived = self.archive.get(mid)
        back = Memory.create(archived.text, [t for t in archived.tags if t not in ARCHIVE_REASONS], archived.pinned,
                             archived.topic)
        # never merged into a look-alike (the archived copy goes next); a value it had been replaced
        # by is superseded by it in turn (archived, linked): restoring an old value is going back to it
        back = self._add_many([back], cue_of(archived), merge=False)[0]
        self.archive.forget(archived.id, reason=None)
        return back

    # ---------------------------------------------------------------- whole files

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


def archived(mem: Memory, reason: str) -> Memory:
    """``mem`` as the archive keeps it: tagged with why it left (only the latest why), dated today."""
    return Memory.create(mem.text, [t for t in mem.tags if t not in ARCHIVE_REASONS] + [reason], mem.pinned,
                         mem.topic, time.strftime("%Y-%m-%d"))


def cue_of(mem: Memory) -> str:
    """How a memory got in, as its tags tell (capture and import tag what they write)."""
    return next((cue for cue in ("distilled", "captured", "imported") if cue in mem.tags), "explicit")


def _delete_lines(lines: list[str], entry: Any) -> None:
    """``_rewrite``'s edit that removes a memory's line(s)."""
    del lines[entry.first_line - 1 : entry.last_line]


def _file_name(name: str) -> str:
    """``name`` if it names a top-level memory file (``NAME.md``, not hidden), else an error."""
    if "/" in name or os.sep in name or "\0" in name or name.startswith(".") or not name.endswith(".md"):
        raise InvalidMemoryError(f"not a memory file name: {name[:80]!r} (a top-level NAME.md of the directory)")
    return name
