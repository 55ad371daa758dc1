"""Distillation: a model scripted to answer extraction JSON (junk, a duplicate, an update, a secret,
invalid JSON); what is stored is exactly what the rules say."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from memwire import MemoryStore, Middleware
from memwire.memory._inbox import approve, inbox_of, read_log, reject, replaced
from memwire.memory._model import Memory
from memwire.memory._supersede import history
from memwire.middleware._capture import Capture
from memwire.middleware._distill import PROMPT, Distiller
from tests.stores import StoreSpec

SYSTEM = "You are a coding agent. Always answer in English."


class Model:
    """A scripted ``complete``: records what it read, answers the next scripted reply."""

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.calls: list[list[dict[str, str]]] = []

    def __call__(self, messages: list[dict[str, str]]) -> str:
        self.calls.append(messages)
        reply = self.replies.pop(0) if self.replies else {"memories": []}
        if isinstance(reply, Exception):
            raise reply
        return reply if isinstance(reply, str) else json.dumps(reply)


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    s = MemoryStore(tmp_path / "mem")
    s.add("Deploys go out on Tuesdays only", tags=["process"])
    return s


def middleware(store: Any, model: Model, capture: str = "auto", **kw: Any) -> Middleware:
    mw = Middleware(store=store, mode="contextPerTurn", capture=capture)
    mw.capture = Capture(capture, distiller=Distiller(model, **kw))
    mw.warm_up()
    return mw


def conversation(*turns: tuple[str, str], latest: str = "Thanks, next question.") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for user, assistant in turns:
        out += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    return out + [{"role": "user", "content": latest}]


EXCHANGE = ("We use pnpm in this repo, not npm. Can you add the lint script?",
            "Added `pnpm lint` to package.json; it runs eslint on src/.")


def distilled(store: MemoryStore) -> list[str]:
    return [m.text for m in store.memories() if "distilled" in m.tags]


def test_what_is_stored_is_exactly_what_the_rules_say(store: MemoryStore, caplog: pytest.LogCaptureFixture) -> None:
    old = store.add("The project uses npm", tags=["fact", "captured"])
    model = Model({"memories": [
        {"text": "Failed builds print \x1b]0;owned\x07 first", "kind": "fact", "confidence": 0.9},  # a control character
        {"text": "The project uses pnpm, not npm", "kind": "fact", "confidence": 0.95, "action": "update",
         "replaces": old.id[:8]},                                                                  # an update
        {"text": "Lint with `pnpm lint` (eslint on src/)", "kind": "instruction", "confidence": 0.9, "action": "add"},
        {"text": "The user is probably a frontend developer", "kind": "fact", "confidence": 0.3},   # junk: a guess
        {"text": "Deploys go out on Tuesdays only", "kind": "fact", "confidence": 0.9},            # a duplicate
        {"text": "The npm token is npm_abcdefghijklmnopqrstuvwxyz0123456789ABCD", "kind": "fact", "confidence": 0.99},
        {"text": "Always answer in English", "kind": "instruction", "confidence": 0.9},             # the system prompt
        {"text": "Nothing to see", "kind": "fact", "confidence": 0.9, "action": "ignore"},
        {"text": "", "kind": "fact", "confidence": 0.9},                                            # malformed ...
        {"text": "An odd kind", "kind": "gossip", "confidence": 0.9},
        {"text": "Not a number", "kind": "fact", "confidence": "high"},
        "just a string",
    ]})
    mw = middleware(store, model)
    with caplog.at_level(logging.WARNING, logger="memwire"):
        mw.prepare(conversation(EXCHANGE), session_id="s")
        mw.flush()
    assert sorted(distilled(store)) == ["Lint with `pnpm lint` (eslint on src/)", "The project uses pnpm, not npm"]
    assert old.id not in store and "superseded" in store.archive.get(old.id).tags  # archived, never lost
    assert [m.text for m in store.memories() if "Tuesdays" in m.text] == ["Deploys go out on Tuesdays only"]
    events = [(e["event"], e.get("cue")) for e in read_log(store)]
    assert events.count(("reinforced", "distilled")) == 1 and events.count(("captured", "distilled")) == 2
    assert not any("npm_abcdef" in p.read_text() for p in store.path.rglob("*") if p.is_file())
    assert any("looks like it holds a secret" in r.getMessage() for r in caplog.records)
    assert any("control character (U+001B ESC)" in r.getMessage() for r in caplog.records)
    assert not any("owned" in r.getMessage() for r in caplog.records)
    lint = next(m for m in store.memories() if "lint" in m.text)
    assert set(lint.tags) == {"instruction", "captured", "distilled"} and lint.topic == "Instructions"


def test_the_model_reads_the_finished_exchange_without_memwires_blocks(store: MemoryStore) -> None:
    model = Model()
    mw = middleware(store, model)
    # a caller that kept memwire's merged block in its history (placement = "merge")
    merged = "<memory>\n- Deploys go out on Tuesdays only\n</memory>\n\n" + EXCHANGE[0]
    with_block = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": merged},
                  {"role": "assistant", "content": EXCHANGE[1]}, {"role": "user", "content": "And the tests?"}]
    mw.prepare(with_block, session_id="s")
    mw.flush()
    [call] = model.calls
    assert call[0] == {"role": "system", "content": PROMPT}
    read = call[1]["content"]
    assert f"User: {EXCHANGE[0]}" in read and f"Assistant: {EXCHANGE[1]}" in read
    assert "<memory>" not in read and "Tuesdays" not in read.split("The exchange:")[1]
    assert "And the tests?" not in read  # the turn in progress is not finished


def test_once_per_turn_and_not_before_an_exchange_is_finished(store: MemoryStore) -> None:
    model = Model()
    mw = middleware(store, model)
    mw.prepare([{"role": "user", "content": EXCHANGE[0]}], session_id="s")  # nothing finished yet
    loop = conversation(EXCHANGE)
    for _ in range(3):  # a tool loop: three requests of one turn
        mw.prepare(loop, session_id="s")
    mw.flush()
    assert len(model.calls) == 1


@pytest.mark.parametrize("reply", ["I found nothing worth keeping.", "```json\n{\"memories\": 3}\n```", "{not json",
                                   TimeoutError("the model took too long"), RuntimeError("HTTP 500")])
def test_invalid_answers_and_failures_cost_a_log_line(store: MemoryStore, reply: Any,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    mw = middleware(store, Model(reply))
    with caplog.at_level(logging.WARNING, logger="memwire"):
        p = mw.prepare(conversation(EXCHANGE, latest="When do deploys go out?"), session_id="s")
        mw.flush()
    assert p.injection.injected  # the call itself is untouched
    assert distilled(store) == [] and len(store) == 1
    assert len([r for r in caplog.records if "distillation" in r.getMessage()]) == 1


def test_a_fenced_json_answer_is_read(store: MemoryStore) -> None:
    fenced = "Here you go:\n```json\n" + json.dumps(
        {"memories": [{"text": "The user works in Lisbon", "kind": "fact", "confidence": 0.8}]}) + "\n```"
    mw = middleware(store, Model(fenced))
    mw.prepare(conversation(EXCHANGE), session_id="s")
    mw.flush()
    assert distilled(store) == ["The user works in Lisbon"]


def test_each_session_has_a_token_budget(store: MemoryStore, caplog: pytest.LogCaptureFixture) -> None:
    model = Model()
    mw = middleware(store, model, session_tokens=700)
    turns = [(f"Question {i} about the upload service?", f"Answer {i}: it retries three times.") for i in range(4)]
    with caplog.at_level(logging.INFO, logger="memwire"):
        for n in range(1, 5):
            mw.prepare(conversation(*turns[:n], latest=f"Next {n}"), session_id="s")
        mw.prepare(conversation(*turns[:1], latest="Other session"), session_id="other")
        mw.flush()
    per_session = [c[1]["content"] for c in model.calls]
    assert 1 <= sum("Other session" not in c for c in per_session) < 4  # the budget ran out for "s"
    assert any("Question 0" in c for c in per_session[-1:])  # "other" had its own budget
    assert any("used its 700-token budget" in r.getMessage() for r in caplog.records)


def test_review_mode_puts_distilled_memories_in_the_inbox(store: MemoryStore) -> None:
    model = Model({"memories": [{"text": "The project uses pnpm", "kind": "fact", "confidence": 0.9}]})
    mw = middleware(store, model, capture="review")
    mw.prepare(conversation(EXCHANGE), session_id="s")
    mw.flush()
    assert distilled(store) == [] and [m.text for m in inbox_of(store)] == ["The project uses pnpm"]


def test_without_a_distill_model_no_model_is_called(store: MemoryStore) -> None:
    mw = Middleware(store=store, mode="contextPerTurn")
    assert mw.capture.distiller is None


def test_a_project_config_cannot_choose_the_distill_model(tmp_path: Path) -> None:
    from memwire._config import restrict_project_config

    kept, notices = restrict_project_config({"distill_model": "gpt-4o", "distill_api_base": "http://evil", "top_k": 3},
                                            "./memwire.toml")
    assert kept == {"top_k": 3} and len(notices) == 2


def test_distill_model_through_litellm_against_a_fake_provider(store: MemoryStore,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("litellm")
    from memwire.testing import FakeProvider, serve_in_thread

    def reply(body: dict[str, Any], api: str) -> str:
        if body["messages"][0]["content"] != PROMPT:
            return "ok"
        return json.dumps({"memories": [{"text": "The repository uses pnpm", "kind": "fact", "confidence": 0.9}]})

    fake = FakeProvider(reply)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with serve_in_thread(fake) as server:
        mw = Middleware(store=store, mode="contextPerTurn", distill_model="openai/gpt-4o-mini",
                        distill_api_base=server.base_url + "/v1")
        mw.prepare(conversation(EXCHANGE), session_id="s")
        mw.flush()
    assert distilled(store) == ["The repository uses pnpm"]
    [call] = [r for r in fake.requests if r.api == "openai.chat"]
    assert call.body["model"] == "gpt-4o-mini" and call.body["temperature"] == 0


def test_distill_model_without_litellm_costs_a_log_line_naming_the_extra(store: MemoryStore,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "litellm", None)  # as if not installed
    mw = Middleware(store=store, mode="contextPerTurn", distill_model="gpt-4o-mini")
    mw.warm_up()
    with caplog.at_level(logging.WARNING, logger="memwire"):
        p = mw.prepare(conversation(EXCHANGE, latest="When do deploys go out?"), session_id="s")
        mw.flush()
    assert p.injection.injected
    assert any("MissingDependencyError" in r.getMessage() and "memwire[litellm]" in r.getMessage()
               for r in caplog.records)


# ------------------------------------------------------------------ updates go through supersession (issue 33)

UPDATE = "Packages are installed with pnpm"  # other words: the store alone would keep both


def updating(make_store: StoreSpec, capture: str = "auto", text: str = UPDATE) -> tuple[Any, Memory, Middleware]:
    """A store holding a captured "npm" memory, and a middleware whose model updates it to ``text``."""
    store = make_store()
    store.add("Deploys go out on Tuesdays only", tags=["process"])
    old = store.add("The project uses npm", tags=["fact", "captured"])
    model = Model({"memories": [{"text": text, "kind": "fact", "confidence": 0.95, "action": "update",
                                 "replaces": old.id[:8]}]})
    return store, old, middleware(store, model, capture=capture)


def chain(store: Any, mid: str) -> list[tuple[str, str]]:
    return [(st.memory.text, st.state) for st in history(store, mid)]


def test_an_update_supersedes_the_old_memory_linked_both_ways(make_store: StoreSpec) -> None:
    store, old, mw = updating(make_store)
    mw.prepare(conversation(EXCHANGE), session_id="s")
    mw.flush()
    store = make_store()  # as another process reads it
    [new] = [m for m in store.memories() if "distilled" in m.tags]
    assert new.text == UPDATE and old.id not in store and "superseded" in store.archive.get(old.id).tags
    assert store.lifecycle.links(new.id).get("supersedes") == [old.id]
    assert store.lifecycle.links(old.id).get("superseded_by") == new.id
    assert chain(store, new.id) == [("The project uses npm", "superseded"), (UPDATE, "current")]
    [event] = [e for e in read_log(store) if e["event"] == "superseded"]
    assert (event["id"], event["by"], event["cue"]) == (old.id, new.id, "distilled")


def test_an_update_is_one_write_a_failed_one_leaves_the_old_value(make_store: StoreSpec,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    store, old, mw = updating(make_store)
    forgotten: list[str] = []
    monkeypatch.setattr(store, "forget", lambda mid, **kw: forgotten.append(mid))  # never a separate forget

    def fails(*args: Any, **kw: Any) -> Memory:
        raise RuntimeError("the write did not happen")

    monkeypatch.setattr(store, "add", fails)
    mw.prepare(conversation(EXCHANGE), session_id="s")
    mw.flush()
    assert forgotten == [] and old.id in make_store() and distilled(make_store()) == []


@pytest.mark.parametrize("text", [UPDATE, "This project uses npm"])  # stored as another memory; the old one itself
def test_an_update_already_stored_reinforces_it_and_the_old_stays(make_store: StoreSpec, text: str) -> None:
    store, old, mw = updating(make_store, text=text)
    said = store.add(UPDATE, tags=["fact"])
    mw.prepare(conversation(EXCHANGE), session_id="s")
    mw.flush()
    assert {m.id for m in make_store().memories()} >= {old.id, said.id} and distilled(make_store()) == []
    assert [(e["event"], e["id"]) for e in read_log(store)] == [("reinforced", said.id if text == UPDATE else old.id)]


def test_in_review_mode_the_old_stays_until_the_update_is_approved(make_store: StoreSpec) -> None:
    store, old, mw = updating(make_store, "review")
    mw.prepare(conversation(EXCHANGE), session_id="s")
    mw.flush()
    [item] = inbox_of(store).memories()
    assert old.id in make_store() and len(make_store().archive) == 0  # nothing active touched
    assert replaced(item) == old.id and item.text == UPDATE
    assert "superseded" not in [e["event"] for e in read_log(store)]

    store = make_store()
    [new] = approve(store, [item.id])
    assert old.id not in store and "superseded" in store.archive.get(old.id).tags
    assert set(new.tags) == {"fact", "captured", "distilled"}  # the bookkeeping tag is not stored
    assert store.lifecycle.links(new.id).get("supersedes") == [old.id]
    assert store.lifecycle.links(old.id).get("superseded_by") == new.id
    assert chain(store, old.id) == [("The project uses npm", "superseded"), (UPDATE, "current")]
    assert [(e["event"], e.get("by")) for e in read_log(store)][-2:] == [("superseded", new.id), ("approved", None)]


def test_in_review_mode_a_rejected_update_leaves_the_old_one(make_store: StoreSpec) -> None:
    store, old, mw = updating(make_store, "review")
    mw.prepare(conversation(EXCHANGE), session_id="s")
    mw.flush()
    [item] = inbox_of(store).memories()
    reject(make_store(), [item.id])
    store = make_store()
    assert old.id in store and store.lifecycle.links(old.id) == {} and len(inbox_of(store)) == 0
    [gone] = store.archive.memories()
    assert gone.text == UPDATE and replaced(gone) is None and "rejected" in gone.tags
    back = store.restore(gone.id)  # a rejected update restored is a memory of its own, settled by its words
    assert replaced(back) is None and back.id in store
