"""Where captured memories wait for review, where removed ones go, and the capture log.

All beside the memory files, as plain markdown a person can read and edit:

- ``DIR/inbox/MEMORY.md``: captures waiting for approval (``capture = "review"``), and merges of
  near-duplicates ``memwire dedupe --apply`` proposes (``propose_merges``: one item a cluster,
  tagged ``#merge``, naming the memory kept and the ones archived in its tags; approving it merges
  them, rejecting it leaves them and the cluster is not proposed again). A capture that corrects an
  active memory (a conversation's correction, a distilled update) names it in a tag
  (``replaces-<id>``): that memory stays active until a person approves, then the approved one
  supersedes it (archived, linked both ways); rejecting it leaves it. The store of ``DIR`` reads
  only the files of ``DIR`` itself, so nothing here is ever injected.
- ``DIR/archive/MEMORY.md``: what capture took back ("forget that …", a superseded fact), what
  a person rejected and what a merge archived, tagged ``#forgotten``, ``#superseded``, ``#rejected``
  or ``#merged``. Never injected;
  nothing captured is deleted silently.
- ``DIR/.captured.jsonl``: one JSON line per capture event (captured, reinforced, forgotten,
  superseded, approved, rejected; proposed and merged for a merge) with the memory id, its kind and
  its source (session, turn); bounded (``LOG_MAX_BYTES``, then one older file ``.captured.jsonl.1``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._errors import InvalidMemoryError, MemoryNotFoundError
from ._logfile import LOG_MAX_BYTES
from ._model import Memory
from ._protocol import Store
from ._store_checks import cue_of
from ._supersede import merge

__all__ = [
    "CAPTURED_TAG",
    "LOG_MAX_BYTES",
    "LOG_NAME",
    "MERGE_TAG",
    "added",
    "approve",
    "inbox_of",
    "is_merge",
    "log_event",
    "merge_members",
    "propose_merges",
    "read_log",
    "reject",
    "replaced",
    "replaces_tag",
    "was_rejected",
]

CAPTURED_TAG = "captured"
LOG = "captured"  # the store's event log of capture events
LOG_NAME = f".{LOG}.jsonl"  # its file in a markdown directory
MERGE_TAG = "merge"  # an inbox item that proposes a merge of duplicates, not a memory to add
# its members, as tags (they survive export, import, hand edits); joined by "-", never "/": a word and
# hex so joined is an id to the secret screen, hex after a "/" a random-looking key
_KEEP, _DROP = "merge-keep-", "merge-drop-"
_REPLACES = "replaces-"  # an item that corrects an active memory: the id it supersedes once approved
_SHOWN, _CHARS = 10, 300  # what its text quotes of a cluster (the tags name every member)


def inbox_of(store: Store) -> Store:
    """The review inbox of ``store`` (its own store: never searched with it)."""
    return store.inbox


def approve(store: Store, ids: Iterable[str]) -> list[Memory]:
    """Move inbox memories (ids or unique prefixes) into ``store``, where they are injected (one
    that replaces a memory supersedes it: ``added``); a proposed merge is carried out instead (the
    memory kept is what it gives back)."""
    inbox, moved = inbox_of(store), []
    for mid in _resolved(inbox, ids):
        mem = inbox.get(mid)
        if is_merge(mem):
            moved.append(_merged(store, mem))
            inbox.forget(mid, reason=None)
            log_event(store, "approved", mem)
            continue
        moved.append(added(store, mem))
        inbox.forget(mid, reason=None)
        log_event(store, "approved", moved[-1])
    return moved


def added(store: Store, item: Memory, text: str | None = None) -> Memory:
    """Add inbox ``item`` to ``store`` (``text``: the reviewer's words for it). One that replaces a
    memory (``replaced``) supersedes it when it is still active, in the same write; else (forgotten
    or replaced since) it is added like any other, settled by its words. The bookkeeping tag is not
    stored with it."""
    old = replaced(item)
    tags = _own_tags(item)
    words = item.text if text is None else text
    date = item.date if words == item.text else None  # the reviewer's words: not what was said that day

    def add(replaces: str | None) -> Memory:
        return store.add(words, tags, item.pinned, topic=item.topic, date=date, cue=cue_of(item), replaces=replaces)

    try:
        before = store.get(old) if old is not None and old in store else None
        mem = add(None if before is None else before.id)
    except MemoryNotFoundError:  # forgotten in between
        return add(None)
    if before is not None and before.id not in store:  # superseded (the same text again leaves it as it was)
        log_event(store, "superseded", before, {"by": mem.id})
    return mem


def reject(store: Store, ids: Iterable[str]) -> list[Memory]:
    """Move inbox memories to the archive as ``#rejected``: capture does not propose them again (nor
    ``propose_merges`` a rejected merge: its memories stay as they are)."""
    inbox, gone = inbox_of(store), []
    for mid in _resolved(inbox, ids):
        mem = inbox.get(mid)
        # what it would have replaced stays as it is; a restore brings it back as a plain memory
        store.archive_copy([Memory.create(mem.text, _own_tags(mem), mem.pinned,
                                          mem.topic, mem.date)], "rejected")
        gone.append(inbox.forget(mid, reason=None))
        log_event(store, "rejected", mem)
    return gone


def is_merge(mem: Memory) -> bool:
    """Whether an inbox item proposes a merge (``propose_merges``) rather than a memory to add."""
    return MERGE_TAG in mem.tags and any(t.startswith(_KEEP) for t in mem.tags)


def replaces_tag(mid: str) -> str:
    """The tag of an inbox item that, once approved, supersedes memory ``mid`` (``added``)."""
    return _REPLACES + mid


def _own_tags(item: Memory) -> list[str]:
    """An item's tags without the bookkeeping of what it replaces (never stored with a memory)."""
    return [t for t in item.tags if not t.startswith(_REPLACES)]


def replaced(mem: Memory) -> str | None:
    """The id of the memory an inbox item replaces once approved (None: it replaces none)."""
    return next((t[len(_REPLACES):] for t in mem.tags if t.startswith(_REPLACES)), None)


def merge_members(mem: Memory) -> list[str]:
    """The ids a proposed merge names: the one kept first, then the ones it archives."""
    return ([t[len(_KEEP):] for t in mem.tags if t.startswith(_KEEP)][:1]
            + [t[len(_DROP):] for t in mem.tags if t.startswith(_DROP)])


def propose_merges(store: Store, clusters: Iterable[Sequence[Memory]]) -> list[tuple[list[Memory], Memory | None]]:
    """Put one inbox item per cluster of duplicates (``_supersede.duplicate_clusters``) for a person to
    approve (``approve``: the others go to the archive as ``#merged``, linked to the first, restorable)
    or reject (they stay; that cluster is not proposed again). A pending proposal that shares a
    memory with a new one gives way to it; one of the same memories stays as it is. Gives each
    cluster with its item, or None when it is not proposed (rejected before, or its text cannot be
    stored as an item)."""
    inbox = inbox_of(store)
    pending = [m for m in inbox.memories() if is_merge(m)]
    rejected = {frozenset(merge_members(m)) for m in store.archive.memories()
                if "rejected" in m.tags and is_merge(m)}
    out: list[tuple[list[Memory], Memory | None]] = []
    for cluster in clusters:
        cluster = list(cluster)
        ids = [m.id for m in cluster]
        if len(cluster) < 2 or frozenset(ids) in rejected:
            out.append((cluster, None))
            continue
        same = next((old for old in pending if merge_members(old) == ids and old.id in inbox), None)
        if same is not None:  # proposed before and still waiting: the same item
            out.append((cluster, same))
            continue
        for old in pending:
            if set(merge_members(old)) & set(ids) and old.id in inbox:
                inbox.forget(old.id, reason=None)  # the fresher look at these memories replaces it
        try:
            item = inbox.add(_merge_text(cluster), [MERGE_TAG, _KEEP + ids[0], *(_DROP + i for i in ids[1:])])
        except InvalidMemoryError:  # an original a newer screen refuses: it is not quoted into the inbox
            out.append((cluster, None))
            continue
        log_event(store, "proposed", item)
        out.append((cluster, item))
    return out


def _merge_text(cluster: Sequence[Memory]) -> str:
    def quoted(m: Memory) -> str:
        return f'"{m.text if len(m.text) <= _CHARS else m.text[:_CHARS - 1] + "…"}"'

    rest = [quoted(m) for m in cluster[1:_SHOWN + 1]]
    more = f" and {len(cluster) - 1 - _SHOWN} more" if len(cluster) - 1 > _SHOWN else ""
    return (f"Merge duplicates: keep {quoted(cluster[0])}; archive {', '.join(rest)}{more} "
            "(merged into it, restorable).")


def _merged(store: Store, item: Memory) -> Memory:
    """Carry out a proposed merge with what of it is still active (a member forgotten or replaced
    since is left out; the first still active is kept): the memory kept, or the item when none is."""
    ids = merge_members(item)
    store.refresh()  # a long-lived store (the proxy's) may not have read a change made elsewhere
    active = {m.id: m for m in store.known(ids)}
    cluster = [active[i] for i in ids if i in active]
    if len(cluster) > 1:
        merge(store, cluster)
        log_event(store, "merged", cluster[0], {"merged": [m.id for m in cluster[1:]]})
    return cluster[0] if cluster else item


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
