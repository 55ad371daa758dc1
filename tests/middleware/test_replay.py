"""history="replay": earlier turns' blocks are re-inserted byte-identical, so the prompt only grows."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from memwire import MemoryStore, Middleware
from memwire.middleware._replay import flush
from memwire.middleware._render import OPEN

from .conftest import MEMORIES
from .test_properties import ITEMS, apis, build, conversation, fixed_parts

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def is_block(item: Any) -> bool:
    c = item.get("content") if isinstance(item, dict) else None
    if isinstance(c, list) and c and isinstance(c[0], dict):
        c = c[0].get("text")
    return isinstance(c, str) and c.startswith(OPEN)


def make_store(path: Path) -> MemoryStore:
    s = MemoryStore(path)
    s.add_many([t for t, _ in MEMORIES])
    return s


@pytest.mark.parametrize("profile", [False, True])
@SETTINGS
@given(spec=conversation, api=apis)
def test_every_request_extends_the_previous_one(tmp_path_factory: Any, spec: Any, api: str, profile: bool) -> None:
    store = make_store(tmp_path_factory.mktemp("replay"))
    # a profile smaller than the store, so that turns still retrieve memories of their own
    mw = Middleware(store=store, mode="contextPerTurn", history="replay", profile=profile, startup_max_tokens=150)
    previous: list[Any] | None = None
    for body in build(spec, api):
        original = copy.deepcopy(body)
        p = mw.prepare_request(body, api=api, session_id="s")
        assert body == original
        assert fixed_parts(p.body, api) == fixed_parts(body, api)
        items = p.body[ITEMS[api]]
        caller_items = [m for m in items if not is_block(m)]
        assert caller_items == body[ITEMS[api]]  # only whole blocks were added
        if p.injection is not None:
            assert bool(p.injection.profile_ids) == profile
        if previous is not None and not (p.injection and p.injection.compacted):
            assert items[: len(previous)] == previous, "the prompt must be an append-only log"
        previous = items


def chat(*texts: str) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for i, t in enumerate(texts):
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": t})
    return msgs


TURNS = ["How do I run the tests?", "Use make test.", "Which database does staging use?", "Postgres 15.",
         "How do I create a migration?", "Use alembic.", "And how do deploys work?"]


def run_session(mw: Middleware, upto: int) -> list[Any]:
    out = None
    for n in range(1, upto + 1, 2):
        out = mw.prepare(chat(*TURNS[:n]), session_id="sess").messages
    assert out is not None
    return out


def test_blocks_replayed_in_place_and_only_new_memories_injected(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    mw = Middleware(store=store, history="replay")
    first = mw.prepare(chat(*TURNS[:1]), session_id="sess")
    second = mw.prepare(chat(*TURNS[:3]), session_id="sess")
    assert second.messages[: len(first.messages)] == first.messages
    assert second.injection.replayed == 1
    assert not set(first.injection.memory_ids) & set(second.injection.memory_ids)  # new memories only
    assert sum(is_block(m) for m in second.messages) == 2
    # the reported position is where this turn's block is, counting the replayed block before it
    at = second.injection.position
    assert is_block(second.messages[at]) and second.messages[at + 1] == second.messages[-1]
    assert second.messages[at]["content"] == second.injection.text


def test_restart_continues_the_ledger_with_identical_bytes(tmp_path: Path) -> None:
    store_dir = tmp_path / "mem"
    make_store(store_dir)
    a = run_session(Middleware(store=MemoryStore(store_dir), history="replay"), 5)
    flush()  # ledgers are saved by a background writer
    assert [p.suffix for p in (store_dir / ".ledger").iterdir()] == [".jsonl"]
    # a new process: new Middleware, new store object, same directory
    b = Middleware(store=MemoryStore(store_dir), history="replay").prepare(chat(*TURNS[:7]), session_id="sess").messages
    assert b[: len(a)] == a


def test_edited_history_never_shifts_a_block_onto_another_message(tmp_path: Path) -> None:
    mw = Middleware(store=make_store(tmp_path), history="replay")
    full = run_session(mw, 7)
    blocks_before = {json.dumps(full[i + 1]): full[i]["content"] for i, m in enumerate(full) if is_block(m)}
    # the caller drops the second exchange and edits the first user message
    edited = chat("How do I run the tests quickly?", "Use make test.", "How do I create a migration?",
                  "Use alembic.", "And how do deploys work?")
    out = mw.prepare(edited, session_id="sess").messages
    for i, m in enumerate(out):
        if is_block(m):
            following = json.dumps(out[i + 1])
            if following in blocks_before and i + 1 < len(out) - 1:
                assert blocks_before[following] == m["content"]  # the same block before the same message
    assert not is_block(out[1])  # the edited message lost its block: it was for another text


def test_compaction_is_reported_once_then_stable(tmp_path: Path) -> None:
    mw = Middleware(store=make_store(tmp_path), history="replay", replay_max_tokens=200, top_k=3)
    reports = []
    previous = None
    for n in range(1, 8, 2):
        p = mw.prepare(chat(*TURNS[:n]), session_id="cap")
        if previous is not None and not (p.injection and p.injection.compacted):
            assert p.messages[: len(previous)] == previous
        reports.append(p.injection.compacted)
        previous = p.messages
        blocks = [m for m in p.messages[:-2] if is_block(m)]
        total = sum(len(m["content"]) for m in blocks)
        assert total < 200 * 8  # bounded
    assert reports.count(True) == 1 and reports[-1] is False  # one compaction, reported on its request only
    again = mw.prepare(chat(*TURNS[:7]), session_id="cap")  # the same request again: stable, not re-reported
    assert again.messages == previous and not again.injection.compacted


def test_forgotten_memory_never_reaches_the_model_again(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    mw = Middleware(store=store, history="replay")
    first = mw.prepare(chat(*TURNS[:1]), session_id="f")
    victim = first.injection.memory_ids[0]
    text = store.get(victim).text
    store.forget(victim)
    later = mw.prepare(chat(*TURNS[:3]), session_id="f")
    assert later.injection.compacted
    assert not any(text.replace("<", "&lt;") in json.dumps(m) for m in later.messages)


def test_closer_turn_keeps_replayed_blocks(tmp_path: Path) -> None:
    mw = Middleware(store=make_store(tmp_path), history="replay")
    first = mw.prepare(chat("How do I run the tests?"), session_id="c").messages
    closer = mw.prepare(chat("How do I run the tests?", "make test", "thanks!"), session_id="c")
    assert closer.messages[: len(first)] == first and closer.injection.skipped == "gate"
    again = mw.prepare(chat("How do I run the tests?", "make test", "thanks!"), session_id="c")
    assert again.injection.reused and again.injection.skipped == "gate" and again.messages == closer.messages


@pytest.mark.parametrize("content", [
    "[]\n", "null\n", "42\n", '"text"\n', "{not json\n", "",
    '{"version": 3, "session": "s"}\n[1, 2]\n', '{"version": 3, "session": "s"}\n{"ids": 5}\n',
    '{"version": 3, "session": "s"}\n{"key": "k", "tokens": "many"}\n', "\x00\xff binary",
])
def test_a_corrupted_ledger_of_any_shape_is_rebuilt_not_trusted(tmp_path: Path, content: str) -> None:
    from memwire.middleware._replay import Ledger

    store = make_store(tmp_path / "mem")
    path = Ledger.load(store.path, "s").path
    assert path is not None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8", errors="surrogateescape")
    mw = Middleware(store=store, mode="contextPerTurn", history="replay")
    first = mw.prepare(chat("How do I run the test suite?"), session_id="s")
    assert first.injection.injected and first.injection.skipped is None
    flush()
    again = Middleware(store=store, mode="contextPerTurn", history="replay")  # a restart reads the rebuilt file
    second = again.prepare(chat("How do I run the test suite?", "Use make test.", "And the staging port?"), session_id="s")
    assert second.injection.replayed == 1 and second.messages[1] == first.messages[1]


def test_a_stateful_responses_call_keeps_no_ledger(tmp_path: Path) -> None:
    # the provider keeps the history and the blocks sent with it: there is nothing to replay
    mw = Middleware(store=make_store(tmp_path / "mem"), mode="contextPerTurn", history="replay")
    mw.warm_up()
    for i, text in enumerate(["How do I run the tests?", "And the deploys?"]):
        body = {"model": "gpt-4o", "previous_response_id": f"resp_{i}", "input": text}
        p = mw.prepare_request(body, api="openai.responses", session_id="stateful")
        assert p.injection.injected and p.injection.replayed == 0
    mw.flush()
    assert mw.mode_for().replay.ledgers.get(("", "stateful")) is None
    assert not (tmp_path / "mem" / ".ledger").exists()
