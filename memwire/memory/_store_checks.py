"""What a store writes: a new memory checked (``_checked``: it reads back exactly, holds no secret,
its relative dates made absolute), a memory as the archive keeps it, and how a memory got in. Both
backends use them (``_store``, ``postgres._store``)."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import replace

from .._errors import InvalidMemoryError
from ..policies._dates import absolute_dates, might_hold_dates, said_day
from ..policies._screen import refusal
from . import _supersede
from ._markdown import MAX_TAG_CHARS, PINNED_TAG, TAG_PATTERN, format_line, parse_text
from ._model import Memory, memory_id

__all__ = ["ARCHIVE_REASONS", "DEFAULT_TOPIC", "MAX_MEMORY_CHARS", "MAX_TOPIC_CHARS", "archived", "cue_of"]

DEFAULT_TOPIC = "Notes"
MAX_MEMORY_CHARS = 4000  # about 1,000 tokens: more than a whole default memory block
MAX_TOPIC_CHARS = 100
#: why a memory is in the archive (its latest reason is its tag there)
ARCHIVE_REASONS = _supersede.ARCHIVE_REASONS  # "merged": a duplicate merged into another (memwire dedupe)
_TAG_RE = re.compile(TAG_PATTERN)


def _checked(mem: Memory, *, screen: bool = True, timezone: str | None = None, dates: bool = True) -> Memory:
    """The memory ``add`` will write, validated: it must read back as exactly this memory. With
    ``screen`` (every new memory; not a copy into the archive) what may never be stored (a secret,
    control characters: ``policies._screen``) is refused, naming the rule, never the text, and
    with ``dates`` too, relative dates become absolute ones from the day it was said (its date,
    else today in ``timezone``; ``policies._dates``), the memory then dated that day. ``dates=False``:
    a restore, which is no new saying (its text was said on its own day, not today's)."""
    text = " ".join(mem.text.split())  # one memory is one line
    if screen and dates and might_hold_dates(text):
        day = said_day(mem.date, timezone)
        if (dated := absolute_dates(text, day)) != text:
            text, mem = dated, replace(mem, date=mem.date or day.isoformat())
    if not text:
        raise InvalidMemoryError("a memory needs some text")
    if len(text) > MAX_MEMORY_CHARS:  # one memory is one fact; a pasted file would crowd every block
        raise InvalidMemoryError(f"a memory is at most {MAX_MEMORY_CHARS:,} characters, this one has {len(text):,}; "
                                 "split it, or keep the file and remember where it is")
    if screen and (why := refusal(" ".join([text, mem.topic or "", *mem.tags]))) is not None:
        raise InvalidMemoryError(why)
    pinned, tags = mem.pinned, []
    for raw in mem.tags:
        tag = unicodedata.normalize("NFC", str(raw).strip().lstrip("#").lower())
        if tag == PINNED_TAG:
            pinned = True
        elif tag and tag not in tags:
            if len(tag) > MAX_TAG_CHARS or not _TAG_RE.fullmatch(tag):
                raise InvalidMemoryError(
                    f"invalid tag {raw!r}: a tag is a letter (any script) followed by letters, digits, "
                    f"'_', '-', '/' or '+', at most {MAX_TAG_CHARS} characters, no spaces (e.g. 'c++', 'code-style')")
            tags.append(tag)
    topic = " ".join(mem.topic.split()) if mem.topic else DEFAULT_TOPIC
    if len(topic) > MAX_TOPIC_CHARS:
        raise InvalidMemoryError(f"a topic is at most {MAX_TOPIC_CHARS} characters, this one has {len(topic)}")
    date = " ".join(mem.date.split()) if mem.date else None
    out = Memory(memory_id(text), text, tuple(tags), pinned, topic, date)
    back = parse_text(f"## {topic}\n{format_line(out)}\n").entries
    if len(back) != 1 or back[0].memory != out:
        got = back[0].memory if len(back) == 1 else None
        what = ("topic" if got.topic != topic else "date" if got.date != date else "text") if got else "line"
        raise InvalidMemoryError(f"this memory's {what} cannot be stored exactly as given "
                                 f"(it would read back differently): {text[:80]!r}")
    return out


def archived(mem: Memory, reason: str) -> Memory:
    """``mem`` as the archive keeps it: tagged with why it left (only the latest why), with its own
    date, the day it was said (a restore brings it back with it; when it left is the lifecycle's
    ``forgotten``)."""
    return Memory.create(mem.text, [t for t in mem.tags if t not in ARCHIVE_REASONS] + [reason], mem.pinned,
                         mem.topic, mem.date)


def cue_of(mem: Memory) -> str:
    """How a memory got in, as its tags tell (capture and import tag what they write)."""
    return next((cue for cue in ("distilled", "captured", "imported") if cue in mem.tags), "explicit")
