"""The replay ledger in PostgreSQL: replicas share one session's ledger (a real server)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from memwire.policies.modes import _ledger
from memwire.policies.modes._ledger_pg import PgLedger, prune
from memwire.policies.modes._ledger import LedgerEntry
from tests.stores import need_psycopg


@pytest.fixture
def connect(postgres_url: str) -> Any:
    """Connections to a fresh schema, migrated as a store's first use does."""
    from memwire.memory.postgres import _pg

    return _pg.database(postgres_url).connection


def entry(key: str, *ids: str) -> LedgerEntry:
    return LedgerEntry(key, ids, tuple(f"- memory {i}" for i in ids), "".join(f"- memory {i}\n" for i in ids), 3 * len(ids))


def test_a_turn_committed_on_one_replica_is_what_the_other_sees(connect: Any) -> None:
    a, b = PgLedger.open(connect, "ns", "s1"), PgLedger.open(connect, "ns", "s1")
    assert a.commit("k#1", [entry("k#1", "m1")])
    assert not b.commit("k#1", [entry("k#1", "m2")])  # the first writer of a turn wins, whoever asks later
    assert b.get("k#1") == entry("k#1", "m1")
    assert a.commit("k2#1", [entry("k#1", "m1"), entry("k2#1", "m3")])
    b.sync()
    assert [e.key for e in b.entries] == ["k#1", "k2#1"] and b.get("k2#1") == entry("k2#1", "m3")
    fresh = PgLedger.open(connect, "ns", "s1")  # a replica that starts now reads the whole ledger
    assert fresh.entries == a.entries
    assert PgLedger.open(connect, "other", "s1").entries == ()  # namespaces do not share sessions


def test_racing_replicas_settle_on_one_block(connect: Any) -> None:
    views = [PgLedger.open(connect, "ns", "race") for _ in range(6)]
    barrier, won = threading.Barrier(len(views)), []

    def run(i: int) -> None:
        barrier.wait()
        if views[i].commit("k#1", [entry("k#1", f"m{i}")]):
            won.append(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(views))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1
    for v in views:
        v.sync()
        assert v.get("k#1") == entry("k#1", f"m{won[0]}")


def test_profile_and_memos_are_shared(connect: Any) -> None:
    a, b = PgLedger.open(connect, "ns", "s"), PgLedger.open(connect, "ns", "s")
    profile = entry(_ledger.PROFILE_KEY, "p1")
    assert a.set_profile(profile) == profile
    assert b.set_profile(entry(_ledger.PROFILE_KEY, "p2")) == profile
    memo = entry(_ledger.MEMO_PREFIX + "turn", "m1")
    assert b.settle_memo(memo) == memo and a.settle_memo(entry(_ledger.MEMO_PREFIX + "turn", "m9")) == memo


def test_a_compaction_is_seen_whole_by_every_replica(connect: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import memwire.policies.modes._ledger_pg as pg

    monkeypatch.setattr(pg, "MAX_LINES", 8)
    monkeypatch.setattr(_ledger, "MAX_ENTRIES", 3)
    a, b = PgLedger.open(connect, "ns", "s"), PgLedger.open(connect, "ns", "s")
    keys = [f"k{i}#1" for i in range(10)]
    for i, key in enumerate(keys):
        a.commit(key, [*a.entries, entry(key, f"m{i}")])
        b.sync()
        assert b.entries == a.entries, i
    assert len(a.entries) <= 8 and a.entries[-1].key == "k9#1"
    with connect() as conn:
        rows = conn.execute("SELECT count(*) FROM memwire_ledger_lines").fetchone()[0]
    assert rows <= 8  # the compaction removed the old rows


def test_unreachable_database_goes_on_in_memory(caplog: pytest.LogCaptureFixture) -> None:
    need_psycopg()
    from memwire.memory.postgres import _pg

    down = _pg.database("postgresql://postgres@127.0.0.1:1/ledger-test").connection  # a closed port (its own URL: an outage is said once per URL and process)
    ledger = PgLedger.open(down, "ns", "s")
    assert ledger.commit("k#1", [entry("k#1", "m1")]) and ledger.get("k#1") == entry("k#1", "m1")
    assert not ledger.commit("k#1", [entry("k#1", "m2")])
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(said) == 1 and "is unavailable" in said[0]  # once per outage, by the database


def test_old_sessions_are_pruned(connect: Any) -> None:
    a = PgLedger.open(connect, "ns", "old")
    a.commit("k#1", [entry("k#1", "m1")])
    PgLedger.open(connect, "ns", "new").commit("k#1", [entry("k#1", "m1")])
    with connect() as conn:
        conn.execute("UPDATE memwire_ledger_sessions SET touched = now() - interval '40 days' WHERE session = 'old'")
        assert prune(conn, 30 * 86400) == 1
        left = conn.execute("SELECT DISTINCT session FROM memwire_ledger_lines").fetchall()
    assert left == [("new",)]
