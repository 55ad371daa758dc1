"""Where captured memories wait for review, where removed ones go, and the capture log.

All beside the memory files, as plain markdown a person can read and edit:

- ``DIR/inbox/MEMORY.md``: captures waiting for approval (``capture = "review"``). The store of
  ``DIR`` reads only the files of ``DIR`` itself, so nothing here is ever injected.
- ``DIR/archive/MEMORY.md``: what capture took back ("forget that …", a superseded fact) and what
  a person rejected, tagged ``#forgotten``, ``#superseded`` or ``#rejected``. Never injected;
  nothing captured is deleted silently.
- ``DIR/.captured.jsonl``: one JSON line per capture event (captured, reinforced, forgotten,
  superseded, approved, rejected) with the memory id, its kind and its source (session, turn);
  bounded (``LOG_MAX_BYTES``, then one older file ``.captured.jsonl.1``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from ._logfile import LOG_MAX_BYTES
from ._model import Memory
from ._protocol import Store
from ._store import cue_of

__all__ = [
    "CAPTURED_TAG",
    "LOG_MAX_BYTES",
    "LOG_NAME",
    "approve",
    "inbox_of",
    "log_event",
    "read_log",
    "reject",
    "was_rejected",
]

CAPTURED_TAG = "captured"
LOG = "captured"  # the store's event log of capture events
LOG_NAME = f".{LOG}.jsonl"  # its file in a markdown directory


def inbox_of(store: Store) -> Store:
    """The review inbox of ``store`` (its own store: never searched with it)."""
    return store.inbox


def approve(store: Store, ids: Iterable[str]) -> list[Memory]:
    """Move inbox memories (ids or unique prefixes) into ``store``, where they are injected."""
    inbox, moved = inbox_of(store), []
    for mid in _resolved(inbox, ids):
        mem = inbox.get(mid)
        moved.append(store.add(mem.text, mem.tags, mem.pinned, topic=mem.topic, date=mem.date, cue=cue_of(mem)))
        inbox.forget(mid, reason=None)
        log_event(store, "approved", moved[-1])
    return moved


def reject(store: Store, ids: Iterable[str]) -> list[Memory]:
    """Move inbox memories to the archive as ``#rejected``: capture does not propose them again."""
    inbox, gone = inbox_of(store), []
    for mid in _resolved(inbox, ids):
        mem = inbox.get(mid)
        store.archive_copy([mem], "rejected")
        gone.append(inbox.forget(mid, reason=None))
        log_event(store, "rejected", mem)
    return gone


def _resolved(inbox: Store, ids: Iterable[str]) -> list[str]:
    """Every id resolved before anything moves: one unknown id changes nothing."""
    return list(dict.fromkeys(inbox.get(mid).id for mid in ids))  # raises MemoryNotFoundError


def was_rejected(store: Store, mem_id: str) -> bool:
    arch = store.archive
    found = arch.known([mem_id]) if mem_id in arch else []  # a full id: no prefix lookup
    return bool(found) and "rejected" in found[0].tags


def log_event(store: Store, event: str, mem: Memory, source: Mapping[str, Any] | None = None) -> None:
    """Append one event to the capture log (the store's ``captured`` event log)."""
    store.append_event(LOG, {"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "event": event, "id": mem.id,
                                         "text": mem.text, "tags": list(mem.tags), **(source or {})})


def read_log(store: Store) -> list[dict[str, Any]]:
    """The capture log's events, oldest first (unreadable lines skipped)."""
    return store.read_events(LOG)
