"""The Anthropic memory tool (``memory_20250818``) over a memwire store: every command and its
errors, paths confined to the memory directory, secrets refused, deletes archived, and a whole
tool loop with the real anthropic SDK against a scripted fake upstream."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import threading
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from anthropic.lib.tools import ToolError

from memwire import MemoryStore, Middleware
from memwire.adapters.anthropic_memory import FRONT_MATTER, AsyncMemoryTool, MemoryTool

LISTING = "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items:\n"


def run(tool: MemoryTool, **command: Any) -> Any:
    """A command as the SDK's tool runner hands it over (the tool_use block's input)."""
    return tool.call(command)


def refused(tool: MemoryTool, match: str, **command: Any) -> str:
    with pytest.raises(ToolError, match=match) as caught:
        run(tool, **command)
    return str(caught.value)


def files(mem: Path) -> list[str]:
    return sorted(n for n in os.listdir(mem) if n != ".lock") if mem.exists() else []


# ------------------------------------------------------------------ the commands


def test_the_tool_is_the_memory_20250818_tool(tool: MemoryTool) -> None:
    assert tool.to_dict() == {"type": "memory_20250818", "name": "memory"} and tool.name == "memory"
    cached = MemoryTool(tool.store, cache_control={"type": "ephemeral"})
    assert cached.to_dict()["cache_control"] == {"type": "ephemeral"}


def test_view_of_a_new_store_lists_nothing_and_creates_nothing(tool: MemoryTool, mem: Path) -> None:
    assert run(tool, command="view", path="/memories") == LISTING + "0B\t/memories"
    assert not mem.exists()


def test_create_then_view_the_directory_and_the_file(tool: MemoryTool, mem: Path) -> None:
    text = "# Project\n\n- The build runs with make\n- Tests need Docker\n"
    assert run(tool, command="create", path="/memories/project.md", file_text=text) == \
        "File created successfully at: /memories/project.md"
    assert (mem / "project.md").read_text() == text  # bullets: written as given
    listing = run(tool, command="view", path="/memories/")
    assert listing.startswith(LISTING) and listing.endswith(f"\n{len(text)}B\t/memories/project.md")
    assert run(tool, command="view", path="/memories/project.md") == (
        "Here's the content of /memories/project.md with line numbers:\n"
        "     1\t# Project\n     2\t\n     3\t- The build runs with make\n     4\t- Tests need Docker\n     5\t")
    assert run(tool, command="view", path="/memories/project.md", view_range=[3, 4]).endswith(
        "with line numbers:\n     3\t- The build runs with make\n     4\t- Tests need Docker")
    assert run(tool, command="view", path="/memories/project.md", view_range=[4, -1]).endswith(
        "with line numbers:\n     4\t- Tests need Docker\n     5\t")
    refused(tool, "view_range", command="view", path="/memories/project.md", view_range=["a", 2])
    assert sorted(m.text for m in tool.store) == ["Tests need Docker", "The build runs with make"]


def test_the_listing_shows_only_what_the_store_reads_as_memory(tool: MemoryTool, mem: Path, tmp_path: Path) -> None:
    mem.mkdir()
    (mem / "MEMORY.md").write_text("- a\n")
    (mem / "notes.txt").write_text("not memory")
    (mem / ".hidden.md").write_text("- hidden\n")
    for sub in ("inbox", "archive", "namespaces"):
        (mem / sub).mkdir()
        (mem / sub / "MEMORY.md").write_text("- elsewhere\n")
    (tmp_path / "outside.md").write_text("- outside\n")
    (mem / "link.md").symlink_to(tmp_path / "outside.md")
    lines = run(tool, command="view", path="/memories").split("\n")[1:]
    assert [ln.split("\t")[1] for ln in lines] == ["/memories", "/memories/MEMORY.md"]


def test_create_refuses_an_existing_file(tool: MemoryTool, mem: Path) -> None:
    run(tool, command="create", path="/memories/a.md", file_text="- one\n")
    refused(tool, "^File /memories/a.md already exists$", command="create", path="/memories/a.md", file_text="- two\n")
    assert (mem / "a.md").read_text() == "- one\n"
    refused(tool, "directory", command="create", path="/memories", file_text="- x\n")


def test_paragraphs_claude_writes_become_memories(tool: MemoryTool, mem: Path) -> None:
    text = "The staging database listens on port 5433.\n\nDeploys go out on Tuesdays.\n"
    run(tool, command="create", path="/memories/facts.md", file_text=text)
    assert (mem / "facts.md").read_text() == FRONT_MATTER + text
    assert sorted(m.text for m in MemoryStore(mem)) == ["Deploys go out on Tuesdays.",
                                                        "The staging database listens on port 5433."]
    assert MemoryStore(mem).search("staging database port")[0].memory.text.startswith("The staging database")
    assert all(m.topic is None and m.tags == () for m in MemoryStore(mem))  # nothing added to what is indexed
    assert MemoryStore(mem).search("which tool did Claude use to write to memory?") == []


def test_str_replace(tool: MemoryTool, mem: Path) -> None:
    run(tool, command="create", path="/memories/a.md", file_text="- one\n- two\n- three\n- four\n- five\n- six\n")
    out = run(tool, command="str_replace", path="/memories/a.md", old_str="four", new_str="FOUR")
    assert out == ("The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
                   "     2\t- two\n     3\t- three\n     4\t- FOUR\n     5\t- five\n     6\t- six")
    assert "FOUR" in [m.text for m in tool.store]
    refused(tool, "^No replacement was performed, old_str `nine` did not appear verbatim in /memories/a.md.$",
            command="str_replace", path="/memories/a.md", old_str="nine", new_str="x")
    refused(tool, "Multiple occurrences of old_str `- ` in lines: 1, 2, 3, 4, 5, 6. Please ensure it is unique",
            command="str_replace", path="/memories/a.md", old_str="- ", new_str="* ")
    refused(tool, "`old_str` is empty", command="str_replace", path="/memories/a.md", old_str="", new_str="x")
    refused(tool, "^The path /memories/b.md does not exist. Please provide a valid path.$",
            command="str_replace", path="/memories/b.md", old_str="a", new_str="b")
    refused(tool, "not a file", command="str_replace", path="/memories", old_str="a", new_str="b")
    assert files(mem) == ["a.md"]


def test_str_replace_that_leaves_only_paragraphs_keeps_them_memories(tool: MemoryTool, mem: Path) -> None:
    run(tool, command="create", path="/memories/a.md", file_text="- Uses tabs\n")
    out = run(tool, command="str_replace", path="/memories/a.md", old_str="- Uses tabs", new_str="Uses spaces")
    assert (mem / "a.md").read_text() == FRONT_MATTER + "Uses spaces\n"
    # the snippet shows the line changed, then what memwire did with the old line
    assert out.endswith('     3\t---\n     4\tUses spaces\n     5\t\n'
                        'memwire archived 1 memory this replaced: "Uses tabs".')
    assert [m.text for m in tool.store] == ["Uses spaces"]
    assert [(m.text, m.tags) for m in tool.store.archive] == [("Uses tabs", ("superseded",))]


def test_insert(tool: MemoryTool, mem: Path) -> None:
    run(tool, command="create", path="/memories/a.md", file_text="- one\n- three\n")
    assert run(tool, command="insert", path="/memories/a.md", insert_line=1, insert_text="- two\n") == \
        "The file /memories/a.md has been edited."
    run(tool, command="insert", path="/memories/a.md", insert_line=0, insert_text="# Counting")
    run(tool, command="insert", path="/memories/a.md", insert_line=4, insert_text="- four")
    assert (mem / "a.md").read_text() == "# Counting\n- one\n- two\n- three\n- four\n"
    refused(tool, r"^Invalid `insert_line` parameter: 6. It should be within the range \[0, 5\].$",
            command="insert", path="/memories/a.md", insert_line=6, insert_text="- x")
    refused(tool, r"range \[0, 5\]", command="insert", path="/memories/a.md", insert_line=-1, insert_text="- x")
    refused(tool, "`insert_line` parameter is missing or not a int",
            command="insert", path="/memories/a.md", insert_line="two", insert_text="- x")
    refused(tool, "does not exist", command="insert", path="/memories/b.md", insert_line=0, insert_text="- x")
    assert files(mem) == ["a.md"]


def test_edits_from_many_threads_are_never_lost(tool: MemoryTool, mem: Path) -> None:
    run(tool, command="create", path="/memories/a.md", file_text="- first\n")
    threads = [threading.Thread(target=run, args=(tool,), kwargs={
        "command": "insert", "path": "/memories/a.md", "insert_line": 1, "insert_text": f"- fact {i}"})
        for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(m.text for m in tool.store) == sorted(["first", *(f"fact {i}" for i in range(8))])
    assert files(mem) == ["a.md"]  # no temp file left


def test_delete_moves_the_memories_to_the_archive(tool: MemoryTool, mem: Path) -> None:
    run(tool, command="create", path="/memories/a.md", file_text="- Uses tabs #style\n- Deploys on Tuesdays\n")
    run(tool, command="create", path="/memories/p.md", file_text="A paragraph without bullets.\n")
    (mem / "p.md").write_text("A hand-written paragraph.\n")  # no front matter: still archived
    assert run(tool, command="delete", path="/memories/a.md") == "Successfully deleted /memories/a.md"
    run(tool, command="delete", path="/memories/p.md")
    assert files(mem) == ["archive"] and list(tool.store) == []
    archived = {m.text: m.tags for m in tool.store.archive}
    assert archived == {"Uses tabs": ("style", "forgotten"), "Deploys on Tuesdays": ("forgotten",),
                        "A hand-written paragraph.": ("forgotten",)}
    refused(tool, "^The path /memories/a.md does not exist$", command="delete", path="/memories/a.md")
    refused(tool, "Cannot delete the /memories directory itself", command="delete", path="/memories")


def test_rename_keeps_the_content(tool: MemoryTool, mem: Path) -> None:
    run(tool, command="create", path="/memories/a.md", file_text="- kept\n")
    run(tool, command="create", path="/memories/b.md", file_text="- other\n")
    assert run(tool, command="rename", old_path="/memories/a.md", new_path="/memories/c.md") == \
        "Successfully renamed /memories/a.md to /memories/c.md"
    assert files(mem) == ["b.md", "c.md"] and (mem / "c.md").read_text() == "- kept\n"
    refused(tool, "^The destination /memories/b.md already exists$",
            command="rename", old_path="/memories/c.md", new_path="/memories/b.md")
    refused(tool, "^The path /memories/a.md does not exist$",
            command="rename", old_path="/memories/a.md", new_path="/memories/d.md")
    refused(tool, "Cannot rename the /memories directory itself",
            command="rename", old_path="/memories", new_path="/memories/d.md")
    refused(tool, "flat markdown files", command="rename", old_path="/memories/c.md", new_path="/memories/sub/c.md")
    refused(tool, "escape", command="rename", old_path="/memories/c.md", new_path="/memories/../c.md")
    assert files(mem) == ["b.md", "c.md"] and sorted(m.text for m in tool.store) == ["kept", "other"]


def test_a_command_with_a_missing_field_is_an_error_for_claude(tool: MemoryTool) -> None:
    refused(tool, "`file_text` parameter is missing", command="create", path="/memories/a.md")
    refused(tool, "`path` parameter is missing", command="view")


# ------------------------------------------------------------------ confinement

BAD_PATHS = [
    ("/memories/../outside.md", "would escape /memories"),
    ("/memories/../../etc/passwd", "would escape /memories"),
    ("/memories/./a.md", "would escape /memories"),
    ("/etc/passwd", "must start with /memories"),
    ("/memoriesX/a.md", "must start with /memories"),
    ("memories/a.md", "must start with /memories"),
    ("/tmp/memories/a.md", "must start with /memories"),
    ("/memories/sub/a.md", "flat markdown files"),
    ("/memories/inbox/MEMORY.md", "flat markdown files"),
    ("/memories/archive", "flat markdown files"),
    ("/memories//a.md", "flat markdown files"),
    ("/memories/a.txt", "flat markdown files"),
    ("/memories/a.md/", "flat markdown files"),
    ("/memories/   .md", "flat markdown files"),
    ("/memories/a\nb.md", "flat markdown files"),
    ("/memories/.hidden.md", "Hidden files"),
    ("/memories/.lock", "Hidden files"),
    ("/memories/a\x00.md", "NUL byte"),
    ("/memories\\..\\a.md", "backslash"),
    ("/memories/a\\b.md", "backslash"),
    ("/memories/" + "x" * 126 + ".md", "too long"),
]
COMMANDS: list[dict[str, Any]] = [
    {"command": "view"},
    {"command": "create", "file_text": "- x\n"},
    {"command": "str_replace", "old_str": "x", "new_str": "y"},
    {"command": "insert", "insert_line": 0, "insert_text": "- y"},
    {"command": "delete"},
]


@pytest.mark.parametrize(("path", "why"), BAD_PATHS)
def test_a_path_outside_the_flat_memory_directory_is_refused(tool: MemoryTool, mem: Path, path: str, why: str) -> None:
    mem.mkdir()
    (mem / "a.md").write_text("- x\n")
    (mem / "sub").mkdir()
    (mem / "sub" / "a.md").write_text("- x\n")
    before = {p: p.read_bytes() for p in mem.parent.rglob("*") if p.is_file()}
    for command in COMMANDS:
        message = refused(tool, why, path=path, **command)
        assert "\x00" not in message and "\n" not in message
    refused(tool, why, command="rename", old_path=path, new_path="/memories/b.md")
    refused(tool, why, command="rename", old_path="/memories/a.md", new_path=path)
    assert {p: p.read_bytes() for p in mem.parent.rglob("*") if p.is_file() and p.name != ".lock"} == before


def test_a_name_of_the_longest_allowed_length_works(tool: MemoryTool, mem: Path) -> None:
    path = "/memories/" + "x" * 125 + ".md"
    run(tool, command="create", path=path, file_text="- long name\n")
    assert run(tool, command="view", path=path).endswith("1\t- long name\n     2\t")


@pytest.mark.parametrize("inside", [False, True])
def test_nothing_is_read_or_written_through_a_symlink(tool: MemoryTool, mem: Path, tmp_path: Path, inside: bool) -> None:
    mem.mkdir()
    target = (mem / "real.md") if inside else (tmp_path / "secret.md")
    target.write_text("- the target\n")
    (mem / "link.md").symlink_to(target)
    (mem / "dangling.md").symlink_to(tmp_path / "nowhere.md")
    (mem / "b.md").write_text("- b\n")
    for path in ("/memories/link.md", "/memories/dangling.md"):
        for command in COMMANDS:
            refused(tool, "symlink", path=path, **command)
        refused(tool, "symlink", command="rename", old_path=path, new_path="/memories/moved.md")
        refused(tool, "already exists", command="rename", old_path="/memories/b.md", new_path=path)
    assert target.read_text() == "- the target\n" and not (tmp_path / "nowhere.md").exists()
    assert (mem / "link.md").is_symlink() and (mem / "dangling.md").is_symlink()
    assert not (mem / "moved.md").exists()


def test_a_directory_or_a_fifo_named_like_a_file_is_not_read(tool: MemoryTool, mem: Path) -> None:
    mem.mkdir()
    (mem / "dir.md").mkdir()
    os.mkfifo(mem / "fifo.md")
    for path in ("/memories/dir.md", "/memories/fifo.md"):
        refused(tool, "not a file|cannot be used", command="view", path=path)
        refused(tool, "not a file|cannot be used", command="str_replace", path=path, old_str="a", new_str="b")
        refused(tool, "not a file|cannot be used|already exists", command="create", path=path, file_text="- x\n")


def test_a_disk_error_reaches_claude_without_the_hosts_path(tool: MemoryTool, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(name: str, edit: Any, **how: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", "/home/someone/.memwire/a.md")

    monkeypatch.setattr(tool.store, "edit_file", full)
    message = refused(tool, "^The path /memories/a.md cannot be written: No space left on device$",
                      command="create", path="/memories/a.md", file_text="- x\n")
    assert "someone" not in message


# ------------------------------------------------------------------ secrets

SECRET = "sk-ant-api03-" + "A1b2C3d4E5f6G7h8" * 3


def test_text_holding_a_secret_is_refused_naming_the_kind_not_the_secret(tool: MemoryTool, mem: Path) -> None:
    run(tool, command="create", path="/memories/a.md", file_text="- Deploy key lives in the vault\n")
    for command in (
        {"command": "create", "path": "/memories/b.md", "file_text": f"- The key is {SECRET}\n"},
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "lives in the vault", "new_str": SECRET},
        {"command": "insert", "path": "/memories/a.md", "insert_line": 1, "insert_text": f"- password: hunter2"},
    ):
        message = refused(tool, "memwire never stores secrets", **command)
        assert SECRET not in message and "hunter2" not in message
        assert "Anthropic API key" in message or "password" in message
    assert files(mem) == ["a.md"] and (mem / "a.md").read_text() == "- Deploy key lives in the vault\n"


def test_text_holding_a_control_character_is_refused_naming_it(tool: MemoryTool, mem: Path) -> None:
    run(tool, command="create", path="/memories/a.md", file_text="- Deploy key lives in the vault\r\n")  # CRLF is fine
    for command in (
        {"command": "create", "path": "/memories/b.md", "file_text": "- Builds \x1b]0;owned\x07 fail\n"},
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "the vault", "new_str": "the \x00vault"},
        {"command": "insert", "path": "/memories/a.md", "insert_line": 1, "insert_text": "- red is \x9b31m\n"},
    ):
        message = refused(tool, "control character", **command)
        assert "U+00" in message and "owned" not in message
    assert files(mem) == ["a.md"] and (mem / "a.md").read_bytes() == b"- Deploy key lives in the vault\r\n"


def test_a_file_too_large_is_refused(tool: MemoryTool, mem: Path) -> None:
    refused(tool, "at most 256 KiB", command="create", path="/memories/a.md", file_text="- word\n" * 40_000)
    assert files(mem) == []


# ------------------------------------------------------------------ async


def test_the_async_tool_does_the_same_work(mem: Path) -> None:
    tool = AsyncMemoryTool(MemoryStore(mem))

    async def main() -> list[Any]:
        return [
            await tool.call({"command": "create", "path": "/memories/a.md", "file_text": "- one\n"}),
            await tool.call({"command": "insert", "path": "/memories/a.md", "insert_line": 1, "insert_text": "- two"}),
            await tool.call({"command": "str_replace", "path": "/memories/a.md", "old_str": "two", "new_str": "2"}),
            await tool.call({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"}),
            await tool.call({"command": "view", "path": "/memories/b.md"}),
            await tool.call({"command": "delete", "path": "/memories/b.md"}),
        ]

    out = asyncio.run(main())
    assert out[0] == "File created successfully at: /memories/a.md" and out[4].endswith("1\t- one\n     2\t- 2\n     3\t")
    assert out[2].endswith('\nmemwire archived 1 memory this replaced: "two".')
    assert out[5] == "Successfully deleted /memories/b.md"
    assert {m.text: m.tags for m in tool.tool.store.archive} == {"one": ("forgotten",), "2": ("forgotten",),
                                                                 "two": ("superseded",)}
    with pytest.raises(ToolError, match="escape"):
        asyncio.run(tool.call({"command": "view", "path": "/memories/../x.md"}))


# ------------------------------------------------------------------ a whole tool loop with the SDK

MODEL = "claude-sonnet-4-6"
FACT = "The staging database listens on port 5433."
SCRIPT: list[list[dict[str, Any]]] = [
    [{"type": "tool_use", "id": "toolu_1", "name": "memory", "input": {"command": "view", "path": "/memories"}}],
    [{"type": "text", "text": "I'll remember that."},
     {"type": "tool_use", "id": "toolu_2", "name": "memory",
      "input": {"command": "create", "path": "/memories/staging.md", "file_text": FACT + "\n"}}],
    [{"type": "tool_use", "id": "toolu_3", "name": "memory",
      "input": {"command": "view", "path": "/memories/../../etc/passwd"}}],
    [{"type": "text", "text": "Noted: staging is on port 5433."}],
]


class Upstream:
    """A fake Anthropic Messages API at the transport: answers each request with the next scripted
    reply, and keeps every request body as sent."""

    def __init__(self, script: list[list[dict[str, Any]]] = SCRIPT) -> None:
        self.script = script
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/v1/messages"
        self.bodies.append(json.loads(request.content))
        content = self.script[len(self.bodies) - 1]
        return httpx2.Response(200, json={
            "id": f"msg_{len(self.bodies)}", "type": "message", "role": "assistant", "model": MODEL, "content": content,
            "stop_reason": "tool_use" if content[-1]["type"] == "tool_use" else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5}})

    def tool_results(self) -> list[dict[str, Any]]:
        return [block for body in self.bodies for msg in body["messages"] if isinstance(msg["content"], list)
                for block in msg["content"] if block.get("type") == "tool_result"]


def _asked_later(store: MemoryStore) -> Any:
    """A new conversation through memwire: what Claude wrote is injected."""
    body = {"model": MODEL, "max_tokens": 100, "system": "You are a helpful assistant.",
            "messages": [{"role": "user", "content": "Which port does the staging database use?"}]}
    return Middleware(store=store, mode="contextPerTurn").prepare_request(body, api="anthropic.messages")


def _check_loop(upstream: Upstream, mem: Path, final: Any) -> None:
    assert [b.text for b in final.content] == ["Noted: staging is on port 5433."]
    assert upstream.bodies[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    results = upstream.tool_results()
    assert [r["tool_use_id"] for r in results] == ["toolu_1", "toolu_2", "toolu_3"]
    assert results[0]["content"] == LISTING + "0B\t/memories" and not results[0].get("is_error")
    assert results[1]["content"] == "File created successfully at: /memories/staging.md"
    assert results[2]["is_error"] and "would escape /memories" in json.dumps(results[2]["content"])
    assert (mem / "staging.md").read_text() == FRONT_MATTER + FACT + "\n"
    prepared = _asked_later(MemoryStore(mem))
    assert FACT in prepared.injection.text and len(prepared.injection.memory_ids) == 1
    assert any(FACT in json.dumps(m) for m in prepared.body["messages"])


def test_a_claude_tool_loop_with_the_sdk_writes_what_memwire_then_injects(mem: Path) -> None:
    upstream = Upstream()
    client = anthropic.Anthropic(api_key="sk-ant-test", base_url="http://127.0.0.1:9", max_retries=0,
                                 http_client=httpx2.Client(transport=httpx2.MockTransport(upstream)))
    runner = client.beta.messages.tool_runner(
        model=MODEL, max_tokens=1024, tools=[MemoryTool(MemoryStore(mem))],
        messages=[{"role": "user", "content": "Remember that the staging database listens on port 5433."}])
    _check_loop(upstream, mem, runner.until_done())


def test_the_same_loop_with_the_async_sdk(mem: Path) -> None:
    upstream = Upstream()
    client = anthropic.AsyncAnthropic(api_key="sk-ant-test", base_url="http://127.0.0.1:9", max_retries=0,
                                      http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(upstream)))

    async def main() -> Any:
        runner = client.beta.messages.tool_runner(
            model=MODEL, max_tokens=1024, tools=[AsyncMemoryTool(MemoryStore(mem))],
            messages=[{"role": "user", "content": "Remember that the staging database listens on port 5433."}])
        return await runner.until_done()

    _check_loop(upstream, mem, asyncio.run(main()))


def test_with_a_wrapped_client_the_next_conversation_gets_what_claude_wrote(mem: Path) -> None:
    """The docs' example: one store behind both the memory tool and the wrapped client."""
    from memwire.adapters.anthropic import wrap

    upstream = Upstream([SCRIPT[1], SCRIPT[3], [{"type": "text", "text": "Port 5433."}]])
    store = MemoryStore(mem)
    http = httpx2.Client(transport=httpx2.MockTransport(upstream))
    claude = wrap(anthropic.Anthropic(api_key="sk-ant-test", base_url="http://127.0.0.1:9", max_retries=0,
                                      http_client=http), Middleware(store=store, capture="off"))
    for question in ("Remember that the staging database listens on port 5433.",  # capture off: the tool writes it
                     "Which port does the staging database use?"):
        claude.beta.messages.tool_runner(model=MODEL, max_tokens=1024, tools=[MemoryTool(store)],
                                         messages=[{"role": "user", "content": question}]).until_done()
    asked = upstream.bodies[-1]["messages"]
    assert asked[-1]["content"] == "Which port does the staging database use?"
    assert FACT in json.dumps(asked[:-1])  # the memory message before the question
    assert [m.text for m in store] == [FACT]
