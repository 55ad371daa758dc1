"""The ``Store`` contract, member by member, on both backends (``make_store``: markdown and
PostgreSQL). ``tests/memory/test_store.py`` holds the rest of the backend-neutral behaviour
(concurrent writers, id prefixes, order, limits); ``test_protocol.py`` the signatures.

``CONTRACT`` names the test of each member of the protocol: a member added to ``Store`` without a
test here fails ``test_every_member_of_the_protocol_has_a_contract_test``.
"""

from __future__ import annotations

import sys
import time
import typing
from pathlib import Path
from typing import Any

import pytest

from memwire._errors import MemoryNotFoundError, UsageError
from memwire.memory._capture_queue import FileQueue, PgQueue
from memwire.memory._protocol import Store

from ..stores import StoreSpec

CONTRACT: dict[str, str] = {}


def covers(*members: str) -> Any:
    """Marks a test as the contract test of ``members``."""
    def mark(test: Any) -> Any:
        for m in members:
            CONTRACT[m] = test.__name__
        return test
    return mark


def _protocol_members() -> set[str]:
    data = set(typing.get_type_hints(Store))
    return data | {name for name, value in vars(Store).items()
                   if (callable(value) or isinstance(value, property))
                   and (not name.startswith("_") or name in ("__iter__", "__len__", "__contains__"))}


@covers("remote", "track", "settles", "min_score", "scoring", "location")
def test_settings_and_location(make_store: StoreSpec) -> None:
    from memwire.memory._lifecycle import Scoring

    scoring = Scoring()
    store = make_store(min_score=0.25, scoring=scoring)
    assert isinstance(store, Store)
    assert store.min_score == 0.25 and store.scoring is scoring and store.track is True
    assert store.remote is (make_store.backend == "postgres")
    assert store.archive.track is False and store.inbox.track is False  # their memories have no lifecycle
    assert store.settles is True and store.archive.settles is False and store.inbox.settles is False
    assert make_store().scoring is None and make_store().min_score is None
    assert isinstance(store.location, str) and store.location
    assert store.namespace_store("alice").location != store.location


@covers("memories", "__iter__", "__len__", "__contains__", "get", "known", "missing", "pinned", "problems")
def test_reading(make_store: StoreSpec) -> None:
    store = make_store()
    assert store.memories() == [] and len(store) == 0 and list(store) == [] and store.problems == []
    a = store.add("The build uses Gradle 8")
    b = store.add("Deploys go out on Tuesdays", pinned=True)
    other = make_store()  # another process's view
    for s in (store, other):
        assert s.memories() == [a, b] == list(s) and len(s) == 2
        assert a.id in s and "0000nothing" not in s
        assert s.get(a.id) == a and s.get(b.id[:8]) == b
        assert s.pinned() == [b]
        assert s.missing([a.id, "0000nothing"]) == {"0000nothing"}
        assert sorted(s.known([b.id, "0000nothing", a.id]), key=lambda m: m.text) == sorted([a, b], key=lambda m: m.text)
        assert s.problems == []
    with pytest.raises(MemoryNotFoundError):
        other.get("0000nothing")
    store.forget(a.id)
    assert other.missing([a.id, b.id]) == {a.id} and a.id not in other


@covers("ready", "refresh", "version")
def test_ready_refresh_and_version(make_store: StoreSpec) -> None:
    store, other = make_store(), make_store()
    assert not store.ready()  # nothing read yet: a read would wait for the disk or the database
    store.memories()
    deadline = time.monotonic() + 5
    while not store.ready() and time.monotonic() < deadline:  # (PostgreSQL: once its listener is up)
        time.sleep(0.05)
        store.memories()
    assert store.ready()
    before = store.version
    other.add("Staging listens on port 5433")
    store.refresh()
    assert store.version != before and [m.text for m in store.memories(refresh=False, wait=False)] == [
        "Staging listens on port 5433"]
    at = store.version
    store.refresh()
    store.memories()
    assert store.version == at  # nothing changed: the same version


@covers("search")
def test_search(make_store: StoreSpec) -> None:
    store = make_store()
    gradle = store.add("The build uses Gradle 8 with the Kotlin DSL")
    port = store.add("The staging database listens on port 5433")
    store.add("Lunch is at noon on Fridays")
    hits = make_store().search("which port does the staging database use", 5)
    assert hits and hits[0].memory == port and all(h.score > 0 for h in hits)
    assert make_store().search("gradle build", 1)[0].memory == gradle
    assert all(h.memory != gradle for h in make_store().search("gradle build", 5, exclude={gradle.id}))
    assert make_store().search("gradle build", 5, min_score=1e9) == []
    assert make_store().search("and which one", 5, context=["the staging database port?"])[0].memory == port
    assert make_store().search("zebra quantum", 5) == []


@covers("index", "similarities")
def test_the_index_search_ranks_with_and_no_vector_side(make_store: StoreSpec) -> None:
    store = make_store()
    port = store.add("The staging database listens on port 5433")
    gradle = store.add("The build uses Gradle 8 with the Kotlin DSL")
    other = make_store()
    assert other.search("staging port", 1)[0].memory == port  # read: the index is as the search left it
    assert set(other.index.scores("staging port 5433")) == {port.id}
    assert other.index.search("gradle kotlin", 5)[0][0] == gradle.id
    store.forget(port.id)
    other.search("anything", 1)
    assert other.index.scores("staging port 5433") == {}
    assert other.similarities("staging port", 5) is None  # BM25 only (hybrid: tests/memory/test_embed.py)


@covers("add", "add_many")
def test_add_and_add_many(make_store: StoreSpec) -> None:
    store = make_store()
    m = store.add("Use tabs in the Makefile", ["style"], True, topic="Setup", date="2024-01-02")
    assert (m.text, m.tags, m.pinned, m.topic, m.date) == ("Use tabs in the Makefile", ("style",), True, "Setup",
                                                            "2024-01-02")
    assert make_store().get(m.id) == m
    assert store.add("Use tabs in the Makefile").id == m.id  # the same text: the same memory
    many = store.add_many(["Python 3.12 everywhere", "CI runs on Linux"], cue="imported")
    assert [x.text for x in many] == ["Python 3.12 everywhere", "CI runs on Linux"]
    assert {x.id for x in make_store()} == {m.id} | {x.id for x in many}
    assert store.add_many([]) == []


@covers("pin")
def test_pin(make_store: StoreSpec) -> None:
    store = make_store()
    m = store.add("Prefer small commits")
    assert store.pin(m.id).pinned and make_store().pinned() == [store.get(m.id)]
    assert not store.pin(m.id, False).pinned and make_store().pinned() == []


@covers("forget", "restore", "archive", "archive_copy")
def test_forget_restore_and_the_archive(make_store: StoreSpec) -> None:
    store = make_store()
    a = store.add("The API key rotates monthly", ["ops"])
    b = store.add("Releases are tagged vX.Y.Z")
    c = store.add("A note to drop outright")
    assert store.forget(a.id) == a and a.id not in make_store()
    archived = make_store().archive.memories()
    assert [m.text for m in archived] == [a.text] and "forgotten" in archived[0].tags
    assert store.search("api key rotates", 5) == []  # never injected from the archive
    back = store.restore(a.id)
    assert back.text == a.text and "forgotten" not in back.tags and "ops" in back.tags
    assert make_store().archive.memories() == [] and back.id in make_store()
    store.forget(c.id, reason=None)  # deleted outright, not archived
    assert c.id not in make_store() and make_store().archive.memories() == []
    with pytest.raises(ValueError):
        store.forget(b.id, reason="because")
    store.archive_copy([b], "superseded")  # a copy: the caller removes it where it was
    assert b.id in make_store()
    assert [("superseded" in m.tags, m.text) for m in make_store().archive.memories()] == [(True, b.text)]


@covers("inbox")
def test_the_inbox_is_apart(make_store: StoreSpec) -> None:
    store = make_store()
    waiting = store.inbox.add("Maybe: the team prefers rebase over merge")
    assert make_store().inbox.memories() == [waiting]
    assert make_store().memories() == [] and make_store().search("rebase merge", 5) == []


@covers("lifecycle")
def test_lifecycle_records(make_store: StoreSpec) -> None:
    store = make_store()
    m = store.add("The on-call rota changes on Mondays")
    meta = store.lifecycle.get(m)
    assert meta.created is not None and meta.evidence >= 1 and meta.cue == "explicit"
    store.add(m.text)  # said again: reinforced
    store.lifecycle.flush()
    again = make_store().lifecycle.get(m)
    assert again.evidence > meta.evidence
    assert isinstance(make_store().lifecycle.score(m), float)


@covers("append_event", "append_events", "read_events")
def test_event_logs(make_store: StoreSpec) -> None:
    store = make_store()
    store.append_event("captured", {"n": 0})
    store.append_events("captured", [{"n": 1}, {"n": 2}])
    store.append_events("captured", [])
    store.namespace_store("alice").append_event("captured", {"n": "alice's"})
    assert [r["n"] for r in make_store().read_events("captured")] == [0, 1, 2]
    assert make_store().read_events("telemetry") == []
    with pytest.raises(ValueError):
        store.append_event("no-such-log", {})


@covers("namespace_store", "has_namespace", "count_namespaces")
def test_namespaces(make_store: StoreSpec) -> None:
    root = make_store()
    assert root.count_namespaces() == 0 and not root.has_namespace("alice")
    alice = root.namespace_store("alice")
    mem = alice.add("Alice works on the billing service")
    assert root.has_namespace("alice") and not root.has_namespace("bob") and root.count_namespaces() == 1
    assert mem.id not in root and root.search("billing service", 5) == []
    assert root.namespace_store("alice").get(mem.id) == mem
    assert alice.namespace_store(None).memories() == root.memories()


@covers("timezone", "case_twin", "queued_namespaces", "exists")
def test_timezone_case_twins_queues_and_place(make_store: StoreSpec) -> None:
    root = make_store(timezone="Europe/Paris")
    assert root.timezone == "Europe/Paris" and make_store().timezone is None
    assert root.namespace_store("alice").timezone == "Europe/Paris"
    carol = root.namespace_store("carol")
    assert carol.exists() is (make_store.backend == "postgres")  # a directory is made on first write
    carol.add("Carol owns the release checklist")
    assert carol.exists()
    # another spelling of an existing namespace: a directory tree's could be one directory
    twin = "carol" if make_store.backend == "markdown" else None
    assert root.case_twin("CAROL") == twin and root.case_twin("carol") is None and root.case_twin("dave") is None
    assert root.queued_namespaces() == []
    entry = {"key": "k1", "kind": "remember", "text": "x", "session": "s1", "turn": "t", "at": 0.0}
    root.namespace_store("alice").capture_queue().put([entry])
    assert root.queued_namespaces() == ["alice"]


@covers("edit_file", "rename_file")
def test_whole_files_are_edited_or_refused(make_store: StoreSpec) -> None:
    """A store of files (markdown) edits and renames a file as a whole (the memory tool's way); a
    store of rows refuses with ``UsageError`` and changes nothing."""
    store = make_store()
    seen: list[str | None] = []

    def edit(old: str | None) -> str:
        seen.append(old)
        return "# Notes\n\n- An edited memory\n"

    if store.remote:
        with pytest.raises(UsageError):
            store.edit_file("notes.md", edit)
        with pytest.raises(UsageError):
            store.rename_file("notes.md", "other.md")
        assert seen == [] and make_store().memories() == []
        return
    store.edit_file("notes.md", edit)
    assert seen == [None] and [m.text for m in make_store()] == ["An edited memory"]
    store.rename_file("notes.md", "other.md")
    assert [m.text for m in make_store()] == ["An edited memory"]
    assert (Path(make_store.where) / "other.md").is_file() and not (Path(make_store.where) / "notes.md").exists()


class _Kinds:
    """Records which kind of ledger a store asked for."""

    def file(self, directory: Path, session: str, root: Path) -> tuple[str, Any, str]:
        return ("file", directory, session)

    def database(self, connection: Any, namespace: str, session: str) -> tuple[str, Any, str]:
        with connection() as conn:  # a connection to the store's own database
            conn.execute("SELECT 1")
        return ("database", namespace, session)


@covers("open_ledger", "capture_queue")
def test_the_ledger_and_the_capture_queue_are_the_backends_own(make_store: StoreSpec) -> None:
    store = make_store().namespace_store("alice")
    kind, where, session = store.open_ledger("s1", _Kinds())
    assert session == "s1"
    q = store.capture_queue()
    if make_store.backend == "markdown":
        assert (kind, where) == ("file", Path(make_store.where) / "namespaces" / "alice")
        assert isinstance(q, FileQueue)
    else:
        assert (kind, where) == ("database", "alice")
        assert isinstance(q, PgQueue) and q.namespace == "alice"
    entry = {"key": "k1", "kind": "remember", "text": "x", "session": "s1", "turn": "t", "at": 0.0}
    q.put([entry])
    again = make_store().namespace_store("alice").capture_queue()  # durable: another handle sees it
    got: list[Any] = []
    assert again.pending() and again.drain(lambda e, replayed: got.append(dict(e))) == 1
    assert got == [entry] and not store.capture_queue().pending()
    assert not make_store().capture_queue().pending()  # the namespace's own queue


def test_every_member_of_the_protocol_has_a_contract_test() -> None:
    assert sorted(_protocol_members() - set(CONTRACT)) == []
    assert sorted(set(CONTRACT) - _protocol_members()) == []  # and nothing here names a member it no longer has


# ---------------------------------------------------------------- PostgreSQL expected: fail, never skip


def test_without_the_variable_postgres_tests_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import conftest

    monkeypatch.setattr(conftest, "TEST_POSTGRES", None)
    with pytest.raises(pytest.skip.Exception):
        next(conftest.fresh_schema())


def test_an_expected_server_that_cannot_be_reached_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import conftest

    pytest.importorskip("psycopg", reason="the PostgreSQL store needs memwire[postgres]")
    monkeypatch.setattr(conftest, "TEST_POSTGRES", "postgresql://postgres@127.0.0.1:1/test")  # a closed port
    monkeypatch.setenv("MEMWIRE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:1/test")
    with pytest.raises(pytest.fail.Exception, match="is set but .* cannot be reached"):
        next(conftest.fresh_schema())


def test_an_expected_driver_that_is_missing_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.stores import need_psycopg

    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    monkeypatch.setenv("MEMWIRE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
    with pytest.raises(pytest.fail.Exception, match="psycopg cannot be imported"):
        need_psycopg()
    monkeypatch.delenv("MEMWIRE_TEST_POSTGRES")
    with pytest.raises(pytest.skip.Exception):
        need_psycopg()
