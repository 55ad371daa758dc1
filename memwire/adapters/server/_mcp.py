"""``memwire mcp``: a Model Context Protocol server over stdio, so a coding agent (Claude Code,
Codex, Cursor) can search its memory and write what it learns into it.

Three tools over one :class:`~memwire.memory._store.MemoryStore`, in the namespace fixed when the
server starts: ``memory_search``, ``memory_add`` and ``memory_forget``. What they write is the
plain markdown the proxy and the adapters inject from. The rules are the HTTP memory API's
(``_memory_api.py``): text that looks like a secret is refused, a forgotten memory moves to the
archive (``DIR/archive/MEMORY.md``), never away. Every failure (an unknown id, a bad tag, an
unwritable directory) is a tool error with a message for the model; the server keeps running. A
store that cannot be used is named to the model by an error id only: the path or the database
goes to the log (stderr), once per failure, with that id.

stdout carries the protocol, so everything else (warnings, logs) goes to stderr.

Needs the ``mcp`` extra (``pip install 'memwire[mcp]'``); importing this module imports the SDK.
"""

from __future__ import annotations

import logging
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from ... import __version__
from ..._errors import InvalidMemoryError, MemoryNotFoundError, MemwireError, NamespaceError
from ...memory._model import Memory
from ...memory._protocol import Store
from ...memory._store import MAX_MEMORY_CHARS
from ...middleware._core import Middleware
from ...policies._secrets import find_secret
from .._common import Failures, public_message

__all__ = ["build_server", "run_stdio"]

log = logging.getLogger("memwire")

MAX_K = 50  # a model asking for more is dumping the memory, not searching it

INSTRUCTIONS = """\
Long-term memory shared across sessions (and with other tools the user runs through memwire).
Search it before work that may depend on earlier decisions, preferences or project facts.
Add durable things you learn: one statement per memory. Forget what turns out wrong or outdated."""

SEARCH_DESCRIPTION = """\
Search long-term memory: facts, preferences, decisions, build and test commands and lessons saved \
in earlier sessions. Use it at the start of a task and whenever the answer may depend on something \
the user or an earlier session settled (how to build or test, conventions, where things live, \
what failed before), and before memory_add, to avoid storing something twice. The query is \
keywords or a question; results are the best matches first, each with an id and a score (about \
1 when a memory covers the whole query, near 0 when it shares one word). An empty list means \
nothing relevant is stored."""

ADD_DESCRIPTION = f"""\
Save one durable statement to long-term memory, so later sessions know it. Worth saving: the \
user's preferences and instructions ("prefers tabs"), project facts ("the staging database \
listens on port 5433"), decisions and their reasons, build/test/deploy commands that work, lessons \
from mistakes ("test_upload is flaky when the S3 mock starts late; rerun it alone"). One statement \
per memory, self-contained (name the project or file it is about), at most {MAX_MEMORY_CHARS:,} \
characters. Do not save: secrets (keys, tokens, passwords: refused), what is already in memory \
(search first), temporary task state, or what the code or docs already say plainly. Tags are \
single lowercase words such as preference, build, decision, lesson. Pin only what matters in \
every session (memwire's startup mode shows pinned memories first). Returns the stored memory; \
adding a text already stored returns the stored one."""

FORGET_DESCRIPTION = """\
Remove a memory that is wrong, outdated or that the user asks you to forget, by the id \
memory_search returned. It moves to the archive (the user can still read it there) and is never \
shown to a model again. To change a fact, forget the old memory and add the corrected one."""


class MemoryOut(BaseModel):
    id: str
    text: str
    tags: list[str]
    pinned: bool


class Hit(MemoryOut):
    score: float = Field(description="relevance: about 1 when the memory covers the whole query")


def _out(mem: Memory) -> MemoryOut:
    return MemoryOut(id=mem.id, text=mem.text, tags=list(mem.tags), pinned=mem.pinned)


def _failed(exc: Exception, failures: Failures) -> ToolError:
    """A store error as a tool error (the SDK prefixes "Error executing tool NAME: "): the model
    reads the message; the server keeps running. The model's own mistakes (an unknown id, a text
    that cannot be stored) are named, without the server's paths; a store that cannot be used (a
    full disk, a lock, the database) gets an error id, its details go to the log."""
    if isinstance(exc, (InvalidMemoryError, MemoryNotFoundError, NamespaceError)):
        return ToolError(public_message(exc))
    eid = failures.failed(exc)
    return ToolError(f"the memory store cannot be used now (error {eid}; the memwire mcp log has the details)")


def build_server(source: Middleware | Store, namespace: str | None = None) -> MCPServer:
    """The MCP server over ``source``'s store in ``namespace`` (None: the default one). The
    namespace is checked here, so a bad name fails at start, not on the first call."""
    if isinstance(source, Middleware):
        store = source.store_for(namespace)
    elif namespace in (None, "", "default"):
        store = source
    else:
        store = source.namespace_store(namespace)

    server: MCPServer = MCPServer("memwire", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    failures = Failures("memwire mcp", log)

    @server.tool(description=SEARCH_DESCRIPTION, annotations=ToolAnnotations(read_only_hint=True))
    def memory_search(
        query: Annotated[str, Field(min_length=1, description="keywords or a question")],
        k: Annotated[int, Field(ge=1, le=MAX_K, description="how many memories at most")] = 5,
    ) -> list[Hit]:
        try:
            # min_score 0: the model asked, so it gets the k best matches and judges them itself
            # (the HTTP API's ?q= does the same); injection keeps its own, stricter threshold
            hits = store.search(query, k, min_score=0.0)
        except (MemwireError, OSError) as exc:
            raise _failed(exc, failures) from None
        failures.ok()
        return [Hit(**_out(h.memory).model_dump(), score=round(h.score, 3)) for h in hits]

    @server.tool(description=ADD_DESCRIPTION,
                 annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True))
    def memory_add(
        text: Annotated[str, Field(min_length=1, description="the memory: one self-contained statement")],
        tags: Annotated[list[str], Field(description="a few single-word tags, e.g. preference, build")] = [],  # noqa: B006 (pydantic copies it)
        pinned: Annotated[bool, Field(description="matters in every session (startup mode shows it first)")] = False,
    ) -> MemoryOut:
        secret = find_secret(" ".join([text, *tags]))
        if secret is not None:  # the kind only: the value must not travel back into the transcript
            raise ToolError(f"not stored: the text looks like it holds a secret ({secret}). Memory is shown "
                            "to models in later sessions; save where the secret is kept, never its value")
        try:
            added = store.add(text, tags, pinned)
        except (MemwireError, OSError) as exc:
            raise _failed(exc, failures) from None
        failures.ok()
        return _out(added)

    @server.tool(description=FORGET_DESCRIPTION,
                 annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False))
    def memory_forget(
        id: Annotated[str, Field(min_length=1, description="the memory's id (or a unique prefix of 4+ characters)")],
    ) -> MemoryOut:
        try:
            forgotten = store.forget(id)  # to the archive
        except (MemwireError, OSError) as exc:
            raise _failed(exc, failures) from None
        failures.ok()
        return _out(forgotten)

    return server


def run_stdio(source: Middleware | Store, namespace: str | None = None) -> None:
    """Serve over stdin/stdout until the client closes stdin."""
    build_server(source, namespace).run("stdio")
