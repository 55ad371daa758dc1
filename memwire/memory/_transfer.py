"""``memwire export`` / ``memwire import FILE``: a namespace, whole, between stores.

One JSON Lines file holds everything a namespace is, in a form either backend (the markdown
directory, PostgreSQL) writes back without loss:

- a header line: ``{"memwire_export": 1, "namespace": ..., "exported": ..., "counts": {...}}``;
- one line per memory, ``{"kind": "memory" | "archive" | "inbox", "id", "text", "tags", "pinned",
  "topic", "date", "meta"}``, in the store's order (``meta``: its lifecycle record, or null for a
  memory nobody recorded; an archived memory's record is the one it had before it was archived);
- one line per event of the capture log and the telemetry log, ``{"kind": "event", "log", "record"}``.

Importing adds what the file holds to the target scope: memories already there keep their place
and take the file's tags and pin (``add_many``); a memory's lifecycle record is merged with the
target's (``Lifecycle.put``: an empty target ends up with exactly the exported record). Every line
is checked before anything is written: a damaged file changes nothing. The replay ledgers are not
exported: they are a per-session cache of what was injected, rebuilt by the next turn.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from .._errors import InvalidMemoryError
from ._inbox import inbox_of
from ._lifecycle import Meta
from ._model import Memory
from ._store import _checked

__all__ = ["FORMAT_KEY", "KINDS", "LOGS", "ImportCounts", "export_store", "import_export", "is_export"]

FORMAT_KEY = "memwire_export"
FORMAT_VERSION = 1
KINDS = ("memory", "archive", "inbox")
LOGS = ("captured", "telemetry")  # the event logs a namespace keeps (see _inbox, _telemetry)


def _scopes(store: Any) -> dict[str, Any]:
    return {"memory": store, "archive": store.archive, "inbox": inbox_of(store)}


def export_store(store: Any, out: IO[str], namespace: str | None = None) -> dict[str, int]:
    """Write the namespace of ``store`` (its memories, archive, inbox, their lifecycle records and
    its event logs) to ``out``; returns how many lines of each kind were written."""
    scopes = _scopes(store)
    rows: dict[str, list[Memory]] = {kind: s.memories() for kind, s in scopes.items()}
    kept = rows["memory"] + rows["archive"]  # the lifecycle holds forgotten memories' records too (restore)
    metas = dict(zip((m.id for m in kept), store.lifecycle.get_many(kept), strict=True))  # one record per memory
    events = [(log, rec) for log in LOGS for rec in store.read_events(log)]
    counts = {kind: len(ms) for kind, ms in rows.items()} | {"event": len(events)}
    head = {FORMAT_KEY: FORMAT_VERSION, "namespace": namespace or "default",
            "exported": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "counts": counts}
    out.write(json.dumps(head, ensure_ascii=False) + "\n")
    for kind, mems in rows.items():
        for m in mems:
            meta = metas.get(m.id) if kind != "inbox" else None
            line = {"kind": kind, "id": m.id, "text": m.text, "tags": list(m.tags), "pinned": m.pinned,
                    "topic": m.topic, "date": m.date,
                    "meta": meta.to_json() if meta is not None and meta.recorded else None}
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
    for log, rec in events:
        out.write(json.dumps({"kind": "event", "log": log, "record": rec}, ensure_ascii=False) + "\n")
    return counts


def is_export(first_line: str) -> bool:
    """Whether a file starting with this line is a memwire export."""
    try:
        head = json.loads(first_line)
    except ValueError:
        return False
    return isinstance(head, dict) and FORMAT_KEY in head


@dataclass
class ImportCounts:
    """What an import did, per kind: memories new to the target, and memories it had already."""

    added: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    already: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    events: int = 0
    namespace: str = "default"


def _parse(lines: Iterable[str], where: str) -> Iterator[tuple[int, dict[str, Any]]]:
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            item = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InvalidMemoryError(f"{where}:{n}: not a JSON line ({exc.msg})") from None
        if not isinstance(item, dict):
            raise InvalidMemoryError(f"{where}:{n}: expected a JSON object")
        yield n, item


def _memory(item: dict[str, Any], where: str) -> tuple[str, Memory, Meta | None]:
    kind = item.get("kind")
    try:
        tags = item.get("tags") or []
        if not isinstance(item["text"], str) or not isinstance(tags, list):
            raise TypeError("text must be a string and tags a list")
        mem = Memory.create(item["text"], tuple(str(t) for t in tags), bool(item.get("pinned")),
                            item.get("topic"), item.get("date"))
        meta = Meta.from_json(item["meta"]) if item.get("meta") else None
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidMemoryError(
            f"{where}: a {kind} line that cannot be read back ({type(exc).__name__}: {exc})"
        ) from None
    return str(kind), mem, meta


def import_export(store: Any, source: IO[str], where: str = "<export>", *, dry_run: bool = False) -> ImportCounts:
    """Add an export (``export_store``'s file) to ``store``'s namespace. Every line is read and
    checked first; nothing is written when one is damaged, or with ``dry_run``."""
    lines = iter(source)
    first = next(lines, "")
    if not is_export(first):
        raise InvalidMemoryError(f"{where}: not a memwire export (its first line is no {FORMAT_KEY} header)")
    head = json.loads(first)
    if head[FORMAT_KEY] != FORMAT_VERSION:
        raise InvalidMemoryError(
            f"{where}: an export of format {head[FORMAT_KEY]!r}; this memwire reads {FORMAT_VERSION}"
        )
    out = ImportCounts(namespace=str(head.get("namespace") or "default"))
    mems: dict[str, list[Memory]] = {kind: [] for kind in KINDS}
    metas: dict[str, Meta] = {}  # a memory without one was recorded by nobody there: nor here
    events: list[tuple[str, dict[str, Any]]] = []
    for n, item in _parse(lines, where):
        at = f"{where}:{n + 1}"
        kind = item.get("kind")
        if kind == "event":
            if item.get("log") not in LOGS or not isinstance(item.get("record"), dict):
                raise InvalidMemoryError(f"{at}: an event line needs a log ({', '.join(LOGS)}) and a record object")
            events.append((item["log"], item["record"]))
            continue
        if kind not in KINDS:
            raise InvalidMemoryError(f"{at}: unknown kind {kind!r} (one of {', '.join(KINDS)}, event)")
        kind, mem, meta = _memory(item, at)
        try:
            mem = _checked(mem)
        except InvalidMemoryError as exc:
            raise InvalidMemoryError(f"{at}: {exc}") from None
        mems[kind].append(mem)
        if meta is not None and kind != "inbox":
            metas[mem.id] = meta
    scopes = _scopes(store)
    for kind, scope in scopes.items():
        here = scope.missing(m.id for m in mems[kind])
        out.added[kind] = sum(m.id in here for m in mems[kind])
        out.already[kind] = len(mems[kind]) - out.added[kind]
    out.events = len(events)
    if dry_run:
        return out
    for kind, scope in scopes.items():
        if mems[kind]:
            scope.add_many(mems[kind], cue="imported")  # one write per scope: the file's order kept
    store.lifecycle.put({m.id: metas.get(m.id) for m in mems["memory"] + mems["archive"]})
    store.lifecycle.flush()
    for log, rec in events:
        store.append_event(log, rec)
    return out
