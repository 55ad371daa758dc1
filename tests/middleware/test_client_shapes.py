"""Request shapes of the coding agents people put behind memwire (synthetic: written for these
tests to mimic each client's structure, never copied from a client).

Claude Code: Anthropic messages; reminders as text parts before the prompt; the prompt's text block
carries ``cache_control`` in one request and is a plain string in the next; tool loops.
Codex: Responses; AGENTS.md and environment context as user messages of their own.
aider: chat completions; its rules in the system prompt and appended to every user message.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from memwire import MemoryStore, Middleware
from memwire.middleware._formats import get_format
from memwire.policies.modes._replay import message_keys
from memwire.policies.modes._render import OPEN

CC = {"type": "ephemeral"}
STAGING = "The staging database is Postgres 15 on port 5433"
OTHERS = [
    "Run the test suite with make test; it needs Docker",
    "User prefers tabs over spaces",
    "Deploys go out on Tuesdays only",
    "The cache layer is Redis 7",
]
# ~6.6 KB of harness text, on topics unrelated to the question (agents, skills, tools, a date)
REMINDERS = [
    {"type": "text", "text": "<system-reminder>\nAgents you can launch:\n" + "\n".join(
        f"- agent-{i}: reviews pull requests, writes release notes and triages issues for module {i}"
        for i in range(40)) + "\n</system-reminder>"},
    {"type": "text", "text": "<system-reminder>\nSkills: spreadsheet, slides, pdf forms, diagrams, "
                             "translation.\nToday's date is 2026-11-22.\n</system-reminder>"},
]
SYSTEM = [{"type": "text", "text": "You are an interactive coding agent. Use the tools.", "cache_control": CC}]
TOOLS = [{"name": "Bash", "description": "Run a shell command", "input_schema": {"type": "object"}}]


@pytest.fixture()
def store(tmp_path: Path) -> MemoryStore:
    s = MemoryStore(tmp_path / "mem")
    s.add_many([STAGING, *OTHERS])
    return s


def blocks_in(messages: list[Any]) -> list[tuple[int, str]]:
    """(index, text) of every memory block in an Anthropic message list."""
    out = []
    for i, m in enumerate(messages):
        content = m["content"]
        parts = [content] if isinstance(content, str) else [p.get("text", "") for p in content]
        out += [(i, t) for t in parts if isinstance(t, str) and t.startswith(OPEN)]
    return out


@pytest.fixture(autouse=True)
def warm(store: MemoryStore) -> None:
    """The store and the encodings these requests' models use, loaded first: a cold encoding
    (seconds on a busy machine) must not be what decides a test (the retrieval budget)."""
    Middleware(store=store).warm_up(("claude-sonnet-4-5", "gpt-5-codex", "gpt-4o", None))


def claude_turn1(prompt: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [*REMINDERS, {"type": "text", "text": prompt, "cache_control": CC}]}]


def body(messages: list[Any]) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": SYSTEM, "tools": TOOLS,
            "messages": messages, "stream": True}


def test_claude_code_turn_one_gets_its_memory_despite_the_reminders(store: MemoryStore) -> None:
    mw = Middleware(store=store, mode="contextPerTurn")
    p = mw.prepare_request(body(claude_turn1("Which port is the staging database on?")), "anthropic.messages",
                           headers={"x-claude-code-session-id": "s-1"})
    assert p.injection is not None and p.injection.injected
    assert STAGING in p.injection.text
    assert not any(t in p.injection.text for t in OTHERS[:1])  # the reminders did not pull in off-topic memories
    assert p.injection.session == "claude-code:s-1"


def test_claude_code_tool_loop_and_next_turn_keep_every_block_byte_identical(store: MemoryStore) -> None:
    mw = Middleware(store=store, mode="contextPerTurn", history="replay")
    headers = {"x-claude-code-session-id": "s-2"}
    m1 = claude_turn1("Which port is the staging database on?")
    r1 = mw.prepare_request(body(m1), "anthropic.messages", headers=headers)
    first_block = blocks_in(r1.body["messages"])
    assert len(first_block) == 1 and STAGING in first_block[0][1]

    # the tool loop: the prompt loses its cache_control, the breakpoint moves to the tool result,
    # a reminder rides along with the tool result; and the store changes mid-turn
    # (a new port for the staging database would supersede it: replay renders an archived memory out)
    store.add("Load tests run with locust against staging only")
    prompt_plain = {"role": "user", "content": [*REMINDERS, {"type": "text", "text": "Which port is the staging database on?"}]}
    m2 = [prompt_plain,
          {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "env"}}]},
          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "PGPORT=5433", "cache_control": CC},
                                       {"type": "text", "text": "<system-reminder>Todo list is empty.</system-reminder>"}]}]
    r2 = mw.prepare_request(body(m2), "anthropic.messages", headers=headers)
    assert r2.injection is not None and r2.injection.reused  # same turn: no new search
    assert blocks_in(r2.body["messages"]) == first_block

    # turn 2: the earlier prompt comes back in yet another serialization
    m3 = [*m2, {"role": "assistant", "content": [{"type": "text", "text": "It is on 5433."}]},
          {"role": "user", "content": "And how do I run the test suite?"}]
    m3[0] = {"role": "user", "content": [*REMINDERS, {"type": "text", "text": "Which port is the staging database on?"}]}
    r3 = mw.prepare_request(body(m3), "anthropic.messages", headers=headers)
    found = blocks_in(r3.body["messages"])
    assert found[0] == first_block[0], "the turn-1 block must stay byte-identical at its place"
    assert len(found) == 2 and "make test" in found[1][1]


def test_two_sessions_opened_with_the_same_prompt_keep_their_own_blocks(store: MemoryStore) -> None:
    mw = Middleware(store=store, mode="contextPerTurn", history="replay")
    prompt = "Which port is the staging database on?"
    a1 = mw.prepare_request(body(claude_turn1(prompt)), "anthropic.messages", headers={"x-claude-code-session-id": "A"})
    forgotten = next(m for m in store if m.text == STAGING)
    store.forget(forgotten.id)
    store.add("The staging database is Postgres 16 on port 6543")
    b1 = mw.prepare_request(body(claude_turn1(prompt)), "anthropic.messages", headers={"x-claude-code-session-id": "B"})
    assert "6543" in b1.injection.text and "5433" not in b1.injection.text  # B searched for itself
    assert "5433" in a1.injection.text


def test_an_empty_client_session_header_does_not_count(store: MemoryStore) -> None:
    mw = Middleware(store=store)
    p = mw.prepare_request(body(claude_turn1("hi there, the staging port?")), "anthropic.messages",
                           headers={"X-Claude-Code-Session-Id": "  "})
    assert p.injection.session.startswith("auto:")


def test_codex_wrapper_messages_are_not_the_latest_user_message(store: MemoryStore) -> None:
    mw = Middleware(store=store, mode="contextPerTurn")
    items = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Sandbox: workspace-write."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text":
            "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\nDeploy with make release.\n</INSTRUCTIONS>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text":
            "<environment_context>\n  <cwd>/repo</cwd>\n  <shell>bash</shell>\n</environment_context>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "which port does staging postgres use"}]},
    ]
    req = {"model": "gpt-5-codex", "instructions": "You are Codex.", "input": items, "stream": True,
           "prompt_cache_key": "0199-conv"}
    p = mw.prepare_request(req, "openai.responses", headers={"session_id": "0199-conv"})
    assert p.injection.injected and STAGING in p.injection.text
    assert p.injection.position == 3  # right before the prompt, after the wrapper messages
    assert p.body["input"][4] == items[3]
    assert p.injection.session == "session:0199-conv"


def test_aider_rules_appended_to_every_message_are_not_the_question(store: MemoryStore) -> None:
    rules = ("Describe each change with a SEARCH/REPLACE block. Use the full path of the file, "
             "and copy the existing lines exactly, whitespace included.")
    messages = [
        {"role": "system", "content": f"Act as an expert software developer.\n\n{rules}"},
        {"role": "user", "content": "Change get_factorial() to use math.factorial"},  # the built-in example
        {"role": "assistant", "content": "Ok. Here is the change."},
        {"role": "user", "content": f"which port is the staging database on?\n\n{rules}"},
    ]
    p = Middleware(store=store).prepare(messages, session_id="aider")
    assert p.injection.injected and STAGING in p.injection.text
    assert p.messages[3]["content"].startswith(OPEN) and p.messages[4] == messages[3]


def test_message_identity_ignores_serialization_and_cache_control() -> None:
    fmt = get_format("anthropic.messages")
    as_string = {"role": "user", "content": "Fix the bug"}
    as_block = {"role": "user", "content": [{"type": "text", "text": "Fix the bug"}]}
    with_cc = {"role": "user", "content": [{"type": "text", "text": "Fix the bug", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}
    restored = {"role": "user", "content": "Fix the bug  \n"}  # aider's --restore-chat-history
    assert fmt.identity(as_string) == fmt.identity(as_block) == fmt.identity(with_cc) == fmt.identity(restored)
    other = {"role": "user", "content": [{"type": "text", "text": "Fix the bug"},
                                          {"type": "image", "source": {"type": "base64", "data": "AAAA"}}]}
    assert fmt.identity(other) != fmt.identity(as_block)
    keys = message_keys({0: fmt.identity(as_string), 2: fmt.identity(with_cc), 4: fmt.identity(other)})
    assert keys[0] != keys[2]  # same identity twice: told apart by occurrence
    assert keys[0].split("#")[0] == keys[2].split("#")[0]


def test_claude_code_body_is_not_mutated(store: MemoryStore) -> None:
    b = body(claude_turn1("Which port is the staging database on?"))
    before = copy.deepcopy(b)
    Middleware(store=store).prepare_request(b, "anthropic.messages", headers={"x-claude-code-session-id": "x"})
    assert b == before


def test_claude_code_mid_conversation_system_messages_are_accepted_and_kept(store: MemoryStore) -> None:
    # Claude Code 2.1 sends role "system" messages inside `messages` (after the prompt, even)
    messages = [*claude_turn1("Which port is the staging database on?"),
                {"role": "system", "content": "Agent types you can launch: reviewer, planner."}]
    p = Middleware(store=store).prepare_request(body(messages), "anthropic.messages",
                                                headers={"x-claude-code-session-id": "s-3"})
    assert p.injection.injected and p.injection.position == 0
    assert p.body["messages"][1:] == messages
    assert p.body["system"] is SYSTEM or p.body["system"] == SYSTEM


def test_agent_side_requests_get_no_memory_and_no_ledger_entry(store: MemoryStore) -> None:
    """A title request: the same harness, the same session, no tools, a JSON-schema output."""
    mw = Middleware(store=store, mode="contextPerTurn", history="replay")
    headers = {"x-claude-code-session-id": "s-side", "user-agent": "claude-cli/2.1.197 (external, cli)"}
    title = {"model": "claude-haiku-4-5", "max_tokens": 512,
             "system": [{"type": "text", "text": "Write a short title for this coding session."}],
             "messages": [{"role": "user", "content": "Which port is the staging database on?"}],
             "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}}}
    p = mw.prepare_request(title, "anthropic.messages", headers=headers)
    assert p.injection.skipped == "side_request" and p.body == title
    assert mw.mode_for().replay.ledgers.get(("", "claude-code:s-side")) is None  # no ledger was even loaded
    main = mw.prepare_request(body(claude_turn1("Which port is the staging database on?")), "anthropic.messages",
                              headers=headers)
    assert main.injection.injected  # the main loop (it offers tools) is served as ever
    codex = {"model": "gpt-5", "input": "Summarize the conversation so far.", "instructions": "Summarize."}
    assert mw.prepare_request(codex, "openai.responses", headers={"originator": "codex_exec"}).injection.skipped == "side_request"
    # Claude Code's prompt suggestions: the main loop's request, tools included, with a mode marker
    suggest = body([*main.body["messages"][-1:], {"role": "assistant", "content": "It is 5433."},
                    {"role": "user", "content": "[SUGGESTION MODE: Suggest what the user types next.]\n\nstaging port?"}])
    assert mw.prepare_request(suggest, "anthropic.messages", headers=headers).injection.skipped == "side_request"
    # the same shape from an application, not an agent harness, gets memory
    assert mw.prepare_request({**title, "messages": main.body["messages"][-1:]}, "anthropic.messages").injection.injected
    # and the policy can be turned off
    inject = Middleware(store=store, side_requests="inject")
    assert inject.prepare_request(title, "anthropic.messages", headers=headers).injection.injected


def test_aider_turn_one_block_survives_its_rules_dropping_out_of_the_history(store: MemoryStore) -> None:
    """aider appends its rules (also in its system prompt) to the message it sends, and keeps the
    message without them (restored from a file: with a trailing "  \\n") in the history."""
    rules = ("To suggest changes to a file you MUST return the entire content of the updated file, "
             "with the file path on the line before the fenced block.")
    system = {"role": "system", "content": f"Act as an expert software developer.\n\n{rules}"}
    question = "Which port is the staging database on?"
    mw = Middleware(store=store, history="replay")
    t1 = mw.prepare([system, {"role": "user", "content": f"{question}\n\n{rules}"}], session_id="aider-A")
    block = t1.messages[1]
    t2 = mw.prepare([system, {"role": "user", "content": f"{question}  \n"}, {"role": "assistant", "content": "5433."},
                     {"role": "user", "content": f"How do I run the test suite?\n\n{rules}"}], session_id="aider-A")
    assert t2.injection.replayed == 1 and t2.messages[1] == block


def aider_like(prompt: str, language: str | None, lazy: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """The system message and the sent user message of an aider-like client whose rules are appended
    to the prompt (its whole-file edit format, a model it has no settings for): its final reminders
    (an optional lazy-model paragraph, then "Reply in <language>." under a locale or a chosen chat
    language, nothing under C/POSIX) go into the system prompt, inside a paragraph and at the end of
    the rules, and at the end of the rules it appends to the sent prompt."""
    reminders = "\n\n".join([
        *(["You are diligent and thorough!\nYou always implement the code you describe in full!\n"] if lazy else []),
        *([f"Reply in {language}.\n"] if language else []),
    ])
    rules = ("To change a file, send back its whole content, with its path on the line before the fence.\n"
             "Never leave out a part of a file with a comment such as 'rest unchanged'.\n\n" + reminders + "\n")
    system = ("Act as an expert software developer.\nIf the request is unclear, ask.\n" + reminders
              + "\nOnce the request is clear, explain the change, then send each changed file.\n" + "\n" + rules)
    return {"role": "system", "content": system}, {"role": "user", "content": prompt + "\n\n" + rules}


@pytest.mark.parametrize(("language", "lazy"), [("English", False), ("English", True), ("German", False),
                                                 (None, False)])
def test_aider_turn_one_block_survives_its_short_reminder_lines(store: MemoryStore, language: str | None,
                                                                lazy: bool) -> None:
    """issue 34 item 10: "Reply in English." (under the 40-character floor of the paragraph rule)
    is appended to the sent prompt and absent from the history of the next turn: the same turn."""
    question = "Which port is the staging database on?"
    system, sent = aider_like(question, language, lazy)
    assert sent["content"].startswith(question + "\n\n")
    mw = Middleware(store=store, history="replay")
    t1 = mw.prepare([system, sent], session_id=f"aider-{language}-{lazy}")
    assert t1.injection.injected and STAGING in t1.injection.text
    block = t1.messages[1]
    _, sent2 = aider_like("How do I run the test suite?", language, lazy)
    t2 = mw.prepare([system, {"role": "user", "content": question}, {"role": "assistant", "content": "5433."}, sent2],
                    session_id=f"aider-{language}-{lazy}")
    assert t2.injection.replayed == 1 and t2.messages[1] == block
    fmt = get_format("openai.chat")
    assert fmt.identity(sent, system["content"]) == fmt.identity({"role": "user", "content": question},
                                                                 system["content"])


def test_short_paragraphs_change_identity_unless_they_are_lines_of_the_system_prompt() -> None:
    fmt = get_format("openai.chat")
    system = "Act as an expert.\nReply in English.\nNever guess a file path; ask which file is meant."

    def same(a: str, b: str) -> bool:
        return fmt.identity({"role": "user", "content": a}, system) == fmt.identity({"role": "user", "content": b},
                                                                                      system)

    assert same("Fix the bug.\n\nReply in English.", "Fix the bug.")
    assert same("Reply in English.\n\nFix the bug.", "Fix the bug.")
    assert not same("Fix the bug.\n\nThanks.", "Fix the bug.")  # not a line of the system prompt
    assert not same("Fix the bug.\n\nReply in", "Fix the bug.")  # a piece of a line is not the line
    assert not same("Fix the bug.\n\nReply in English. Please", "Fix the bug.")
    assert not same("Reply in English.", "")  # all there is: kept
    # without a system prompt, and for a message with nothing to drop, the identity is as it was
    assert fmt.identity({"role": "user", "content": "Fix it.\n\nReply in English."}) == "Fix it.\n\nReply in English."
    assert fmt.identity({"role": "user", "content": "a\n\n\n\nb"}, system) == "a\n\n\n\nb"
