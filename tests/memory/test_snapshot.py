"""The index snapshot (``DIR/.index``): checked against the files, never trusted blindly. Whatever
changed in the files, a store loaded with the snapshot is the store loaded from scratch."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memwire import MemoryStore
from memwire.memory import _snapshot, _text
from memwire.memory._index import BM25Index

QUERIES = ["apple pie recipe", "what does the team deploy on friday", "rust tabs", "garden roses in May",
           "session notes", "python"]

MAIN = """# Memory

## Notes
- Likes apple pie with cinnamon <!-- date: 2024-05-01 -->
- The team deploys on Fridays #work <!-- date: 2024-05-01 -->
- Prefers tabs over spaces in Rust #code #pinned
-
- Grows roses in the garden <!-- date: 2024-05-02 -->
  and tulips too
"""
WORK = """## Work
- Standups are at 9:30 #work <!-- date: 2024-05-03 -->
- Staging runs on Postgres 16 <!-- date: 2024-05-03 -->
- The python service is called ledgerd #python
"""


@pytest.fixture(autouse=True)
def small_snapshots(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(_snapshot, "MIN_MEMORIES", 0)
    yield


def seed(d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "MEMORY.md").write_text(MAIN)
    (d / "work.md").write_text(WORK)
    for i in range(30):  # enough memories for idf to matter
        (d / "MEMORY.md").open("a").write(f"- session note {i} about topic{i % 7} <!-- date: 2024-06-0{i % 3 + 1} -->\n")


def view(store: MemoryStore) -> dict[str, Any]:
    """Everything a reader of the store can see."""
    mems = [(m.id, m.text, m.tags, m.pinned, m.topic, m.date, m.source) for m in store]
    problems = [(p.path, p.line, p.problem) for p in store.problems]
    hits = {q: [(h.memory.id, round(h.score, 9)) for h in store.search(q, k=8, min_score=0)] for q in QUERIES}
    neighbors = {m[0]: store._index.neighbors(m[0]) for m in mems}
    return {"memories": mems, "problems": problems, "hits": hits, "neighbors": neighbors}


def from_scratch(d: Path) -> dict[str, Any]:
    (d / _snapshot.SNAPSHOT_NAME).unlink(missing_ok=True)
    return view(MemoryStore(d, track=False))


def same_size_edit(path: Path) -> None:
    """Change bytes, keep the size, put the mtime back: only the digest can tell."""
    st = path.stat()
    data = path.read_bytes()
    at = data.index(b"apple") if b"apple" in data else data.index(b"Stand")
    path.write_bytes(data[:at] + (b"apric" if b"apple" in data else b"Stond") + data[at + 5 :])
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_mtime_ns == st.st_mtime_ns and path.stat().st_size == st.st_size


def change(d: Path, kind: str, n: int) -> None:
    main, work = d / "MEMORY.md", d / "work.md"
    lines = main.read_text().split("\n")
    i = n % len(lines)
    if kind == "edit a line":
        lines[i] = lines[i].replace("e", "E", 1) + " edited"
        main.write_text("\n".join(lines))
    elif kind == "delete a line":
        del lines[i]
        main.write_text("\n".join(lines))
    elif kind == "append":
        with main.open("a") as fh:
            fh.write(f"- appended fact {n} about apple trees\n")
    elif kind == "truncate":
        main.write_bytes(main.read_bytes()[: n % max(1, main.stat().st_size)])
    elif kind == "delete a file":
        work.unlink(missing_ok=True)
    elif kind == "add a file":
        # sorts before work.md, same date as its memories: from scratch, these come first
        (d / "aa-extra.md").write_text(f"## Extra\n- an added file mentions python {n} <!-- date: 2024-05-03 -->\n"
                                       "- and Postgres staging <!-- date: 2024-05-03 -->\n")
    elif kind == "rename":
        if work.exists():
            work.rename(d / "zz-work.md")
    elif kind == "same-size edit, mtime put back":
        target = main if n % 2 or not work.exists() else work
        if b"apple" in target.read_bytes() or b"Stand" in target.read_bytes():
            same_size_edit(target)
    elif kind == "swap two files' contents" and work.exists():
        a, b = main.read_bytes(), work.read_bytes()
        main.write_bytes(b)
        work.write_bytes(a)
    elif kind in ("nothing", "swap two files' contents"):
        pass
    else:  # pragma: no cover
        raise AssertionError(kind)


KINDS = ["edit a line", "delete a line", "append", "truncate", "delete a file", "add a file", "rename",
         "same-size edit, mtime put back", "swap two files' contents", "nothing"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=3), n=st.integers(0, 10_000))
@example(kinds=["same-size edit, mtime put back"], n=1)
@example(kinds=["same-size edit, mtime put back"], n=0)
@example(kinds=["nothing"], n=0)
def test_a_store_loaded_with_the_snapshot_is_the_store_loaded_from_scratch(
    tmp_path_factory: pytest.TempPathFactory, kinds: list[str], n: int
) -> None:
    d = tmp_path_factory.mktemp("store")
    seed(d)
    MemoryStore(d, track=False).memories()  # the first load writes the snapshot
    assert (d / _snapshot.SNAPSHOT_NAME).is_file()
    for i, kind in enumerate(kinds):
        change(d, kind, n + i)
    got = view(MemoryStore(d, track=False))
    assert got == from_scratch(d)


def test_an_unchanged_store_is_restored_without_parsing_or_indexing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed(tmp_path)
    want = view(MemoryStore(tmp_path, track=False))
    calls: list[str] = []
    monkeypatch.setattr(BM25Index, "add_many", lambda self, docs: calls.append("index"))
    monkeypatch.setattr("memwire.memory._store_files.parse", lambda *a: calls.append("parse"))
    assert view(MemoryStore(tmp_path, track=False)) == want
    assert calls == []


def test_a_same_size_edit_with_the_mtime_put_back_is_parsed_again(tmp_path: Path) -> None:
    seed(tmp_path)
    MemoryStore(tmp_path, track=False).memories()
    same_size_edit(tmp_path / "MEMORY.md")
    texts = [m.text for m in MemoryStore(tmp_path, track=False)]
    assert "Likes apric pie with cinnamon" in texts and "Likes apple pie with cinnamon" not in texts


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "foreign version", "another analysis", "other directory",
                                    "a directory"])
def test_a_damaged_or_foreign_snapshot_is_ignored_and_written_again(tmp_path: Path, damage: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    seed(tmp_path / "s")
    d = tmp_path / "s"
    want = view(MemoryStore(d, track=False))
    snap = d / _snapshot.SNAPSHOT_NAME
    good = snap.read_bytes()
    assert good.startswith(b"PK")
    if damage == "truncated":
        snap.write_bytes(good[: len(good) // 2])
    elif damage == "garbage":
        snap.write_bytes(os.urandom(4096))
    elif damage == "empty":
        snap.write_bytes(b"")
    elif damage == "foreign version":
        monkeypatch.setattr(_snapshot, "FORMAT", _snapshot.FORMAT + 1)
    elif damage == "another analysis":  # e.g. a new stopword: the recorded terms are not today's
        monkeypatch.setattr("memwire.memory._text.STOPWORDS", _text.STOPWORDS | {"apple"})
    elif damage == "other directory":  # a copied directory: the snapshot names where it was made
        shutil.copytree(d, tmp_path / "copy")
        d, want = tmp_path / "copy", None
    elif damage == "a directory":
        snap.unlink()
        snap.mkdir()
    got = view(MemoryStore(d, track=False))
    assert got == (from_scratch(d) if want is None or damage == "another analysis" else want)
    if damage != "a directory":  # written again, and used next time
        calls: list[str] = []
        monkeypatch.setattr(BM25Index, "add_many", lambda self, docs: calls.append("index"))
        assert view(MemoryStore(d, track=False))["memories"] == got["memories"]
        assert calls == []


def test_adds_are_in_the_snapshot_written_at_exit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memwire.memory import _store

    seed(tmp_path)
    store = MemoryStore(tmp_path, track=False)
    store.memories()
    store.add("Added after the first load about apple cider", date="2024-06-01")
    _store._save_snapshots()  # what atexit runs
    calls: list[str] = []
    monkeypatch.setattr(BM25Index, "add_many", lambda self, docs: calls.append("index"))
    got = view(MemoryStore(tmp_path, track=False))
    assert calls == []
    monkeypatch.undo()
    monkeypatch.setattr(_snapshot, "MIN_MEMORIES", 0)
    assert got == from_scratch(tmp_path)
    assert "Added after the first load about apple cider" in [m[1] for m in got["memories"]]


def test_small_stores_write_no_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_snapshot, "MIN_MEMORIES", 1000)
    seed(tmp_path)
    MemoryStore(tmp_path, track=False).memories()
    assert not (tmp_path / _snapshot.SNAPSHOT_NAME).exists()
