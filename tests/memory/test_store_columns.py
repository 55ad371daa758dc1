"""The markdown store keeps memories as columns (``_table``): what it shows is what a store reading
the files from scratch shows, whatever was written in between; a snapshot restores the columns
without building a ``Memory`` per memory, and the index shares the tables' id strings."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memwire import MemoryStore
from memwire.memory import _model as model
from memwire.memory import _snapshot, _store
from memwire.memory._model import Memory
from memwire.memory._table import Merged, Table

QUERIES = ["apple pie", "deploy friday", "rust tabs", "garden roses", "session note", "python staging"]


def view(store: MemoryStore, ordered: bool = True) -> dict[str, Any]:
    """What a reader sees: every memory with all its fields, lookups, and (the memories being
    undated, so no conversation neighbors) the search results with their scores. ``ordered=False``:
    an add shows its memory last until the files are read again, where a fresh read has it at the
    end of ``MEMORY.md``, before the topic files' (as before the columns: placing it costs O(n))."""
    mems = [(m.id, m.text, m.tags, m.pinned, m.topic, m.date, m.source) for m in store]
    return {"memories": mems if ordered else sorted(mems), "len": len(store), "get": [store.get(m[0]) == store.known([m[0]])[0] for m in mems],
            "hits": {q: [(h.memory.id, h.memory.tags, round(h.score, 9)) for h in store.search(q, k=6, min_score=0)]
                     for q in QUERIES}}


def scratch(d: Path, global_dir: Path | None = None, ordered: bool = True) -> dict[str, Any]:
    for where in (d, global_dir):
        if where is not None:
            (where / _snapshot.SNAPSHOT_NAME).unlink(missing_ok=True)
    return view(MemoryStore(d, global_dir=global_dir, track=False), ordered)


def seed(home: Path, proj: Path) -> None:
    home.mkdir()
    proj.mkdir()
    (home / "MEMORY.md").write_text("## Global\n- Likes apple pie #food\n- Prefers tabs in Rust #code\n")
    (proj / "MEMORY.md").write_text("## Notes\n" + "".join(f"- session note {i} about topic{i % 5}\n" for i in range(12)))
    (proj / "work.md").write_text("## Work\n- The team deploys on Fridays #work\n- Staging runs python 3.12\n")


OPS = st.lists(st.tuples(st.sampled_from(["add", "add again tagged", "add to a topic", "pin", "forget", "hand append",
                                          "global add", "new topic file"]), st.integers(0, 50)), min_size=1, max_size=6)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_a_store_that_wrote_shows_what_a_store_reading_the_files_shows(tmp_path_factory: pytest.TempPathFactory,
                                                                        ops: list[tuple[str, int]]) -> None:
    root = tmp_path_factory.mktemp("cols")
    home, proj = root / "home", root / "proj"
    seed(home, proj)
    store = MemoryStore(proj, global_dir=home, track=False)
    store.memories()
    for op, n in ops:
        mems = store.memories()
        if op == "add":
            store.add(f"fact {n} about garden roses")
        elif op == "add again tagged":  # already stored (maybe only in the global scope): tags merge into its line
            store.add(mems[n % len(mems)].text, tags=[f"t{n}"])
        elif op == "add to a topic":  # not the file's last topic: the file is replaced, then re-read
            store.add(f"fact {n} about deploy days", topic="Work" if n % 2 else "Notes")
        elif op == "pin":
            store.pin(mems[n % len(mems)].id, pinned=bool(n % 2))
        elif op == "forget" and len(mems) > 1:
            store.forget(mems[n % len(mems)].id)
        elif op == "hand append":
            with (proj / "MEMORY.md").open("a") as fh:
                fh.write(f"- hand written {n} about rust tabs\n")
        elif op == "global add":
            MemoryStore(home, track=False).add(f"global fact {n} about python", tags=["global"])
        elif op == "new topic file":
            (proj / f"t{n}.md").write_text(f"## T{n}\n- topic file fact {n} about apple pie\n")
        assert view(store, ordered=False) == scratch(proj, home, ordered=False)


def test_an_add_that_creates_memory_md_beside_other_files_merges_it(tmp_path: Path) -> None:
    (tmp_path / "work.md").write_text("## Work\n- The team deploys on Fridays\n")
    store = MemoryStore(tmp_path, track=False)
    assert len(store) == 1
    new = store.add("Staging runs python 3.12")  # a new table beside the topic file's
    assert [m.text for m in store] == ["Staging runs python 3.12", "The team deploys on Fridays"]
    assert [h.memory.id for h in store.search("python staging")] == [new.id]
    assert view(store) == scratch(tmp_path)


@pytest.fixture
def small_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_snapshot, "MIN_MEMORIES", 0)


def big_seed(d: Path, n: int = 60) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "MEMORY.md").write_text("## Notes\n" + "".join(f"- session note {i} about topic{i % 7} at 5€ #t{i % 3}\n" for i in range(n)))
    (d / "work.md").write_text("## Work\n- The team deploys on Fridays #work\n- Staging runs python 3.12 #pinned\n")


@pytest.mark.usefixtures("small_snapshots")
def test_a_restored_store_builds_only_the_memories_it_returns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big_seed(tmp_path)
    MemoryStore(tmp_path, track=False).memories()  # writes the snapshot
    built: list[str] = []
    original = Table._memory
    monkeypatch.setattr(Table, "_memory", lambda self, mid, row: (built.append(mid), original(self, mid, row))[1])
    store = MemoryStore(tmp_path, track=False)
    hits = store.search("session note topic3", k=3)
    assert len(hits) == 3 and len(built) <= 3 + _store._PRIOR_POOL  # what the index found, not 62


@pytest.mark.usefixtures("small_snapshots")
def test_the_restored_index_holds_the_tables_id_strings(tmp_path: Path) -> None:
    big_seed(tmp_path)
    MemoryStore(tmp_path, track=False).memories()
    store = MemoryStore(tmp_path, track=False)
    assert len(store) == 62
    keys = {mid: mid for d in store._dirs for t in d.tables() for mid in t.ids()}
    index_ids = [mid for mid in store._index.export()["ids"] if mid is not None]
    assert sorted(index_ids) == sorted(keys) and all(mid is keys[mid] for mid in index_ids)  # one string per id


@pytest.mark.usefixtures("small_snapshots")
def test_a_restored_store_then_written_to_is_the_store_from_scratch(tmp_path: Path) -> None:
    big_seed(tmp_path)
    MemoryStore(tmp_path, track=False).memories()
    store = MemoryStore(tmp_path, track=False)
    store.add("session note 99 about topic3", tags=["t0"])  # a kind the restored table has
    store.add("a new kind of fact about apple pie", tags=["food"], pinned=True, date="2024-05-01")
    store.pin(store.memories()[4].id)
    store.add(store.memories()[0].text, tags=["again"])
    assert view(store) == scratch(tmp_path)


@pytest.mark.usefixtures("small_snapshots")
def test_a_one_file_store_written_to_round_trips_through_the_snapshot(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """One memory file (its rows and the index's slots looked up all at once when saving), with
    forgotten memories (free slots in the index) and adds: the snapshot restores it as it was."""
    (tmp_path / "MEMORY.md").write_text("## Notes\n" + "".join(f"- session note {i} about topic{i % 5}\n" for i in range(40)))
    store = MemoryStore(tmp_path, track=False)
    for m in store.memories()[3:9]:
        store.forget(m.id)
    store.add("a new fact about apple pie")
    store.add("session note 77 about garden roses", date="2024-05-01")
    store._save_snapshot()  # what exit does
    want = view(store)
    monkeypatch.setattr(_store.BM25Index, "add_many", lambda *a: pytest.fail("the index was rebuilt"))
    again = MemoryStore(tmp_path, track=False)
    assert view(again) == want
    table = again._dirs[0].files["MEMORY.md"]
    assert all(mid is table._ids[table._row[mid]] for mid in again._index._data.ids if mid is not None)


@pytest.mark.usefixtures("small_snapshots")
def test_colliding_ids_survive_the_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(model, "ID_CHARS", 1)  # 16 possible ids: within a file and across files they collide
    (tmp_path / "MEMORY.md").write_text("".join(f"- fact number {i} about apple\n" for i in range(20)))
    (tmp_path / "more.md").write_text("".join(f"- fact number {i} about rust\n" for i in range(20, 40)))
    with caplog.at_level(logging.WARNING, logger="memwire"):
        want = view(MemoryStore(tmp_path, track=False))
        assert (tmp_path / _snapshot.SNAPSHOT_NAME).is_file()
        got = view(MemoryStore(tmp_path, track=False))
    assert got == want and len({m[0] for m in got["memories"]}) == 40


@pytest.mark.usefixtures("small_snapshots")
@pytest.mark.parametrize("damage", ["kind out of range", "ends past the text", "an id twice", "fewer ends",
                                    "ends out of order", "a cut inside a character", "not UTF-8"])
def test_a_snapshot_whose_columns_do_not_fit_is_ignored(tmp_path: Path, damage: str) -> None:
    """A well-formed archive with columns that cannot be right (a bug, a hand edit): the files are
    read again, never a memory made of the wrong bytes."""
    big_seed(tmp_path)
    want = view(MemoryStore(tmp_path, track=False))
    snap = tmp_path / _snapshot.SNAPSHOT_NAME
    with np.load(snap) as z:
        arrays = {k: z[k] for k in z.files}
    if damage == "kind out of range":
        arrays["m_kind"] = arrays["m_kind"].copy()
        arrays["m_kind"][3] = 10_000
    elif damage == "ends past the text":
        arrays["m_end"] = arrays["m_end"] + 5
    elif damage == "an id twice":
        ids = arrays["m_id"].tobytes().decode().split("\n")
        ids[1] = ids[0]
        arrays["m_id"] = np.frombuffer("\n".join(ids).encode(), dtype=np.uint8)
    elif damage == "fewer ends":
        arrays["m_end"] = arrays["m_end"][1:]
    elif damage == "ends out of order":
        arrays["m_end"] = arrays["m_end"].copy()
        arrays["m_end"][[2, 3]] = arrays["m_end"][[3, 2]]
    elif damage == "a cut inside a character":  # every text ends with "€": the next would start mid-character
        arrays["m_end"] = arrays["m_end"].copy()
        arrays["m_end"][0] -= 1
    elif damage == "not UTF-8":
        arrays["m_text"] = arrays["m_text"].copy()
        arrays["m_text"][5] = 0xFF
    with snap.open("wb") as fh:
        np.savez(fh, **arrays)
    assert view(MemoryStore(tmp_path, track=False)) == want


def test_a_large_load_gives_the_heap_back_and_a_small_one_does_not_bother(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(_store, "_trim_heap", lambda: calls.append(1))
    monkeypatch.setattr(_snapshot, "MIN_MEMORIES", 50)
    big_seed(tmp_path / "big")
    big_seed(tmp_path / "small", n=10)
    MemoryStore(tmp_path / "big", track=False).memories()
    MemoryStore(tmp_path / "big", track=False).memories()  # from the snapshot
    MemoryStore(tmp_path / "small", track=False).memories()
    assert calls == [1, 1]
    _store._trim_heap()  # the real one: glibc's malloc_trim here, nothing where there is none


# ------------------------------------------------------------------ the tables themselves


def mem(text: str, tags: tuple[str, ...] = (), pinned: bool = False, topic: str | None = "T", date: str | None = None) -> Memory:
    return Memory.create(text, tags, pinned, topic, date)


def test_a_table_gives_back_what_it_was_given() -> None:
    given = [mem("one"), mem("deux €", ("a", "b")), mem("three", pinned=True, topic=None, date="2024-05-01"), mem("one")]
    table = Table.of("/x/MEMORY.md", given)
    assert len(table) == 3 and list(table.ids()) == [m.id for m in given[:3]]
    assert list(table.memories()) == given[:3] and all(m.source == "/x/MEMORY.md" for m in table.memories())
    assert table.get(given[1].id) == given[1] and table.get("nope") is None
    assert table.get(given[1].id, as_id="longer").id == "longer"
    assert len(table._kinds) == 3 and Table.of("s", [mem("a"), mem("b"), mem("c")])._kinds == [((), False, "T", None)]
    again = Table.restore("/x/MEMORY.md", *table.columns())
    assert list(again.memories()) == given[:3]
    assert again.append(mem("four", ("a", "b"))) and again.get(mem("four").id) == mem("four", ("a", "b"))


@pytest.mark.parametrize("other", [mem("one", ("x",)), mem("one", pinned=True), mem("one", topic="U"),
                                   mem("one", date="2024"), mem("One")])
def test_tables_compare_rows_as_memories_compare(other: Memory) -> None:
    a, b, c = Table.of("a", [mem("one")]), Table.of("b", [other]), Table.of("c", [mem("zero"), mem("one")])
    assert a.same(mem("one").id, c, mem("one").id)  # another row and another file: the same memory
    assert a.same(mem("one").id, b, other.id) == (mem("one") == b.get(other.id))
    assert not a.same(mem("one").id, c, "missing") and a.same("missing", c, "missing")


def test_merged_order_and_precedence() -> None:
    g = Table.of("g", [mem("shared"), mem("global only")])
    p1 = Table.of("p1", [mem("project only"), mem("shared", ("project",))])
    p2 = Table.of("p2", [mem("shared", ("second file",)), mem("later")])
    merged = Merged.of([[g], [p1, p2]])
    assert [m.text for m in merged.values()] == ["shared", "global only", "project only", "later"]
    assert merged.get(mem("shared").id) == mem("shared", ("project",))  # the project's, first file of it
    assert len(merged) == 4 and mem("later").id in merged and "nope" not in merged
    single = Merged.of([[g], []])
    assert single.get(mem("global only").id) == mem("global only")
    g.append(mem("appended"))  # one table: the view is the table
    assert [m.text for m in single.values()] == ["shared", "global only", "appended"]
    single.put(mem("project only").id, p1)  # a second table: from then on by id
    assert [m.text for m in single.values()] == ["shared", "global only", "appended", "project only"]
    assert single.same(mem("shared").id, Merged.of([[g]])) and not single.same(mem("shared").id, merged)


def test_memories_are_built_outside_the_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A million memories take seconds to build: a search meanwhile must not wait (or, on a time
    budget, find the store busy)."""
    big_seed(tmp_path)
    store = MemoryStore(tmp_path, track=False)
    store.memories()
    free: list[bool] = []
    original = Table._memory

    def build(self: Table, mid: str, row: int) -> Memory:
        if not free:
            def other() -> None:  # another thread, as a search would
                free.append(store._lock.acquire(blocking=False))
                if free[0]:
                    store._lock.release()

            t = threading.Thread(target=other)
            t.start()
            t.join()
        return original(self, mid, row)

    monkeypatch.setattr(Table, "_memory", build)
    assert len(store.memories()) == 62 and free == [True]
