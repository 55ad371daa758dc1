"""The memory value types."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

__all__ = ["ID_CHARS", "LEGACY_ID_CHARS", "FileEdit", "Hit", "Memory", "memory_id", "normalized"]

_WS = re.compile(r"\s+")
# 80 bits: among 10 million memories the chance of any collision is about 4e-11 (a collision
# is still detected and reported by the store). Ids of 10 characters (40 bits, older versions) are
# prefixes of these, and the store accepts any unique prefix, so ids people noted keep working.
ID_CHARS = 20
LEGACY_ID_CHARS = 10


def normalized(text: str) -> str:
    """What the id is derived from: case and white space do not make another memory."""
    return _WS.sub(" ", text.strip().lower())


def memory_id(text: str) -> str:
    """An id derived from the text: the same text (case and white space aside) gets the same id."""
    return hashlib.sha1(normalized(text).encode("utf-8")).hexdigest()[:ID_CHARS]


@dataclass(frozen=True, slots=True)
class Memory:
    """One memory: one bullet line of a markdown memory file. Slots: no ``__dict__`` per memory
    (a store builds them by the thousand)."""

    id: str
    text: str
    tags: tuple[str, ...] = ()
    pinned: bool = False
    topic: str | None = None
    date: str | None = None
    source: str | None = field(default=None, compare=False)  # file it came from

    @classmethod
    def create(
        cls,
        text: str,
        tags: tuple[str, ...] | list[str] = (),
        pinned: bool = False,
        topic: str | None = None,
        date: str | None = None,
        source: str | None = None,
    ) -> Memory:
        return cls(memory_id(text), text, tuple(tags), pinned, topic, date, source)

    def search_text(self) -> str:
        """What retrieval indexes: the text, its tags and its topic."""
        parts = [self.text, *self.tags]
        if self.topic:
            parts.append(self.topic)
        return " ".join(parts)


@dataclass(frozen=True, slots=True)
class Hit:
    """A search result."""

    memory: Memory
    score: float


@dataclass(frozen=True, slots=True)
class FileEdit:
    """What ``edit_file`` did to the memories. Every memory named here as gone is in the archive
    (restorable), and the file holds what the edit returned, as returned."""

    #: memories the file holds now that it did not hold before
    added: tuple[Memory, ...] = ()
    #: (old, new): the old archived as ``superseded`` by the new, linked both ways: a line the edit
    #: rewrote, or a value in another file that a new line replaces (its line removed there)
    replaced: tuple[tuple[Memory, Memory], ...] = ()
    #: lines the edit took out, replaced by nothing: archived as ``forgotten``
    removed: tuple[Memory, ...] = ()
    #: (old, new): a memory of another file that the new one says again in other words, archived as
    #: ``merged`` into the new one (its line removed there; the file written keeps its own words)
    merged: tuple[tuple[Memory, Memory], ...] = ()
    #: (old, new): an active memory the new one may contradict; both kept, marked for a person
    conflicts: tuple[tuple[Memory, Memory], ...] = ()

    @property
    def archived(self) -> list[Memory]:
        """The memories this edit moved to the archive."""
        return [*(o for o, _ in self.replaced), *self.removed, *(o for o, _ in self.merged)]
