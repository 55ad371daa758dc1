"""A turn whose search found nothing looks again once the store has changed (it sent no block)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memwire import MemoryStore, Middleware

QUESTION = [{"role": "user", "content": "Which database does staging use?"}]
FACT = "The staging database is Postgres 16 on port 5433"


@pytest.mark.parametrize(("mode", "history"), [("contextPerTurn", "drop"), ("systemPromptPerTurn", "drop")])
def test_a_memory_added_after_an_empty_turn_reaches_its_retry(tmp_path: Path, mode: str, history: str) -> None:
    store = MemoryStore(tmp_path)
    store.add("Deploys go out on Tuesdays")
    mw = Middleware(store=store, mode=mode, history=history)
    first = mw.prepare(QUESTION, session_id="s")
    assert first.injection.skipped == "nothing_relevant"
    assert mw.prepare(QUESTION, session_id="s").injection.skipped == "nothing_relevant"  # unchanged store: memo
    store.add(FACT)
    retry = mw.prepare(QUESTION, session_id="s")
    assert retry.injection.injected and FACT in retry.injection.text


def test_a_hand_written_file_reaches_an_empty_turn(tmp_path: Path) -> None:
    mw = Middleware(store=MemoryStore(tmp_path), history="drop")
    assert mw.prepare(QUESTION, session_id="s").injection.skipped == "nothing_relevant"
    (tmp_path / "ops.md").write_text(f"- {FACT}\n")  # by hand, not through this store object
    assert FACT in mw.prepare(QUESTION, session_id="s").injection.text


def test_a_turn_that_sent_a_block_keeps_it_when_the_store_changes(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    store.add(FACT)
    mw = Middleware(store=store, history="drop")
    first = mw.prepare(QUESTION, session_id="s")
    store.add("Staging database backups run nightly")
    again = mw.prepare(QUESTION, session_id="s")
    assert again.messages == first.messages  # rule 4: the turn's bytes stay


def test_a_gate_skip_is_not_looked_at_again(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    mw = Middleware(store=store, history="drop")
    closer = [{"role": "user", "content": "thanks!"}]
    assert mw.prepare(closer).injection.skipped == "gate"
    store.add("Thanks are always welcome")
    assert mw.prepare(closer).injection.skipped == "gate"


def test_replay_an_empty_turn_looks_again_even_after_a_restart(tmp_path: Path) -> None:
    from memwire.policies.modes._ledger import flush

    store = MemoryStore(tmp_path)
    store.add("Deploys go out on Tuesdays")
    mw = Middleware(store=store, history="replay")
    assert mw.prepare(QUESTION, session_id="s").injection.skipped == "nothing_relevant"
    assert mw.prepare(QUESTION, session_id="s").injection.reused  # unchanged store: the ledger's verdict
    flush()
    MemoryStore(tmp_path).add(FACT)  # another process adds it, then this one restarts
    restarted = Middleware(store=MemoryStore(tmp_path), history="replay")
    retry = restarted.prepare(QUESTION, session_id="s")
    assert retry.injection.injected and FACT in retry.injection.text
    flush()
    again = Middleware(store=MemoryStore(tmp_path), history="replay").prepare(QUESTION, session_id="s")
    assert again.messages == retry.messages  # once a block was sent, the turn keeps it
