"""Keeping a store in shape: what is fading (``stale``), archiving what decayed or overflows its
category (``sweep``), and the figures of ``memwire stats``.

The sweep archives only memories that got in by themselves (captured, distilled, imported) and
are not pinned: one that decayed to ``dropped``, and the weakest beyond their category's cap.
What a person wrote or pinned is never moved by a sweep; ``stale`` lists it for them to decide.
Nothing is deleted: the archive keeps every swept memory, tagged ``#decayed`` or ``#capped``,
restorable with ``memwire restore ID``.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from ._lifecycle import CATEGORIES, STATES, category_of
from ._model import Memory
from ._protocol import Store

__all__ = ["SWEEP_INTERVAL_S", "CategoryStats", "Scored", "scored", "stale", "stats", "sweep", "sweep_if_due"]

log = logging.getLogger("memwire")

SWEEP_INTERVAL_S = 6 * 3600.0  # a background sweep per store at most this often
_last_sweep: dict[str, float] = {}
_sweep_lock = threading.Lock()


@dataclass(frozen=True)
class Scored:
    memory: Memory
    category: str
    score: float
    state: str
    cue: str
    days: float  # since last reinforced
    uses: int
    injected: int


def scored(store: Store, now: float | None = None) -> list[Scored]:
    """Every memory of ``store`` with its category, stability and state, strongest first."""
    lc = store.lifecycle
    now = lc.clock() if now is None else now
    out = []
    for mem in store.memories():
        meta = lc.get(mem)
        score = lc.scoring.stability(mem, meta, now)
        out.append(Scored(mem, category_of(mem), score, lc.scoring.state(score), meta.cue,
                          max(0.0, now - meta.reinforced) / 86_400, meta.uses, meta.injected))
    return sorted(out, key=lambda s: (-s.score, s.memory.id))


def _movable(s: Scored) -> bool:
    return s.cue != "explicit" and not s.memory.pinned


def _sweepable(store: Store, rows: list[Scored]) -> list[tuple[Scored, str]]:
    """What a sweep archives, of ``rows`` (``scored``, strongest first), and why."""
    out = [(s, "decayed") for s in rows if s.state == "dropped" and _movable(s)]
    decayed = {s.memory.id for s, _ in out}
    caps = store.lifecycle.scoring.caps
    for cat in CATEGORIES:
        kept = [s for s in rows if s.category == cat and s.memory.id not in decayed]
        over = len(kept) - caps[cat]
        if over > 0:  # the weakest that may move; a person's own memories count but never move
            out += [(s, "capped") for s in [s for s in reversed(kept) if _movable(s)][:over]]
    return out


def stale(store: Store, now: float | None = None) -> list[tuple[Scored, str]]:
    """What is fading (``candidate`` or ``dropped``) or over its cap, weakest first, each with what
    a sweep does to it: ``decayed``/``capped`` (archived) or ``kept`` (a person's or pinned)."""
    every = scored(store, now)
    moving = {s.memory.id: why for s, why in _sweepable(store, every)}
    rows = [s for s in every if s.state in ("candidate", "dropped") or s.memory.id in moving]
    return [(s, moving.get(s.memory.id, "kept")) for s in sorted(rows, key=lambda s: (s.score, s.memory.id))]


def sweep(store: Store, now: float | None = None) -> list[tuple[Memory, str]]:
    """Archive what decayed or overflows its category (see the module); returns what moved."""
    store.lifecycle.seen(store.memories())  # from now on a hand-written memory's age counts
    moved = []
    for s, why in _sweepable(store, scored(store, now)):
        try:
            store.forget(s.memory.id, reason=why)
            moved.append((s.memory, why))
        except Exception as exc:
            log.info("memwire: sweep left %s (%s)", s.memory.id, exc)
    store.lifecycle.flush()
    for mem, why in moved:
        log.info("memwire: archived %s memory %s", why, mem.id)
    return moved


def sweep_if_due(store: Store) -> None:
    """A background sweep, at most every ``SWEEP_INTERVAL_S`` per store in this process (none for a
    directory not there: nothing to sweep, or not a directory, which its caller reports)."""
    key = store.location
    now = time.monotonic()
    with _sweep_lock:  # first: it is asked after every captured turn and observed reply
        if now - _last_sweep.get(key, -SWEEP_INTERVAL_S) < SWEEP_INTERVAL_S:
            return
        _last_sweep[key] = now
    if not store.exists():
        return
    try:
        sweep(store)
    except Exception as exc:
        log.warning("memwire: lifecycle sweep of %s failed (%s: %s)", key, type(exc).__name__, exc)


@dataclass
class CategoryStats:
    category: str
    states: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATES, 0))
    injected: int = 0
    used: int = 0
    cap: int = 0

    @property
    def count(self) -> int:
        return sum(self.states.values())

    @property
    def usage_rate(self) -> float | None:
        return self.used / self.injected if self.injected else None

    @property
    def capacity(self) -> float:
        return self.count / self.cap if self.cap else 0.0


def stats(store: Store, now: float | None = None) -> list[CategoryStats]:
    """Per category (those with memories): counts by state, injections, uses, capacity."""
    caps = store.lifecycle.scoring.caps
    out = {c: CategoryStats(c, cap=caps[c]) for c in CATEGORIES}
    for s in scored(store, now):
        row = out[s.category]
        row.states[s.state] += 1
        row.injected += s.injected
        row.used += s.uses
    return [row for row in out.values() if row.count]
