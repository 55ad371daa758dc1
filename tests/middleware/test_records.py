"""Per-request records: what memwire did and what the provider reported, bounded, never text."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from memwire.middleware._core import Injection
from memwire.middleware._records import Record, Records, read_records, record_of
from memwire.middleware._usage import Usage

INJ = Injection("contextPerTurn", ("a1", "b2"), "<memory>secret plans</memory>", 40, elapsed_ms=1.23456,
                session="s1", namespace="team", replayed=3, profile_tokens=12)


def test_a_record_holds_counts_and_ids_never_text() -> None:
    r = record_of(INJ, "anthropic.messages", "claude-sonnet-4-5", 200, Usage(1000, 800, 100, 50), at=5.0)
    assert r == Record(5.0, "anthropic.messages", "claude-sonnet-4-5", 200, "team", "s1", "contextPerTurn",
                       memory_ids=("a1", "b2"), replayed=3, block_tokens=40, profile_tokens=12, added_ms=1.235,
                       prompt_tokens=1000, cached_tokens=800, cache_write_tokens=100, output_tokens=50,
                       provider="anthropic")
    assert r.injected == 2 and "secret" not in json.dumps(r.__dict__)


def test_a_skipped_turn_injected_nothing_and_unknown_usage_stays_unknown() -> None:
    skipped = Injection("contextPerTurn", ("a1",), "", 9, skipped="gate", session="s")
    r = record_of(skipped, "openai.chat", "gpt-4o", 200, None)
    assert (r.injected, r.block_tokens, r.skipped, r.prompt_tokens, r.cached_tokens) == (0, 0, "gate", None, None)
    passed = record_of(None, "openai.responses", "gpt-4o", 502, None)
    assert (passed.mode, passed.session, passed.status, passed.provider) == ("", "", 502, "openai")


def test_the_ring_keeps_the_latest_and_filters(tmp_path: Path) -> None:
    records = Records(size=3)
    for i in range(5):
        records.add(record_of(INJ if i % 2 else None, "openai.chat", "m", 200, None, at=float(i)))
    assert [r.at for r in records.recent()] == [2.0, 3.0, 4.0]
    assert [r.at for r in records.recent(namespace="team")] == [3.0]
    assert [r.at for r in records.recent(1)] == [4.0]
    assert records.recent(session="nobody") == []


def test_the_log_file_round_trips_and_a_failing_listener_costs_a_log_line(tmp_path: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    seen: list[Record] = []
    records = Records(path=tmp_path / "requests.jsonl")
    records.listeners += [lambda r: 1 / 0, seen.append]
    r = record_of(INJ, "openai.chat", "gpt-4o", 200, Usage(10, 5))
    with caplog.at_level(logging.WARNING, "memwire"):
        records.add(r)
    assert seen == [r] and "not counted" in caplog.text
    (tmp_path / "requests.jsonl").open("a").write("not json\n")
    assert read_records(tmp_path / "requests.jsonl") == [r]
    assert [x.rid for x in read_records(tmp_path / "requests.jsonl")] == [r.rid]  # rid is not compared by ==
    assert json.loads((tmp_path / "requests.jsonl").read_text().splitlines()[0]) == {**r.__dict__, "memory_ids": ["a1", "b2"]}


def test_request_ids_differ_across_processes_even_forked_ones() -> None:
    import os

    from memwire.middleware._records import Record, next_rid

    mine = [next_rid() for _ in range(3)] + [Record(at=0.0, api="openai.chat", model="m", status=200).rid]
    assert len(set(mine)) == 4 and len({r[:10] for r in mine}) == 1  # one prefix, then a count
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a worker forked from a process that already made ids
        os.write(write, next_rid().encode())
        os._exit(0)
    os.waitpid(pid, 0)
    theirs = os.read(read, 64).decode()
    os.close(read), os.close(write)
    assert theirs[:10] != mine[0][:10]


def test_records_kept_in_the_stores_together_each_in_its_namespace(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """Records waiting for the background writer are appended together, each namespace's to its
    own store, in order; a store that cannot be written costs a log line naming how many."""
    import threading

    from memwire import MemoryStore
    from memwire.middleware._records import SharedRecords, stored_records

    stores = {None: MemoryStore(tmp_path / "default"), "alice": MemoryStore(tmp_path / "alice")}

    def store_for(namespace: str | None) -> MemoryStore:
        if namespace == "broken":
            raise OSError("disk gone")
        return stores[namespace]

    kept, gate = SharedRecords(store_for), threading.Event()
    kept._worker.submit(gate.wait, 10)  # busy: the records below wait together
    made = [Record(at=float(i), api="openai.chat", model="m", status=200, namespace=ns, session=f"s{i}")
            for i, ns in enumerate(["", "alice", "", "broken", "alice", ""])]
    for r in made:
        kept.offer(r)
    gate.set()
    kept.flush(10)
    assert [r.session for r in stored_records(stores[None])] == ["s0", "s2", "s5"]
    assert [r.session for r in stored_records(stores["alice"])] == ["s1", "s4"]
    assert stored_records(stores[None])[0] == made[0]
    assert "requests' records not kept in the store (1 of them; OSError: details not logged)" in caplog.text
