"""`memwire mcp` through the real `mcp` SDK client: the server runs as `python -m memwire.cli mcp`
in a subprocess and is driven over stdio, as Claude Code or Codex drive it.

Starting a server costs about two seconds (mostly the SDK's import), so only two tests start one:
the tool round trip in the default namespace, and a namespaced server."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from memwire import MemoryStore

from ..test_startup import loaded_after

if importlib.util.find_spec("mcp") is None:
    pytest.skip("the mcp extra is not installed", allow_module_level=True)
if TYPE_CHECKING:  # imported where a server starts: the SDK's import costs every xdist worker ~0.7 s at collection
    from mcp import Client

pytestmark = pytest.mark.timeout(60)

FACT = "The staging database listens on port 5433"


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "memwire.cli", "mcp", *args]


def isolated_env(tmp_path: Path) -> dict[str, str]:
    """No user state: the global memory and the trust file live under the test's directory."""
    return {"MEMWIRE_HOME": str(tmp_path / "home"), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


@contextlib.asynccontextmanager
async def serve(tmp_path: Path, *args: str) -> AsyncIterator[Client]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    argv = command(*args)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=isolated_env(tmp_path), cwd=tmp_path)
    async with Client(params, read_timeout_seconds=30) as client:
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    """A tool's structured result; a tool error fails the test with its message."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    data = result.structured_content
    return data["result"] if isinstance(data, dict) and set(data) == {"result"} else data


async def error(client: Client, tool: str, **arguments: Any) -> str:
    """The message of a call that must fail as a tool error."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return " ".join(getattr(c, "text", "") for c in result.content)


async def test_tools_add_search_forget_over_stdio(tmp_path: Path) -> None:
    mem = tmp_path / "mem"
    async with serve(tmp_path, "--dir", str(mem)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"memory_search", "memory_add", "memory_forget"}
        assert tools["memory_search"].input_schema["required"] == ["query"]
        assert tools["memory_search"].input_schema["properties"]["k"]["default"] == 5
        assert set(tools["memory_add"].input_schema["properties"]) == {"text", "tags", "pinned"}
        assert tools["memory_add"].input_schema["required"] == ["text"]
        assert tools["memory_forget"].input_schema["required"] == ["id"]
        assert tools["memory_search"].annotations is not None and tools["memory_search"].annotations.read_only_hint
        for t in tools.values():  # written for a model: when to use it, not only what it does
            assert t.description and len(t.description) > 150, t.name
        assert "secret" in (tools["memory_add"].description or "")

        added = await call(client, "memory_add", text=FACT, tags=["fact"])
        assert added["text"] == FACT and added["tags"] == ["fact"] and added["pinned"] is False
        assert await call(client, "memory_add", text=FACT) == added  # already stored: the stored one
        assert FACT in (mem / "MEMORY.md").read_text()  # plain markdown, what the proxy injects from
        assert MemoryStore(mem).get(added["id"]).text == FACT

        hits = await call(client, "memory_search", query="Which port does the staging database use?")
        assert [h["id"] for h in hits] == [added["id"]]
        assert hits[0]["text"] == FACT and hits[0]["tags"] == ["fact"] and hits[0]["score"] > 0
        assert await call(client, "memory_search", query="kubernetes helm chart") == []
        # another namespace's memory is never seen from the default one
        MemoryStore.for_namespace(mem, "alice").add("Alice keeps the staging database on port 6543")
        assert [h["id"] for h in await call(client, "memory_search", query="staging database port")] == [added["id"]]

        # a memory written by hand (or by `memwire add`) meanwhile is found: the files are the truth
        MemoryStore(mem).add("Run the tests with make test; Docker must be running", tags=["build"])
        assert [h["text"] for h in await call(client, "memory_search", query="how to run the tests")] == [
            "Run the tests with make test; Docker must be running"]

        forgotten = await call(client, "memory_forget", id=added["id"][:8])  # a unique prefix works
        assert forgotten["id"] == added["id"]
        assert FACT not in (mem / "MEMORY.md").read_text()
        archived = (mem / "archive" / "MEMORY.md").read_text()
        assert FACT in archived and "#forgotten" in archived  # archived, never deleted silently
        assert await call(client, "memory_search", query="staging database port") == []

        # every failure is a tool error with a message; the server keeps serving
        assert "no memory with id 'deadbeef00'" in await error(client, "memory_forget", id="deadbeef00")
        assert "no memory" in await error(client, "memory_forget", id=added["id"])  # already forgotten
        key = "sk-proj-" + "Ab3" * 10
        message = await error(client, "memory_add", text=f"The deploy key is {key}")
        assert "secret" in message and "OpenAI API key" in message and key not in message
        assert "secret" in await error(client, "memory_add", text="the CI login", tags=["password=hunter22"])
        assert "tag" in await error(client, "memory_add", text="A fact", tags=["two words"])
        assert "at most" in await error(client, "memory_add", text="x" * 5000)
        assert await error(client, "memory_search", query="")
        assert await error(client, "memory_search", query="tests", k=0)
        assert await error(client, "memory_add")  # no text
        assert "memory_delete" in await error(client, "memory_delete", id="x")  # no such tool
        assert len(await call(client, "memory_search", query="tests")) == 1  # still alive
        (mem / ".lock").unlink()
        (mem / ".lock").mkdir()  # the directory's write lock cannot be taken: the store fails
        assert "cannot be used" in await error(client, "memory_add", text="Builds need Python 3.12")
        assert len(await call(client, "memory_search", query="tests")) == 1  # readers take no lock
    assert "sk-proj-" not in (mem / "MEMORY.md").read_text() + archived


async def test_namespace_isolation(tmp_path: Path) -> None:
    """A server started with --namespace alice reads and writes DIR/namespaces/alice only. (The
    default namespace's server never sees alice's memories: the test above.) Without --dir it
    serves the working directory's ./.memwire, created and recorded as memwire's like `memwire add`
    does, so later commands use it."""
    root = tmp_path / ".memwire"
    async with serve(tmp_path, "--namespace", "alice") as alice:
        theirs = MemoryStore(root).add("The default team deploys the billing service on Mondays")
        query = "when is the billing service deployed"
        assert await call(alice, "memory_search", query=query) == []
        mine = await call(alice, "memory_add", text="Alice deploys the billing service on Fridays")
        assert "Fridays" in (root / "namespaces" / "alice" / "MEMORY.md").read_text()
        assert "Fridays" not in (root / "MEMORY.md").read_text()
        assert [h["id"] for h in await call(alice, "memory_search", query=query)] == [mine["id"]]
        assert [h.memory.id for h in MemoryStore(root).search(query, 5, min_score=0.0)] == [theirs.id]

        # an id of the default namespace is unknown here: alice cannot forget it
        assert "no memory" in await error(alice, "memory_forget", id=theirs.id)
        assert "Mondays" in (root / "MEMORY.md").read_text()
        await call(alice, "memory_forget", id=mine["id"])
        assert "Fridays" in (root / "namespaces" / "alice" / "archive" / "MEMORY.md").read_text()
        assert not (root / "archive").exists()

    listed = subprocess.run([sys.executable, "-m", "memwire.cli", "list", "--json"], capture_output=True, text=True,
                            env={**os.environ, **isolated_env(tmp_path)}, cwd=tmp_path, timeout=30)
    assert listed.stderr == "" and [m["id"] for m in json.loads(listed.stdout)] == [theirs.id]


@pytest.mark.parametrize("name", ["../escape", "a/b", ".hidden", "x" * 200])
def test_a_bad_namespace_fails_at_start_in_one_line(tmp_path: Path, name: str) -> None:
    out = subprocess.run(command("--dir", str(tmp_path / "mem"), "--namespace", name), capture_output=True,
                         text=True, env=isolated_env(tmp_path), cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=30)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("memwire: error: invalid namespace") and out.stderr.count("\n") == 1
    assert not (tmp_path / "mem").exists()


def test_without_the_extra_one_line_and_exit_2(tmp_path: Path) -> None:
    # sys.modules["mcp"] = None makes `import mcp` fail as if the package were not installed
    code = ("import sys; sys.modules['mcp'] = None; from memwire.cli import main; "
            f"sys.exit(main(['mcp', '--dir', {str(tmp_path / 'mem')!r}]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=isolated_env(tmp_path),
                         cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=30)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == "memwire: error: memwire mcp needs the mcp extra: pip install 'memwire[mcp]'\n"


def test_help_does_not_import_the_sdk() -> None:
    code = "from memwire.cli import main\ntry:\n    main({})\nexcept SystemExit:\n    pass"
    for argv in ("['--help']", "['mcp', '--help']"):
        loaded = loaded_after(code.format(argv))
        assert not {m for m in loaded if m.split(".")[0] in ("mcp", "mcp_types")}, argv
        assert "memwire.adapters.server._mcp" not in loaded, argv
    assert "mcp" not in {m.split(".")[0] for m in loaded_after("import memwire")}


def test_docs_registration_lines_match_the_command() -> None:
    """The documented registrations name the subcommand and options this module registers."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text()
    assert "claude mcp add memwire -- memwire mcp" in doc
    assert "[mcp_servers.memwire]" in doc and 'command = "memwire"' in doc
    assert 'args = ["mcp", "--dir", ' in doc
