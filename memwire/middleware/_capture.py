"""Explicit capture, off the request path.

``Capture.offer(turn)`` runs on the request path and costs a memo lookup: a latest user message
is read once per turn (never per tool-loop request), and its human text goes to one background
worker thread. The worker takes up a turn once no request has been prepared for ``settle_s``
(the request has left and the provider is working on it), or ``MAX_DEFER_S`` after it was
offered under sustained load (``memwire._worker.Traffic``): its Python work never holds the
interpreter while a request is being sent (one thread at a time runs Python), nor takes the CPU
from requests while they keep coming. It finds the statements (``policies/_capture``) and, per statement:

1. refuses it when it holds a secret (``policies/_secrets``): a log line naming the kind, never
   the value, and nothing written;
2. skips it within ``COOLDOWN_S`` of capturing the same statement (a person repeating it, a
   client re-sending the turn);
3. reinforces a stored memory it nearly duplicates instead of adding it (an event in the capture
   log, no new line): BM25 finds it (``search`` score ≥ ``DUPLICATE_SCORE``, the share of the
   statement's weight it matches) and it holds ``DUPLICATE_WORDS`` of the statement's words and
   the same numbers;
4. supersedes an earlier captured "User's KEY is ..." of the same profile key (the old one goes to
   the archive);
5. adds it, tagged with its kind and ``#captured`` and dated, under a topic per kind, to the
   memory files (``capture = "auto"``) or to the review inbox (``"review"``); a statement a
   person rejected is not proposed again.

"forget that X" archives the captured memory that best matches X (score ≥ ``FORGET_SCORE``);
"never mind" alone archives what this session captured in the last ``COOLDOWN_S``. Only captured
memories are ever taken back: what a person wrote by hand stays theirs. A failure costs a log line.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable

from .._worker import QUIET_S, Traffic, Worker
from ..memory._inbox import CAPTURED_TAG, inbox_of, log_event, reject, was_rejected
from ..memory._model import Memory, memory_id, normalized
from ..memory._text import analyze
from ..memory._upkeep import sweep_if_due
from ..policies._capture import Statement, statements
from ..policies._human_text import human_text
from ..policies._secrets import find_secret
from ._distill import Complete, Distiller
from ._render import CLOSE, OPEN
from ._session import LRU

if TYPE_CHECKING:
    from ..memory._store import MemoryStore
    from ..policies.modes import Turn
    from ._formats import Format

__all__ = ["Capture", "CAPTURE_SETTINGS", "DUPLICATE_SCORE", "DUPLICATE_WORDS", "FORGET_SCORE", "COOLDOWN_S", "TOPICS"]

log = logging.getLogger("memwire")

CAPTURE_SETTINGS = ("auto", "review", "off")
DUPLICATE_SCORE = 0.8
DUPLICATE_WORDS = 0.8
FORGET_SCORE = 0.5
COOLDOWN_S = 600.0
MAX_PENDING = 1000      # turns waiting for the worker at most; past it a turn is not read (logged)
TOPICS = {"preference": "Preferences", "instruction": "Instructions", "fact": "Facts", "decision": "Decisions",
          "lesson": "Lessons"}
DISTILLED_TAG = "distilled"
MAX_EXISTING = 50  # the captured memories a distillation may update, most recent last
_PROFILE_PREFIX = "User's "


class Capture:
    """One middleware's capture: its setting, its worker and what it has seen."""

    def __init__(self, setting: str = "auto", *, cooldown_s: float = COOLDOWN_S,
                 clock: Callable[[], float] = time.monotonic, memo_size: int = 1024,
                 distiller: Distiller | None = None, settle_s: float = QUIET_S, traffic: Traffic | None = None) -> None:
        if setting not in CAPTURE_SETTINGS:
            raise ValueError(f"capture must be one of {', '.join(CAPTURE_SETTINGS)}, got {setting!r}")
        self.setting = setting
        self.cooldown_s = cooldown_s
        self.distiller = distiller
        self._clock = clock
        self._seen: LRU[tuple[str, ...], object] = LRU(memo_size)
        self._recent: LRU[tuple[str, str], float] = LRU(memo_size)  # (store, statement) -> when captured
        self._by_session: LRU[tuple[str, str], list[tuple[float, str]]] = LRU(memo_size)  # -> (when, id)
        # one worker, in order: a "forget that" follows the capture it takes back
        self.traffic = traffic or Traffic()  # the middleware's: every request touches it
        self.listeners: list[Callable[[str], None]] = []  # told each event's name (captured, reinforced, ...)
        self._worker = Worker("memwire-capture", "capture", "turns", lambda: MAX_PENDING, self.traffic, settle_s)

    @property
    def settle_s(self) -> float:
        """How long no request must have been prepared before the worker takes up a turn."""
        return self._worker.quiet_s

    @settle_s.setter
    def settle_s(self, value: float) -> None:
        self._worker.quiet_s = value

    def offer(self, turn: "Turn", complete: Complete | None = None) -> None:
        """Hand a new turn to the worker (request path: no parsing, no I/O): its human text, and
        with a distiller the exchange it finishes (the previous user message and the replies)."""
        if self.setting == "off":
            return
        key, mine = turn.turn_key(), object()
        if self._seen.setdefault(key, mine) is not mine:  # another request of this turn was first
            return
        text = "" if turn.gate.skip else turn.view.user_text
        exchange = _previous_exchange(turn) if self.distiller is not None else None
        if not text and not exchange:
            return
        self.traffic.touch()
        # offered, not submitted: turns that come while the worker waits for a quiet moment join
        # the waiting job (no thread woken per request)
        self._worker.offer(self._run_all, (turn.store, turn.session, key[-1], text, exchange, complete))

    def _event(self, store: "MemoryStore", event: str, mem: Memory, source: dict[str, str]) -> None:
        """One capture event: to the capture log, and to the ``listeners`` (the proxy's metrics)."""
        log_event(store, event, mem, source)
        for listen in self.listeners:
            listen(event)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until what was offered so far is captured."""
        self._worker.flush(timeout)

    # ------------------------------------------------------------------ the worker

    def _run_all(self, turns: list[tuple[Any, ...]]) -> None:
        for args in turns:
            self._run(*args)

    def _run(self, store: "MemoryStore", session: str, turn: str, text: str,
             exchange: tuple["Format", list[Any], str] | None = None, complete: Complete | None = None) -> None:
        try:
            for st in statements(_without_blocks(text)):
                if st.kind == "forget":
                    self._forget(store, session, st)
                elif (secret := find_secret(st.said)) is not None:
                    log.warning("memwire: not captured: the statement looks like it holds a secret (%s)", secret)
                else:
                    self._write(store, st.kind, st.text, {"kind": st.kind, "session": session, "turn": turn})
            if exchange is not None:
                self._distill(store, session, turn, *exchange, complete=complete)
            if store.track:
                sweep_if_due(store)  # the lifecycle's upkeep, at most every few hours
        except Exception as exc:  # noqa: BLE001 - capture is never worth more than a log line
            log.warning("memwire: capture failed (%s: %s)", type(exc).__name__, exc)

    def _write(self, store: "MemoryStore", kind: str, text: str, source: dict[str, str],
               extra_tags: tuple[str, ...] = ()) -> None:
        """The one write path of explicit and distilled memories: cooldown, near-duplicates
        reinforced, rejected ones not proposed again, profile facts superseded, review inbox."""
        now = self._clock()
        recent = (store.location, normalized(text))
        last = self._recent.get(recent)
        if last is not None and now - last <= self.cooldown_s:
            return
        self._recent.setdefault(recent, now, replace=lambda _: True)
        inbox = inbox_of(store) if self.setting == "review" else None
        for where in (store, inbox):
            dup = where is not None and _near_duplicate(where, text)
            if dup:
                self._event(store, "reinforced", dup, source)
                if where is store:
                    store.lifecycle.reinforce([dup.id])
                return
        if was_rejected(store, memory_id(text)):
            return
        if kind == "fact" and text.startswith(_PROFILE_PREFIX) and inbox is None:
            self._supersede(store, text, source)
        mem = (store if inbox is None else inbox).add(text, tags=[kind, CAPTURED_TAG, *extra_tags],
                                                      topic=TOPICS[kind], date=time.strftime("%Y-%m-%d"),
                                                      cue="distilled" if DISTILLED_TAG in extra_tags else "captured")
        self._event(store, "captured" if inbox is None else "captured-for-review", mem, source)
        self._by_session.setdefault((store.location, source["session"]), []).append((now, mem.id))
        log.info("memwire: captured %s %s: %s", kind, mem.id, mem.text)

    def _distill(self, store: "MemoryStore", session: str, turn: str, fmt: "Format", items: list[Any],
                 system_text: str, complete: Complete | None = None) -> None:
        assert self.distiller is not None
        exchange = _exchange_text(fmt, items)
        existing = [m for m in store.memories() if CAPTURED_TAG in m.tags][-MAX_EXISTING:]
        for p in self.distiller.propose(session, exchange, existing, system_text, complete):
            source = {"kind": p.kind, "session": session, "turn": turn, "cue": "distilled",
                      "confidence": f"{p.confidence:.2f}"}
            old = next((m for m in existing if p.replaces and m.id.startswith(p.replaces)), None)
            if p.action == "update" and old is not None and old.id in store and _near_duplicate(store, p.text) is None:
                self._event(store, "superseded", store.forget(old.id, reason="superseded"), source)
            self._write(store, p.kind, p.text, source, extra_tags=(DISTILLED_TAG,))

    def _supersede(self, store: "MemoryStore", text: str, source: dict[str, str]) -> None:
        """A new "User's timezone is X" replaces the captured "User's timezone is Y"."""
        key = text[: text.find(" is ") + 4].lower()
        for mem in store.memories():
            if CAPTURED_TAG in mem.tags and mem.text.lower().startswith(key) and mem.text != text:
                self._event(store, "superseded", store.forget(mem.id, reason="superseded"), source)

    def _forget(self, store: "MemoryStore", session: str, st: Statement) -> None:
        inbox = inbox_of(store) if self.setting == "review" else None
        if st.text:
            gone = [m for where in (store, inbox) if where is not None for m in _captured_match(where, st.text)][:1]
        else:  # "never mind": what this session captured just now
            now = self._clock()
            recent = self._by_session.get((store.location, session)) or []
            ids = {mid for at, mid in recent if now - at <= self.cooldown_s}
            gone = [m for where in (store, inbox) if where is not None for m in where.memories() if m.id in ids]
            recent.clear()
        for mem in gone:
            if inbox is not None and mem.id in inbox:  # not approved yet: it was never memory
                reject(store, [mem.id])
            else:
                self._event(store, "forgotten", store.forget(mem.id), {"session": session})
            log.info("memwire: forgot captured memory %s: %s", mem.id, mem.text)


def _captured_match(store: "MemoryStore", text: str) -> list[Memory]:
    return [h.memory for h in store.search(text, 5, min_score=FORGET_SCORE) if CAPTURED_TAG in h.memory.tags][:1]


def _near_duplicate(store: "MemoryStore", text: str) -> Memory | None:
    """A stored memory that says the same: BM25 finds it (share ≥ ``DUPLICATE_SCORE``), and it
    holds ``DUPLICATE_WORDS`` of the statement's words and the same numbers ("Java 21" is not
    "Java 17", though BM25 scores them alike)."""
    words = set(analyze(text))
    numbers = {w for w in words if any(c.isdigit() for c in w)}
    for hit in store.search(text, 3, min_score=DUPLICATE_SCORE):
        theirs = set(analyze(hit.memory.text))
        same_numbers = numbers == {w for w in theirs if any(c.isdigit() for c in w)}
        if words and same_numbers and len(words & theirs) >= DUPLICATE_WORDS * len(words):
            return hit.memory
    return None


def _without_blocks(text: str) -> str:
    """memwire's own memory blocks are never read back as something the person said."""
    while (start := text.find(OPEN)) >= 0:
        end = text.find(CLOSE, start)
        text = text[:start] + (text[end + len(CLOSE):] if end >= 0 else "")
    return text


def _previous_exchange(turn: "Turn") -> tuple["Format", list[Any], str] | None:
    """The exchange this turn finishes: the previous human user message up to this one (a shallow
    copy: the caller may append to its list once the call returns)."""
    users = turn.view.user_indices
    if len(users) < 2:
        return None
    return turn.fmt, list(turn.view.items[users[-2]:users[-1]]), turn.view.system_text


def _exchange_text(fmt: "Format", items: list[Any]) -> str:
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
