"""Telemetry: did the model's reply use the memories injected into its request?

The overlap measure (``used``): a memory's terms are its index terms (``text.analyze``: folded,
stemmed, stopwords out) minus common English words; the reply used it when it holds at least
``USED_SHARE`` of them and at least two (one, for a memory of one such term), or any of its
numbers and identifiers ("5433", "v2.3", "py311"), which a reply rarely repeats by chance.
Crude on purpose: cheap, explainable, and the same in every language memwire indexes.

Each read reply appends one line to ``DIR/.telemetry.jsonl`` (bounded: ``LOG_MAX_BYTES``, then one
older file): when, the session, the mode, the memories injected and those used. Each injected
memory's ``injected`` count goes up; a used one is reinforced (``uses`` + 1, evidence + 1, its
decay starts over). All of it on one background thread: the reply reaches the caller first.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from functools import lru_cache

from .._worker import Traffic, Worker
from ._model import Memory
from ._protocol import Store
from ._text import analyze, common_terms
from ._upkeep import sweep_if_due

__all__ = ["TELEMETRY_NAME", "USED_SHARE", "Telemetry", "read_telemetry", "used"]

log = logging.getLogger("memwire")

LOG = "telemetry"  # the store's event log of telemetry records
TELEMETRY_NAME = f".{LOG}.jsonl"  # its file in a markdown directory
USED_SHARE = 0.5
MAX_PENDING = 1000  # replies waiting for the worker at most; past it they are not read (logged once)


def _terms(text: str) -> set[str]:
    common = common_terms()
    return {t for t in analyze(text) if t not in common}


@lru_cache(maxsize=4096)
def _memory_terms(text: str) -> frozenset[str]:
    """A memory's ``_terms``: the same few memories are credited reply after reply."""
    return frozenset(_terms(text))


def used(mem: Memory, reply_terms: set[str]) -> bool:
    """Whether a reply (its ``_terms``) used ``mem`` (see the module)."""
    terms = _memory_terms(mem.text)
    if not terms:
        return False
    if any(any(c.isdigit() for c in t) and t in reply_terms for t in terms):
        return True
    hits = len(terms & reply_terms)
    return hits >= max(min(2, len(terms)), math.ceil(USED_SHARE * len(terms)))


class Telemetry:
    """Records what replies used, off the caller's path (one worker thread per middleware)."""

    def __init__(self, traffic: Traffic | None = None) -> None:
        self._worker = Worker("memwire-telemetry", "telemetry", "replies", lambda: MAX_PENDING, traffic)

    def offer(self, store: Store, ids: Sequence[str], reply: str, session: str, mode: str) -> None:
        self._worker.offer(self._record, (store, tuple(ids), reply, session, mode))

    def flush(self, timeout: float | None = None) -> None:
        self._worker.flush(timeout)

    def _record(self, replies: list[tuple[Store, tuple[str, ...], str, str, str]]) -> None:
        """The replies offered since the last call, each store's records appended together."""
        by_store: dict[int, tuple[Store, list[dict[str, object]]]] = {}
        for store, ids, reply, session, mode in replies:
            try:
                reply_terms = _terms(reply)
                mems = store.known(dict.fromkeys(ids))  # one forgotten or edited since has nothing to credit
                took = [m.id for m in mems if used(m, reply_terms)]
                by_store.setdefault(id(store), (store, []))[1].append({
                    "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "session": session, "mode": mode,
                    "injected": [m.id for m in mems], "used": took, "reply_chars": len(reply)})
                if store.track:
                    store.lifecycle.injected([m.id for m in mems])
                    store.lifecycle.reinforce(took, used=True)
            except Exception as exc:
                log.warning("memwire: telemetry failed (%s: %s)", type(exc).__name__, exc)
        for store, records in by_store.values():
            try:
                store.append_events(LOG, records)
                if store.track:
                    sweep_if_due(store)
            except Exception as exc:
                log.warning("memwire: telemetry failed (%s: %s)", type(exc).__name__, exc)


def read_telemetry(store: Store) -> list[dict[str, object]]:
    """The telemetry records of ``store``, oldest first."""
    return store.read_events(LOG)
