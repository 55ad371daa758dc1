"""memwire export / import: a namespace, whole, between stores, without loss."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from memwire import InvalidMemoryError, MemoryStore
from memwire.memory._inbox import inbox_of, log_event
from memwire.memory._transfer import export_store, import_export


def _filled(store: Any) -> Any:
    """A namespace with something of everything: topics, tags, a pin, a date, an archive, an
    inbox, lifecycle records with counts, and both event logs."""
    a = store.add("Build with `make build`, never call setup.py", tags=["build"], topic="Build")
    store.add("User prefers tabs over spaces", tags=["preference"], pinned=True, topic="Style")
    store.add("Release notes go in CHANGES.md", topic="Build", date="2026-01-05", cue="captured")
    store.add("The staging database is Postgres 15 on port 5433", tags=["infra"], cue="distilled")
    gone = store.add("We deploy on Fridays")
    store.forget(gone.id)
    store.lifecycle.reinforce([a.id], used=True)
    store.lifecycle.injected([a.id, a.id])
    inbox_of(store).add("Tests run with `pytest -q`", tags=["captured"])
    log_event(store, "captured", a, {"session": "s1"})
    store.append_event("telemetry", {"session": "s1", "injected": [a.id], "used": [a.id]})
    store.lifecycle.flush()
    if isinstance(store, MemoryStore):  # a line written by hand: nobody recorded it, nor will the target
        with open(store.path / "MEMORY.md", "a") as fh:
            fh.write("- Hand-written: the CI runs on two cores\n")
    return store


def _dump(store: Any) -> list[dict[str, Any]]:
    buf = io.StringIO()
    export_store(store, buf)
    lines = [json.loads(ln) for ln in buf.getvalue().splitlines()]
    return lines[1:]  # the header holds the time of export


def _moved(src: Any, dst: Any) -> None:
    buf = io.StringIO()
    export_store(src, buf)
    buf.seek(0)
    import_export(dst, buf)


def test_round_trip_between_directories_is_lossless(tmp_path: Path) -> None:
    src = _filled(MemoryStore(tmp_path / "a"))
    dst = MemoryStore(tmp_path / "b")
    _moved(src, dst)
    before, after = _dump(src), _dump(dst)
    assert after == before
    kinds = [ln["kind"] for ln in after]
    assert kinds.count("memory") == 5 and kinds.count("archive") == 1 and kinds.count("inbox") == 1
    assert kinds.count("event") == 2
    metas = {ln["text"]: ln["meta"] for ln in after if ln["kind"] == "memory"}
    build = metas["Build with `make build`, never call setup.py"]
    assert build["evidence"] == 2 and build["uses"] == 1 and build["injected"] == 2
    assert metas["Release notes go in CHANGES.md"]["cue"] == "captured"
    assert metas["Release notes go in CHANGES.md"]["created"].startswith("2026-01-05")
    assert metas["Hand-written: the CI runs on two cores"] is None
    # what the target's files say, read by a fresh process
    fresh = MemoryStore(tmp_path / "b")
    assert {m.text for m in fresh.pinned()} == {"User prefers tabs over spaces"}
    assert fresh.search("how do I build?", k=1)[0].memory.text.startswith("Build with")


def test_import_again_adds_nothing_and_keeps_counts_exact_for_new_memories(tmp_path: Path) -> None:
    src = _filled(MemoryStore(tmp_path / "a"))
    buf = io.StringIO()
    export_store(src, buf)
    dst = MemoryStore(tmp_path / "b")
    first = import_export(dst, io.StringIO(buf.getvalue()))
    assert first.added == {"memory": 5, "archive": 1, "inbox": 1} and first.already["memory"] == 0
    again = import_export(dst, io.StringIO(buf.getvalue()), dry_run=True)
    assert again.added == {"memory": 0, "archive": 0, "inbox": 0} and again.already["memory"] == 5


def test_a_damaged_line_changes_nothing(tmp_path: Path) -> None:
    src = _filled(MemoryStore(tmp_path / "a"))
    buf = io.StringIO()
    export_store(src, buf)
    lines = buf.getvalue().splitlines()
    dst = MemoryStore(tmp_path / "b")
    for bad, what in ((lines[:-1] + ['{"kind": "memory", "text": 5}'], "cannot be read back"),
                      (lines + ['{"kind": "secret"}'], "unknown kind"),
                      (lines + ["{not json"], "not a JSON line"),
                      (lines + ['{"kind": "memory", "text": "x", "tags": ["no spaces allowed"]}'], "invalid tag"),
                      (lines[1:], "not a memwire export")):
        with pytest.raises(InvalidMemoryError, match=what):
            import_export(dst, io.StringIO("\n".join(bad) + "\n"), "dump.jsonl")
    assert len(dst) == 0 and len(dst.archive) == 0 and not (tmp_path / "b").exists()


def test_markdown_to_postgresql_and_back_is_lossless(tmp_path: Path, postgres_url: str) -> None:
    from memwire.memory.postgres._store import PgStore

    src = _filled(MemoryStore(tmp_path / "a"))
    db = PgStore(postgres_url, "alice")
    _moved(src, db)
    back = MemoryStore(tmp_path / "b")
    _moved(PgStore(postgres_url, "alice"), back)  # another replica's view of the namespace
    assert _dump(db) == _dump(src) == _dump(back)
    assert _dump(PgStore(postgres_url, "bob")) == []  # namespaces stay apart
    hit = PgStore(postgres_url, "alice").search("how do I build?", k=1)[0]
    assert hit.memory.text.startswith("Build with")
