r"""Reading and writing markdown memory files.

One memory is one bullet line. Headers (``## Topic``) set the topic of the bullets under them.
Recognized on a bullet line:

- inline ``#tags`` (a ``#`` after white space, then a letter of any script, then letters, digits,
  ``_ - / +``: ``#rust``, ``#c++``, ``#ñandú``, ``#语言``); trailing tags are not part of the
  text, so tagging a memory does not change its id;
- ``#pinned`` (or a leading 📌) marks a pinned memory;
- a backslash keeps a character literal, as in markdown: ``\#rust`` is text, not a tag; ``\[``
  and a leading ``\📌`` likewise, and ``<\!--`` is a literal ``<!--``. ``format_line`` writes
  these escapes, so any text ``add`` accepts reads back exactly;
- ``- [category] text``: the category becomes a tag (the format other memory tools write);
- ``<!-- date: ... -->`` keeps a date with the memory, invisible when the markdown is rendered.

Files may start with YAML front matter (``description``, ``tags``, ``date``), read with PyYAML's
``BaseLoader``: every value stays the string written (a date is not turned into a date, ``no`` not
into False); ``tags`` is a list or a comma-separated string. Its tags apply to every memory of the
file, and in such a file a body without bullets counts one memory per paragraph. Problems (bad
UTF-8, empty bullets, unterminated or invalid front matter) are reported with the path and line,
and the rest of the file still loads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .._errors import MemoryFileError
from ._model import Memory

__all__ = ["MAX_TAG_CHARS", "PINNED_TAG", "TAG_PATTERN", "Entry", "ParsedFile", "format_line", "parse"]

PINNED_TAG = "pinned"
_PIN_EMOJI = "📌"
_HEADER = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_BULLET_EMPTY = re.compile(r"^\s*[-*+]\s*$")
_CHECKBOX = re.compile(r"^\[[ xX]\]\s+")
_CATEGORY = re.compile(r"^\[([A-Za-z][\w .-]{0,40})\]\s+")
MAX_TAG_CHARS = 64
TAG_PATTERN = r"[^\W\d_][\w/+-]*"  # a letter of any script, then letters, digits, _ / + -
_TAG = re.compile(rf"(?:(?<=\s)|^)#({TAG_PATTERN})")
_TRAILING_TAGS = re.compile(rf"(?:\s+#{TAG_PATTERN})+\s*$")
_PINNED_INLINE = re.compile(r"(?:(?<=\s)|^)#pinned(?![\w/+-])", re.IGNORECASE)
_ESCAPED = re.compile(r"\\([#\[])")  # markdown's backslash escapes of the characters we give meaning to
_DATE = re.compile(r"\s*<!--\s*date:\s*(.*?)\s*-->\s*")


@dataclass
class Entry:
    """A memory with the lines it spans (1-based, inclusive) in its file."""

    memory: Memory
    first_line: int
    last_line: int


@dataclass
class ParsedFile:
    entries: list[Entry] = field(default_factory=list)
    problems: list[MemoryFileError] = field(default_factory=list)
    description: str | None = None


def _slug_tag(s: str) -> str:
    return re.sub(r"[^\w/+-]+", "-", s.strip().lower()).strip("-")


def _parse_list(value: str) -> list[str]:
    value = value.strip()
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1]
    return [v.strip().strip("'\"") for v in value.split(",") if v.strip().strip("'\"")]


def _front_matter(lines: list[str], path: str, out: ParsedFile) -> tuple[int, dict[str, object], bool]:
    """Parse a leading ``---`` block; return the index of the first body line, the fields, and
    whether the body's paragraphs are memories (there are fields, or fields that could not be read:
    a typo in the front matter must not make the file's memories disappear)."""
    if not lines or lines[0].strip() != "---":
        return 0, {}, False
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        out.problems.append(MemoryFileError(path, 1, "front matter is not closed with '---'; read as body"))
        return 0, {}, False
    import yaml  # only files with front matter need it

    try:  # BaseLoader: every scalar stays the string written, nothing is constructed
        data = yaml.load("\n".join(lines[1:end]), Loader=yaml.BaseLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = 2 + mark.line if mark is not None else 1
        problem = getattr(exc, "problem", None) or "cannot be parsed"
        out.problems.append(
            MemoryFileError(path, line, f"front matter is not valid YAML ({problem}); its fields are ignored")
        )
        return end + 1, {}, True
    if data is None:  # an empty block
        return end + 1, {}, False
    if not isinstance(data, dict):
        out.problems.append(MemoryFileError(path, 2, "front matter is not a list of 'key: value' fields; ignored"))
        return end + 1, {}, True
    meta: dict[str, object] = {}
    for key, value in data.items():
        key = str(key).lower()
        if isinstance(value, str):  # a folded or literal block ends with a newline
            value = _parse_list(value) if key == "tags" else value.strip()  # tags: "a, b" or [a, b]
        meta[key] = value
    return end + 1, meta, bool(meta)


def parse_text(text: str, path: str = "<memory>") -> ParsedFile:
    return _parse_lines(text.split("\n"), path, ParsedFile())


def parse(data: bytes, path: str) -> ParsedFile:
    """Parse a memory file's bytes. Never raises: problems are collected with their line."""
    out = ParsedFile()
    lines: list[str] = []
    for n, raw in enumerate(data.split(b"\n"), start=1):
        try:
            lines.append(raw.decode("utf-8").rstrip("\r"))
        except UnicodeDecodeError as exc:
            out.problems.append(MemoryFileError(path, n, f"invalid UTF-8 ({exc.reason}); line skipped"))
            lines.append("")
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    return _parse_lines(lines, path, out)


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


# complexity over 15: a line scanner: one branch per form of a memory file (front matter, topic, entry, continuation)
def _parse_lines(lines: list[str], path: str, out: ParsedFile) -> ParsedFile:  # noqa: C901
    start, meta, paragraphs = _front_matter(lines, path, out)
    tags_value = meta.get("tags")
    file_tags = [_slug_tag(t) for t in tags_value if isinstance(t, str)] if isinstance(tags_value, list) else []
    file_date = _str_or_none(meta.get("date"))
    out.description = _str_or_none(meta.get("description"))
    topic = out.description
    has_bullets = any(_BULLET.match(line) for line in lines[start:])
    current: Entry | None = None
    current_body = ""
    paragraph: list[tuple[int, str]] = []

    def flush_paragraph() -> None:
        if paragraph:
            text = " ".join(t for _, t in paragraph)
            _add(text, paragraph[0][0], paragraph[-1][0], [])
            paragraph.clear()

    def _add(body: str, first: int, last: int, extra_tags: list[str]) -> Entry | None:
        mem = _memory_from(body, topic, file_tags + extra_tags, file_date, path)
        if mem is None:
            out.problems.append(MemoryFileError(path, first, "empty bullet; skipped"))
            return None
        entry = Entry(mem, first, last)
        out.entries.append(entry)
        return entry

    in_code = False
    for n in range(start, len(lines)):
        line, lineno = lines[n], n + 1
        if line.lstrip().startswith("```"):
            in_code = not in_code
            current = None
            continue
        if in_code:
            continue
        header = _HEADER.match(line)
        if header:
            flush_paragraph()
            current = None
            if len(header.group(1)) >= 2:
                topic = header.group(2) or topic
            continue
        bullet = _BULLET.match(line)
        if bullet:
            flush_paragraph()
            current, current_body = _add(bullet.group(2), lineno, lineno, []), bullet.group(2)
            continue
        if _BULLET_EMPTY.match(line):
            out.problems.append(MemoryFileError(path, lineno, "empty bullet; skipped"))
            current = None
            continue
        if not line.strip():
            flush_paragraph()
            current = None
            continue
        if current is not None and line[:1] in (" ", "\t"):
            # an indented line continues the bullet above (hand-wrapped text)
            current_body += " " + line.strip()
            merged = _memory_from(current_body, topic, file_tags, file_date, path)
            if merged is not None:
                current.memory, current.last_line = merged, lineno
            continue
        current = None
        if paragraphs and not has_bullets:
            paragraph.append((lineno, line.strip()))
    flush_paragraph()
    return out


def _memory_from(
    body: str, topic: str | None, base_tags: list[str], file_date: str | None, path: str
) -> Memory | None:
    body = body.strip()
    date = file_date
    m = _DATE.search(body)
    if m:
        date = m.group(1) or file_date
        body = (body[: m.start()] + " " + body[m.end() :]).strip()
    pinned = False
    if body.startswith(_PIN_EMOJI):
        pinned, body = True, body[len(_PIN_EMOJI) :].strip()
    elif body.startswith("\\" + _PIN_EMOJI):
        body = body[1:]
    body = _CHECKBOX.sub("", body)
    tags = list(base_tags)
    cat = _CATEGORY.match(body)
    if cat:
        tags.append(_slug_tag(cat.group(1)))
        body = body[cat.end() :]
    tags += [t.lower() for t in _TAG.findall(body)]
    body = _TRAILING_TAGS.sub("", body)
    body = " ".join(_PINNED_INLINE.sub("", body).split())
    body = _ESCAPED.sub(r"\1", body).replace("<\\!--", "<!--")
    if PINNED_TAG in tags:
        pinned = True
    tags = [t for t in dict.fromkeys(tags) if t and t != PINNED_TAG]
    if not body:
        return None
    return Memory.create(body, tuple(tags), pinned, topic, date, path)


def escape_text(text: str) -> str:
    """Text as a bullet line must hold it: one line, and nothing in it read as a tag, a pin, a
    category, a checkbox or a date."""
    text = " ".join(text.split())  # a memory never spans lines
    text = re.sub(r"\\(?=[#\[])", r"\\\\", text)  # a literal backslash before # or [ survives the unescape
    text = re.sub(r"(^|\s)#", r"\1\\#", text).replace("<!--", "<\\!--")
    if text.startswith("["):
        text = "\\" + text
    if text.startswith(_PIN_EMOJI):
        text = "\\" + text
    return text


def format_line(mem: Memory) -> str:
    """The canonical bullet line of a memory (what ``add`` writes). One line, always; it parses
    back to the same memory (the store checks that before writing)."""
    tags = list(mem.tags)
    if mem.pinned:
        tags.append(PINNED_TAG)
    line = "- " + escape_text(mem.text) + "".join(f" #{t}" for t in tags)
    if mem.date:
        line += f" <!-- date: {' '.join(mem.date.split())} -->"
    return line
