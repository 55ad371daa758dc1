"""``history="replay"``: the blocks memwire inserted before earlier user messages, put back in place.

In contextPerTurn with ``history="drop"`` the block of turn N is gone at turn N+1, so the
provider's prefix cache stops matching where it stood. With ``history="replay"`` memwire keeps,
per session, the block it inserted before each earlier user message and re-inserts it,
byte-identical, at its old place on every later request: the provider sees an append-only log.
Everything replay needs lives here:

- :class:`Replay`, the history strategy of contextPerTurn: a new turn retrieves only memories no
  replayed block shows, renders forgotten or edited memories out of earlier blocks, and compacts
  once when the replayed memory passes ``replay_max_tokens`` (the oldest blocks go, down to half);
- the turn memo is the session's :class:`Ledger` (the first request of a turn to commit wins, so
  every request of that turn, in any thread, gets the same bytes);
- the keys: a hash of the user message's identity (its normalized text: ``cache_control`` and other
  block metadata ignored, a string equal to one text block) and its occurrence number among the
  user messages of that same identity, so removing or editing an earlier message never moves a
  block onto another message (an edited message simply loses its block);
- the session's profile block (contextPerTurn with ``profile = true``), kept in the ledger too
  (:class:`ProfileMemo`), so that a restart puts back the same bytes; it is never compacted nor
  rendered out (byte-stable for the session);
- storage: one JSON Lines file per session under the memory directory (``.ledger/``), bounded in
  entries, files and age, saved by a background writer thread (off the request path; a ledger is
  read back whole, ``flush()`` waits for it).

Symlinks: memwire never follows one out of the memory directory. When ``.ledger`` or a session's
ledger file is a symlink (or not a plain directory / file), that ledger is kept in memory only, for
this process, and a warning is logged once; nothing is read, written, pruned or deleted through
it. A rewritten ledger file keeps its permissions.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..policies._tokens import count_tokens
from ._incremental import count_keys, user_keys
from ._render import Block, render_lines
from ._session import LRU

if TYPE_CHECKING:
    from ..memory._store import MemoryStore
    from ..policies.modes import Turn

__all__ = ["Replay", "LedgerEntry", "Ledger", "ProfileMemo", "message_keys", "flush", "PROFILE_KEY"]

log = logging.getLogger("memwire")

LEDGER_DIR = ".ledger"
MAX_ENTRIES = 500          # per session; the oldest go first (a compaction)
MAX_FILES = 1000           # sessions kept per memory directory
MAX_AGE_S = 30 * 24 * 3600  # sessions untouched this long are pruned
_VERSION = 3  # keys by message identity (2: raw JSON); a JSON Lines file: a header line, then one entry per line
PROFILE_KEY = "profile"  # the profile's line in a ledger file (message keys are "<hash>#<n>")


def message_keys(identities: Mapping[int, str]) -> dict[int, str]:
    """Ledger keys of user messages, given their identities (``Format.identity``) by index in
    conversation order: identity hash + occurrence number among messages of the same identity."""
    return count_keys(identities, {})


@dataclass(frozen=True)
class LedgerEntry:
    """The block inserted before one user message ("" when that turn got none)."""

    key: str
    ids: tuple[str, ...] = ()
    lines: tuple[str, ...] = ()   # the rendered memory lines, so a forgotten one can be re-rendered out
    text: str = ""
    tokens: int = 0
    skipped: str | None = None    # why that turn got no block (gate, nothing_relevant, ...)

    def without(self, gone: set[str], model: str | None) -> "LedgerEntry":
        """This entry with the memories in ``gone`` rendered out of its block."""
        kept = [(mid, line) for mid, line in zip(self.ids, self.lines) if mid not in gone]
        if not kept:
            return LedgerEntry(self.key)
        lines = tuple(line for _, line in kept)
        text = render_lines(lines)
        return LedgerEntry(self.key, tuple(mid for mid, _ in kept), lines, text, count_tokens(text, model))

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "LedgerEntry":
        return cls(str(d["key"]), tuple(d.get("ids", ())), tuple(d.get("lines", ())), str(d.get("text", "")),
                   int(d.get("tokens", 0)), d.get("skipped"))


class Ledger:
    """One session's entries, in turn order, and its profile. Thread-safe; the first writer of a
    turn (or of the profile) wins."""

    def __init__(self, path: Path | None, session: str = "", entries: Sequence[LedgerEntry] = (),
                 profile: LedgerEntry | None = None) -> None:
        self.path = path
        self.session = session
        self.entries: tuple[LedgerEntry, ...] = tuple(entries)
        self.profile = profile
        self._lock = threading.Lock()

    @classmethod
    def load(cls, root: Path, session: str) -> "Ledger":
        path = root / LEDGER_DIR / (hashlib.sha256(session.encode("utf-8", "surrogatepass")).hexdigest()[:24] + ".jsonl")
        _writer.flush(path)  # a ledger saved a moment ago by this process is read back whole
        if _unsafe(path):  # a symlink (or worse) where the ledger goes: this process keeps it in memory
            return cls(None, session)
        try:
            head, *lines = path.read_text(encoding="utf-8").splitlines()
            meta = json.loads(head)
            if not isinstance(meta, dict) or meta.get("version") != _VERSION or meta.get("session") != session:
                raise ValueError("not this session's ledger")
            by_key: dict[str, LedgerEntry] = {}
            for line in lines:
                if line.strip():  # a line cut short by a crash ends the readable part
                    try:
                        e = LedgerEntry.from_json(json.loads(line))
                    except (ValueError, KeyError, TypeError, AttributeError):
                        break
                    by_key[e.key] = e
            profile = by_key.pop(PROFILE_KEY, None)
            return cls(path, session, list(by_key.values()), profile)
        except (FileNotFoundError, NotADirectoryError):  # no ledger yet (or no directory: retrieval will say so)
            return cls(path, session)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:  # any shape: set aside
            log.warning("memwire: ledger %s unreadable (%s); starting a new one", path, exc)
            return cls(path, session)

    def get(self, key: str) -> LedgerEntry | None:
        for e in reversed(self.entries):
            if e.key == key:
                return e
        return None

    def commit(self, key: str, entries: Sequence[LedgerEntry], persist: bool = True, relook: bool = False) -> bool:
        """Replace the entries with ``entries`` (which hold ``key``) unless another request of the
        same turn committed first. Returns whether this call's entries were stored. ``persist=False``
        keeps the change in memory only (after a failed retrieval: the memory directory may be broken).
        ``relook``: the turn's entry may be replaced while it holds no block (nothing was sent)."""
        with self._lock:
            existing = self.get(key)
            if existing is not None and (existing.ids or not relook):
                return False
            self.entries = tuple(entries)[-MAX_ENTRIES:]
            snapshot = self._lines()
        if persist:
            self._save(snapshot)
        return True

    def set_profile(self, entry: LedgerEntry) -> LedgerEntry:
        """Keep ``entry`` as the session's profile unless one is kept already; returns the kept one."""
        with self._lock:
            if self.profile is not None:
                return self.profile
            self.profile = entry
            snapshot = self._lines()
        self._save(snapshot)
        return entry

    def _lines(self) -> tuple[LedgerEntry, ...]:
        """What the file holds: the profile first (set once, so a new turn is still an append)."""
        return (self.profile, *self.entries) if self.profile is not None else self.entries

    def _save(self, entries: tuple[LedgerEntry, ...]) -> None:
        if self.path is not None:  # serialized on the writer thread, off the request path
            _writer.submit(self.path, (self.session, entries))


class _Writer:
    """Saves ledgers off the request path: one daemon thread, the latest snapshot per file wins.

    ``flush()`` waits until everything submitted is on disk; loading a ledger flushes first, and
    so does interpreter exit."""

    def __init__(self) -> None:
        self._pending: dict[Path, tuple[str, tuple[LedgerEntry, ...]]] = {}
        self._writing: set[Path] = set()
        self._on_disk: dict[Path, tuple[LedgerEntry, ...]] = {}  # what this process last wrote
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def submit(self, path: Path, data: tuple[str, tuple[LedgerEntry, ...]]) -> None:
        with self._cond:
            self._pending[path] = data
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="memwire-ledger", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def flush(self, path: Path | None = None) -> None:
        """Wait until everything (or ``path``) submitted so far is on disk."""
        with self._cond:
            while (path in self._pending or path in self._writing) if path else (self._pending or self._writing):
                self._cond.wait(1.0)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending:
                    self._cond.wait()
                batch, self._pending = self._pending, {}
                self._writing = set(batch)
            try:
                for path, (session, entries) in batch.items():
                    written = _write(path, session, entries, self._on_disk.get(path))
                    if written is None:  # unknown state on disk: the next save rewrites the file
                        self._on_disk.pop(path, None)
                    else:
                        self._on_disk[path] = written
            finally:
                with self._cond:
                    self._writing = set()
                    self._cond.notify_all()


_warned: set[Path] = set()
_warned_lock = threading.Lock()


def _unsafe(path: Path) -> bool:
    """Whether the ledger directory or file of ``path`` is a symlink or not a plain directory /
    file (a FIFO would block a read). Logs a warning once per directory or file."""
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
                what = "a symlink" if stat.S_ISLNK(mode) else "not a plain " + ("directory" if p == path.parent else "file")
                log.warning("memwire: %s is %s; memwire does not read or write ledgers through it: replay "
                            "ledgers stay in memory for this process", p, what)
            return True
    return False


def _line(entry: LedgerEntry) -> str:
    return json.dumps(asdict(entry), ensure_ascii=False, separators=(",", ":")) + "\n"


def _write(
    path: Path, session: str, entries: tuple[LedgerEntry, ...], on_disk: tuple[LedgerEntry, ...] | None
) -> tuple[LedgerEntry, ...] | None:
    """Append the new entries when the file holds a prefix of them (a new turn: one short line);
    rewrite it atomically otherwise (compaction, a forgotten memory). Returns what is on disk."""
    tmp = ""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if _unsafe(path):  # it became a symlink since it was loaded: never write through it
            return None
        try:
            mode: int | None = stat.S_IMODE(os.lstat(path).st_mode)
        except FileNotFoundError:
            mode = None
        if on_disk is not None and entries[: len(on_disk)] == on_disk and mode is not None:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0))
            with open(fd, "a", encoding="utf-8") as fh:
                fh.write("".join(_line(e) for e in entries[len(on_disk):]))
            return entries
        fd, tmp = tempfile.mkstemp(prefix=".ledger.", suffix=".tmp", dir=path.parent)
        if mode is not None:  # a rewrite keeps the file's permissions (a new ledger is private)
            os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps({"version": _VERSION, "session": session, "saved": time.time()}) + "\n")
            fh.write("".join(_line(e) for e in entries))
        os.replace(tmp, path)
        if mode is None:
            _prune(path.parent)
        return entries
    except OSError as exc:  # the ledger is an optimization: never fail a call over it
        log.warning("memwire: could not save ledger %s (%s)", path, exc)
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return None


_writer = _Writer()
atexit.register(_writer.flush)


def flush() -> None:
    """Wait until every ledger change is on disk."""
    _writer.flush()


def _prune(directory: Path) -> None:
    """Drop ledgers older than MAX_AGE_S, then the oldest beyond MAX_FILES. Only plain files in a
    plain directory: never a symlink, nor anything through one."""
    with contextlib.suppress(OSError):
        if not stat.S_ISDIR(os.lstat(directory).st_mode):
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


# ---------------------------------------------------------------------------- the strategy

Search = Callable[[bool, frozenset[str]], Block]  # (fresh, ids to leave out) -> the new block


class Replay:
    """The replay history strategy for one middleware: the sessions' ledgers, loaded from disk once
    per session and kept in an LRU of ``memo_size`` sessions."""

    name = "replay"

    def __init__(self, max_tokens: int, memo_size: int) -> None:
        self.max_tokens = max_tokens  # replayed memory per session before a compaction
        self.ledgers: LRU[tuple[str, str], Ledger] = LRU(memo_size)
        # in this process: the store version an empty turn was searched at (may look again)
        self._looked: LRU[tuple[int, str], int] = LRU(memo_size)

    def keys(self, turn: "Turn") -> dict[int, str]:
        """The ledger key of each human user message of the request, by index (reading only the
        messages that are new since the conversation's previous request)."""
        return user_keys(turn.fmt, turn.view)

    def memo(self, turn: "Turn", keys: Mapping[int, str]) -> "LedgerMemo":
        assert turn.view.latest_user is not None
        return LedgerMemo(self._ledger(turn), keys[turn.view.latest_user], turn.store, self._looked)

    def profile_memo(self, turn: "Turn") -> "ProfileMemo":
        """The memo of the session's profile block: its ledger."""
        return ProfileMemo(self._ledger(turn))

    def compute(self, turn: "Turn", keys: Mapping[int, str], search: Search) -> Callable[[bool], Block]:
        ledger = self._ledger(turn)
        return lambda fresh: self._new_turn(ledger, turn, keys, search, fresh)

    def earlier(self, turn: "Turn", keys: Mapping[int, str], block: Block) -> dict[int, str]:
        """The blocks to put back before earlier user messages, by index: byte-identical."""
        by_key = {e.key: e for e in block.extra or ()}
        out: dict[int, str] = {}
        for i in turn.view.user_indices[:-1]:
            e = by_key.get(keys[i])
            if e is not None and e.text:
                out[i] = e.text
        return out

    def _ledger(self, turn: "Turn") -> Ledger:
        key = (turn.namespace, turn.session)
        cached = self.ledgers.get(key)
        if cached is None:  # loaded from disk once per session (I/O, but only on a session's first call)
            cached = self.ledgers.setdefault(key, Ledger.load(turn.store.path, turn.session))
        return cached

    def _new_turn(self, ledger: Ledger, turn: "Turn", keys: Mapping[int, str], search: Search, fresh: bool) -> Block:
        """A new turn: refresh the earlier blocks, retrieve only new memories. The block's ``extra``
        is every entry of the session, this turn's last."""
        view = turn.view
        assert view.latest_user is not None
        latest_key = keys[view.latest_user]
        present = {keys[i] for i in view.user_indices if i != view.latest_user}
        entries = list(ledger.entries)
        compacted = False
        # retrieval reads the files first, so the check for forgotten memories below sees them as
        # this search did (a forgotten id is not in the index anyway: excluding it changes nothing)
        block = search(fresh, frozenset(mid for e in entries if e.key in present for mid in e.ids))
        gone = turn.store.missing({mid for e in entries for mid in e.ids}, refresh=False, wait=fresh)
        for j, e in enumerate(entries):  # a forgotten or edited memory is rendered out of its block
            if gone.intersection(e.ids):
                entries[j] = e.without(gone, turn.model)
                compacted = compacted or e.key in present
        shown = [e for e in entries if e.key in present and e.text]
        total = sum(e.tokens for e in shown)
        if total + block.tokens > self.max_tokens:  # compact once: drop the oldest blocks down to half the cap
            budget = self.max_tokens // 2 - block.tokens
            for j, e in enumerate(entries):
                if total <= budget:
                    break
                if e.key in present and e.text:
                    entries[j] = LedgerEntry(e.key)
                    total -= e.tokens
                    compacted = True
        new = LedgerEntry(latest_key, block.ids, block.lines, block.text, block.tokens, block.skipped)
        entries = [e for e in entries if e.key != latest_key] + [new]
        return replace(block, extra=tuple(entries), compacted=compacted)


def _as_block(entry: LedgerEntry, **kw: Any) -> Block:
    skipped = kw.pop("skipped", None) or entry.skipped or (None if entry.ids else "nothing_relevant")
    return Block(entry.ids, entry.lines, entry.text, entry.tokens, skipped=skipped, **kw)


class ProfileMemo:
    """The session's profile block, kept in the session's ledger: the first one settled is what
    every request of the session gets, after a restart too."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def get(self) -> Block | None:
        entry = self.ledger.profile
        return None if entry is None else _as_block(entry)

    def settle(self, block: Block) -> Block:
        entry = LedgerEntry(PROFILE_KEY, block.ids, block.lines, block.text, block.tokens, block.skipped)
        return _as_block(self.ledger.set_profile(entry))


class LedgerMemo:
    """The turn memo of replay: the session's ledger, keyed by the latest user message. An entry
    that holds no block because its search found nothing is looked at again once the store changed."""

    def __init__(self, ledger: Ledger, key: str, store: "MemoryStore", looked: LRU[tuple[int, str], int]) -> None:
        self.ledger, self.key, self.store, self.looked = ledger, key, store, looked

    def _block(self, entry: LedgerEntry, entries: tuple[LedgerEntry, ...], **kw: Any) -> Block:
        return _as_block(entry, extra=entries, **kw)

    def get(self) -> Block | None:
        entries = self.ledger.entries
        entry = self.ledger.get(self.key)
        if entry is None:
            return None
        found = self._block(entry, entries)
        if found.skipped == "nothing_relevant":  # no block was sent: look again if the store changed
            found = replace(found, looked_at=self.looked.get((id(self.ledger), self.key)))
            if found.looked_at is None or found.may_look_again(self.store):
                return None
        return found

    def settle(self, block: Block) -> Block:
        if block.looked_at is not None:
            self.looked.setdefault((id(self.ledger), self.key), block.looked_at, replace=lambda _: True)
        if not block.extra:  # retrieval failed: record an empty entry, keep the earlier ones as they are
            entry = LedgerEntry(self.key)
            if self.ledger.commit(self.key, (*self.ledger.entries, entry), persist=False):
                return self._block(entry, self.ledger.entries, skipped=block.skipped, error=block.error)
        elif self.ledger.commit(self.key, block.extra, relook=block.looked_at is not None or bool(block.ids)):
            return block
        return self.get() or block
