"""The memory value types."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

__all__ = ["Memory", "Hit", "memory_id"]

_WS = re.compile(r"\s+")


def memory_id(text: str) -> str:
    """A short id derived from the text: the same text always gets the same id."""
    norm = _WS.sub(" ", text.strip().lower())
    return hashlib.sha1(norm.encode("utf-8")).hexdigest()[:10]


@dataclass(frozen=True)
class Memory:
    """One memory: one bullet line of a markdown memory file."""

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
    ) -> "Memory":
        return cls(memory_id(text), text, tuple(tags), pinned, topic, date, source)

    def search_text(self) -> str:
        """What retrieval indexes: the text, its tags and its topic."""
        parts = [self.text, *self.tags]
        if self.topic:
            parts.append(self.topic)
        return " ".join(parts)


@dataclass(frozen=True)
class Hit:
    """A search result."""

    memory: Memory
    score: float
