"""The replay ledger never follows a symlink out of the memory directory: it never reads, writes,
prunes or deletes through one (that ledger stays in memory for the process, with one warning),
and a rewritten ledger file keeps its permissions. Real files on disk."""

from __future__ import annotations

import json
import logging
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memwire import MemoryStore, Middleware
from memwire.policies.modes._ledger import MAX_AGE_S, Ledger, LedgerEntry, flush

from .conftest import MEMORIES

OLD = time.time() - MAX_AGE_S - 10 * 24 * 3600  # older than the pruning age


def chat(*texts: str) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]


TURNS = ("How do I run the test suite?", "Use make test.", "And which port does staging use?")


def make_store(path: Path) -> MemoryStore:
    s = MemoryStore(path)
    s.add_many([t for t, _ in MEMORIES])
    return s


def snapshot(d: Path) -> dict[str, tuple[bytes, float, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime, stat.S_IMODE(p.stat().st_mode)) for p in sorted(d.iterdir())}


def ledger_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "ledger" in r.getMessage() and "symlink" in r.getMessage()]


def session_file(store: MemoryStore, session: str) -> Path:
    path = Ledger.load(store.path, session).path
    assert path is not None
    return path


def test_a_symlinked_ledger_dir_is_never_written_pruned_or_deleted_through(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.jsonl").write_text("a month and more of work\n")
    os.utime(outside / "precious.jsonl", (OLD, OLD))
    (outside / "recent.jsonl").write_text("today\n")
    before = snapshot(outside)
    store = make_store(tmp_path / "mem")
    os.symlink(outside, tmp_path / "mem" / ".ledger")
    mw = Middleware(store=store, mode="contextPerTurn", history="replay")
    with caplog.at_level(logging.WARNING, logger="memwire"):
        first = mw.prepare(chat(TURNS[0]), session_id="a")
        second = mw.prepare(chat(*TURNS), session_id="a")
        mw.prepare(chat(TURNS[0]), session_id="b")
        flush()
    assert snapshot(outside) == before  # nothing pruned, nothing written, nothing deleted
    assert (tmp_path / "mem" / ".ledger").is_symlink()
    # the ledger still works in memory for this process: the first turn's block is replayed in place
    assert first.injection.injected and second.injection.replayed == 1 and second.messages[0] == first.messages[0]
    assert len(ledger_warnings(caplog)) == 1  # once, not per session or per request


def test_a_symlinked_ledger_file_pointing_outside_is_never_trusted_nor_written(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = make_store(tmp_path / "mem")
    path = session_file(store, "s")
    outside = tmp_path / "outside.jsonl"
    # a well-formed ledger of this very session, with a block nobody in this directory wrote
    from memwire.policies.modes._ledger import _VERSION, _line
    from memwire.policies.modes._replay import message_keys

    key = message_keys({0: TURNS[0]})[0]  # the key of this conversation's first user message
    planted = LedgerEntry(key=key, ids=("evil",), lines=("- planted",), text="<memory>PLANTED</memory>", tokens=3)

    outside.write_text(json.dumps({"version": _VERSION, "session": "s", "saved": 0}) + "\n" + _line(planted).decode())
    before = outside.read_bytes()
    path.parent.mkdir(parents=True)
    os.symlink(outside, path)
    with caplog.at_level(logging.WARNING, logger="memwire"):
        assert Ledger.load(store.path, "s").entries == ()
        mw = Middleware(store=store, mode="contextPerTurn", history="replay")
        first = mw.prepare(chat(TURNS[0]), session_id="s")
        second = mw.prepare(chat(*TURNS), session_id="s")
        flush()
    assert "PLANTED" not in json.dumps(first.messages + second.messages)
    assert second.injection.replayed == 1  # kept in memory
    assert outside.read_bytes() == before and path.is_symlink() and os.readlink(path) == str(outside)
    assert len(ledger_warnings(caplog)) == 1


def test_a_ledger_replaced_by_a_symlink_after_it_was_saved_is_not_appended_through(tmp_path: Path) -> None:
    store = make_store(tmp_path / "mem")
    mw = Middleware(store=store, mode="contextPerTurn", history="replay")
    mw.prepare(chat(TURNS[0]), session_id="s")
    flush()
    path = session_file(store, "s")
    assert path.is_file() and not path.is_symlink()
    outside = tmp_path / "victim.txt"
    outside.write_text("do not touch\n")
    path.unlink()
    os.symlink(outside, path)
    mw.prepare(chat(*TURNS), session_id="s")  # a new turn: would be appended to the file
    flush()
    assert outside.read_text() == "do not touch\n" and path.is_symlink()
    mw.prepare(chat(*TURNS, "Fine.", "Where are the migrations?"), session_id="s")  # would be rewritten
    flush()
    assert outside.read_text() == "do not touch\n" and path.is_symlink()


def test_pruning_skips_symlinks_and_prunes_plain_old_ledgers(tmp_path: Path) -> None:
    store = make_store(tmp_path / "mem")
    ledger_dir = tmp_path / "mem" / ".ledger"
    ledger_dir.mkdir()
    outside = tmp_path / "outside.jsonl"
    outside.write_text("keep\n")
    os.utime(outside, (OLD, OLD))
    os.symlink(outside, ledger_dir / "link.jsonl")
    stale = ledger_dir / "stale.jsonl"
    stale.write_text("old\n")
    os.utime(stale, (OLD, OLD))
    Middleware(store=store, mode="contextPerTurn", history="replay").prepare(chat(TURNS[0]), session_id="new")
    flush()  # a new ledger file: pruning runs
    assert not stale.exists()  # pruning did run
    assert outside.read_text() == "keep\n" and (ledger_dir / "link.jsonl").is_symlink()


def test_a_rewritten_ledger_keeps_its_permissions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memwire.policies.modes import _ledger

    monkeypatch.setattr(_ledger, "MAX_LINES", 2)  # the third line makes the file be rewritten
    monkeypatch.setattr(_ledger, "MAX_ENTRIES", 1)  # ... with its newest entry
    store = make_store(tmp_path / "mem")
    ledger = Ledger.load(store.path, "s")
    assert ledger.path is not None
    a, b, c = LedgerEntry("a", text="A"), LedgerEntry("b", text="B"), LedgerEntry("c", text="C")
    assert ledger.commit("a", (a,))
    assert stat.S_IMODE(ledger.path.stat().st_mode) == 0o600  # a new ledger is private
    os.chmod(ledger.path, 0o640)
    inode = ledger.path.stat().st_ino
    assert ledger.commit("b", (a, b))  # appended
    assert ledger.path.stat().st_ino == inode
    assert ledger.commit("c", (a, b, c))  # past MAX_LINES: a rewrite
    assert ledger.path.stat().st_ino != inode  # it was rewritten (a new file renamed over it) ...
    assert stat.S_IMODE(ledger.path.stat().st_mode) == 0o640  # ... with the file's permissions
    assert [e.key for e in Ledger.load(store.path, "s").entries] == ["c"]
    assert [e.key for e in ledger.entries] == ["c"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_where_a_ledger_goes_does_not_block_the_request(tmp_path: Path) -> None:
    store = make_store(tmp_path / "mem")
    path = session_file(store, "s")
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    done: dict[str, Any] = {}
    t = threading.Thread(target=lambda: done.update(p=Middleware(store=store, history="replay").prepare(
        chat(TURNS[0]), session_id="s")), daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive() and done["p"].injection.injected
    flush()
    assert stat.S_ISFIFO(os.lstat(path).st_mode)
