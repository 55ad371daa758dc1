"""Telemetry: the overlap measure, the log, and reinforcement of what the reply used."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from memwire import MemoryStore, Middleware
from memwire._errors import MemoryFileError
from memwire.memory._logfile import append_jsonl, append_jsonl_many, read_jsonl
from memwire.memory._model import Memory
from memwire.memory._telemetry import _terms, read_telemetry, used

PORT = Memory.create("The staging database listens on port 5433")
TABS = Memory.create("User prefers tabs over spaces in Go code")


@pytest.mark.parametrize("reply, port, tabs", [
    ("Connect to the staging database on port 5433.", True, False),
    ("Use 5433.", True, False),                                   # a number the memory holds
    ("The staging database port is in the wiki.", True, False),   # staging, database, port: 3 of its 5 terms
    ("The staging database is the one to use.", False, False),    # 2 of 5: under half
    ("Indent the Go code with tabs, as you prefer.", False, True),
    ("", False, False),
])
def test_the_overlap_measure(reply: str, port: bool, tabs: bool) -> None:
    terms = _terms(reply)
    assert (used(PORT, terms), used(TABS, terms)) == (port, tabs)


def test_a_memory_of_one_term_needs_that_term() -> None:
    mem = Memory.create("Kubernetes")
    assert used(mem, _terms("Deploy it on kubernetes."))
    assert not used(mem, _terms("Deploy it on the cluster."))


def test_the_log_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    for i in range(50):
        append_jsonl(path, {"i": i, "pad": "x" * 100}, max_bytes=1000, root=tmp_path)
    assert path.stat().st_size <= 1000 + 200
    kept = [r["i"] for r in read_jsonl(path, root=tmp_path)]
    assert kept == sorted(kept) and kept[-1] == 49 and len(kept) < 50


def test_many_records_are_appended_in_order_and_still_bounded(tmp_path: Path) -> None:
    """A batch is written in pieces of whole lines, the file rotating between them: a backlog of
    records never makes one file much larger than ``max_bytes``."""
    path = tmp_path / "x.jsonl"
    append_jsonl_many(path, [{"i": i, "pad": "x" * 100} for i in range(20)], max_bytes=1000, root=tmp_path)
    append_jsonl_many(path, [{"i": i, "pad": "x" * 100} for i in range(20, 50)], max_bytes=1000, root=tmp_path)
    append_jsonl_many(path, [], max_bytes=1000, root=tmp_path)
    assert path.stat().st_size <= 1000
    assert path.with_name("x.jsonl.1").stat().st_size <= 1000
    kept = [r["i"] for r in read_jsonl(path, root=tmp_path)]
    assert kept == list(range(kept[0], 50)) and len(kept) < 50


def test_a_log_starts_in_a_directory_not_made_yet_and_never_through_a_symlink(tmp_path: Path) -> None:
    path = tmp_path / "new" / "deeper" / "x.jsonl"
    append_jsonl(path, {"i": 1}, root=tmp_path)
    append_jsonl(path, {"i": 2}, root=tmp_path)
    assert read_jsonl(path, root=tmp_path) == [{"i": 1}, {"i": 2}]
    (tmp_path / "elsewhere.jsonl").write_text("")
    link = tmp_path / "link.jsonl"
    link.symlink_to(tmp_path / "elsewhere.jsonl")
    with pytest.raises(MemoryFileError, match="symlink"):
        append_jsonl(link, {"i": 3}, root=tmp_path)
    (tmp_path / "real").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "real")  # a linked directory on the way: refused too
    with pytest.raises(MemoryFileError, match="symlink"):
        append_jsonl(tmp_path / "linked" / "x.jsonl", {"i": 4}, root=tmp_path)
    assert (tmp_path / "elsewhere.jsonl").read_text() == "" and not list((tmp_path / "real").iterdir())


@pytest.fixture
def mw(tmp_path: Path) -> Middleware:
    store = MemoryStore(tmp_path / "mem")
    store.add("The staging database listens on port 5433", ["infra"])
    store.add("Deploys go out on Tuesdays only", ["process"])
    m = Middleware(store=store, mode="contextPerTurn", capture="off")
    m.warm_up()
    return m


def ask(mw: Middleware, text: str, session: str = "s1", namespace: str | None = None) -> Any:
    return mw.prepare([{"role": "user", "content": text}], session_id=session, namespace=namespace).injection


def test_a_used_memory_is_reinforced_and_logged(mw: Middleware) -> None:
    inj = ask(mw, "Which port does the staging database use, and when do deploys go out?")
    assert len(inj.memory_ids) == 2
    port = next(m for m in mw.store.memories() if "5433" in m.text)
    deploys = next(m for m in mw.store.memories() if "Tuesdays" in m.text)
    before = mw.store.lifecycle.score(port)
    mw.observe_reply(inj, "It listens on 5433.")
    mw.flush()
    meta = mw.store.lifecycle.get(port)
    assert (meta.injected, meta.uses, meta.evidence) == (1, 1, 2)
    assert mw.store.lifecycle.score(port) > before
    other = mw.store.lifecycle.get(deploys)
    assert (other.injected, other.uses, other.evidence) == (1, 0, 1)
    [record] = read_telemetry(mw.store)
    assert record["used"] == [port.id] and set(record["injected"]) == set(inj.memory_ids)
    assert record["session"] == "s1" and record["mode"] == "contextPerTurn"


def test_nothing_is_recorded_without_an_injection_or_a_reply(mw: Middleware) -> None:
    mw.observe_reply(None, "text")
    inj = ask(mw, "Which port does the staging database use?")
    mw.observe_reply(inj, "")
    mw.flush()
    assert read_telemetry(mw.store) == []


def test_telemetry_credits_the_namespace_that_was_injected(mw: Middleware) -> None:
    alice = mw.store_for("alice")
    mem = alice.add("Alice's staging database listens on port 6543")
    inj = ask(mw, "Which port does the staging database use?", namespace="alice")
    assert inj.memory_ids == (mem.id,)
    mw.observe_reply(inj, "Port 6543.")
    mw.flush()
    assert alice.lifecycle.get(mem).uses == 1
    assert read_telemetry(mw.store) == [] and len(read_telemetry(alice)) == 1


def test_replies_read_together_credit_each_its_own_store(mw: Middleware) -> None:
    """Replies waiting for the worker are read in one job: each store gets its records, in order."""
    alice = mw.store_for("alice")
    mine = alice.add("Alice's staging database listens on port 6543")
    ours = mw.store.add("The staging database listens on port 5433")
    gate = threading.Event()
    mw.telemetry._worker.submit(gate.wait, 10)  # the worker is busy: the replies below wait together
    for n in range(3):
        a = ask(mw, f"Which port does the staging database use? ({n})", namespace="alice")
        mw.observe_reply(a, "Port 6543." if n != 1 else "No idea.")
        b = ask(mw, f"Which port does the staging database use? ({n})")
        mw.observe_reply(b, "Port 5433.")
    gate.set()
    mw.flush()
    assert [r["used"] for r in read_telemetry(alice)] == [[mine.id], [], [mine.id]]
    assert [r["used"] for r in read_telemetry(mw.store)] == [[ours.id]] * 3
    assert alice.lifecycle.get(mine).uses == 2 and mw.store.lifecycle.get(ours).uses == 3


def test_a_failure_costs_a_log_line(mw: Middleware, monkeypatch: pytest.MonkeyPatch,
                                    caplog: pytest.LogCaptureFixture) -> None:
    inj = ask(mw, "Which port does the staging database use?")
    monkeypatch.setattr("memwire.memory._store.append_jsonl_many", lambda *a, **k: 1 / 0)
    mw.observe_reply(inj, "5433")
    mw.flush()
    assert "telemetry failed (ZeroDivisionError" in caplog.text


def test_memories_in_the_profile_are_credited_too(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")
    pinned = store.add("Always answer in British English", ["instruction"], pinned=True)
    port = store.add("The staging database listens on port 5433", ["infra"])
    mw = Middleware(store=store, mode="contextPerTurn", capture="off", profile=True)
    mw.warm_up()
    inj = ask(mw, "Thanks!")  # a closer: no per-turn block, the profile still goes in
    assert inj.profile_ids and not inj.memory_ids
    mw.observe_reply(inj, "You're welcome: staging listens on 5433, in British English as always.")
    mw.flush()
    [record] = read_telemetry(store)
    assert set(record["injected"]) == {pinned.id, port.id} and set(record["used"]) == {pinned.id, port.id}
