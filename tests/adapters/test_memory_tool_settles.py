"""The Anthropic memory tool's file edits keep memory true (issue 33): a line rewritten in place is
archived as superseded by its new words (linked both ways, in the history), a line taken out is
archived as forgotten, a new line that states a new value of another file's memory replaces it
there, a paraphrase of one is merged, look-alikes stay apart, doubt keeps both; an edit that fails
changes nothing. Through the tool's commands, the store's ``edit_file``, and the real SDK's tool runner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from anthropic.lib.tools import ToolError

from memwire import InvalidMemoryError, MemoryStore, Middleware
from memwire.adapters.anthropic_memory import MemoryTool
from memwire.memory import _supersede, _upkeep
from memwire.memory._file_edit import diff
from memwire.memory._model import FileEdit, Memory

from .test_anthropic_memory import MODEL, Upstream, refused, run

OLD = "The staging database listens on port 5433"
NEW = "The staging database listens on port 6543"
REDIS = "The staging Redis listens on port 6379"


def active(store: MemoryStore) -> list[str]:
    return sorted(m.text for m in MemoryStore(store.path))  # a new store: what is on disk


def archived(store: MemoryStore) -> dict[str, tuple[str, ...]]:
    return {m.text: m.tags for m in MemoryStore(store.path).archive}


def links(store: MemoryStore, mem: Memory | str) -> dict[str, Any]:
    return store.lifecycle.links(mem if isinstance(mem, str) else mem.id)


def by_text(store: MemoryStore, text: str, archive: bool = False) -> Memory:
    return next(m for m in (store.archive if archive else store) if m.text == text)


# ------------------------------------------------------------------ a line rewritten, a line removed


def test_str_replace_of_a_value_archives_the_old_line_superseded_and_links_both_ways(tool: MemoryTool) -> None:
    store = tool.store
    run(tool, command="create", path="/memories/infra.md", file_text=f"# Infra\n\n- {OLD}\n- {REDIS}\n")
    old = by_text(store, OLD)
    out = run(tool, command="str_replace", path="/memories/infra.md", old_str="port 5433", new_str="port 6543")
    assert out.endswith(f'     4\t- {REDIS}\n     5\t\nmemwire archived 1 memory this replaced: "{OLD}".')
    assert (store.path / "infra.md").read_text() == f"# Infra\n\n- {NEW}\n- {REDIS}\n"  # as Claude wrote it
    new = by_text(store, NEW)
    assert active(store) == sorted([NEW, REDIS]) and archived(store) == {OLD: ("superseded",)}
    assert links(store, new)["supersedes"] == [old.id] and links(store, old)["superseded_by"] == new.id
    steps = _supersede.history(store, new.id)
    assert [(s.memory.text, s.state) for s in steps] == [(OLD, "superseded"), (NEW, "current")]
    assert steps[0].until is not None and steps[1].since  # both dated
    found = [h.memory.text for h in MemoryStore(store.path).search("staging database port")]
    assert NEW in found and OLD not in found
    assert store.lifecycle.get(old).forgotten is not None
    meta = store.lifecycle.get(new)  # recorded by the edit, as a deliberate write: never moved by a sweep
    assert meta.recorded and meta.cue == "explicit" and not any(_upkeep._movable(s) for s in _upkeep.scored(store))


def test_a_rewritten_line_is_replaced_whatever_its_words(tool: MemoryTool) -> None:
    """The edit itself says which line replaces which: not the words (unlike a new line elsewhere)."""
    store = tool.store
    run(tool, command="create", path="/memories/a.md", file_text="- Deploys go out on Tuesdays\n- Tests need Docker\n")
    run(tool, command="str_replace", path="/memories/a.md", old_str="Deploys go out on Tuesdays",
        new_str="The office is closed on Fridays")
    new = by_text(store, "The office is closed on Fridays")
    assert archived(store) == {"Deploys go out on Tuesdays": ("superseded",)}
    assert links(store, new)["supersedes"] == [by_text(store, "Deploys go out on Tuesdays", archive=True).id]


def test_one_line_rewritten_as_two_pairs_the_old_with_the_new_one_about_the_same_thing(tool: MemoryTool) -> None:
    store = tool.store
    run(tool, command="create", path="/memories/a.md", file_text=f"- {OLD}\n")
    out = run(tool, command="str_replace", path="/memories/a.md", old_str=f"- {OLD}",
              new_str=f"- Deploys go out on Tuesdays\n- {NEW}")
    assert out.endswith(f'memwire archived 1 memory this replaced: "{OLD}".')
    deploys, new = by_text(store, "Deploys go out on Tuesdays"), by_text(store, NEW)
    assert links(store, new)["supersedes"] == [by_text(store, OLD, archive=True).id]
    assert "supersedes" not in links(store, deploys)


def test_a_line_str_replace_removes_is_archived_as_forgotten(tool: MemoryTool) -> None:
    store = tool.store
    run(tool, command="create", path="/memories/infra.md", file_text=f"- {OLD}\n- {REDIS}\n")
    out = run(tool, command="str_replace", path="/memories/infra.md", old_str=f"- {REDIS}\n", new_str="")
    assert out.endswith(f'\nmemwire archived 1 memory this removed: "{REDIS}".')
    assert active(store) == [OLD] and archived(store) == {REDIS: ("forgotten",)}
    assert store.lifecycle.get(by_text(store, REDIS, archive=True)).forgotten is not None


def test_many_lines_removed_are_named_up_to_five(tool: MemoryTool) -> None:
    run(tool, command="create", path="/memories/a.md", file_text="".join(f"- Fact number {i}\n" for i in range(8)))
    run(tool, command="create", path="/memories/b.md", file_text="- kept\n")
    out = run(tool, command="delete", path="/memories/a.md")
    assert out == "Successfully deleted /memories/a.md" and len(archived(tool.store)) == 8  # what a delete means
    run(tool, command="create", path="/memories/a.md", file_text="".join(f"- Fact number {i}\n" for i in range(8)))
    out = run(tool, command="str_replace", path="/memories/a.md", old_str="".join(
        f"- Fact number {i}\n" for i in range(1, 8)), new_str="")
    assert out.endswith('memwire archived 7 memories this removed: "Fact number 1", "Fact number 2", '
                        '"Fact number 3", "Fact number 4", "Fact number 5" and 2 more.')


def test_an_edit_that_changes_no_memory_says_nothing_more(tool: MemoryTool) -> None:
    run(tool, command="create", path="/memories/a.md", file_text=f"- {OLD}\n")
    assert run(tool, command="str_replace", path="/memories/a.md", old_str=OLD, new_str=f"{OLD} #infra").endswith(
        f"     1\t- {OLD} #infra\n     2\t")  # a tag keeps the memory: nothing archived, nothing said
    assert run(tool, command="insert", path="/memories/a.md", insert_line=1, insert_text="## Infra") == \
        "The file /memories/a.md has been edited."
    assert not (tool.store.path / "archive").exists()


# ------------------------------------------------------------------ new lines against the other files


@pytest.mark.parametrize("how", ["create", "insert"])
def test_a_new_line_supersedes_a_memory_memwire_add_wrote_in_MEMORY_md(tool: MemoryTool, how: str) -> None:
    store = tool.store
    old = store.add(OLD + ".")
    store.add("Deploys go out on Tuesdays")
    line = "- The staging database now listens on port 6543.\n"
    if how == "create":
        out = run(tool, command="create", path="/memories/claude.md", file_text=line)
        assert out.startswith("File created successfully at: /memories/claude.md memwire archived")
    else:
        run(tool, command="create", path="/memories/claude.md", file_text="- The build uses make\n")
        out = run(tool, command="insert", path="/memories/claude.md", insert_line=1, insert_text=line)
        assert out.startswith("The file /memories/claude.md has been edited. memwire archived")
    assert out.endswith(f'memwire archived 1 memory this replaced: "{OLD}." (in /memories/MEMORY.md).')
    assert OLD not in (store.path / "MEMORY.md").read_text() and "Tuesdays" in (store.path / "MEMORY.md").read_text()
    assert line in (store.path / "claude.md").read_text()
    assert archived(store) == {OLD + ".": ("superseded",)}
    new = by_text(store, "The staging database now listens on port 6543.")
    assert links(store, new)["supersedes"] == [old.id] and links(store, old)["superseded_by"] == new.id
    assert [s.state for s in _supersede.history(store, old.id)] == ["superseded", "current"]
    prepared = Middleware(store=MemoryStore(store.path)).prepare(
        [{"role": "user", "content": "Which port does the staging database listen on?"}])
    assert "6543" in prepared.injection.text and "5433" not in prepared.injection.text


def test_look_alikes_about_other_things_both_stay(tool: MemoryTool) -> None:
    store = tool.store
    store.add("The production database listens on port 5432.")
    out = run(tool, command="create", path="/memories/claude.md", file_text=f"- {REDIS}\n")
    assert out == "File created successfully at: /memories/claude.md"  # nothing archived, nothing to say
    run(tool, command="insert", path="/memories/claude.md", insert_line=1, insert_text="- The API gateway runs on Go")
    assert active(store) == sorted(["The production database listens on port 5432.", REDIS,
                                    "The API gateway runs on Go"])
    assert not (store.path / "archive").exists() and links(store, by_text(store, REDIS)) == {}


def test_a_paraphrase_of_another_files_memory_keeps_claudes_words_and_merges_the_other(tool: MemoryTool) -> None:
    """Said again in other words: one memory stays (Claude's line, as written; the tool says so),
    the other is archived as merged into it, its saying counted."""
    store = tool.store
    old = store.add("The ledger runs on PostgreSQL 15.")
    out = run(tool, command="create", path="/memories/db.md", file_text="- The ledger database is PostgreSQL 15.\n")
    assert out.endswith('memwire archived 1 memory this says again (merged into it): '
                        '"The ledger runs on PostgreSQL 15." (in /memories/MEMORY.md).')
    assert (store.path / "db.md").read_text() == "- The ledger database is PostgreSQL 15.\n"
    assert active(store) == ["The ledger database is PostgreSQL 15."]
    assert archived(store) == {"The ledger runs on PostgreSQL 15.": ("merged",)}
    new = by_text(store, "The ledger database is PostgreSQL 15.")
    assert links(store, new)["merged"] == [old.id] and links(store, old)["merged_into"] == new.id
    assert store.lifecycle.get(new).evidence == 2  # its own saying and the one merged into it
    assert {s.memory.text for s in _supersede.history(store, new.id)} == {
        "The ledger runs on PostgreSQL 15.", "The ledger database is PostgreSQL 15."}


def test_the_same_line_as_another_files_is_one_memory_said_again(tool: MemoryTool) -> None:
    store = tool.store
    old = store.add(OLD)
    assert run(tool, command="create", path="/memories/a.md", file_text=f"- {OLD}\n") == \
        "File created successfully at: /memories/a.md"
    assert active(store) == [OLD] and OLD in (store.path / "MEMORY.md").read_text()
    assert store.lifecycle.get(old).evidence == 2 and not (store.path / "archive").exists()
    run(tool, command="delete", path="/memories/a.md")  # still in MEMORY.md: it did not leave
    assert active(store) == [OLD] and not (store.path / "archive").exists()


def test_doubt_keeps_both_and_marks_a_conflict(tool: MemoryTool) -> None:
    """A new value beside the old one in Claude's own file (the file stays as written), and a new
    value of a memory a person pinned: both kept, marked for a person, the tool says so."""
    store = tool.store
    run(tool, command="create", path="/memories/infra.md", file_text=f"- {OLD}\n")
    out = run(tool, command="insert", path="/memories/infra.md", insert_line=1, insert_text=f"- {NEW}")
    assert out.endswith(f'memwire kept 1 memory this may contradict, for the user to settle: "{OLD}".')
    assert active(store) == sorted([OLD, NEW]) and links(store, by_text(store, NEW))["conflicts"] == [
        by_text(store, OLD).id]
    pinned = store.add("I prefer npm for installing packages.", pinned=True)
    out = run(tool, command="create", path="/memories/tools.md", file_text="- I prefer pnpm over npm now.\n")
    assert out.endswith('kept 1 memory this may contradict, for the user to settle: '
                        '"I prefer npm for installing packages." (in /memories/MEMORY.md).')
    assert pinned.text in active(store) and not (store.path / "archive").exists()


# ------------------------------------------------------------------ what fails changes nothing


def test_an_edit_that_raises_changes_nothing_and_archives_nothing(tool: MemoryTool) -> None:
    store = tool.store
    store.add(OLD)
    run(tool, command="create", path="/memories/a.md", file_text=f"- {REDIS}\n")
    before = {p.name: p.read_bytes() for p in store.path.iterdir() if p.is_file() and p.name != ".meta.json"}

    def boom(old: str | None) -> str:
        raise ValueError("no")

    with pytest.raises(ValueError):
        store.edit_file("a.md", boom)
    refused(tool, "did not appear verbatim", command="str_replace", path="/memories/a.md", old_str="x y z",
            new_str=f"{NEW}")
    refused(tool, "already exists", command="create", path="/memories/a.md", file_text=f"- {NEW}\n")
    after = {p.name: p.read_bytes() for p in store.path.iterdir() if p.is_file() and p.name != ".meta.json"}
    assert after == before and not (store.path / "archive").exists() and active(store) == sorted([OLD, REDIS])


def test_a_line_that_cannot_be_archived_cannot_be_removed(tool: MemoryTool) -> None:
    """Nothing is lost: the archive is written first, and when it refuses, the file stays."""
    store = tool.store
    long = "A hand-written note " + "word " * 900  # over the 4,000 characters a memory may hold
    store.path.mkdir(parents=True)
    (store.path / "a.md").write_text(f"- {long}\n- {REDIS}\n")
    with pytest.raises(ToolError, match=r"^a.md was not changed: the memories this edit removes could not be"):
        run(tool, command="str_replace", path="/memories/a.md", old_str="A hand-written note", new_str="A note")
    assert (store.path / "a.md").read_text() == f"- {long}\n- {REDIS}\n"
    with pytest.raises(InvalidMemoryError):
        store.edit_file("a.md", lambda text: f"- {REDIS}\n")
    assert (store.path / "a.md").read_text() == f"- {long}\n- {REDIS}\n"


def test_the_report_names_what_left(tool: MemoryTool) -> None:
    store = tool.store
    assert store.edit_file("a.md", lambda text: None) == FileEdit()  # no file, none made
    report = store.edit_file("a.md", lambda text: f"- {OLD}\n- {REDIS}\n", cue="distilled")
    assert [m.text for m in report.added] == [OLD, REDIS] and report.archived == []
    report = store.edit_file("a.md", lambda text: f"- {NEW}\n")
    assert [(o.text, n.text) for o, n in report.replaced] == [(OLD, NEW)]
    assert [m.text for m in report.removed] == [REDIS] and [m.text for m in report.archived] == [OLD, REDIS]


def test_diff_pairs_by_place_then_by_words() -> None:
    a, b, c, d = (Memory.create(t) for t in ("one thing", "two things", "three things", "four things"))
    assert diff([a, b, c], [a, d, c]).rewritten == [(b, d)]
    assert diff([a, b, c], [b, c, d]).rewritten == []  # removed at the top, added at the end: no rewrite
    change = diff([a, b], [b, a])  # moved, not changed
    assert change.removed == change.added == change.rewritten == []
    old, new = Memory.create(OLD), Memory.create(NEW)
    assert diff([old], [Memory.create(REDIS), new]).rewritten == [(old, new)]


# ------------------------------------------------------------------ the SDK's tool runner

SCRIPT: list[list[dict[str, Any]]] = [
    [{"type": "tool_use", "id": "toolu_1", "name": "memory",
      "input": {"command": "view", "path": "/memories/staging.md"}}],
    [{"type": "text", "text": "Updating the port."},
     {"type": "tool_use", "id": "toolu_2", "name": "memory",
      "input": {"command": "str_replace", "path": "/memories/staging.md", "old_str": "port 5433",
                "new_str": "port 6543"}}],
    [{"type": "tool_use", "id": "toolu_3", "name": "memory",
      "input": {"command": "create", "path": "/memories/more.md",
                "file_text": "- The ledger database is PostgreSQL 15.\n"}}],
    [{"type": "text", "text": "Noted: staging is on port 6543 now."}],
]


def test_a_claude_tool_loop_through_the_sdk_replaces_and_archives(mem: Path) -> None:
    store = MemoryStore(mem)
    run(MemoryTool(store), command="create", path="/memories/staging.md", file_text=f"- {OLD}\n")
    store.add("The ledger runs on PostgreSQL 15.")
    upstream = Upstream(SCRIPT)
    client = anthropic.Anthropic(api_key="sk-ant-test", base_url="http://127.0.0.1:9", max_retries=0,
                                 http_client=httpx2.Client(transport=httpx2.MockTransport(upstream)))
    final = client.beta.messages.tool_runner(
        model=MODEL, max_tokens=1024, tools=[MemoryTool(store)],
        messages=[{"role": "user", "content": "The staging database moved to port 6543."}]).until_done()
    assert [b.text for b in final.content] == ["Noted: staging is on port 6543 now."]
    results = [r["content"] for r in upstream.tool_results()]
    assert results[1].endswith(f'\nmemwire archived 1 memory this replaced: "{OLD}".')
    assert results[2] == ('File created successfully at: /memories/more.md memwire archived 1 memory this says '
                          'again (merged into it): "The ledger runs on PostgreSQL 15." (in /memories/MEMORY.md).')
    assert str(mem) not in json.dumps(upstream.bodies)  # no host path reaches the model
    assert active(store) == sorted([NEW, "The ledger database is PostgreSQL 15."])
    assert archived(store) == {OLD: ("superseded",), "The ledger runs on PostgreSQL 15.": ("merged",)}
    new = by_text(store, NEW)
    assert [s.memory.text for s in _supersede.history(store, new.id)] == [OLD, NEW]
    body = {"model": MODEL, "max_tokens": 100,
            "messages": [{"role": "user", "content": "Which port does the staging database use?"}]}
    prepared = Middleware(store=MemoryStore(mem)).prepare_request(body, api="anthropic.messages")
    assert NEW in prepared.injection.text and OLD not in prepared.injection.text
