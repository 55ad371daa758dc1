"""``memwire import PATH``: other tools' memory files into a memwire scope, read-only.

The source files are only read (never written, moved or touched); what they hold is added to the
store with ``add_many(..., cue="imported")``, tagged ``imported`` (and with its category where the
format has one), keeping its topic and date where the format says them (a dated memory is as old as
its date in the lifecycle metadata). Importing the same PATH again adds nothing: a memory's id is
derived from its text, and a text already in the scope is counted "already there" and left as it is
(not even reinforced: reading the same file twice is no new evidence). What is new settles as every
write does (``_supersede``), and the report says how: ``added`` (a fact of its own), ``merged`` (the
same thing as an active memory in other words: that one is reinforced, nothing added, the text's id
recorded in its ``merged`` link, so importing it again finds it "already there") and
``superseded`` (a new value of an active memory's subject: added, the old value archived); a dry
run says what the same decision would be.

Formats (``auto`` looks at each file's name, front matter and lines):

- ``claude``: Claude Code's ``CLAUDE.md`` (free markdown: bullets and numbered items under headings,
  the heading as topic; a prose sentence is a memory too, hand-wrapped lines joined; code blocks,
  tables, HTML comments and ``@path`` import lines are not memories, the imports are reported), and
  its auto memory directory ``~/.claude/projects/<project>/memory/``: ``MEMORY.md`` is an index of
  ``- [Title](file.md) — hook`` lines (skipped: the files they point to are read) or older bullets;
  each topic file with ``name`` / ``description`` / ``type`` front matter holds one memory (its
  body, "**Why:**" and "**How to apply:**" included), tagged with its type, its name the topic.
- ``pi``: pi-memory's ``MEMORY.md``: entries after ``<!-- YYYY-MM-DD HH:MM:SS [session] -->``
  stamps (the date is kept), leading ``#tags`` and ``[[links]]`` become tags.
- ``pi-md``: pi-memory-md's files: YAML front matter (``description`` the topic, ``tags``,
  ``created`` / ``updated`` the date) and a markdown body read as for ``claude``.
- ``pi-topics``: ``.pi/memory/topics/*.md``: ``- [category] text`` lines, tagged with the category,
  the file name the topic, ``*(pinned)*`` pinned.
- ``memwire``: memwire's own files (bullets, ``#tags``, ``📌``, ``<!-- date: -->``).

A directory is read whole: its ``*.md`` files, sub-directories included, except hidden ones,
memwire's ``archive/``, ``inbox/`` and ``namespaces/``, and pi-memory's ``daily/`` logs and
``SCRATCHPAD.md`` (running notes and to-dos, not durable memory). A project directory (one with a
``CLAUDE.md`` or a ``.pi/memory/topics/``, and no ``MEMORY.md``) gives only its memory files:
``CLAUDE.md``, ``CLAUDE.local.md``, ``.claude/CLAUDE.md`` and ``.pi/memory/topics/*.md``, never its
documentation.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .._errors import InvalidMemoryError, MemwireError
from ..policies._screen import screened
from . import _supersede
from ._markdown import MAX_TAG_CHARS, TAG_PATTERN, ParsedFile, _front_matter, parse
from ._model import Memory
from ._protocol import Store
from ._store import MAX_MEMORY_CHARS, MAX_TOPIC_CHARS, _checked

__all__ = ["FORMATS", "IMPORTED_TAG", "FileReport", "ImportReport", "detect_format", "import_path"]

FORMATS = ("claude", "pi", "pi-md", "pi-topics", "memwire")
IMPORTED_TAG = "imported"
MAX_FILES = 1000  # more markdown files than any memory directory holds: a wrong PATH (a home directory)

_CLAUDE_FILES = ("CLAUDE.md", "CLAUDE.local.md")
_PROJECT_FILES = ("CLAUDE.md", "CLAUDE.local.md", ".claude/CLAUDE.md")
_SKIP_DIRS = {"archive": "memwire's archive", "inbox": "memwire's review inbox",
              "namespaces": "other memwire namespaces", "daily": "daily logs, not durable memory",
              "node_modules": "packages"}
_SKIP_FILES = {"SCRATCHPAD.md": "a to-do list, not memories"}
_CLAUDE_TYPES = ("user", "feedback", "project", "reference")

_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])(?:\s+(.*))?$")  # a bullet or a numbered item
_CHECKBOX = re.compile(r"^\[[ xX]\](?:\s+|$)")
_RULE = re.compile(r"^(?:-{3,}|\*{3,}|_{3,})$")
_FENCE = re.compile(r"^(`{3,}|~{3,})")
_IMPORT_LINE = re.compile(r"^@[~\w./-]+$")  # CLAUDE.md's `@path/to/import`, alone on its line
_INDEX_ENTRY = re.compile(r"^\[[^\]]*\]\([^)\s]+\.md\)")  # Claude auto memory's `[Title](file.md) — hook`
_SENTENCE_END = re.compile(r"[.!?][\"')\]`*_]*$")
# pi-memory stamps every write: `<!-- 2026-06-07 10:12:03 [a1b2c3d4] -->`, `<!-- last updated: … -->`
_PI_STAMP = re.compile(r"^<!--\s*(?:last updated:\s*|HANDOFF\s+)?(\d{4}-\d{2}-\d{2})[ T][\d:.]+Z?"
                       r"\s*(?:\[[^\]]*\])?\s*-->$")
_PI_LEAD = re.compile(rf"^(?:(?:#{TAG_PATTERN}|\[\[[^\]\n]+\]\])\s+)+")  # leading `#tag [[link]]` tokens
_TOPIC_PINNED = re.compile(r"\s*\*\(pinned\)\*\s*$")
_TOPIC_CATEGORY = re.compile(r"^\[([^\[\]]{1,40})\]\s+")  # memwire's reader takes only those that are tags
_ISO_DATE = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:[T ][\d:.]+(?:Z|[+-]\d\d:?\d\d)?)?$")
_TAG_OK = re.compile(TAG_PATTERN)


@dataclass
class FileReport:
    """What one source file gave."""

    path: str
    format: str
    added: int = 0  # new in the scope, a fact of its own (with ``dry_run``: would be)
    already: int = 0  # the same text is in the scope already (or came earlier in this import)
    merged: int = 0  # said in other words by an active memory: that one reinforced, nothing added
    superseded: int = 0  # a new value of an active memory: added, the older value archived
    skipped: Counter[str] = field(default_factory=Counter)  # why -> how many
    imports: list[str] = field(default_factory=list)  # CLAUDE.md `@path` lines: reported, not followed
    problems: list[str] = field(default_factory=list)  # what could not be read (the rest still was)

    def skip(self, reason: str) -> None:
        self.skipped[reason] += 1


@dataclass
class ImportReport:
    """What ``import_path`` took, file by file."""

    source: str
    target: str
    dry_run: bool
    files: list[FileReport] = field(default_factory=list)
    ignored: list[tuple[str, str]] = field(default_factory=list)  # (path, why) left out of a directory

    @property
    def added(self) -> int:
        return sum(f.added for f in self.files)

    @property
    def already(self) -> int:
        return sum(f.already for f in self.files)

    @property
    def merged(self) -> int:
        return sum(f.merged for f in self.files)

    @property
    def superseded(self) -> int:
        return sum(f.superseded for f in self.files)

    @property
    def skipped(self) -> Counter[str]:
        return sum((f.skipped for f in self.files), Counter())


@dataclass
class _Found:
    """A memory read from a source file, before the store has validated it."""

    text: str
    line: int
    tags: tuple[str, ...] = ()
    topic: str | None = None
    date: str | None = None
    pinned: bool = False


# ---------------------------------------------------------------- finding the files


def _walk(root: Path, ignored: list[tuple[str, str]]) -> list[Path]:
    """The memory files of a directory (see the module docstring)."""
    topics = root / ".pi" / "memory" / "topics"
    project = [root / p for p in _PROJECT_FILES if (root / p).is_file()]
    if (project or topics.is_dir()) and not (root / "MEMORY.md").is_file():
        # a project: its memory files, never its README and docs
        return project + (sorted(topics.glob("*.md")) if topics.is_dir() else [])
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        for d in sorted(dirnames):
            if d.startswith(".") or d in _SKIP_DIRS:
                if d in _SKIP_DIRS:
                    ignored.append((str(here / d) + os.sep, _SKIP_DIRS[d]))
                dirnames.remove(d)
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith(".md") or name.startswith("."):
                continue
            if name in _SKIP_FILES:
                ignored.append((str(here / name), _SKIP_FILES[name]))
                continue
            found.append(here / name)
            if len(found) > MAX_FILES:
                raise MemwireError(f"import: {root} holds more than {MAX_FILES:,} markdown files; name the "
                                   "directory that holds the memory files")
    return sorted(found, key=lambda p: (p.parent != root, str(p)))


# ---------------------------------------------------------------- reading one file


def _decode(data: bytes, report: FileReport) -> list[str]:
    lines = []
    for raw in data.split(b"\n"):
        try:
            lines.append(raw.decode("utf-8").rstrip("\r"))
        except UnicodeDecodeError:
            report.skip("invalid UTF-8")
            lines.append("")
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    return lines


def _meta(lines: list[str], path: str) -> tuple[int, dict[str, object], list[str]]:
    """Front matter (memwire's reader: PyYAML's BaseLoader, values stay strings): the first body
    line, the fields, and the problems found."""
    out = ParsedFile()
    start, meta, _ = _front_matter(lines, path, out)
    return start, meta, [p.problem for p in out.problems]


def detect_format(path: str | os.PathLike[str], data: bytes) -> str:
    """The format of one memory file (one of ``FORMATS``), from its name, front matter and lines."""
    p = Path(path)
    if p.name in _CLAUDE_FILES:
        return "claude"
    lines = _decode(data, FileReport(str(p), "?"))
    _, meta, _ = _meta(lines, str(p))
    if meta:
        return "claude" if "type" in meta or "name" in meta else "pi-md"
    if p.parent.name == "topics" and p.parent.parent.name == "memory":
        return "pi-topics"
    if any(_PI_STAMP.match(line.strip()) for line in lines):
        return "pi"
    items = [m.group(1) or "" for m in map(_ITEM.match, lines) if m]
    if items and all(re.match(r"\[[A-Za-z][\w .-]{0,40}\]\s", t) for t in items):
        return "pi-topics"
    first = next((line.strip() for line in lines if line.strip()), "")
    marked = re.compile(rf"(?:\s#{TAG_PATTERN}\s*|<!--\s*date:.*-->\s*)$|^📌")
    if first == "# Memory" or any(marked.search(t) for t in items):
        return "memwire"
    return "claude"


def _tag(raw: str) -> str | None:
    """A tag memwire can store (it lower-cases it), or None when the source's category cannot be one."""
    tag = re.sub(r"[^\w/+-]+", "-", raw.strip().lstrip("#")).strip("-")
    return tag if tag and len(tag) <= MAX_TAG_CHARS and _TAG_OK.fullmatch(tag) else None


def _topic(raw: str | None) -> str | None:
    if not raw:
        return None
    topic = " ".join(raw.split()).rstrip("# ")  # a trailing '#' would read back as a closing sequence
    if len(topic) > MAX_TOPIC_CHARS:
        topic = topic[:MAX_TOPIC_CHARS].rsplit(" ", 1)[0]
    return topic or None


def _date(raw: object) -> str | None:
    if not isinstance(raw, str) or not raw.strip() or "-->" in raw:  # memwire keeps it in a comment
        return None
    m = _ISO_DATE.match(raw.strip())
    return m.group(1) if m else " ".join(raw.split())


# complexity over 15: a line scanner: one branch per markdown form (heading, bullet, numbered item, wrapped prose)
def _markdown(lines: list[str], start: int, report: FileReport, *, topic: str | None, tags: tuple[str, ...],  # noqa: C901
              date: str | None, pi: bool) -> list[_Found]:
    """Free markdown (CLAUDE.md, pi-memory's and pi-memory-md's bodies): bullets and numbered items
    are memories, and so is each prose sentence (hand-wrapped lines joined until one ends one)."""
    found: list[_Found] = []
    prose: list[tuple[int, str]] = []
    item: _Found | None = None  # the last bullet: an indented line continues it
    fence: str | None = None
    in_comment = False

    def add(text: str, line: int) -> _Found | None:
        lead = _PI_LEAD.match(text) if pi else None
        extra: tuple[str, ...] = ()
        if lead:  # pi-memory's convention: `#decision [[database-choice]] Chose PostgreSQL …`
            extra = tuple(t.strip("#[]") for t in lead.group(0).split())
            text = text[lead.end():]
        if not text.strip():
            report.skip("empty")
            return None
        f = _Found(text.strip(), line, tags + extra, topic, date)
        found.append(f)
        return f

    def end_prose(always: bool = True) -> None:
        if prose and (always or _SENTENCE_END.search(prose[-1][1])):
            text = " ".join(t for _, t in prose)
            if text.endswith(":"):  # "Run these commands:" introduces what follows; alone it says nothing
                report.skip("not a memory line")
            else:
                add(text, prose[0][0])
            prose.clear()

    for n in range(start, len(lines)):
        raw, lineno = lines[n], n + 1
        s = raw.strip()
        if fence is not None:
            if s.startswith(fence):
                fence = None
            continue
        if in_comment:
            in_comment = "-->" not in s
            continue
        opening = _FENCE.match(s)
        if opening:
            end_prose()
            item, fence = None, opening.group(1)
            report.skip("code block")
            continue
        if s.startswith("<!--"):
            end_prose()
            item = None
            stamp = _PI_STAMP.match(s) if pi else None
            if stamp:  # a new pi-memory entry, and its date
                date = stamp.group(1)
                continue
            in_comment = "-->" not in s
            report.skip("comment")
            continue
        if not s or _RULE.match(s):
            end_prose()
            item = None
            continue
        heading = _HEADING.match(s)
        if heading:
            end_prose()
            item, topic = None, _topic(heading.group(1)) or topic
            continue
        if s.startswith("|"):
            end_prose()
            if n == start or not lines[n - 1].strip().startswith("|"):  # one table, one skip
                report.skip("table")
            item = None
            continue
        bullet = _ITEM.match(raw)
        body = _CHECKBOX.sub("", (bullet.group(1) or "").strip()) if bullet else s
        if _IMPORT_LINE.match(body):
            end_prose()
            item = None
            report.imports.append(body)
            continue
        if bullet:
            end_prose()
            if _INDEX_ENTRY.match(body):  # an index line: the file it points to holds the memory
                item = None
                report.skip("index entry")
            else:
                item = add(body, lineno)
            continue
        if item is not None and raw[:1] in (" ", "\t"):
            item.text += " " + s
            continue
        item = None
        prose.append((lineno, s[1:].strip() if s.startswith(">") else s))
        end_prose(always=False)
    end_prose()
    return found


def _claude_typed(lines: list[str], start: int, meta: dict[str, object], report: FileReport) -> list[_Found]:
    """A Claude Code auto memory file: one fact per file, its body (the rule, then why and how to
    apply it) the memory; ``name`` the topic, ``type`` the category."""
    parts: list[str] = []
    fence = None
    for line in lines[start:]:
        s = line.strip()
        if fence is not None:
            fence = None if s.startswith(fence) else fence
            continue
        opening = _FENCE.match(s)
        if opening:
            fence = opening.group(1)
            report.skip("code block")
        elif s.startswith("<!--"):
            report.skip("comment")
        elif s and not _HEADING.match(s) and not _RULE.match(s):
            bullet = _ITEM.match(line)
            parts.append((bullet.group(1) or "").strip() if bullet else s)
    description = meta.get("description")
    text = " ".join(p for p in parts if p) or (description if isinstance(description, str) else "")
    if not text.strip():
        report.skip("empty")
        return []
    kind = meta.get("type")
    name = meta.get("name")
    tags = (kind.lower(),) if isinstance(kind, str) and kind.lower() in _CLAUDE_TYPES else ()
    return [_Found(text, start + 1, tags, _topic(name if isinstance(name, str) else None))]


def _memwire(data: bytes, path: str, report: FileReport, topics: bool) -> list[_Found]:
    """memwire's own reader (bullets, #tags, pins, dates, ``- [category]``); for the pi scoring
    system's topic files the file name is the topic and ``*(pinned)*`` pins."""
    parsed = parse(data, path)
    for p in parsed.problems:
        if "empty bullet" in p.problem:
            report.skip("empty")
        elif "UTF-8" in p.problem:
            report.skip("invalid UTF-8")
        else:
            report.problems.append(f"line {p.line}: {p.problem}")
    out = []
    stem = Path(path).stem.replace("-", " ").replace("_", " ").strip()
    for e in parsed.entries:
        m = e.memory
        f = _Found(m.text, e.first_line, m.tags, m.topic, m.date, m.pinned)
        if topics:
            f.topic = stem[:1].upper() + stem[1:] or m.topic
            pin = _TOPIC_PINNED.search(f.text)
            if pin:
                f.text, f.pinned = f.text[: pin.start()], True
            category = _TOPIC_CATEGORY.match(f.text)
            if category:  # `[2fa]`: a category all the same, though no tag (dropped with the others)
                f.text, f.tags = f.text[category.end():], (*f.tags, category.group(1))
        out.append(f)
    return out


def _read(path: Path, data: bytes, format: str) -> tuple[list[_Found], FileReport]:
    """The memories one file holds, read as ``format`` (``auto``: ``detect_format``), and a report
    of what was skipped (nothing is counted added yet)."""
    p = str(path)
    fmt = detect_format(path, data) if format == "auto" else format
    report = FileReport(p, fmt)
    if fmt in ("memwire", "pi-topics"):
        return _memwire(data, p, report, topics=fmt == "pi-topics"), report
    lines = _decode(data, report)
    start, meta, problems = _meta(lines, p)
    report.problems += problems
    if fmt == "claude" and ("type" in meta or "name" in meta):
        return _claude_typed(lines, start, meta, report), report
    listed = meta.get("tags")
    tags = tuple(t for t in listed if isinstance(t, str)) if isinstance(listed, list) else ()
    when = meta.get("created") or meta.get("date") or meta.get("updated")
    description = meta.get("description")
    topic = _topic(description) if isinstance(description, str) else None
    return _markdown(lines, start, report, topic=topic, tags=tags, date=_date(when), pi=fmt == "pi"), report


# ---------------------------------------------------------------- into the store


def _memory(f: _Found) -> Memory:
    """The memory to store: tagged ``imported``, a category that cannot be a tag left out."""
    tags = [t for t in (_tag(raw) for raw in f.tags) if t]
    return Memory.create(" ".join(f.text.split()), tuple(dict.fromkeys([*tags, IMPORTED_TAG])),
                         f.pinned, _topic(f.topic), _date(f.date))


# complexity over 15: one branch per source format, the dry run and the report: each a line or two
def import_path(  # noqa: C901
    path: str | os.PathLike[str],
    store: Store,
    *,
    format: str = "auto",
    dry_run: bool = False,
) -> ImportReport:
    """Import the memory file or directory ``path`` into ``store`` (its own directory: the scope
    written to). Never writes to ``path``. Idempotent: memories whose text the scope already holds
    are counted ``already`` and left untouched. With ``dry_run`` nothing is written at all."""
    root = Path(path).expanduser()
    if format != "auto" and format not in FORMATS:
        raise MemwireError(f"import: unknown format {format!r}; use auto or one of {', '.join(FORMATS)}")
    if not root.exists():
        raise MemwireError(f"import: {root} does not exist")
    report = ImportReport(str(root), store.location, dry_run)
    if root.is_dir():
        files = _walk(root, report.ignored)
    elif root.is_file():
        files = [root]
    else:
        raise MemwireError(f"import: {root} is neither a file nor a directory")
    known = {m.id for m in store.memories()}  # the scope as it is: what is there stays untouched
    before = frozenset(known)
    if store.track:  # a text merged into a memory before (an earlier import of it) is there too
        known.update(o for links in store.lifecycle.links_many(before).values() for o in links.get("merged") or ())
    new: list[tuple[Memory, FileReport]] = []
    for file in files:
        try:
            data = file.read_bytes()
        except OSError as exc:
            if root.is_file():
                raise MemwireError(f"import: cannot read {file}: {exc.strerror or exc}") from None
            failed = FileReport(str(file), "?")
            failed.problems.append(f"cannot read: {exc.strerror or exc}")
            report.files.append(failed)
            continue
        found, fr = _read(file, data, format)
        report.files.append(fr)
        for f in found:
            text = " ".join(f.text.split())
            if not text:
                fr.skip("empty")
            elif (why := screened(" ".join([text, f.topic or "", *f.tags]))) is not None:
                fr.skip(why[0])  # the rule only ("secret", "control character"): the value is never shown
            elif len(text) > MAX_MEMORY_CHARS:
                fr.skip("too long")
            else:
                try:
                    mem = _checked(_memory(f))
                except InvalidMemoryError:
                    fr.skip("cannot be stored as written")
                    continue
                if mem.id in known:
                    fr.already += 1
                else:
                    known.add(mem.id)
                    new.append((mem, fr))
                    fr.added += 1
    if new:
        _settled(store, new, before, dry_run)
    return report


def _settled(store: Store, new: list[tuple[Memory, FileReport]], before: frozenset[str], dry_run: bool) -> None:
    """Write ``new`` (unless ``dry_run``) and move each one's count from ``added`` to ``merged`` or
    ``superseded`` as the store's add path settled it (a dry run: as it would, the same decision)."""
    mems = [m for m, _ in new]
    if dry_run:
        if not store.settles:
            return  # an archive, an inbox: nothing settles there
        plan = _supersede.plan(mems, _supersede.candidates(store.search), lambda m: True)
        outcome = ["merged" if m.id in plan.duplicates else "superseded" if m.id in plan.replaced else "added"
                   for m in mems]
    else:
        stored = store.add_many(mems, cue="imported")  # its stability weighs how it got in (see lifecycle)
        links = store.lifecycle.links_many([m.id for m in stored]) if store.track else {}
        outcome = ["merged" if got.id != mem.id  # the memory that says it was returned, reinforced
                   else "superseded" if any(o in before for o in links.get(got.id, {}).get("supersedes") or ())
                   else "added" for mem, got in zip(mems, stored, strict=True)]
        if store.track:  # each text merged, linked to the memory that says it: importing it again is no news
            store.lifecycle.link_merges([(mem.id, got.id) for mem, got in zip(mems, stored, strict=True)
                                         if got.id != mem.id], back=False)
    for (_, fr), how in zip(new, outcome, strict=True):
        if how == "merged":
            fr.added, fr.merged = fr.added - 1, fr.merged + 1
        elif how == "superseded":
            fr.added, fr.superseded = fr.added - 1, fr.superseded + 1

