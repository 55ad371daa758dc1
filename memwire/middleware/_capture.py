"""Explicit capture: read on the request path, written off it, never dropped.

``Capture.offer(turn)`` runs on the request path, once per turn (a memo lookup: never per
tool-loop request). It reads the human text of the latest user message for statements
(``policies/_capture``: a few substring tests for almost every message, regexes for the rest), and
refuses one that holds a secret (``policies/_secrets``: a log line naming the kind, never the
value; nothing written anywhere). What it found goes to the store's capture queue
(``memory/_capture_queue``: an append to a file beside the memories, for a PostgreSQL store this
process's memory) and the worker thread is woken: only the write waits. A statement is never
dropped: when the worker is ``MAX_BACKLOG`` statements behind, a request that says one waits for
it, at most ``BACKPRESSURE_S``, and then queues it anyway. The worker writes queued statements as
soon as they come when ``URGENT`` of them wait; else once no request has been prepared for
``settle_s`` (the request has left and the provider is working on it), or ``MAX_DEFER_S`` after
they came under sustained load (``memwire._worker.Traffic``). What a restart left in a queue is
written when the store is first seen again (a queued entry is applied once: see
``_capture_queue``). A store that cannot be written now (a full disk, an outage) keeps its
statements queued and is tried again every ``RETRY_S``.

Per statement, the worker:

1. skips it within ``COOLDOWN_S`` of capturing the same statement (a person repeating it, a
   client re-sending the turn);
2. reinforces a stored memory it nearly duplicates instead of adding it (an event in the capture
   log, no new line): BM25 finds it (``search`` score ≥ ``DUPLICATE_SCORE``, the share of the
   statement's weight it matches) and it holds ``DUPLICATE_WORDS`` of the statement's words, the
   same numbers and the same names;
3. supersedes an earlier captured "User's KEY is ..." of the same profile key (the old one goes to
   the archive);
4. adds it, tagged with its kind and ``#captured`` and dated (the day it was said), under a topic
   per kind, to the memory files (``capture = "auto"``) or to the review inbox (``"review"``); a
   statement a person rejected is not proposed again.

Relative dates in a statement ("tomorrow", "next Friday", "last week") are written as absolute
ones from the day it was said (``policies/_dates``): the request's time, in the user's time zone
(the one they stated: a "User's timezone is ..." memory; else the ``timezone`` setting; else UTC).

"forget that X" archives the captured memory that best matches X (score ≥ ``FORGET_SCORE``). A
bare retraction ("actually, forget that", "scratch that", "no, that's wrong") and a correction
("correction: X", "I meant X", "actually it's X", "not Y but X") act on what this conversation
captured last, read from the capture log (so any process, or a restart, finds it): the statement
just before it in the same message, else what the previous user message captured (a Responses
call continuing a stored history, whose earlier messages are not in the request: the session's
latest captures). A retraction archives it; a correction archives it as ``superseded`` and
captures the corrected statement (X itself, or the memory with X in place of the value it
corrects: ``policies._capture.corrected``; named by "not Y" when said), in one write that links
the two. In review mode a correction of an active memory waits in the inbox naming it; that memory
stays until a person approves (``_inbox.added``). Nothing to act on, a
retraction does nothing and "correction: X" captures X. Only captured memories are ever taken
back, and only this conversation's: what a person wrote by hand, or another session captured, stays.

Each write is one event in the capture log (``memory/_inbox``). An event that cannot be appended
(a full disk) once the memory was written is not a failed capture: it is kept and appended again
every ``RETRY_S`` until it is.

Distillation (``_distill``, opt-in) is the one part that may be shed: at most ``MAX_PENDING``
exchanges wait for it; past that one is not read, said once per backlog and counted
(``memwire._worker.dropped("distillation")``: ``memwire_capture_dropped_total`` on ``/metrics``).
The worker runs it only when no statement waits. A failure costs a log line that names no text.
"""

from __future__ import annotations

import atexit
import collections
import hashlib
import logging
import re
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, cast

from .._errors import MemoryFileError, StoreBusyError, StoreUnavailableError
from .._logs import describe
from .._lru import LRU
from .._worker import MAX_DEFER_S, QUIET_S, Traffic, dropped
from ..memory._capture_queue import FileQueue, MemoryQueue, PgQueue, Retry
from ..memory._inbox import CAPTURED_TAG, inbox_of, log_event, read_log, reject, replaces_tag, was_rejected
from ..memory._model import Memory, memory_id, normalized
from ..memory._protocol import Store
from ..memory._supersede import ALTERNATIVES
from ..memory._text import analyze
from ..memory._upkeep import sweep_if_due
from ..policies._capture import corrected, statements
from ..policies._dates import absolute_dates, day_of, might_hold_dates, zone_named
from ..policies._human_text import human_text
from ..policies._screen import screened
from ..policies.modes import Turn
from ..policies.modes._base import turn_key
from ..policies.modes._render import CLOSE, OPEN
from ._distill import Complete, Distiller
from ._formats import Format

__all__ = [
    "BACKPRESSURE_S",
    "CAPTURE_SETTINGS",
    "COOLDOWN_S",
    "DUPLICATE_SCORE",
    "DUPLICATE_WORDS",
    "FORGET_SCORE",
    "MAX_BACKLOG",
    "MAX_PENDING",
    "RETRY_S",
    "TOPICS",
    "URGENT",
    "Capture",
]

log = logging.getLogger("memwire")

CAPTURE_SETTINGS = ("auto", "review", "off")
DUPLICATE_SCORE = 0.8
DUPLICATE_WORDS = 0.8
FORGET_SCORE = 0.5
COOLDOWN_S = 600.0
MAX_PENDING = 1000      # exchanges waiting for distillation at most; past it one is shed (logged, counted)
MAX_BACKLOG = 1000      # statements waiting to be written past which a request that says one waits ...
BACKPRESSURE_S = 0.1    # ... at most this long (then its statements are queued all the same)
URGENT = 16             # statements waiting past which the worker writes them without waiting for a quiet moment
RETRY_S = 2.0           # a store that could not be written, or a capture event not appended, is tried again
TOPICS = {"preference": "Preferences", "instruction": "Instructions", "fact": "Facts", "decision": "Decisions",
          "lesson": "Lessons"}
DISTILLED_TAG = "distilled"
MAX_EXISTING = 50  # the captured memories a distillation may update, most recent last
_PROFILE_PREFIX = "User's "
_KINDS = ("fact", "preference", "instruction", "forget", "correct")
_CAPTURED_EVENTS = ("captured", "captured-for-review")
_ZONE_KEYS = ("user's timezone is ", "user's time zone is ")
# the store cannot be written now (a full disk, a permission, an outage): keep the statement queued
_TRANSIENT = (OSError, StoreUnavailableError, StoreBusyError, MemoryFileError)

_alive: weakref.WeakSet[Capture] = weakref.WeakSet()


@atexit.register
def _finish_at_exit() -> None:  # what was queued is on disk anyway; this only spares a replay
    for capture in list(_alive):
        capture.flush(2.0)


def entry_key(session: str, turn: str, kind: str, text: str) -> str:
    """The queue key of a statement: the same statement of the same turn is one entry."""
    return hashlib.blake2b("\x00".join((session, turn, kind, normalized(text))).encode("utf-8"),
                           digest_size=12).hexdigest()


class Capture:
    """One middleware's capture: its setting, its queues, its worker and what it has seen."""

    def __init__(self, setting: str = "auto", *, cooldown_s: float = COOLDOWN_S,
                 clock: Callable[[], float] = time.monotonic, memo_size: int = 1024,
                 distiller: Distiller | None = None, settle_s: float = QUIET_S, traffic: Traffic | None = None,
                 timezone: str | None = None) -> None:
        if setting not in CAPTURE_SETTINGS:
            raise ValueError(f"capture must be one of {', '.join(CAPTURE_SETTINGS)}, got {setting!r}")
        self.setting = setting
        self.cooldown_s = cooldown_s
        self.distiller = distiller
        self.settle_s = settle_s  # how long no request must have been prepared before the worker writes
        self.timezone = timezone  # the configured one: the day a statement was said, unless the user stated theirs
        self._clock = clock
        self._seen: LRU[tuple[str, ...], object] = LRU(memo_size)
        self._recent: LRU[tuple[str, str], float] = LRU(memo_size)  # (store, statement) -> when captured
        self._zones: dict[str, tuple[int, str | None]] = {}  # store -> (its version, the zone the user stated)
        self.traffic = traffic or Traffic()  # the middleware's: every request touches it
        self.listeners: list[Callable[[str], None]] = []  # told each event's name (captured, reinforced, ...)
        # one worker thread, in order: a "forget that" follows the capture it takes back
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._queues: dict[str, FileQueue | PgQueue | MemoryQueue] = {}  # by store location
        self._held: dict[str, MemoryQueue] = {}  # statements a queue file could not take (a full disk)
        self._due: dict[str, Store] = {}  # stores with statements to write (or to look at)
        self._due_since: float | None = None
        self._retry: dict[str, Store] = {}  # stores to try again at _retry_at
        self._retry_at = 0.0
        self._known: set[str] = set()  # stores whose leftovers were looked for
        self._jobs: collections.deque[tuple[Any, ...]] = collections.deque()  # distillation, shed past MAX_PENDING
        self._shedding = False
        self._backlog = 0  # statements this process queued and no one has written yet
        self._busy = False
        self._unlogged: list[tuple[Store, str, Memory, dict[str, str]]] = []  # capture events to append
        self._waiting = False  # said once per outage: the store cannot be written
        _alive.add(self)

    # ------------------------------------------------------------------ the request path

    def offer(self, turn: Turn, complete: Complete | None = None) -> None:
        """Read a new turn (request path: no I/O unless it says something to remember): its
        statements are queued, and with a distiller the exchange it finishes (the previous user
        message and the replies) is handed to the worker."""
        if self.setting == "off":
            return
        key, mine = turn.turn_key(), object()
        if self._seen.setdefault(key, mine) is not mine:  # another request of this turn was first
            return
        store = turn.store
        if store.location not in self._known:  # first seen: what a restart left in its queue is written
            self._wake(store)
        text = "" if turn.gate.skip else turn.view.user_text
        entries = self._entries(text, turn.session, key[-1], partial(_previous_turn, turn)) if text else []
        exchange = _previous_exchange(turn) if self.distiller is not None else None
        if not entries and not exchange:
            return
        self.traffic.touch()
        if entries:
            self._enqueue(store, entries)
        if exchange:
            self._offer_exchange(store, turn.session, key[-1], exchange, complete)

    def resume(self, store: Store) -> None:
        """Write, in the background, what a restart left in ``store``'s queues and its namespaces'
        (done anyway when a request first uses a store; a server calls this as it starts)."""
        if self.setting != "off":
            self._wake(store)

    def _entries(self, text: str, session: str, turn: str,
                 previous: Callable[[], str | None] = lambda: "") -> list[dict[str, Any]]:
        """The queue entries of ``text``'s statements. A retraction or a correction also names the
        previous user message's turn (``previous()``: "" when there is none, None when the request
        does not hold the earlier messages)."""
        out: list[dict[str, Any]] = []
        at = time.time()
        for st in statements(_without_blocks(text)):
            if (why := screened(" ".join(st.said.split()))) is not None:  # the store's screen, before the queue
                log.warning("memwire: not captured: the statement looks like it holds a %s (%s)", *why)
                continue
            entry: dict[str, Any] = {"key": entry_key(session, turn, st.kind, st.text), "kind": st.kind,
                                     "text": st.text, "session": session, "turn": turn, "at": at}
            if st.kind == "correct" or (st.kind == "forget" and not st.text):
                entry["prev"] = previous()
            if st.kind == "correct":
                entry.update(old=st.old, value=st.value, retracts=st.retracts)
            out.append(entry)
        return out

    def _queue_of(self, store: Store) -> FileQueue | PgQueue | MemoryQueue:
        q = self._queues.get(store.location)
        if q is None:
            q = self._queues.setdefault(store.location, _new_queue(store))
        return q

    def _enqueue(self, store: Store, entries: list[dict[str, Any]]) -> None:
        """Queue ``entries`` (never dropped): back-pressure first when the worker is far behind."""
        with self._cond:
            if self._backlog >= MAX_BACKLOG:
                self._start()
                self._cond.notify_all()
                deadline = time.monotonic() + BACKPRESSURE_S
                while self._backlog >= MAX_BACKLOG and (left := deadline - time.monotonic()) > 0:
                    self._cond.wait(left)
            self._backlog += len(entries)
        try:
            self._queue_of(store).put(entries)
        except Exception as exc:
            held = self._held.setdefault(store.location, MemoryQueue())
            if not held.pending():  # said once while it lasts (an outage is not a line per statement)
                log.warning("memwire: capture queue of %s not written (%s); what is said is held in memory until "
                            "it can be", store.location, describe(exc))
            held.put(entries)
        self._wake(store)

    def _wake(self, store: Store) -> None:
        with self._cond:
            self._due[store.location] = store
            if self._due_since is None:
                self._due_since = time.monotonic()
            self._start()
            self._cond.notify_all()

    def _offer_exchange(self, store: Store, session: str, turn: str,
                        exchange: tuple[Format, list[Any], str], complete: Complete | None) -> None:
        with self._cond:
            shed = len(self._jobs) >= MAX_PENDING
            if shed:
                if not self._shedding:
                    log.warning("memwire: distillation is %d exchanges behind; exchanges are not read until it "
                                "catches up (counted in memwire_capture_dropped_total)", len(self._jobs))
                self._shedding = True
            else:
                self._shedding = False
                self._jobs.append((time.monotonic(), store, session, turn, exchange, complete))
                self._start()
                self._cond.notify_all()
        if shed:
            dropped("distillation")

    def _event(self, store: Store, event: str, mem: Memory, source: dict[str, str]) -> None:
        """One capture event: to the capture log, and to the ``listeners`` (the proxy's metrics).
        The memory is written by now: an event that cannot be appended is kept and tried again."""
        source = {"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **source}
        try:
            log_event(store, event, mem, source)
        except _TRANSIENT as exc:
            with self._cond:
                first = not self._unlogged
                self._unlogged.append((store, event, mem, source))
                self._retry_at = time.monotonic() + RETRY_S
                self._cond.notify_all()
            if first:
                log.warning("memwire: capture event %s of memory %s not appended to the capture log in %s (%s); "
                            "the memory is stored; the event is kept and appended again", event, mem.id,
                            store.location, describe(exc))
        for listen in self.listeners:
            listen(event)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until what was offered so far is written (statements a store cannot take now stay
        queued, and are not waited for)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._due or self._jobs or self._busy:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return
                self._cond.wait(left)

    # ------------------------------------------------------------------ the worker

    def _start(self) -> None:
        """Start the worker thread on first use (call with ``_cond`` held)."""
        if self._thread is None:
            self._thread = threading.Thread(target=_work, args=(weakref.ref(self),), name="memwire-capture",
                                            daemon=True)
            self._thread.start()

    def _next(self) -> tuple[str, Any] | None:
        """The worker's next piece of work (call with ``_cond`` held): ("stores", stores due),
        ("job", a distillation) or ("retry", None); None when there is none."""
        now = time.monotonic()
        if (self._retry or self._unlogged) and now >= self._retry_at:
            self._due.update(self._retry)
            self._retry.clear()
            if self._unlogged:
                return "retry", None
        if self._due:
            since = self._due_since or now
            self._due_since = None
            due = list(self._due.values())
            self._due.clear()
            return "stores", (since, due)
        if self._jobs:
            return "job", self._jobs.popleft()
        return None

    def _wait_s(self) -> float | None:
        return max(0.0, self._retry_at - time.monotonic()) if (self._retry or self._unlogged) else None

    def _do(self, what: str, arg: Any) -> None:
        if what == "retry":
            self._append_unlogged()
        elif what == "stores":
            since, stores = arg
            self._wait_quiet(since)
            for store in stores:
                self._drain(store)
        else:
            offered, store, session, turn, exchange, complete = arg
            self.traffic.wait_quiet(self.settle_s, offered + MAX_DEFER_S)
            try:
                fmt, items, system_text = exchange
                self._distill(store, session, turn, fmt, items, system_text, complete=complete)
                if store.track:
                    sweep_if_due(store)
            except Exception as exc:
                log.warning("memwire: distillation of an exchange failed (%s)", describe(exc))

    def _wait_quiet(self, since: float) -> None:
        """Wait for a quiet moment (at most until ``MAX_DEFER_S`` after ``since``), and no longer
        once ``URGENT`` statements wait."""
        until = since + MAX_DEFER_S
        while self._backlog < URGENT and (now := time.monotonic()) < until:
            self.traffic.wait_quiet(self.settle_s, min(until, now + 0.05))
            if time.monotonic() - self.traffic.last >= self.settle_s:
                return

    def _drain(self, store: Store) -> None:
        """Write what waits in ``store``'s queues (and, the first time, in its namespaces' queues)."""
        loc = store.location
        if loc not in self._known:
            self._known.add(loc)
            for other in _namespaces_with_queues(store):
                if other.location not in self._known:
                    self._drain(other)
        apply = partial(self._apply, store)
        try:
            held = self._held.get(loc)
            if held is not None:
                held.drain(apply)
            self._queue_of(store).drain(apply)
            if self._waiting:
                self._waiting = False
                log.warning("memwire: capture writes to %s again", loc)
        except Exception as exc:
            cause = exc.__cause__ if isinstance(exc, Retry) and exc.__cause__ is not None else exc
            with self._cond:
                self._retry[loc] = store
                self._retry_at = time.monotonic() + RETRY_S
            if not self._waiting:
                self._waiting = True
                log.warning("memwire: capture cannot write to %s now (%s); what was said stays queued and is "
                            "written when it can be", loc, describe(cause))
            return
        if store.track:
            try:
                sweep_if_due(store)  # the lifecycle's upkeep, at most every few hours
            except Exception as exc:
                log.warning("memwire: lifecycle upkeep failed (%s)", describe(exc))

    def _apply(self, store: Store, entry: Mapping[str, Any], replayed: bool) -> None:
        """Write one queued statement (``Retry`` when the store cannot take it now)."""
        kind, text, session, turn = (entry.get(k) for k in ("kind", "text", "session", "turn"))
        if kind not in _KINDS or not (isinstance(text, str) and isinstance(session, str) and isinstance(turn, str)):
            self._written(1)  # not a line memwire wrote: nothing to do
            return
        try:
            at = entry.get("at")
            at = at if isinstance(at, (int, float)) else None
            if kind not in ("forget", "correct"):
                entry = {**entry, "text": self._dated(store, text, at)}  # as it is stored
            if replayed and self._applied_before(store, entry):
                pass
            elif kind == "forget" and not text:
                self._retract(store, session, turn, entry.get("prev", ""))
            elif kind == "forget":
                self._forget(store, session, text)
            elif kind == "correct":
                self._correct(store, entry, at)
            else:
                self._write(store, kind, entry["text"],
                            {"kind": kind, "session": session, "turn": turn, "key": entry["key"]}, at=at)
        except _TRANSIENT as exc:
            raise Retry() from exc
        except Exception as exc:
            log.warning("memwire: a statement was not captured (%s)", describe(exc))
        self._written(1)

    def _written(self, n: int) -> None:
        with self._cond:
            self._backlog = max(0, self._backlog - n)
            self._cond.notify_all()

    def _applied_before(self, store: Store, entry: Mapping[str, Any]) -> bool:
        """Whether a replayed entry was applied before its consumer died: the capture log has an
        event of its key, or its memory is there (then the event it lacks is appended now)."""
        if entry["kind"] == "forget":
            return False  # forgetting again finds nothing to forget
        if any(e.get("key") == entry["key"] for e in read_log(store)):
            return True
        if entry["kind"] == "correct":
            return False  # its text is not what it stored
        mid = memory_id(entry["text"])
        inbox = inbox_of(store) if self.setting == "review" else None
        where = store if mid in store else inbox if inbox is not None and mid in inbox else None
        if where is None:
            return False
        source = {"kind": entry["kind"], "session": entry["session"], "turn": entry["turn"], "key": entry["key"]}
        self._event(store, "captured" if where is store else "captured-for-review", where.get(mid), source)
        return True

    def _append_unlogged(self) -> None:
        with self._cond:
            waiting, self._unlogged = self._unlogged, []
        for i, (store, event, mem, source) in enumerate(waiting):
            try:
                log_event(store, event, mem, source)
            except _TRANSIENT:
                with self._cond:
                    self._unlogged[:0] = waiting[i:]
                    self._retry_at = time.monotonic() + RETRY_S
                return
        if waiting:
            log.warning("memwire: %d capture event(s) appended to the capture log late", len(waiting))

    def _run(self, store: Store, session: str, turn: str, text: str, previous: str | None = "") -> None:
        """Read and write ``text``'s statements now, on this thread (tests, tools)."""
        for entry in self._entries(text, session, turn, lambda: previous):
            self._apply(store, entry, False)

    def _zone(self, store: Store) -> str | None:
        """The user's time zone: the one they stated (the latest "User's timezone is X" memory
        that names a known zone), else the configured one, else the store's (None: UTC). The
        stated one is looked for once per version of the store."""
        version = store.version
        known = self._zones.get(store.location)
        if known is None or known[0] != version:
            stated = None
            for mem in reversed(store.memories()):
                if mem.text.lower().startswith(_ZONE_KEYS) and (stated := zone_named(mem.text)) is not None:
                    break
            known = self._zones[store.location] = (version, stated)
        return known[1] or self.timezone or store.timezone

    def _dated(self, store: Store, text: str, at: float | None) -> str:
        """``text`` with its relative dates written from the day it was said (``at``; None: now)."""
        return absolute_dates(text, day_of(at, self._zone(store))) if might_hold_dates(text) else text

    def _write(self, store: Store, kind: str, text: str, source: dict[str, str],
               extra_tags: tuple[str, ...] = (), at: float | None = None, replaces: str | None = None) -> Memory | None:
        """The one write path of explicit and distilled memories: dates made absolute, cooldown,
        near-duplicates reinforced, rejected ones not proposed again, profile facts superseded,
        review inbox. ``replaces``: the id of the store's memory it corrects (archived as
        superseded and linked to it by the store, in the same write; in review mode the inbox item
        names it and nothing active changes before a person approves). Returns the memory written
        or reinforced (None: skipped)."""
        day = day_of(at, self._zone(store))  # the day it was said, in the user's zone
        text = absolute_dates(text, day)
        now = self._clock()
        recent = (store.location, normalized(text))
        last = self._recent.get(recent)
        if last is not None and now - last <= self.cooldown_s:
            return None
        inbox = inbox_of(store) if self.setting == "review" else None
        for where in (store, inbox):
            dup = where is not None and _near_duplicate(where, text)
            if dup and dup.id != replaces:
                if where is store:
                    store.lifecycle.reinforce([dup.id])
                self._recent.setdefault(recent, now, replace=lambda _: True)
                self._event(store, "reinforced", dup, source)
                return dup
        if was_rejected(store, memory_id(text)):
            return None
        profile = None
        if kind == "fact" and text.startswith(_PROFILE_PREFIX) and inbox is None and replaces is None:
            profile = self._supersede(store, text, source)
            replaces = profile.id if profile is not None else None
        tags = [kind, CAPTURED_TAG, *extra_tags]
        if inbox is not None and replaces is not None:  # approving it supersedes that one (``_inbox.added``)
            tags.append(replaces_tag(replaces))
        mem = (store if inbox is None else inbox).add(text, tags=tags, topic=TOPICS[kind], date=day.isoformat(),
                                                      cue="distilled" if DISTILLED_TAG in extra_tags else "captured",
                                                      replaces=replaces if inbox is None else None)
        if profile is not None:
            self._event(store, "superseded", profile, source)
        self._recent.setdefault(recent, now, replace=lambda _: True)
        self._event(store, "captured" if inbox is None else "captured-for-review", mem, source)
        log.info("memwire: captured %s %s (%d chars)", kind, mem.id, len(mem.text))
        return mem

    def _distill(self, store: Store, session: str, turn: str, fmt: Format, items: list[Any],
                 system_text: str, complete: Complete | None = None) -> None:
        assert self.distiller is not None
        exchange = _exchange_text(fmt, items)
        existing = [m for m in store.memories() if CAPTURED_TAG in m.tags][-MAX_EXISTING:]
        for p in self.distiller.propose(session, exchange, existing, system_text, complete):
            source = {"kind": p.kind, "session": session, "turn": turn, "cue": "distilled",
                      "confidence": f"{p.confidence:.2f}"}
            old = next((m for m in existing if p.replaces and m.id.startswith(p.replaces)), None)
            # an update whose text is already stored reinforces that memory; the old one stays
            if not (p.action == "update" and old is not None and old.id in store
                    and _near_duplicate(store, p.text) is None):
                old = None
            written = self._write(store, p.kind, p.text, source, extra_tags=(DISTILLED_TAG,),
                                  replaces=None if old is None else old.id)  # one write: both linked
            if old is not None and written is not None and old.id not in store:
                self._event(store, "superseded", old, {**source, "by": written.id})

    def _supersede(self, store: Store, text: str, source: dict[str, str]) -> Memory | None:
        """A new "User's timezone is X" replaces the captured "User's timezone is Y": the first such
        memory is returned, for the add to replace (the store archives it and links the two: its
        history); any other is archived here."""
        key = text[: text.find(" is ") + 4].lower()
        olds = [mem for mem in store.memories()
                if CAPTURED_TAG in mem.tags and mem.text.lower().startswith(key) and mem.text != text]
        for mem in olds[1:]:
            self._event(store, "superseded", store.forget(mem.id, reason="superseded"), source)
        return olds[0] if olds else None

    def _forget(self, store: Store, session: str, text: str) -> None:
        """"forget that X": the captured memory that best matches X."""
        inbox = inbox_of(store) if self.setting == "review" else None
        gone = [m for where in (store, inbox) if where is not None for m in _captured_match(where, text)][:1]
        self._take_back(store, inbox, gone, "forgotten", {"session": session})

    def _take_back(self, store: Store, inbox: Store | None, mems: list[Memory], reason: str,
                   source: dict[str, str]) -> None:
        """Archive ``mems`` (``reason``: forgotten, superseded); one still in the review inbox is
        rejected (it was never memory)."""
        for mem in mems:
            if inbox is not None and mem.id in inbox:
                reject(store, [mem.id])
            elif mem.id in store:
                self._event(store, reason, store.forget(mem.id, reason=reason), source)
            else:
                continue
            log.info("memwire: took back captured memory %s (%s)", mem.id, reason)

    def _captures(self, store: Store, inbox: Store | None, session: str) -> list[tuple[str, Memory]]:
        """What ``session`` captured that is still there (in the store, or in the review inbox), as
        (turn, memory), oldest first: the capture log's events (and those waiting to be appended)."""
        with self._cond:
            waiting = [(mem.id, src) for st, ev, mem, src in self._unlogged
                       if st is store and ev in _CAPTURED_EVENTS]
        events = [(e.get("id"), e) for e in read_log(store) if e.get("event") in _CAPTURED_EVENTS]
        out: list[tuple[str, Memory]] = []
        seen: set[str] = set()
        for mid, e in [*events, *waiting]:
            if e.get("session") != session or not isinstance(mid, str) or mid in seen:
                continue
            where = store if mid in store else inbox if inbox is not None and mid in inbox else None
            if where is not None:
                seen.add(mid)
                out.append((str(e.get("turn", "")), where.get(mid)))
        return out

    def _last_captured(self, store: Store, inbox: Store | None, session: str, turn: str,
                       prev: str | None) -> list[Memory]:
        """What "that" is: the statement captured just before in the same message, else what the
        previous user message captured (``prev``: its turn; None: not known, the session's
        latest captures; "": there was none)."""
        caps = self._captures(store, inbox, session)
        same = [m for t, m in caps if t == turn]
        if same:
            return same[-1:]
        if prev is None and caps:
            prev = caps[-1][0]
        return [m for t, m in caps if prev and t == prev]

    def _retract(self, store: Store, session: str, turn: str, prev: str | None) -> None:
        """"Actually, forget that": what this conversation captured last goes to the archive."""
        inbox = inbox_of(store) if self.setting == "review" else None
        gone = self._last_captured(store, inbox, session, turn, prev)
        if not gone:
            log.info("memwire: a retraction found nothing this conversation captured just before")
        self._take_back(store, inbox, gone, "forgotten", {"session": session, "turn": turn})

    def _correct(self, store: Store, entry: Mapping[str, Any], at: float | None) -> None:
        """"Correction: X", "I meant X": what this conversation captured last (or the capture of it
        that holds the value named as wrong) is superseded by the corrected statement."""
        text, session, turn = entry["text"], entry["session"], entry["turn"]
        old, value = str(entry.get("old") or ""), bool(entry.get("value"))
        source = {"kind": "correct", "session": session, "turn": turn, "key": entry["key"]}
        inbox = inbox_of(store) if self.setting == "review" else None
        last = self._last_captured(store, inbox, session, turn, entry.get("prev", ""))
        if old:  # "not deploy.sh": the capture that holds it, the last one first, else any of this conversation's
            named = [m for m in last if old.lower() in m.text.lower()]
            last = named or [m for _, m in reversed(self._captures(store, inbox, session))
                             if old.lower() in m.text.lower()][:1]
        target, new = None, None
        for mem in reversed(last):
            if value:
                new = corrected(mem.text, text, old, ALTERNATIVES)
            elif set(analyze(text)) & set(analyze(mem.text)):  # a statement about the same thing
                new = text
            if new is not None:
                target = mem
                break
        if target is None or new is None:
            if entry.get("retracts"):  # "scratch that, it's X" and no place for X: the retraction stands
                self._take_back(store, inbox, last, "forgotten", {"session": session, "turn": turn})
            elif not value:  # "correction: X" with nothing of this conversation's to correct: X is said
                self._write(store, "fact", text, source, at=at)
            else:
                log.info("memwire: a correction found no captured value of this conversation to replace")
            return
        kind = next((k for k in ("fact", "preference", "instruction") if k in target.tags), "fact")
        if inbox is not None and target.id in inbox:  # never memory: rejected; the correction waits for review
            self._take_back(store, inbox, [target], "forgotten",
                            {**source, "by": memory_id(self._dated(store, new, at))})
            self._write(store, kind, new, source, at=at)
            return
        written = self._write(store, kind, new, source, at=at, replaces=target.id)  # the store links the two
        if inbox is not None:  # review: it waits in the inbox naming what it corrects, which stays until approved
            return
        by = {**source, "by": written.id if written else ""}
        if target.id in store:  # said already (reinforced) or refused before: the corrected one leaves all the same
            self._take_back(store, None, [target], "superseded", by)
        else:
            self._event(store, "superseded", target, by)


def _previous_turn(turn: Turn) -> str | None:
    """The turn key of the user message before ``turn``'s: "" when there is none, None when the
    request does not hold the conversation (a Responses call continuing a stored one)."""
    view = turn.view
    users = view.user_indices
    if len(users) >= 2:
        i = users[-2]
        return turn_key(i, turn.fmt.identity(view.items[i], view.system_text))
    return None if view.stateful else ""


def _work(ref: weakref.ref[Capture]) -> None:
    """The worker thread's loop (it holds its capture weakly: a dropped middleware's thread ends)."""
    while True:
        capture = ref()
        if capture is None:
            return
        with capture._cond:
            work = capture._next()
            if work is None:
                capture._busy = False
                capture._cond.notify_all()
                wait = capture._wait_s()
                capture._cond.wait(60.0 if wait is None else wait)
                del capture
                continue
            capture._busy = True
        try:
            capture._do(*work)
        except Exception as exc:
            log.warning("memwire: capture worker: %s", describe(exc))
        del capture


def _new_queue(store: Store) -> FileQueue | PgQueue | MemoryQueue:
    """The store's own queue (``Store.capture_queue``): a markdown directory's queue file, a
    PostgreSQL namespace's table."""
    return store.capture_queue()


def _namespaces_with_queues(store: Store) -> list[Store]:
    """The other namespaces of ``store``'s tree or database whose queues hold entries (a restart's)."""
    try:
        names = store.queued_namespaces()
    except Exception:
        return []
    out = []
    for name in names:
        try:
            out.append(store.namespace_store(name))
        except Exception:
            continue
    return out


def _captured_match(store: Store, text: str) -> list[Memory]:
    return [h.memory for h in store.search(text, 5, min_score=FORGET_SCORE) if CAPTURED_TAG in h.memory.tags][:1]


def _near_duplicate(store: Store, text: str) -> Memory | None:
    """A stored memory that says the same: BM25 finds it (share ≥ ``DUPLICATE_SCORE``), and it
    holds ``DUPLICATE_WORDS`` of the statement's words, the same numbers and the same names ("Java
    21" is not "Java 17", "owned by Alice" not "owned by Bob", though BM25 scores them alike)."""
    words = set(analyze(text))
    numbers = {w for w in words if any(c.isdigit() for c in w)}
    names = _names(text)
    for hit in store.search(text, 3, min_score=DUPLICATE_SCORE):
        theirs = set(analyze(hit.memory.text))
        same_numbers = numbers == {w for w in theirs if any(c.isdigit() for c in w)}
        same_names = names | _names(hit.memory.text) <= words & theirs
        if words and same_numbers and same_names and len(words & theirs) >= DUPLICATE_WORDS * len(words):
            return hit.memory
    return None


_NAME = re.compile(r"\b[A-Z][\w-]*")
_OPENS = re.compile(r"(?:^|[.!?:;]\s+)$")


def _names(text: str) -> set[str]:
    """The (analyzed) words of ``text`` that are names: capitalized, not opening a sentence."""
    return set(analyze(" ".join(m.group() for m in _NAME.finditer(text) if not _OPENS.search(text[:m.start()]))))


def _without_blocks(text: str) -> str:
    """memwire's own memory blocks are never read back as something the person said."""
    while (start := text.find(OPEN)) >= 0:
        end = text.find(CLOSE, start)
        text = text[:start] + (text[end + len(CLOSE):] if end >= 0 else "")
    return text


def _previous_exchange(turn: Turn) -> tuple[Format, list[Any], str] | None:
    """The exchange this turn finishes: the previous human user message up to this one (a shallow
    copy: the caller may append to its list once the call returns)."""
    users = turn.view.user_indices
    if len(users) < 2:
        return None
    fmt = cast("Format", turn.fmt)  # the middleware reads every Turn with one of its Formats
    return fmt, list(turn.view.items[users[-2]:users[-1]]), turn.view.system_text


def _exchange_text(fmt: Format, items: list[Any]) -> str:
    """"User: ..." and "Assistant: ..." lines: the person's human text and the replies' text
    (tool calls and their results left out: the model's reading is about what was said), never
    memwire's own blocks (the model would extract what memwire injected, again and again)."""
    lines = []
    for i, item in enumerate(items):
        if i == 0:
            lines.append(f"User: {_without_blocks(human_text(fmt.text_parts(item))).strip()}")
        elif fmt.role(item, i) == "assistant" and (text := _without_blocks(fmt.text(item)).strip()):
            lines.append(f"Assistant: {text}")
    return "\n\n".join(lines)
