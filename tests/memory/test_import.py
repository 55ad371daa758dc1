"""`memwire import`: other tools' memory files, read from real files on disk, into a memwire scope.
Read-only (the sources keep their bytes and mtimes), idempotent (a second import adds nothing),
secrets and overlong memories skipped and counted, never a crash."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memwire import InvalidMemoryError, Memory, MemoryStore, MemwireError
from memwire.memory._import import detect_format, import_path
from memwire.memory._store import MAX_MEMORY_CHARS

SECRET = "sk-proj-" + "Ab3dEfGh1jKlMn0pQrStUvWx" * 2

CLAUDE_MD = f"""# Payments service

This is a Django 5 app that talks to Stripe through `payments/gateway.py`.
Deploys go out on Tuesdays
after the freeze window closes.

## Commands

Run these commands:

```bash
make test   # - not a bullet
```

- Run the tests with `make test`; Docker must be running
- Lint with `ruff check .` before every commit
1. Never run migrations on a Friday

## Code style
- Use 4 spaces, never tabs
  (the CI formatter rejects tabs)
- [ ] Keep functions under 40 lines
- Ping #ops before a schema change
- The staging key is {SECRET}

> Always squash before merging.

<!-- maintainers: keep this file
     under 150 lines -->

| command | what |
|---|---|
| make test | tests |

---

@docs/git-instructions.md
- @~/.claude/my-project-instructions.md
"""

# Claude Code's auto memory (~/.claude/projects/<project>/memory/): an index, and one file per fact
AUTO_INDEX = """- [Testing preferences](feedback_testing.md) — use a real DB, not mocks
- [User role](user_role.md) — data scientist focused on observability
"""
AUTO_FEEDBACK = """---
name: Testing preferences
description: Integration tests must hit a real database, not mocks
type: feedback
---
Integration tests must hit a real database, not mocks.

**Why:** mocked tests passed last quarter while the prod migration failed.

**How to apply:** use the docker-compose postgres fixture for anything touching the DB.
"""
AUTO_REFERENCE = """---
name: Bug tracker
description: Pipeline bugs are tracked in Linear project INGEST
type: reference
---
"""

# pi-memory (~/.pi/agent/memory/): stamped appends, #tags and [[links]] by convention
PI_MEMORY = """<!-- last updated: 2026-01-10 08:00:00 [0f1e2d3c] -->
- Node 20 everywhere

<!-- 2026-02-15 14:30:00 [a1b2c3d4] -->
#preference [[package-manager]] Always use pnpm in this repo, never npm.

<!-- 2026-02-16 09:01:12 [b2c3d4e5] -->
#decision [[database-choice]] Chose PostgreSQL for all backend services.
- Backups run nightly at 02:00 UTC
"""

# pi-memory-md (~/.pi/memory-md/<project>/core/user/prefer.md)
PI_MD = """---
description: User habits and code style preferences
tags: [user, Code Style]
created: "2026-02-14T08:00:00.000Z"
updated: "2026-02-20"
---

# User Profile

<!--
  WHAT: habits and preferences
-->

## Communication Style
- Be concise
- Show code examples when helpful

Prefers answers in British English.
"""

# the scoring system's topic files (.pi/memory/topics/*.md)
PI_TOPICS = """# Preferences

- [preference] Always use --admin for gate-blocked PRs *(pinned)*
- [preference] User prefers concise responses
- [2fa] Hardware keys only for production
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def stored(store: MemoryStore) -> list[tuple[str, str | None, tuple[str, ...], str | None, bool]]:
    return [(m.text, m.topic, m.tags, m.date, m.pinned) for m in store]


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root``: its bytes and mtime."""
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_claude_md_bullets_and_sentences_under_their_headings(tmp_path: Path) -> None:
    src = write(tmp_path / "project", {"CLAUDE.md": CLAUDE_MD, "README.md": "- not memory\n",
                                       "docs/guide.md": "- not memory either\n"})
    store = MemoryStore(tmp_path / "mem")
    report = import_path(src, store)
    assert stored(store) == [
        ("This is a Django 5 app that talks to Stripe through `payments/gateway.py`.", "Payments service",
         ("imported",), None, False),
        ("Deploys go out on Tuesdays after the freeze window closes.", "Payments service", ("imported",), None, False),
        ("Run the tests with `make test`; Docker must be running", "Commands", ("imported",), None, False),
        ("Lint with `ruff check .` before every commit", "Commands", ("imported",), None, False),
        ("Never run migrations on a Friday", "Commands", ("imported",), None, False),
        ("Use 4 spaces, never tabs (the CI formatter rejects tabs)", "Code style", ("imported",), None, False),
        ("Keep functions under 40 lines", "Code style", ("imported",), None, False),
        ("Ping #ops before a schema change", "Code style", ("imported",), None, False),  # text, not a tag
        ("Always squash before merging.", "Code style", ("imported",), None, False),
    ]
    [f] = report.files  # a project directory: its CLAUDE.md, not its README or docs
    assert (Path(f.path).name, f.format, f.added, f.already) == ("CLAUDE.md", "claude", 9, 0)
    assert dict(f.skipped) == {"not a memory line": 1, "code block": 1, "secret": 1, "comment": 1, "table": 1}
    assert f.imports == ["@docs/git-instructions.md", "@~/.claude/my-project-instructions.md"]
    assert SECRET not in repr(report) and SECRET not in (tmp_path / "mem" / "MEMORY.md").read_text()


def test_claude_auto_memory_one_fact_per_file_and_the_index_skipped(tmp_path: Path) -> None:
    src = write(tmp_path / "memory", {"MEMORY.md": AUTO_INDEX, "feedback_testing.md": AUTO_FEEDBACK,
                                      "reference_linear.md": AUTO_REFERENCE})
    store = MemoryStore(tmp_path / "mem")
    report = import_path(src, store)
    assert stored(store) == [
        ("Integration tests must hit a real database, not mocks. **Why:** mocked tests passed last quarter "
         "while the prod migration failed. **How to apply:** use the docker-compose postgres fixture for "
         "anything touching the DB.", "Testing preferences", ("feedback", "imported"), None, False),
        ("Pipeline bugs are tracked in Linear project INGEST", "Bug tracker", ("reference", "imported"), None, False),
    ]
    assert [(Path(f.path).name, f.format, f.added, dict(f.skipped)) for f in report.files] == [
        ("MEMORY.md", "claude", 0, {"index entry": 2}),
        ("feedback_testing.md", "claude", 1, {}),
        ("reference_linear.md", "claude", 1, {}),
    ]


def test_pi_memory_stamps_give_the_date_and_leading_tags_the_tags(tmp_path: Path) -> None:
    src = write(tmp_path / "pi", {"MEMORY.md": PI_MEMORY, "SCRATCHPAD.md": "# Scratchpad\n- [ ] fix auth\n",
                                  "daily/2026-02-15.md": "- worked on auth\n"})
    store = MemoryStore(tmp_path / "mem")
    report = import_path(src, store)
    assert stored(store) == [
        ("Node 20 everywhere", "Notes", ("imported",), "2026-01-10", False),
        ("Always use pnpm in this repo, never npm.", "Notes", ("preference", "package-manager", "imported"),
         "2026-02-15", False),
        ("Chose PostgreSQL for all backend services.", "Notes", ("decision", "database-choice", "imported"),
         "2026-02-16", False),
        ("Backups run nightly at 02:00 UTC", "Notes", ("imported",), "2026-02-16", False),
    ]
    assert [(f.format, f.added) for f in report.files] == [("pi", 4)]
    assert [(Path(p).name, why) for p, why in report.ignored] == [
        ("daily", "daily logs, not durable memory"), ("SCRATCHPAD.md", "a to-do list, not memories")]


def test_pi_memory_md_front_matter_gives_tags_date_and_topic(tmp_path: Path) -> None:
    src = write(tmp_path / "memory-md", {"proj/core/user/prefer.md": PI_MD, "proj/core/project/stack.md":
                                         "---\ndescription: Tech stack\nupdated: 2026-03-01\n---\n- Python 3.12 with uv\n"})
    store = MemoryStore(tmp_path / "mem")
    report = import_path(src, store)
    tags = ("user", "code-style", "imported")
    assert stored(store) == [
        ("Python 3.12 with uv", "Tech stack", ("imported",), "2026-03-01", False),  # no heading: the description
        ("Be concise", "Communication Style", tags, "2026-02-14", False),
        ("Show code examples when helpful", "Communication Style", tags, "2026-02-14", False),
        ("Prefers answers in British English.", "Communication Style", tags, "2026-02-14", False),
    ]
    assert [(f.format, f.added, dict(f.skipped)) for f in report.files] == [("pi-md", 1, {}),
                                                                            ("pi-md", 3, {"comment": 1})]


def test_pi_topics_category_tag_pin_and_the_file_name_as_topic(tmp_path: Path) -> None:
    src = write(tmp_path / "project", {".pi/memory/topics/preferences.md": PI_TOPICS,
                                       ".pi/memory/topics/code-review.md": "- [lesson] Review the migration first\n",
                                       "CLAUDE.md": "- Use uv run, never python directly\n"})
    store = MemoryStore(tmp_path / "mem")
    report = import_path(src, store)
    assert stored(store) == [
        ("Use uv run, never python directly", "Notes", ("imported",), None, False),
        ("Review the migration first", "Code review", ("lesson", "imported"), None, False),
        ("Always use --admin for gate-blocked PRs", "Preferences", ("preference", "imported"), None, True),
        ("User prefers concise responses", "Preferences", ("preference", "imported"), None, False),
        ("Hardware keys only for production", "Preferences", ("imported",), None, False),  # '2fa' is no tag
    ]
    assert [f.format for f in report.files] == ["claude", "pi-topics", "pi-topics"]


def test_a_memwire_directory_imports_with_its_tags_pins_and_dates(tmp_path: Path) -> None:
    other = MemoryStore(tmp_path / "other")
    other.add("Deploys go out on Tuesdays", tags=["process"], topic="Ops", date="2024-05-08")
    other.add("Never push to main", pinned=True)
    write(tmp_path / "other", {"archive/MEMORY.md": "- a forgotten memory\n", "inbox/MEMORY.md": "- unapproved\n",
                               "namespaces/bob/MEMORY.md": "- bob's own\n"})
    store = MemoryStore(tmp_path / "mem")
    report = import_path(tmp_path / "other", store)
    assert stored(store) == [("Deploys go out on Tuesdays", "Ops", ("process", "imported"), "2024-05-08", False),
                             ("Never push to main", "Notes", ("imported",), None, True)]
    assert [f.format for f in report.files] == ["memwire"]
    assert sorted(Path(p).name for p, _ in report.ignored) == ["archive", "inbox", "namespaces"]


@pytest.mark.parametrize(("name", "text", "expected"), [
    ("CLAUDE.md", "- [preference] looks like a category\n", "claude"),
    ("notes.md", AUTO_FEEDBACK, "claude"),
    ("notes.md", AUTO_INDEX, "claude"),
    ("notes.md", "## Build\n- Run make test\nSome prose.\n", "claude"),
    ("MEMORY.md", PI_MEMORY, "pi"),
    ("prefer.md", PI_MD, "pi-md"),
    ("lessons.md", "# Lessons\n- [lesson] Read the logs first\n", "pi-topics"),
    ("MEMORY.md", "# Memory\n\n## Notes\n- Deploys on Tuesdays\n", "memwire"),
    ("MEMORY.md", "## Build\n- Run make test #build\n", "memwire"),
])
def test_the_format_is_detected_per_file(tmp_path: Path, name: str, text: str, expected: str) -> None:
    assert detect_format(tmp_path / name, text.encode()) == expected


def test_topic_files_are_pi_topics_by_their_place(tmp_path: Path) -> None:
    path = tmp_path / ".pi" / "memory" / "topics" / "notes.md"
    assert detect_format(path, b"# Notes\n- plain bullet\n") == "pi-topics"


def test_importing_again_adds_nothing_and_leaves_the_scope_as_it_is(tmp_path: Path) -> None:
    src = write(tmp_path / "src", {"CLAUDE.md": CLAUDE_MD, ".pi/memory/topics/preferences.md": PI_TOPICS})
    store = MemoryStore(tmp_path / "mem")
    first = import_path(src, store)
    assert (first.added, first.already) == (12, 0)
    store.lifecycle.flush()
    written = snapshot(tmp_path / "mem")  # the memory files and their metadata
    again = MemoryStore(tmp_path / "mem")  # a new process, say
    second = import_path(src, again)
    assert (second.added, second.already, second.skipped) == (0, 12, first.skipped)
    again.lifecycle.flush()
    assert snapshot(tmp_path / "mem") == written  # not even reinforced: importing is not evidence


def test_imported_memories_are_recorded_as_imported_as_old_as_their_date(tmp_path: Path) -> None:
    import datetime as dt

    src = write(tmp_path / "pi", {"MEMORY.md": PI_MEMORY})
    store = MemoryStore(tmp_path / "mem")
    import_path(src, store)
    pnpm = next(m for m in store if "pnpm" in m.text)
    meta = store.lifecycle.get(pnpm)
    assert meta.cue == "imported"
    assert meta.created == dt.datetime(2026, 2, 15, tzinfo=dt.timezone.utc).timestamp()


def test_a_memory_already_in_the_scope_is_counted_and_its_line_untouched(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")
    store.add("Never run migrations on a Friday", tags=["ops"])
    before = (tmp_path / "mem" / "MEMORY.md").read_bytes()
    src = write(tmp_path / "src", {"CLAUDE.md": "- never run migrations  on a friday\n- Deploys on Tuesdays\n"
                                                "- Deploys on Tuesdays\n"})
    report = import_path(src / "CLAUDE.md", store)
    assert (report.added, report.already) == (1, 2)  # the scope's own line, then a repeat in the file
    assert (tmp_path / "mem" / "MEMORY.md").read_bytes().startswith(before)
    assert [(m.text, m.tags) for m in store] == [("Never run migrations on a Friday", ("ops",)),
                                                 ("Deploys on Tuesdays", ("imported",))]


def test_the_sources_are_only_read(tmp_path: Path) -> None:
    src = write(tmp_path / "src", {"CLAUDE.md": CLAUDE_MD, "memory/MEMORY.md": AUTO_INDEX,
                                   "memory/feedback_testing.md": AUTO_FEEDBACK, "pi/MEMORY.md": PI_MEMORY,
                                   "md/prefer.md": PI_MD, ".pi/memory/topics/preferences.md": PI_TOPICS})
    old = 1_600_000_000_000_000_000
    for p in src.rglob("*.md"):
        os.utime(p, ns=(old, old))  # an mtime that a write (or a touch) would move
    before = snapshot(src)
    for path in (src, src / "memory", src / "pi", src / "md", src / "CLAUDE.md"):
        import_path(path, MemoryStore(tmp_path / "mem"))
    assert snapshot(src) == before  # same files, same bytes, same mtimes: nothing added beside them either


def test_secrets_and_overlong_memories_are_skipped_and_counted(tmp_path: Path) -> None:
    long = "word " * (MAX_MEMORY_CHARS // 5 + 1)
    src = write(tmp_path / "src", {"notes.md": f"- The token is ghp_{'a1B2' * 9}\n- {long}\n- Deploys on Tuesdays\n"
                                               "- [ ] \n- Tests need Docker\n"})
    store = MemoryStore(tmp_path / "mem")
    report = import_path(src, store)
    assert [m.text for m in store] == ["Deploys on Tuesdays", "Tests need Docker"]
    assert dict(report.skipped) == {"secret": 1, "too long": 1, "empty": 1}
    assert "a1B2" not in repr(report)


def test_a_line_with_a_control_character_is_skipped_and_counted_by_its_rule(tmp_path: Path) -> None:
    src = write(tmp_path / "src", {"notes.md": "- Build output is \x1b[31mred\x1b[0m on failure\n- Tests need Docker\n"
                                               "- The vault PIN is 4921\n"})
    store = MemoryStore(tmp_path / "mem")
    report = import_path(src, store)
    assert [m.text for m in store] == ["Tests need Docker"]
    assert dict(report.skipped) == {"control character": 1, "secret": 1}
    assert "\x1b" not in repr(report) and "4921" not in repr(report)


def test_a_dry_run_writes_nothing_and_says_what_it_would_take(tmp_path: Path) -> None:
    src = write(tmp_path / "src", {"CLAUDE.md": CLAUDE_MD})
    report = import_path(src, MemoryStore(tmp_path / "mem"), dry_run=True)
    assert (report.added, report.already, report.dry_run) == (9, 0, True)
    assert not (tmp_path / "mem").exists()
    store = MemoryStore(tmp_path / "mem")
    assert import_path(src, store).added == 9
    store.lifecycle.flush()
    written = snapshot(tmp_path / "mem")
    write(src, {"CLAUDE.md": CLAUDE_MD + "- Tests need Docker\n"})
    report = import_path(src, MemoryStore(tmp_path / "mem"), dry_run=True)
    assert (report.added, report.already) == (1, 9) and snapshot(tmp_path / "mem") == written


def test_a_forced_format_reads_every_file_that_way(tmp_path: Path) -> None:
    src = write(tmp_path / "src", {"MEMORY.md": "- [lesson] Read the logs first\nA sentence.\n"})
    store = MemoryStore(tmp_path / "mem")
    report = import_path(src, store, format="claude")
    assert [(m.text, m.tags) for m in store] == [("[lesson] Read the logs first", ("imported",)),
                                                 ("A sentence.", ("imported",))]
    assert report.files[0].format == "claude"


def test_what_cannot_be_imported_is_an_error_that_names_it(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")
    with pytest.raises(MemwireError, match="does not exist"):
        import_path(tmp_path / "nowhere", store)
    with pytest.raises(MemwireError, match="unknown format 'obsidian'"):
        import_path(tmp_path, store, format="obsidian")
    (tmp_path / "gone.md").symlink_to(tmp_path / "missing-target.md")
    with pytest.raises(MemwireError, match="does not exist"):
        import_path(tmp_path / "gone.md", store)


def test_an_unreadable_file_is_an_error_that_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = write(tmp_path, {"CLAUDE.md": "- Deploys on Tuesdays\n"}) / "CLAUDE.md"
    read_bytes = Path.read_bytes

    def refuse(self: Path) -> bytes:  # the tests may run as root, whom permissions do not stop
        if self == src:
            raise PermissionError(13, "Permission denied", str(self))
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", refuse)
    with pytest.raises(MemwireError, match=f"cannot read {src}: Permission denied"):
        import_path(src, MemoryStore(tmp_path / "mem"))


def test_an_unreadable_file_in_a_directory_is_reported_and_the_rest_imported(tmp_path: Path) -> None:
    src = write(tmp_path / "src", {"MEMORY.md": "- Deploys on Tuesdays\n"})
    (src / "broken.md").symlink_to(src / "missing-target.md")
    store = MemoryStore(tmp_path / "mem")
    report = import_path(src, store)
    assert [m.text for m in store] == ["Deploys on Tuesdays"]
    failed = [f for f in report.files if f.problems]
    assert [(Path(f.path).name, f.format) for f in failed] == [("broken.md", "?")]
    assert failed[0].problems[0].startswith("cannot read: ")


def test_a_directory_of_thousands_of_markdown_files_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import memwire.memory._import as imp

    monkeypatch.setattr(imp, "MAX_FILES", 3)
    src = write(tmp_path / "home", {f"n{i}.md": "- x\n" for i in range(5)})
    with pytest.raises(MemwireError, match="more than 3 markdown files"):
        import_path(src, MemoryStore(tmp_path / "mem"))
    assert not (tmp_path / "mem").exists()


def test_a_project_with_only_pi_topics_gives_only_them(tmp_path: Path) -> None:
    src = write(tmp_path / "project", {".pi/memory/topics/lessons.md": "- [lesson] Read the logs first\n",
                                       "README.md": "- Install with pip\n", "docs/notes.md": "- not memory\n"})
    report = import_path(src, MemoryStore(tmp_path / "mem"))
    assert [(Path(f.path).name, f.added) for f in report.files] == [("lessons.md", 1)]


def test_bad_lines_are_skipped_and_the_rest_of_the_file_still_read(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import memwire.memory._import as imp

    long_heading = "Deployment " * 15
    body = (b"---\ndescription: Ops notes\ncreated: 'soon -->'\n---\n- Refused by the store\n"
            b"---\n## " + long_heading.encode() + b"\n- Bad byte \xff here\n- Roll back with make undo\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "ops.md").write_bytes(body)
    (tmp_path / "src" / "broken.md").write_text("---\ntags: [a\n---\n- Tests need Docker\n")
    checked = imp._checked

    def refuse(mem: Memory) -> Memory:
        if mem.text == "Refused by the store":
            raise InvalidMemoryError("this memory's text cannot be stored exactly as given")
        return checked(mem)

    monkeypatch.setattr(imp, "_checked", refuse)
    store = MemoryStore(tmp_path / "mem")
    report = import_path(tmp_path / "src", store)
    assert [(m.text, m.topic, m.date) for m in store] == [
        ("Tests need Docker", "Notes", None),
        # a date memwire cannot keep is dropped, not the memory; a topic is cut at a word, within 100 characters
        ("Roll back with make undo", ("Deployment " * 9).strip(), None),
    ]
    broken, ops = report.files
    assert dict(ops.skipped) == {"cannot be stored as written": 1, "invalid UTF-8": 1}
    assert broken.problems and "front matter is not valid YAML" in broken.problems[0]
