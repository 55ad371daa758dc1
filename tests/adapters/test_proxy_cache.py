"""Anthropic prompt caching in proxy mode: the breakpoint before the memory message."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import pytest

from memwire import MemoryStore, Middleware
from memwire.adapters.server._proxy import add_cache_breakpoint, count_cache_breakpoints, create_app
from memwire.middleware._core import Injection

EPHEMERAL = {"type": "ephemeral"}
MEMORIES = [
    "The project database is PostgreSQL 16",
    "Deploys run through GitHub Actions on every merge",
    "The user lives in Lisbon",
    "Favourite editor is Neovim",
]


def cc(block: dict[str, Any]) -> dict[str, Any]:
    return {**block, "cache_control": EPHEMERAL}


def request(n_existing: int) -> dict[str, Any]:
    """A conversation with ``n_existing`` breakpoints spread over tools, system and messages."""
    tools = [{"name": "read", "input_schema": {"type": "object"}}]
    system = [{"type": "text", "text": "You are a coding agent."}]
    first = [{"type": "text", "text": "hello"}]
    marks = [lambda: tools.__setitem__(0, cc(tools[0])), lambda: system.__setitem__(0, cc(system[0])),
             lambda: first.__setitem__(0, cc(first[0])), lambda: first.append(cc({"type": "text", "text": "more"}))]
    for mark in marks[:n_existing]:
        mark()
    return {
        "model": "claude-haiku-4-5",
        "max_tokens": 64,
        "tools": tools,
        "system": system,
        "messages": [
            {"role": "user", "content": first},
            {"role": "assistant", "content": [{"type": "text", "text": "hi"}, {"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "file body"}]},
            {"role": "assistant", "content": "The file is short."},
            {"role": "user", "content": "which database does the project use?"},
        ],
    }


@pytest.fixture
def mw(tmp_path: Any) -> Middleware:
    store = MemoryStore(tmp_path / "mem")
    store.add_many(MEMORIES)
    return Middleware(store=store, mode="contextPerTurn")


@pytest.mark.parametrize("n_existing", [0, 3, 4])
def test_breakpoint_with_0_3_4_existing(mw: Middleware, n_existing: int) -> None:
    body = request(n_existing)
    snapshot = copy.deepcopy(body)
    prepared = mw.prepare_request(body, "anthropic.messages")
    inj = prepared.injection
    assert inj is not None and inj.injected and inj.placement == "message" and inj.position == 4
    assert count_cache_breakpoints(prepared.body) == n_existing
    out = add_cache_breakpoint(prepared.body, inj)
    assert body == snapshot  # the caller's request is never touched
    if n_existing == 4:
        assert out is prepared.body  # never a fifth breakpoint
        return
    assert count_cache_breakpoints(out) == n_existing + 1
    # string content before the memory became one text block carrying the marker
    assert out["messages"][3]["content"] == [{"type": "text", "text": "The file is short.", "cache_control": EPHEMERAL}]
    assert prepared.body["messages"][3]["content"] == "The file is short."  # prepared body not mutated either
    assert out["messages"][4] == prepared.body["messages"][4]  # the memory message itself is unchanged
    assert out["messages"][:3] == prepared.body["messages"][:3]


def test_last_block_of_a_list_message_is_marked() -> None:
    messages: list[Any] = [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "...", "signature": "s"},
                                          {"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
        {"role": "user", "content": [{"type": "text", "text": "<memory>m</memory>"}]},
        {"role": "user", "content": "go on"},
    ]
    inj = Injection("contextPerTurn", memory_ids=("a",), text="<memory>m</memory>", position=2, placement="message")
    out = add_cache_breakpoint({"messages": messages}, inj)
    assert out["messages"][1]["content"][1]["cache_control"] == EPHEMERAL
    assert "cache_control" not in out["messages"][1]["content"][0]
    assert "cache_control" not in messages[1]["content"][1]


def test_thinking_and_empty_text_blocks_are_skipped() -> None:
    messages = [
        {"role": "assistant", "content": [{"type": "text", "text": "done"}, {"type": "redacted_thinking", "data": "x"},
                                          {"type": "text", "text": ""}]},
        {"role": "user", "content": [{"type": "text", "text": "<memory>m</memory>"}]},
        {"role": "user", "content": "next"},
    ]
    inj = Injection("contextPerTurn", memory_ids=("a",), text="<memory>m</memory>", position=1, placement="message")
    out = add_cache_breakpoint({"messages": messages}, inj)
    assert [("cache_control" in b) for b in out["messages"][0]["content"]] == [True, False, False]


def test_existing_marker_before_memory_is_left_alone() -> None:
    body = {"messages": [
        {"role": "assistant", "content": [cc({"type": "text", "text": "done"})]},
        {"role": "user", "content": [{"type": "text", "text": "<memory>m</memory>"}]},
        {"role": "user", "content": "next"},
    ]}
    inj = Injection("contextPerTurn", memory_ids=("a",), text="<memory>m</memory>", position=1, placement="message")
    assert add_cache_breakpoint(body, inj) is body


def test_merge_after_tool_results_marks_the_last_tool_result() -> None:
    body = {"messages": [
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "run", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
                                     {"type": "text", "text": "<memory>m</memory>"},
                                     {"type": "text", "text": "and now the tests?"}]},
    ]}
    inj = Injection("contextPerTurn", memory_ids=("a",), text="<memory>m</memory>", position=2, placement="merge")
    out = add_cache_breakpoint(body, inj)
    assert out["messages"][2]["content"][0]["cache_control"] == EPHEMERAL
    assert "cache_control" not in out["messages"][2]["content"][2]


def test_one_hour_ttl_later_is_matched() -> None:
    body = {"messages": [
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": [{"type": "text", "text": "<memory>m</memory>"}]},
        {"role": "user", "content": [{"type": "text", "text": "next", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]},
    ]}
    inj = Injection("contextPerTurn", memory_ids=("a",), text="<memory>m</memory>", position=1, placement="message")
    out = add_cache_breakpoint(body, inj)
    assert out["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


@pytest.mark.parametrize("inj", [
    None,
    Injection("contextPerTurn", skipped="gate"),
    Injection("startup", memory_ids=("a",), text="m", position=0, placement="message"),  # nothing before it
    Injection("systemPromptPerTurn", memory_ids=("a",), text="m", position=None, placement="system"),
])
def test_nothing_to_mark(inj: Injection | None) -> None:
    body = {"messages": [{"role": "user", "content": "m"}, {"role": "user", "content": "hi"}]}
    assert add_cache_breakpoint(body, inj) is body


def test_count_includes_tools_system_and_nested_tool_results() -> None:
    body = {
        "tools": [cc({"name": "a"}), {"name": "b"}],
        "system": [cc({"type": "text", "text": "s"})],
        "messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": [cc({"type": "text", "text": "r"})]},
            cc({"type": "text", "text": "x"})]}],
    }
    assert count_cache_breakpoints(body) == 4
    assert count_cache_breakpoints({"system": "plain", "messages": [{"role": "user", "content": "x"}]}) == 0


async def _sent_through_proxy(mw: Middleware, body: dict[str, Any], **options: Any) -> dict[str, Any]:
    seen: list[bytes] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req.content)
        return httpx.Response(200, json={"type": "message"})

    app = create_app(mw, client=httpx.AsyncClient(transport=httpx.MockTransport(handler)), **options)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy.test") as http:
        r = await http.post("/v1/messages", json=body)
    assert r.status_code == 200 and r.headers["x-memwire-injected"] == "1"
    result: dict[str, Any] = json.loads(seen[0])
    return result


@pytest.mark.parametrize(("n_existing", "expected"), [(0, 1), (3, 4), (4, 4)])
async def test_through_the_proxy(mw: Middleware, n_existing: int, expected: int) -> None:
    sent = await _sent_through_proxy(mw, request(n_existing))
    assert count_cache_breakpoints(sent) == expected


async def test_switched_off(mw: Middleware) -> None:
    sent = await _sent_through_proxy(mw, request(0), anthropic_cache_breakpoint=False)
    assert count_cache_breakpoints(sent) == 0
    mw_off = Middleware(store=mw.store, mode="contextPerTurn", anthropic_cache_breakpoint=False)
    sent = await _sent_through_proxy(mw_off, request(0))
    assert count_cache_breakpoints(sent) == 0


async def test_a_top_level_cache_control_counts_so_no_fifth_is_sent(mw: Middleware) -> None:
    body = {**request(3), "cache_control": EPHEMERAL}  # automatic caching: one breakpoint of the four
    assert count_cache_breakpoints(body) == 4
    sent = await _sent_through_proxy(mw, body)
    assert count_cache_breakpoints(sent) == 4 and sent["cache_control"] == EPHEMERAL


async def test_changed_bodies_keep_non_ascii_text_as_utf8(mw: Middleware) -> None:
    body = request(0)
    body["system"] = [{"type": "text", "text": "Réponds en français — toujours. 日本語も可。"}]
    seen: list[bytes] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req.content)
        return httpx.Response(200, json={"type": "message"})

    app = create_app(mw, client=httpx.AsyncClient(transport=httpx.MockTransport(handler)))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy.test") as http:
        r = await http.post("/v1/messages", content=json.dumps(body, ensure_ascii=False).encode())
    assert r.headers["x-memwire-injected"] == "1"
    assert "Réponds en français — toujours. 日本語も可。".encode() in seen[0] and b"\\u" not in seen[0]
