"""The capture queue (issue 30 item 4): what a person asked to remember is on disk before the
request goes on, survives a kill at any point, is written once, and is never lost to a racing
appender, another process or a backlog."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from memwire import Middleware
from memwire._errors import MemoryFileError
from memwire.memory._capture_queue import QUEUE_NAME, WORK_NAME, FileQueue, MemoryQueue, Retry
from memwire.memory._inbox import read_log
from memwire.policies import _capture as rules
from tests.stores import StoreSpec

ROOT = Path(__file__).resolve().parents[2]
SAID = "Remember that the payroll export runs at 02:00 UTC."
STORED = "The payroll export runs at 02:00 UTC."

CHILD = """
import os, signal, sys, time
from memwire import Middleware
from memwire._errors import MemoryFileError
from memwire.middleware import _capture
from tests.stores import StoreSpec

how = sys.argv[3]
if how == "before-write":  # killed with the statement queued, before the worker writes it
    _capture.Capture._apply = lambda *a: time.sleep(3600)
else:  # killed just after the memory is written, before its event and its done mark
    _capture.Capture._event = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
mw = Middleware(store=StoreSpec(sys.argv[1], sys.argv[2])(), mode="contextPerTurn", capture="auto")
mw.prepare([{"role": "user", "content": sys.argv[4]}], session_id="monday")
print("prepared", flush=True)
time.sleep(3600)
"""


def captured(store: Any) -> list[str]:
    return [m.text for m in store.memories() if "captured" in m.tags]


def child(tmp_path: Path, spec: StoreSpec, how: str) -> subprocess.Popen[str]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMWIRE_")}, "PYTHONPATH": str(ROOT),
           "MEMWIRE_HOME": str(tmp_path / "home"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.Popen([sys.executable, "-c", CHILD, spec.backend, spec.where, how, SAID], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, text=True)


def restart(spec: StoreSpec) -> Any:
    """A new process's middleware on the same store: its first request finds what was left."""
    store = spec()
    mw = Middleware(store=store, mode="contextPerTurn", capture="auto")
    mw.prepare([{"role": "user", "content": "Which day is it?"}], session_id="tuesday")
    mw.flush(30)
    return store


def waiting(spec: StoreSpec) -> list[dict[str, Any]]:
    """The queued entries (the queue file, or the table's rows) and whether each was claimed."""
    if spec.backend == "markdown":
        return [json.loads(ln) | {"claimed": False} for name in (QUEUE_NAME, WORK_NAME)
                if (Path(spec.where) / name).exists()
                for ln in (Path(spec.where) / name).read_text().splitlines() if "done" not in json.loads(ln)]
    import psycopg

    with psycopg.connect(spec.where) as conn:
        try:
            rows = conn.execute("SELECT entry, claimed IS NOT NULL FROM memwire_capture_queue ORDER BY seq").fetchall()
        except psycopg.errors.UndefinedTable:
            return []
    return [entry | {"claimed": claimed} for entry, claimed in rows]


def test_a_statement_survives_a_kill_between_queueing_and_writing(tmp_path: Path, make_store: StoreSpec) -> None:
    proc = child(tmp_path, make_store, "before-write")
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "prepared\n"
        assert [(e["kind"], e["text"], e["session"]) for e in waiting(make_store)] == [("fact", STORED, "monday")]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert captured(make_store()) == []  # killed before the write
    store = restart(make_store)
    assert captured(store) == [STORED]
    assert [(e["event"], e["session"]) for e in read_log(store)] == [("captured", "monday")]
    assert waiting(make_store) == []


def test_a_consumer_killed_after_writing_does_not_write_twice(tmp_path: Path, make_store: StoreSpec) -> None:
    """Killed between the memory's write and the entry's done mark: the replay finds the memory by
    the entry's key, writes nothing twice, reinforces nothing, and appends the missing event."""
    proc = child(tmp_path, make_store, "after-write")
    assert proc.wait(60) == -signal.SIGKILL
    assert [e["claimed"] or make_store.backend == "markdown" for e in waiting(make_store)] == [True]
    assert captured(make_store()) == [STORED] and read_log(make_store()) == []
    store = restart(make_store)
    assert captured(store) == [STORED]
    assert [e["event"] for e in read_log(store)] == ["captured"]
    assert store.lifecycle.get(store.memories()[0]).evidence == 1  # not reinforced by its own replay
    assert waiting(make_store) == []
    store = restart(make_store)  # a second restart finds nothing left to do
    assert [e["event"] for e in read_log(store)] == ["captured"]


def entries(prefix: str, n: int) -> list[dict[str, Any]]:
    return [{"key": f"{prefix}-{i}", "kind": "fact", "text": f"{prefix} {i}", "session": "s", "turn": "t"}
            for i in range(n)]


def test_appends_racing_claims_are_never_lost_nor_applied_twice(tmp_path: Path) -> None:
    q = FileQueue(tmp_path)
    applied: list[str] = []
    stop = threading.Event()

    def produce(name: str) -> None:
        for e in entries(name, 300):
            q.put([e])

    def consume() -> None:
        while not stop.is_set():
            q.drain(lambda e, replayed: applied.append(e["key"]))

    consumer = threading.Thread(target=consume)
    consumer.start()
    producers = [threading.Thread(target=produce, args=(f"p{i}",)) for i in range(4)]
    for t in producers:
        t.start()
    for t in producers:
        t.join()
    stop.set()
    consumer.join()
    q.drain(lambda e, replayed: applied.append(e["key"]))
    assert sorted(applied) == sorted(e["key"] for i in range(4) for e in entries(f"p{i}", 300))
    for i in range(4):  # each producer's entries in the order it put them
        mine = [k for k in applied if k.startswith(f"p{i}-")]
        assert mine == [f"p{i}-{n}" for n in range(300)]


def _produce(path: str, name: str) -> None:
    q = FileQueue(Path(path))
    for e in entries(name, 200):
        q.put([e])


def test_processes_appending_while_another_drains(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_produce, args=(str(tmp_path), f"proc{i}")) for i in range(3)]
    for p in procs:
        p.start()
    q, applied = FileQueue(tmp_path), []
    while any(p.is_alive() for p in procs):
        q.drain(lambda e, replayed: applied.append(e["key"]))
    for p in procs:
        p.join()
    q.drain(lambda e, replayed: applied.append(e["key"]))
    assert sorted(applied) == sorted(e["key"] for i in range(3) for e in entries(f"proc{i}", 200))


def test_a_store_that_cannot_take_an_entry_keeps_it_and_those_after_it(tmp_path: Path) -> None:
    q, applied, failing = FileQueue(tmp_path), [], {"a-1"}
    q.put(entries("a", 3))

    def apply(e: dict[str, Any], replayed: bool) -> None:
        if e["key"] in failing:
            raise Retry()
        applied.append((e["key"], replayed))

    with pytest.raises(Retry):
        q.drain(apply)
    assert applied == [("a-0", False)] and (tmp_path / WORK_NAME).exists()
    q.put(entries("b", 1))  # said meanwhile: after what waits
    failing.clear()
    q.drain(apply)
    assert applied == [("a-0", False), ("a-1", True), ("a-2", True), ("b-0", False)]
    assert not (tmp_path / WORK_NAME).exists() and not (tmp_path / QUEUE_NAME).exists()

    m, seen = MemoryQueue(), []  # a PostgreSQL store's queue: the same order and the same retry
    m.put(entries("c", 2))
    failing.add("c-0")
    with pytest.raises(Retry):
        m.drain(lambda e, r: (_ for _ in ()).throw(Retry()) if e["key"] in failing else seen.append((e["key"], r)))
    failing.clear()
    m.drain(lambda e, r: seen.append((e["key"], r)))
    assert seen == [("c-0", True), ("c-1", False)]


def test_the_queue_file_never_follows_a_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_text("")
    (tmp_path / "mem").mkdir()
    (tmp_path / "mem" / QUEUE_NAME).symlink_to(outside)
    with pytest.raises((OSError, MemoryFileError)):  # O_NOFOLLOW's ELOOP, or memwire/_paths naming the link
        FileQueue(tmp_path / "mem").put(entries("x", 1))
    assert outside.read_text() == ""


@pytest.mark.parametrize("text", [
    "Remember that the API runs on port 8000.", "remember: deploys on Fridays", "please remember we use pnpm",
    "Don't forget that the staging box reboots nightly.", "Keep in mind that reviews need two approvals.",
    "Note for the future: the cache is cold on Mondays.", "For future reference, builds take ten minutes.",
    "Make a note that Ana owns billing.", "From now on, answer in Portuguese.", "Going forward use tabs.",
    "In the future, write tests first.", "Always run the linter before committing.", "Never push to main directly.",
    "Don't ever delete the prod bucket.", "Do not ever log tokens.", "You should always cite sources.",
    "I prefer dark mode.", "I'd prefer shorter answers.", "I would rather use Go.", "I'd rather not use ORMs.",
    "My preference is spaces.", "Call me Sam.", "My timezone is Europe/Lisbon.", "My  time   zone is UTC.",
    "MY EDITOR IS VIM.", "my github handle: octo", "Forget that the API runs on port 8000.", "never mind",
    "Nevermind that.", "Disregard what I said about tabs.", "ok, so remember that the DB is Postgres 16.",
    "Hey, call  me Ana.", "By the way, I really prefer short answers.", "remember I use fish",
    "What did we decide about the schema?", "Let me know the plan.", "The migration always fails.",
    "Remember?", "This is a code review of my changes.",
])
def test_the_quick_test_never_skips_a_statement(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``might_state`` and the sentence trigger only skip what the patterns would not match."""
    fast = rules.statements(text)
    monkeypatch.setattr(rules, "might_state", lambda t: True)
    monkeypatch.setattr(rules, "_TRIGGER", rules.re.compile(""))
    assert fast == rules.statements(text)


def test_the_quick_test_skips_ordinary_messages() -> None:
    for text in ("What did we decide about the schema?", "Fix the failing test in payments/test_api.py",
                 "Here is the log:\n" + "ERROR connection reset by peer\n" * 200):
        assert not rules.might_state(text)


def test_resume_writes_what_a_restart_left_without_a_request(tmp_path: Path) -> None:
    from memwire import MemoryStore
    from memwire.middleware._capture import entry_key

    store = MemoryStore(tmp_path / "mem")
    ns = store.namespace_store("team-a")
    for where, text in ((store, STORED), (ns, "The team-a standup is at 09:30.")):
        FileQueue(Path(where.path), Path(tmp_path / "mem")).put([{"key": entry_key("s", "t", "fact", text), "kind": "fact",
                                                                 "text": text, "session": "s", "turn": "t"}])
    mw = Middleware(store=store, mode="contextPerTurn", capture="auto")
    mw.capture.resume(store)
    mw.flush(30)
    assert captured(store) == [STORED]
    assert captured(store.namespace_store("team-a")) == ["The team-a standup is at 09:30."]
