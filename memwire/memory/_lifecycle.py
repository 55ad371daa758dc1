"""Lifecycle: memories strengthen when used and fade when not.

Each memory has metadata beside the markdown, in ``DIR/.meta.json`` (the store owns it: the
markdown stays as people wrote it): when it was created and last reinforced, its evidence (how
often it was said, captured, restored or used), its cue (how it got in: ``explicit`` — a person
wrote or added it —, ``captured``, ``distilled``, ``imported``), and how often it was injected and
used. Entries are keyed by the memory's id, which comes from its words: a hand edit of its tags,
pin, topic or place keeps its history; new words make a new memory.

Stability (``Scoring.stability``)::

    cue_weight[cue] × 0.5 ** (days since last reinforced / half_life[category]) × ln(1 + evidence)

A pinned memory does not decay (the middle factor is 1); a forgotten one is 0. The category comes
from the memory's tags (``CATEGORY_TAGS``: "preference", "lessons", ...), ``fact`` when none says.
States: ``active`` ≥ 1.5, ``provisional`` ≥ 0.7, ``candidate`` ≥ 0.4, ``dropped`` below. With the
default weights a memory a person wrote starts active (2.08), a captured one too (1.73), a distilled
or imported one provisional (1.04, 1.39); each reinforcement adds evidence and restarts the decay.

A memory nobody has recorded (written by hand, or before this file existed) counts as written by a
person when first seen: its markdown date when it has one, else the day a sweep first saw it.

Writes are batched: changes are kept in memory and merged into the file (re-read under its lock,
so processes sharing a directory add up their counts) at most every ``SAVE_INTERVAL_S`` seconds,
and at exit. A crash loses at most those seconds of counts, never a memory.

Evidence counts what was said (each add, each reinforcement, in any process: they add up); a
record made only because a memory was seen or injected says nothing and saves evidence 0 (read and
scored as 1, like a memory nobody recorded). So a memory one process adds and another process's sweep
records before the adder saves has evidence 1, not 2, whichever saves first. Ranking reads only
what is saved (``priors``): at any moment every process sharing the storage ranks a search alike.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as _dt
import functools
import json
import logging
import math
import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from .. import _paths
from .._errors import MemoryFileError
from .._locks import write_lock
from ._model import Memory
from ._table import Kind

__all__ = ["CATEGORIES", "CATEGORY_TAGS", "CUES", "LINKS", "META_NAME", "STATES", "Lifecycle", "Meta", "Scoring",
           "category_of"]

log = logging.getLogger("memwire")
_REFUSED = (-1, -1, -1)  # the signature of a metadata file that is refused (a symlink): warned once

META_NAME = ".meta.json"
SAVE_INTERVAL_S = 5.0
DAY_S = 86_400.0
CUES = ("explicit", "captured", "distilled", "imported")
CATEGORIES = ("preference", "instruction", "lesson", "mistake", "pattern", "decision", "completion", "fact")
#: tag -> category (the first of a memory's tags that names one wins)
CATEGORY_TAGS = {**{c: c for c in CATEGORIES}, **{c + "s": c for c in CATEGORIES}, "pref": "preference",
                 "prefs": "preference", "rule": "instruction", "rules": "instruction", "done": "completion",
                 "completed": "completion"}
STATES = ("active", "provisional", "candidate", "dropped")
#: how a memory relates to others (``Lifecycle.link``): the one it replaced and the one that
#: replaced it (issue 33), the ones it stands in conflict with, the one a duplicate was merged into
#: and the ones merged into it (``memwire dedupe``)
LINKS = ("supersedes", "superseded_by", "conflicts", "merged_into", "merged")
_DAY = re.compile(r"\d{4}-\d{1,2}-\d{1,2}")


def category_of(mem: Memory) -> str:
    return _category(mem.tags)


def _category(tags: Iterable[str]) -> str:
    for tag in tags:
        if tag in CATEGORY_TAGS:
            return CATEGORY_TAGS[tag]
    return "fact"


@dataclass(frozen=True)
class Scoring:
    """The weights of the stability score, its state thresholds and the per-category caps (all
    configurable: ``cue_weights``, ``half_lives`` in days, ``category_caps``, ``rank_prior``)."""

    cue_weights: Mapping[str, float] = field(default_factory=lambda: {
        "explicit": 3.0, "captured": 2.5, "imported": 2.0, "distilled": 1.5})
    half_lives: Mapping[str, float] = field(default_factory=lambda: {
        "instruction": 365.0, "preference": 180.0, "lesson": 180.0, "mistake": 120.0, "pattern": 120.0,
        "fact": 90.0, "decision": 60.0, "completion": 14.0})
    caps: Mapping[str, int] = field(default_factory=lambda: {
        "instruction": 100, "preference": 100, "lesson": 100, "mistake": 100, "pattern": 100,
        "fact": 500, "decision": 200, "completion": 50})
    thresholds: tuple[float, float, float] = (1.5, 0.7, 0.4)  # active, provisional, candidate
    rank_prior: float = 0.1  # retrieval: a score is multiplied by 1 ± rank_prior/2 (see prior)

    def __post_init__(self) -> None:
        for name, table, keys in (("cue_weights", self.cue_weights, CUES), ("half_lives", self.half_lives, CATEGORIES),
                                  ("category_caps", self.caps, CATEGORIES)):
            unknown = set(table) - set(keys)
            if unknown:
                raise ValueError(f"{name}: unknown key(s) {', '.join(sorted(unknown))}; valid: {', '.join(keys)}")
            bad = [k for k, v in table.items() if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0]
            if bad:
                raise ValueError(f"{name}: {bad[0]} must be a positive number, got {table[bad[0]]!r}")
        defaults = Scoring.__dataclass_fields__  # partial tables fill in from the defaults
        for attr in ("cue_weights", "half_lives", "caps"):
            factory = defaults[attr].default_factory
            assert callable(factory)  # each of these fields has one
            base = factory()
            object.__setattr__(self, attr, {**base, **getattr(self, attr)})
        if not 0 <= self.rank_prior <= 1:
            raise ValueError(f"rank_prior must be between 0 and 1, got {self.rank_prior!r}")

    def stability(self, mem: Memory, meta: Meta, now: float) -> float:
        return self.stability_of(meta, mem.pinned, mem.tags, now)

    def stability_of(self, meta: Meta, pinned: bool, tags: Iterable[str], now: float) -> float:
        """``stability`` from the memory's pin and tags (a search ranks hits before building them)."""
        if meta.forgotten:
            return 0.0
        decay = 1.0 if pinned else 0.5 ** (max(0.0, now - meta.reinforced) / DAY_S / self.half_lives[_category(tags)])
        return self.cue_weights.get(meta.cue, 1.0) * decay * math.log1p(max(1, meta.evidence))

    def state(self, score: float) -> str:
        active, provisional, candidate = self.thresholds
        return ("active" if score >= active else "provisional" if score >= provisional
                else "candidate" if score >= candidate else "dropped")

    def prior(self, score: float) -> float:
        """The factor a retrieval score is multiplied by: 1 at the active threshold, toward
        1 + rank_prior/2 for the strongest memories, 1 - rank_prior/2 for the weakest. Small: it
        reorders memories of about equal relevance, never makes an irrelevant one relevant.
        Rounded to 1/1000: two memories whose stability differs by a few seconds of age (or by
        whether a process has saved their metadata yet) rank alike, by id, in every process."""
        active = self.thresholds[0]
        return round(1.0 + self.rank_prior * (score / (score + active) - 0.5), 3)


class Meta(NamedTuple):
    """One memory's metadata (a named tuple: a search builds one per hit it ranks)."""

    created: float
    reinforced: float
    evidence: int = 1
    cue: str = "explicit"
    uses: int = 0
    injected: int = 0
    forgotten: float | None = None
    recorded: bool = True  # False: nobody recorded it yet (a hand-written memory, first seen now)
    # how it relates to other memories (``LINKS``: supersedes, superseded_by, conflicts, merged_into,
    # merged), each an id or a list of ids; None when it has none
    links: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"created": _iso(self.created), "reinforced": _iso(self.reinforced),
                               "evidence": self.evidence, "cue": self.cue, "uses": self.uses, "injected": self.injected}
        if self.forgotten is not None:
            out["forgotten"] = _iso(self.forgotten)
        if self.links:
            out["links"] = dict(self.links)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Meta:
        created = _epoch(data["created"])
        forgotten = data.get("forgotten")
        links = data.get("links")
        return cls(created, _epoch(data.get("reinforced", data["created"])), int(data.get("evidence", 1)),
                   str(data.get("cue", "explicit")), int(data.get("uses", 0)), int(data.get("injected", 0)),
                   _epoch(forgotten) if forgotten else None, links=links if isinstance(links, dict) and links else None)


@dataclass
class _Delta:
    """What this process changed since its last save: counts to add, times to take."""

    created: float | None = None
    cue: str | None = None
    reinforced: float | None = None
    evidence: int = 0
    uses: int = 0
    injected: int = 0
    forgotten: float | None = None
    restored: bool = False
    links: dict[str, Any] | None = None  # links set (None: removed), each replacing what was there

    def apply(self, base: Meta | None, now: float) -> Meta:
        if base is None:
            created = self.created if self.created is not None else now
            base = Meta(created, created, 0, self.cue or "explicit")
        reinforced = base.reinforced if self.reinforced is None else max(base.reinforced, self.reinforced)
        forgotten = self.forgotten if self.forgotten is not None else None if self.restored else base.forgotten
        return Meta(base.created, reinforced, base.evidence + self.evidence, base.cue,
                    base.uses + self.uses, base.injected + self.injected, forgotten,
                    links=_linked(base.links, self.links) or None)


class Lifecycle:
    """The metadata of one memory directory (``store.lifecycle``)."""

    def __init__(self, path: str | os.PathLike[str], *, scoring: Scoring | None = None,
                 clock: Callable[[], float] = time.time, root: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path)
        self.root = Path(root) if root is not None else self.path  # nothing below it is a symlink (_paths)
        self.scoring = scoring or Scoring()
        self.clock = clock
        self._disk: dict[str, Meta] = {}
        self._sig: tuple[int, int, int] | None = None
        self._checked = -math.inf
        self._delta: dict[str, _Delta] = {}
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        _OPEN.add(self)

    @property
    def file(self) -> Path:
        return self.path / META_NAME

    # ------------------------------------------------------------------ reading

    def get(self, mem: Memory) -> Meta:
        """``mem``'s metadata (for one nobody recorded: a person's, created at its markdown date
        or now)."""
        return self.get_many([mem])[0]

    def get_many(self, mems: Iterable[Memory]) -> list[Meta]:
        self._sync()
        now = self.clock()
        with self._lock:
            return [self._meta(mem.id, mem.date, now) for mem in mems]

    def _meta(self, mid: str, date: str | None, now: float) -> Meta:
        """The metadata of memory ``mid`` (dated ``date``), with the lock held. A memory is there
        because it was said or written once at least: a record that counts no saying (made by a sweep
        or an injection before its adder's record was saved, or without it) shows evidence 1."""
        base, delta = self._disk.get(mid), self._delta.get(mid)
        meta = delta.apply(base, now) if delta is not None else base
        if meta is None:
            return _unrecorded(date, now)
        return meta if meta.evidence > 0 else meta._replace(evidence=1)

    def score(self, mem: Memory, now: float | None = None) -> float:
        return self.scoring.stability(mem, self.get(mem), self.clock() if now is None else now)

    def state(self, mem: Memory, now: float | None = None) -> str:
        return self.scoring.state(self.score(mem, now))

    def priors(self, ids: Sequence[str], kinds: Sequence[Kind]) -> list[float]:
        """The ranking factors (see ``Scoring.prior``) of the memories ``ids``, of these (tags,
        pinned, topic, date): a search ranks its hits by them before building any.

        Read from the metadata as saved, looked at on every call (the file's signature; the
        PostgreSQL store's catch-up), never from this process's unsaved changes: processes sharing
        the storage rank a search alike, so the block a turn gets does not depend on which worker
        of ``memwire proxy --workers N`` settles it, nor on when each one last saved or looked. A
        change counts in ranking once saved (within ``SAVE_INTERVAL_S``); ``get``, ``score`` and
        ``state`` see it at once."""
        self._sync(always=True)
        now, sc = self.clock(), self.scoring
        with self._lock:
            disk = self._disk
        metas = [disk.get(mid) or _unrecorded(kind[3], now) for mid, kind in zip(ids, kinds, strict=True)]
        return [sc.prior(sc.stability_of(meta, kind[1], kind[0], now)) for meta, kind in zip(metas, kinds, strict=True)]

    # ------------------------------------------------------------------ recording

    def added(self, mems: Iterable[Memory], cue: str = "explicit") -> None:
        """New memories (``cue``: how they got in); one already recorded is reinforced instead."""
        if cue not in CUES:
            raise ValueError(f"cue must be one of {', '.join(CUES)}, got {cue!r}")
        now = self.clock()
        self._sync()
        with self._lock:
            for m in mems:
                d = self._delta.setdefault(m.id, _Delta())
                if m.id in self._disk or d.created is not None:
                    d.evidence += 1
                    d.reinforced = now
                else:
                    when = _date(m.date) or now  # a dated memory (imported, say) is as old as its date
                    d.created, d.cue, d.reinforced, d.evidence = when, cue, when, 1
                d.forgotten, d.restored = None, True  # added again after it was forgotten: back
        self._changed()

    def reinforce(self, ids: Iterable[str], *, used: bool = False) -> None:
        """Said again, or used by a reply (``used``): more evidence, and the decay starts over."""
        now = self.clock()
        with self._lock:
            for mid in ids:
                d = self._delta.setdefault(mid, _Delta())
                d.evidence += 1
                d.reinforced = now
                d.uses += used
        self._changed()

    def link(self, changes: Mapping[str, Mapping[str, Any]]) -> None:
        """Record how memories relate to others: ``{id: {link: value}}`` (``LINKS``; a value None
        removes that link). Saved at once: a supersession or a conflict is not a count that may wait."""
        unknown = {k for links in changes.values() for k in links} - set(LINKS)
        if unknown:
            raise ValueError(f"unknown link(s) {', '.join(sorted(unknown))}; valid: {', '.join(LINKS)}")
        if not changes:
            return
        with self._lock:
            for mid, links in changes.items():
                d = self._delta.setdefault(mid, _Delta())
                d.links = {**(d.links or {}), **links}
        self.flush()

    def link_merges(self, merges: Sequence[tuple[str, str]], *, back: bool = True) -> None:
        """Record each ``(merged, kept)``: the kept memory's ``merged`` list grows by the merged ids
        (each once, after the ones it had) and, with ``back``, each merged one links
        ``merged_into`` its kept one (not for a text that never was a memory: an import's)."""
        into: dict[str, list[str]] = {}
        had = self.links_many({kept for _, kept in merges})
        for merged, kept in merges:
            into.setdefault(kept, list(had.get(kept, {}).get("merged") or [])).append(merged)
        changes: dict[str, dict[str, Any]] = {kept: {"merged": list(dict.fromkeys(ids))} for kept, ids in into.items()}
        if back:
            changes.update({merged: {"merged_into": kept} for merged, kept in merges})
        self.link(changes)

    def links(self, mid: str) -> dict[str, Any]:
        """The links of memory ``mid`` (empty when it has none), this process's changes included."""
        self._sync()
        with self._lock:
            base, delta = self._disk.get(mid), self._delta.get(mid)
            return _linked(base.links if base is not None else None, delta.links if delta is not None else None)

    def links_many(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """``links`` of each of ``ids`` that has any, under one look at the storage."""
        self._sync()
        with self._lock:
            disk, delta = self._disk, self._delta
            out = {}
            for mid in ids:
                base, d = disk.get(mid), delta.get(mid)
                if (base is not None and base.links) or (d is not None and d.links):
                    out[mid] = _linked(base.links if base is not None else None, d.links if d is not None else None)
            return out

    def injected(self, ids: Iterable[str]) -> None:
        with self._lock:
            for mid in ids:
                self._delta.setdefault(mid, _Delta()).injected += 1
        self._changed()

    def forgotten(self, ids: Iterable[str]) -> None:
        now = self.clock()
        with self._lock:
            for mid in ids:
                d = self._delta.setdefault(mid, _Delta())
                d.forgotten, d.restored = now, False
        self._changed()

    def seen(self, mems: Iterable[Memory]) -> None:
        """Record memories nobody recorded yet, as a person's, first seen now (or at their date)."""
        self._sync()
        now = self.clock()
        with self._lock:
            for m in mems:
                if m.id not in self._disk and m.id not in self._delta:
                    when = _date(m.date) or now
                    # evidence 0: seeing a memory is not a saying (its adder, maybe another process
                    # whose record is not saved yet, counts that), else it would be counted twice
                    self._delta[m.id] = _Delta(created=when, cue="explicit", reinforced=when)
        self._changed()

    def put(self, metas: Mapping[str, Meta | None]) -> None:
        """Records kept elsewhere (an import): each replaces what this process has pending for its
        memory, and is merged with what is saved (counts add up, the latest reinforcement wins), so a
        memory new here gets exactly the record it had there. None: nobody recorded it there, so
        nothing is recorded here either (it counts as a person's when first seen)."""
        with self._lock:
            for mid, m in metas.items():
                if m is None:
                    self._delta.pop(mid, None)
                else:
                    self._delta[mid] = _Delta(m.created, m.cue, m.reinforced, m.evidence, m.uses, m.injected,
                                              m.forgotten, m.forgotten is None, dict(m.links) if m.links else None)
        self._changed()

    # ------------------------------------------------------------------ the file

    def _changed(self) -> None:
        with self._lock:
            if self._timer is None and self._delta:
                self._timer = threading.Timer(SAVE_INTERVAL_S, self._timed_flush)
                self._timer.daemon = True
                self._timer.start()

    def _timed_flush(self) -> None:
        with self._lock:
            self._timer = None
        try:
            self.flush()
        except Exception as exc:
            log.warning("memwire: could not save memory metadata to %s (%s: %s)", self.where, type(exc).__name__, exc)

    def flush(self) -> None:
        """Merge this process's changes into the storage now."""
        with self._lock:
            if not self._delta:
                return
            delta, self._delta = self._delta, {}
        try:
            disk = self._save(delta)
        except BaseException:
            with self._lock:  # not saved: keep the changes (merged with any made meanwhile)
                for mid, d in delta.items():
                    self._delta[mid] = _merge(d, self._delta.get(mid))
            raise
        with self._lock:
            self._disk, self._checked = disk, time.monotonic()

    def _sync(self, always: bool = False) -> None:
        """Re-read the storage when another process changed it (looked at most once a second, or
        ``always``)."""
        now = time.monotonic()
        if now - self._checked < 1.0 and not always:
            return
        self._checked = now
        disk = self._load()
        if disk is not None:
            with self._lock:
                self._disk = disk

    # ------------------------------------------------------------------ storage: the JSON file
    # (hooks: a subclass keeps the metadata elsewhere, memory/postgres/_store.py in a table)

    @property
    def where(self) -> str:
        """Where the metadata is kept, for messages."""
        return str(self.file)

    def _load(self) -> dict[str, Meta] | None:
        """Everything stored, when it changed since last loaded; else None."""
        # looked at on every ranking: unchanged, or still not there, it costs one lstat (no walk)
        try:
            st = os.lstat(os.path.join(self.path, META_NAME))  # not self.file: a Path costs more than the lstat
        except FileNotFoundError:
            if self._sig is None:  # never there: nothing stored yet
                return None
        except OSError:
            pass
        else:
            if (st.st_mtime_ns, st.st_size, st.st_ino) == self._sig:
                return None
        try:
            st = _paths.lstat(self.root, self.file)
            return self._read() if (st.st_mtime_ns, st.st_size, st.st_ino) != self._sig else None
        except FileNotFoundError:
            return None
        except MemoryFileError as exc:  # a symlink: never read; ranking goes on without what it holds
            if self._sig != _REFUSED:
                self._sig = _REFUSED
                log.warning("memwire: memory metadata not read: %s", exc)
            return None

    def _save(self, delta: Mapping[str, _Delta]) -> dict[str, Meta]:
        """Merge ``delta`` into what is stored, under the file's lock (the counts of processes
        sharing the directory add up); returns everything stored. A memory directory removed
        meanwhile is not made again for its metadata alone: the memories it described are gone."""
        if not self.path.is_dir():
            log.debug("memwire: memory metadata not saved: %s is gone", self.where)
            return {}
        with write_lock(_paths.under(self.root, self.path / ".meta.lock")):
            disk = self._read()
            now = self.clock()
            for mid, d in delta.items():
                disk[mid] = d.apply(disk.get(mid), now)
            self._write(disk)
        return disk

    def _read(self) -> dict[str, Meta]:
        try:
            fd = _paths.open_fd(self.root, self.file, os.O_RDONLY)
        except FileNotFoundError:
            return {}
        with os.fdopen(fd, "rb") as fh:
            raw, st = fh.read(), os.fstat(fd)
        self._sig = (st.st_mtime_ns, st.st_size, st.st_ino)
        try:
            entries = json.loads(raw)["memories"]
            return {mid: Meta.from_json(e) for mid, e in entries.items()}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            # never lose the damaged file: keep it aside, start over (the memories are in the markdown)
            aside = self.file.with_name(f"{META_NAME}.damaged")
            with contextlib.suppress(OSError):
                _paths.replace(self.root, self.file, aside)
            log.warning("memwire: %s is damaged (%s); moved to %s, metadata starts over", self.file, exc, aside.name)
            return {}

    def _write(self, disk: Mapping[str, Meta]) -> None:
        data = json.dumps({"version": 1, "memories": {k: m.to_json() for k, m in sorted(disk.items())}},
                          indent=0, ensure_ascii=False).encode("utf-8")
        fd, tmp = _paths.mkstemp(self.root, self.path, prefix=".meta.")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            _paths.replace(self.root, tmp, self.file)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        st = os.lstat(self.file)
        self._sig = (st.st_mtime_ns, st.st_size, st.st_ino)


def _unrecorded(date: str | None, now: float) -> Meta:
    """The metadata of a memory nobody recorded: a person's, as old as its markdown date, else new."""
    when = _date(date) or now
    return Meta(when, when, recorded=False)


def _merge(a: _Delta, b: _Delta | None) -> _Delta:
    if b is None:
        return a
    return _Delta(a.created if a.created is not None else b.created, a.cue or b.cue,
                  max((t for t in (a.reinforced, b.reinforced) if t is not None), default=None),
                  a.evidence + b.evidence, a.uses + b.uses, a.injected + b.injected,
                  b.forgotten if b.forgotten is not None else a.forgotten, a.restored or b.restored,
                  {**a.links, **b.links} if a.links and b.links else a.links or b.links)


def _linked(base: Mapping[str, Any] | None, change: Mapping[str, Any] | None) -> dict[str, Any]:
    """``base``'s links with ``change`` applied (a key set to None is removed)."""
    out = dict(base or {})
    for key, value in (change or {}).items():
        if value is None or value == []:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def _iso(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _epoch(s: Any) -> float:
    if isinstance(s, (int, float)):
        return float(s)
    return _dt.datetime.strptime(str(s), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=_dt.timezone.utc).timestamp()


def _date(date: str | None) -> float | None:
    """A markdown date (``2026-11-24``) as a time, or None."""
    return _day(date.strip()[:10]) if date else None


@functools.lru_cache(maxsize=4096)
def _day(day: str) -> float | None:
    # by its first ten characters: few distinct ones, and a date of another form ("session 12",
    # "8 May, 2023") is told apart without strptime raising (a search ranks a dozen hits by it)
    if not _DAY.fullmatch(day):
        return None
    try:
        return _dt.datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=_dt.timezone.utc).timestamp()
    except ValueError:
        return None


_OPEN: weakref.WeakSet[Lifecycle] = weakref.WeakSet()


@atexit.register
def _flush_all() -> None:
    for lc in list(_OPEN):
        with contextlib.suppress(Exception):
            lc.flush()
