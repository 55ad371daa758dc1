"""Property tests over generated conversations in all three request formats (DESIGN.md rules 1-5)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memwire import Middleware, MemoryStore
from memwire.policies.modes._render import OPEN

RELEVANT = ["How do I run the tests?", "Which database does staging use?", "How should I format commit messages?",
            "Remind me how deploys work", "How do I create a migration?", "Which linter do we use?"]
UNRELATED = ["What's the capital of Mongolia?", "Tell me a joke about penguins"]
CLOSERS = ["ok", "Thanks!", "👍", "got it", "cool"]

user_text = st.one_of(st.sampled_from(RELEVANT + UNRELATED + CLOSERS), st.text(min_size=1, max_size=40))
# a turn: the user text, then a tool loop of n calls, then an optional final assistant text
turn = st.tuples(user_text, st.integers(0, 3), st.booleans())
conversation = st.tuples(st.booleans(), st.lists(turn, min_size=1, max_size=4), st.booleans())


def build(spec: tuple[bool, list[tuple[str, int, bool]], bool], api: str) -> list[dict[str, Any]]:
    """All requests of the conversation, in order: one per model call (the agent's tool loops)."""
    has_system, turns, has_tools = spec
    requests: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = []
    system = "You are a coding agent. Follow the house style."
    tools = [{"name": "sh", "description": "run a shell command", "input_schema": {"type": "object"}}]

    def body() -> dict[str, Any]:
        msgs = copy.deepcopy(history)
        if api == "openai.chat":
            b: dict[str, Any] = {"model": "gpt-4o", "messages": ([{"role": "system", "content": system}] if has_system else []) + msgs}
            if has_tools:
                b["tools"] = [{"type": "function", "function": {"name": "sh", "parameters": {"type": "object"}}}]
        elif api == "anthropic.messages":
            b = {"model": "claude-sonnet-4", "max_tokens": 100, "messages": msgs}
            if has_system:
                b["system"] = [{"type": "text", "text": system}]
            if has_tools:
                b["tools"] = tools
        else:
            b = {"model": "gpt-4.1", "input": msgs}
            if has_system:
                b["instructions"] = system
            if has_tools:
                b["tools"] = [{"type": "function", "name": "sh", "parameters": {"type": "object"}}]
        return b

    for t, (text, calls, final) in enumerate(turns):
        history.append({"role": "user", "content": text})
        requests.append(body())
        for c in range(calls):
            cid = f"call_{t}_{c}"
            if api == "openai.chat":
                history.append({"role": "assistant", "content": None, "tool_calls": [
                    {"id": cid, "type": "function", "function": {"name": "sh", "arguments": "{}"}}]})
                history.append({"role": "tool", "tool_call_id": cid, "content": f"output {c}"})
            elif api == "anthropic.messages":
                history.append({"role": "assistant", "content": [{"type": "tool_use", "id": cid, "name": "sh", "input": {}}]})
                history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid, "content": f"output {c}"}]})
            else:
                history.append({"type": "function_call", "call_id": cid, "name": "sh", "arguments": "{}"})
                history.append({"type": "function_call_output", "call_id": cid, "output": f"output {c}"})
            requests.append(body())
        if final:
            history.append({"role": "assistant", "content": "Done. Anything else?" if t % 2 else "Done."})
    return requests


ITEMS = {"openai.chat": "messages", "anthropic.messages": "messages", "openai.responses": "input"}


def fixed_parts(body: dict[str, Any], api: str) -> str:
    """System prompt and tools, serialized: what must leave byte-identical."""
    if api == "openai.chat":
        sys_msgs = [m for m in body["messages"] if m.get("role") in ("system", "developer")]
        return json.dumps([sys_msgs, body.get("tools")], sort_keys=True)
    if api == "anthropic.messages":
        return json.dumps([body.get("system"), body.get("tools")], sort_keys=True)
    return json.dumps([body.get("instructions"), body.get("tools")], sort_keys=True)


def latest_user_index(items: list[dict[str, Any]]) -> int | None:
    # a whitespace-only message is not one the person wrote (it is not the latest user message)
    users = [i for i, m in enumerate(items) if m.get("role") == "user" and isinstance(m.get("content"), str) and m["content"].strip()]
    return users[-1] if users else None


def is_memory(item: dict[str, Any]) -> bool:
    c = item.get("content")
    text = c if isinstance(c, str) else (c[0].get("text", "") if isinstance(c, list) and c else "")
    return isinstance(text, str) and text.startswith(OPEN)


APIS = ["openai.chat", "anthropic.messages", "openai.responses"]
MODES = ["startup", "systemPromptPerTurn", "contextPerTurn"]
apis = st.sampled_from(APIS)
SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("mode", MODES)  # every mode and format branch, on every run
@settings(SETTINGS, max_examples=25)
@given(spec=conversation)
@example(spec=(False, [("How do I run the tests?", 0, False), (" ", 0, False)], False))  # a whitespace-only
# last message: the block stays before the earlier question
@example(spec=(False, [("\r", 0, False)], False))  # no human message at all
def test_rules_hold_over_generated_conversations(store: MemoryStore, spec: Any, api: str, mode: str) -> None:
    mw = Middleware(store=store, mode=mode, history="drop")
    requests = build(spec, api)
    blocks_by_turn: dict[int, Any] = {}
    startup_blocks = set()
    for body in requests:
        original = copy.deepcopy(body)
        p = mw.prepare_request(body, api=api, session_id="prop")
        out = p.body
        assert body == original  # rule 1: the caller's objects are never mutated
        items_in, items_out = body[ITEMS[api]], out[ITEMS[api]]
        inj = p.injection
        if mode != "systemPromptPerTurn":  # rule 2
            assert fixed_parts(out, api) == fixed_parts(body, api)
        if inj is None or not inj.injected:
            if mode != "startup":
                assert out == body  # nothing relevant or a closer: the request leaves unchanged
            continue
        if mode == "contextPerTurn":
            u = latest_user_index(items_in)
            assert u is not None  # no human message, nothing to place a block before
            assert len(items_out) == len(items_in) + 1
            assert is_memory(items_out[u]) and items_out[u + 1] == items_in[u]
            assert sum(is_memory(m) for m in items_out) == 1
            assert items_out[:u] == items_in[:u]  # history before the insertion point is byte-stable
            if u == len(items_in) - 1:
                assert items_out[-1] == items_in[-1]  # rule 3: still last
            key = (u, json.dumps(items_in[u]))
            blocks_by_turn.setdefault(key, json.dumps(items_out[u]))
            assert blocks_by_turn[key] == json.dumps(items_out[u])  # rule 4: turn-stable bytes
        elif mode == "startup":
            lead = inj.position
            assert is_memory(items_out[lead])
            startup_blocks.add(json.dumps(items_out[lead]))
        else:
            non_system = [m for m in items_out if m.get("role") not in ("system", "developer")]
            assert non_system == [m for m in items_in if m.get("role") not in ("system", "developer")]
            assert OPEN in fixed_parts(out, api)
    assert len(startup_blocks) <= 1  # startup: the same bytes on every request of the session


@SETTINGS
@given(spec=conversation, api=apis, closer=st.sampled_from(["Thanks!", "👍", "got it", "cool"]))  # not answers
def test_closer_turn_leaves_request_equal_in_per_turn_modes(store: MemoryStore, spec: Any, api: str, closer: str) -> None:
    has_system, turns, has_tools = spec
    turns = [*turns[:-1], (closer, turns[-1][1], False)]
    for mode in ("contextPerTurn", "systemPromptPerTurn"):
        mw = Middleware(store=store, mode=mode, history="drop")
        last = build((has_system, turns, has_tools), api)[-1]
        p = mw.prepare_request(last, api=api)
        assert p.body == last and p.injection is not None and p.injection.skipped == "gate"
