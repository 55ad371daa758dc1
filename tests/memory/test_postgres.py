"""The PostgreSQL store on a real server (``MEMWIRE_TEST_POSTGRES``): migrations, replicas that learn
of each other's changes, the same results as the markdown store, failing open, the extra.

Another replica is a store opened with another URL for the same schema (``replica``): in this
process it has its own pool and its own listener, as a second proxy would."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memwire import MemoryStore, MissingDependencyError
from memwire._errors import NamespaceError, StoreUnavailableError, UsageError
from memwire.memory._lifecycle import Lifecycle
from memwire.memory.postgres import _pg
from tests.stores import need_psycopg

psycopg = need_psycopg()  # fails, not skips, when MEMWIRE_TEST_POSTGRES is set

from memwire.memory.postgres._store import PgStore  # noqa: E402


def replica(url: str, name: str = "b") -> str:
    """The same database as another replica reaches it: another URL, so its own pool and listener."""
    return f"{url}&application_name=replica-{name}"


def within(seconds: float, check: Callable[[], Any]) -> Any:
    """``check()``'s first true value, asked until ``seconds`` have passed (then fails)."""
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            assert found, f"not within {seconds} s"
            return found
        time.sleep(0.005)


@pytest.fixture
def other(postgres_url: str) -> Iterator[str]:
    url = replica(postgres_url)
    yield url
    _pg.close(url)


def settled(store: PgStore) -> None:
    """Until the store is loaded and its process listens (the listener starts with the first store)."""
    within(2.0, lambda: (store.refresh(), store.ready() and store._db.listening)[1])


def texts(hits: list[Any]) -> list[str]:
    return [h.memory.text for h in hits]


# ---------------------------------------------------------------- migrations


def tables(conn: Any) -> set[str]:
    return {r[0] for r in conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()").fetchall()}


def test_migrations_from_an_empty_database_and_again(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        assert tables(conn) == set()
        assert _pg.migrate(conn) == len(_pg.MIGRATIONS)
        assert {"memwire_schema", "memwire_namespaces", "memwire_memories", "memwire_lifecycle",
                "memwire_events"} <= tables(conn)
        assert _pg.migrate(conn) == len(_pg.MIGRATIONS)  # nothing left to do: nothing done
        assert conn.execute("SELECT version FROM memwire_schema").fetchall() == [(len(_pg.MIGRATIONS),)]


# Data put in at a schema version (with that version's SQL), and read back by today's code after
# the later migrations. A migration that changes these tables adds its version's seed here.
SEED_ID = "5eed5eed5eed5eed5eed"
SEEDS = {1: f"""
    INSERT INTO memwire_namespaces (namespace, version, meta_version) VALUES ('seed', 1, 1);
    INSERT INTO memwire_memories (namespace, kind, id, text, tags, pinned, topic, date, position, version)
        VALUES ('seed', 'memories', '{SEED_ID}', 'The seed survives every migration', '{{seed}}', true, 'Seeds',
                '2026-01-02', 1, 1);
    INSERT INTO memwire_lifecycle (namespace, id, created, reinforced, evidence, cue, uses, injected, version)
        VALUES ('seed', '{SEED_ID}', '2026-01-02T00:00:00Z', '2026-01-03T00:00:00Z', 3, 'captured', 1, 2, 1);
    INSERT INTO memwire_events (namespace, log, record) VALUES ('seed', 'captured', '{{"event": "captured"}}');
"""}


@pytest.mark.parametrize("previous", range(len(_pg.MIGRATIONS)))
def test_migrations_from_each_previous_version_keep_the_data(postgres_url: str, previous: int) -> None:
    with psycopg.connect(postgres_url) as conn:
        assert _pg.migrate(conn, upto=previous) == previous
        seeded = [v for v in SEEDS if v <= previous]
        if seeded:
            with conn.transaction():
                conn.execute(SEEDS[max(seeded)])
        assert _pg.migrate(conn) == len(_pg.MIGRATIONS)
    store = PgStore(postgres_url, "seed")
    if seeded:
        mem = store.get(SEED_ID)
        assert (mem.text, mem.tags, mem.pinned, mem.topic, mem.date) == (
            "The seed survives every migration", ("seed",), True, "Seeds", "2026-01-02")
        meta = store.lifecycle.get(mem)
        assert (meta.evidence, meta.cue, meta.uses, meta.injected) == (3, "captured", 1, 2)
        assert store.read_events("captured") == [{"event": "captured"}]
    new = store.add("Added after the migrations")
    assert store.search("added after migrations")[0].memory == new


def test_a_new_migration_applies_to_a_database_in_use_and_older_code_refuses_it(
        postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = PgStore(postgres_url, "alice")
    kept = store.add("Deploys go out on Tuesdays", ["process"])
    store.append_event("telemetry", {"n": 1})
    n = len(_pg.MIGRATIONS)
    monkeypatch.setattr(_pg, "MIGRATIONS", [*_pg.MIGRATIONS, "ALTER TABLE memwire_memories ADD COLUMN note text"])
    _pg.close(postgres_url)  # a replica of the next version starts
    newer = PgStore(postgres_url, "alice")
    assert newer.get(kept.id) == kept and newer.read_events("telemetry") == [{"n": 1}]
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT version FROM memwire_schema").fetchone() == (n + 1,)
        assert conn.execute("SELECT note FROM memwire_memories").fetchall() == [(None,)]
    monkeypatch.setattr(_pg, "MIGRATIONS", _pg.MIGRATIONS[:n])
    _pg.close(postgres_url)  # and a replica of the older version
    older = PgStore(postgres_url, "alice")
    with pytest.raises(StoreUnavailableError, match=f"schema is version {n + 1}, newer than this memwire knows"):
        older.add("Refused")
    assert older.search("deploys tuesdays") == []  # reads fail open


def test_runners_starting_together_migrate_once(postgres_url: str) -> None:
    start, results, errors = threading.Barrier(4), [], []

    def run() -> None:
        try:
            with psycopg.connect(postgres_url) as conn:
                start.wait()
                results.append(_pg.migrate(conn))
        except Exception as exc:  # noqa: BLE001 - reported by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and results == [len(_pg.MIGRATIONS)] * 4
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT version FROM memwire_schema").fetchall() == [(len(_pg.MIGRATIONS),)]


# ---------------------------------------------------------------- replicas


def test_a_replica_sees_another_replicas_adds_forgets_and_pins_within_a_second(postgres_url: str,
                                                                               other: str) -> None:
    reader, writer = PgStore(postgres_url, "team"), PgStore(other, "team")
    settled(reader)
    assert reader.search("staging port") == []
    mem = writer.add("The staging database listens on port 5433", ["infra"])
    within(1.0, lambda: reader.search("staging port"))
    assert reader.ready()
    writer.pin(mem.id)
    within(1.0, lambda: reader.pinned() == [replace_pinned(mem)])
    writer.forget(mem.id)
    within(1.0, lambda: reader.search("staging port") == [])
    assert reader.archive.get(mem.id).tags == ("infra", "forgotten") and len(reader) == 0
    writer.restore(mem.id)
    within(1.0, lambda: texts(reader.search("staging port")) == [mem.text])
    assert len(reader.archive) == 0


def replace_pinned(mem: Any) -> Any:
    from dataclasses import replace

    return replace(mem, pinned=True)


def test_a_replica_sees_the_metadata_another_one_saved(postgres_url: str, other: str) -> None:
    reader, writer = PgStore(postgres_url, "team"), PgStore(other, "team")
    mem = writer.add("The staging database listens on port 5433")
    writer.lifecycle.injected([mem.id])
    writer.lifecycle.reinforce([mem.id], used=True)
    writer.lifecycle.flush()
    within(1.0, lambda: reader.search("staging port") and reader.lifecycle.get(mem).uses == 1)
    assert (reader.lifecycle.get(mem).injected, reader.lifecycle.get(mem).evidence) == (1, 2)


def test_searches_ask_the_database_nothing_while_nothing_changed(postgres_url: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    store = PgStore(postgres_url, "team")
    store.add_many(["The staging database listens on port 5433", "Deploys go out on Tuesdays"])
    settled(store)
    db, asked = store._db, []
    real = db.connection
    monkeypatch.setattr(db, "connection", lambda: (asked.append(1), real())[1])
    for _ in range(50):
        assert texts(store.search("staging port")) == ["The staging database listens on port 5433"]
        assert store.ready() and store.missing(["nope"]) == {"nope"} and len(store.memories()) == 2
    assert asked == []


def test_without_its_listener_a_replica_polls_every_second(postgres_url: str, other: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_pg, "LISTEN_RETRY_S", 60.0)  # the listener stays down for the test
    reader, writer = PgStore(postgres_url, "team"), PgStore(other, "team")
    assert reader.search("staging port") == []
    listener = reader._db._listening()
    within(2.0, lambda: listener.listening)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (listener.backend_pid,))
    within(2.0, lambda: not reader._db.listening)
    assert reader.search("staging port") == [] and reader.ready()  # looked just now: in-memory for a second
    writer.add("The staging database listens on port 5433")
    within(1.0, lambda: reader.search("staging port"))
    assert not reader._db.listening  # found by polling


def test_a_write_shows_at_once_in_the_writers_process(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = PgStore(postgres_url, "team")
    archive = store.archive
    listener = store._db._listening()
    bump = listener.bump  # notifications may come late: here they never do, only this process's own marks
    monkeypatch.setattr(listener, "bump", lambda ns: None if threading.current_thread().name == "memwire-pg-listen"
                        else bump(ns))
    settled(archive)
    settled(store)
    mem = store.add("The staging database listens on port 5433")
    assert texts(store.search("staging port")) == [mem.text]
    assert archive.memories() == [] and archive.ready()
    store.forget(mem.id)
    assert store.search("staging port") == [] and [m.id for m in archive.memories()] == [mem.id]


def test_many_writers_on_one_text_settle_on_one_row(postgres_url: str) -> None:
    urls = [replica(postgres_url, str(i)) for i in range(4)]
    start, errors = threading.Barrier(len(urls)), []

    def add(url: str, i: int) -> None:
        try:
            store = PgStore(url, "team")
            start.wait()
            for j in range(5):
                store.add("The staging database listens on port 5433", [f"t{i}-{j}"])
            store.lifecycle.flush()
        except Exception as exc:  # noqa: BLE001 - reported by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=add, args=(url, i)) for i, url in enumerate(urls)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for url in urls:
            _pg.close(url)
    assert errors == []
    [mem] = PgStore(postgres_url, "team").memories()
    assert sorted(mem.tags) == sorted(f"t{i}-{j}" for i in range(4) for j in range(5))  # no merge lost
    assert PgStore(postgres_url, "team").lifecycle.get(mem).evidence == 20
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM memwire_memories").fetchone() == (1,)


# ---------------------------------------------------------------- the same as the markdown store


MEMORIES = [
    ("Build with `make build`, never call setup.py directly", ["build"], "Build", None),
    ("The staging database is Postgres 15 on port 5433", ["infra"], "Infra", None),
    ("Production runs Postgres 16 behind pgbouncer", ["infra"], "Infra", None),
    ("User prefers tabs over spaces, width 4", ["preference"], None, None),
    ("Deploys go out on Tuesdays only", ["process"], None, None),
    ("Rollbacks use kubectl rollout undo", ["process"], None, None),
    ("How long have you had the dog?", [], "Chat", "2026-03-01"),
    ("Three years now, she is a beagle", [], "Chat", "2026-03-01"),
    ("The CI pipeline runs on GitHub Actions with a self-hosted runner", ["ci"], None, None),
    ("Never push to main directly; open a pull request", ["instruction"], None, None),
    ("We met at the conference in Lisbon", [], "Travel", "2026-04-02"),  # one day across two topics
    ("The keynote was about vector databases", [], "Work", "2026-04-02"),
    ("Afterwards we walked to the Belem tower", [], "Travel", "2026-04-02"),
]
QUERIES = ["which postgres version runs where?", "how do I build the project", "what breed is the dog",
           "tabs or spaces", "when can I deploy and how do I roll back", "push to main", "weather in Paris",
           "where did we walk afterwards?", "what was the keynote about", "Lisbon conference"]


def test_the_same_memories_search_the_same_on_both_backends(postgres_url: str, tmp_path: Path) -> None:
    md, pg = MemoryStore(tmp_path / "mem"), PgStore(postgres_url, "same")
    for store in (md, pg):
        for text, tags, topic, date in MEMORIES:
            store.add(text, tags, topic=topic, date=date, cue="captured" if "infra" in tags else "explicit")
        store.forget(store.search("kubectl rollback")[0].memory.id)
    md, pg = MemoryStore(tmp_path / "mem"), PgStore(replica(postgres_url), "same")  # as read back
    try:
        assert [m.text for m in md] == [m.text for m in pg]
        for query in QUERIES:
            a, b = md.search(query, k=4), pg.search(query, k=4)
            assert [h.memory for h in a] == [h.memory for h in b], query
            assert [h.score for h in a] == pytest.approx([h.score for h in b], rel=1e-6), query
    finally:
        _pg.close(replica(postgres_url))


# ---------------------------------------------------------------- failing open


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_database_finds_nothing_and_refuses_writes(caplog: pytest.LogCaptureFixture,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"postgresql://postgres:hunter2@127.0.0.1:{closed_port()}/test"
    monkeypatch.setattr(_pg, "RETRY_S", 0.2)
    tried = []
    connect = psycopg.connect
    monkeypatch.setattr(psycopg, "connect", lambda *a, **kw: (
        tried.append(1) if kw.get("application_name") != "memwire-listen" else None, connect(*a, **kw))[1])
    try:
        store = PgStore(url, "alice")
        with caplog.at_level(logging.WARNING, logger="memwire"):
            for _ in range(3):
                assert store.search("staging port") == [] and store.memories() == []
                assert store.missing(["x"], refresh=True) == {"x"} and not store.ready()
            assert len(tried) == 1  # then calls fail at once for a while: one timeout per pause
            with pytest.raises(StoreUnavailableError, match=r"127\.0\.0\.1:\d+/test is unavailable") as err:
                store.add("Refused while the database is down")
            within(2.0, lambda: (store.search("staging port"), len(tried) == 2)[1])  # after the pause: tried again
        assert "hunter2" not in str(err.value) and "hunter2" not in store.location
        outage = [r for r in caplog.records if "unavailable" in r.getMessage()]
        assert len(outage) == 1 and "hunter2" not in outage[0].getMessage()
    finally:
        _pg.close(url)


class Forwarder:
    """A TCP port that forwards to PostgreSQL until ``cut()``: the database going away under a
    replica that has loaded its memories (and coming back at ``mend()``)."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.up = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if not self.up:
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target))
            self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        self.up = False
        for s in self.conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.conns = []

    def mend(self) -> None:
        self.up = True

    def close(self) -> None:
        self.cut()
        self.server.close()


def test_a_database_that_goes_away_serves_the_cache_and_comes_back(
        postgres_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from urllib.parse import urlsplit

    monkeypatch.setattr(_pg, "POOL_TIMEOUT_S", 0.3)
    monkeypatch.setattr(_pg, "RETRY_S", 0.2)
    parts = urlsplit(postgres_url)
    fwd = Forwarder(parts.port or 5432)
    url = postgres_url.replace(parts.netloc, f"{parts.username}@127.0.0.1:{fwd.port}")
    try:
        store = PgStore(url, "team")
        mem = store.add("The staging database listens on port 5433")
        assert texts(store.search("staging port")) == [mem.text]
        fwd.cut()
        with caplog.at_level(logging.WARNING, logger="memwire"):
            within(3.0, lambda: not store._db.listening)
            for _ in range(3):
                assert texts(store.search("staging port", refresh=True)) == [mem.text]  # the cache
            with pytest.raises(StoreUnavailableError):
                store.add("Refused while the database is away")
            store.lifecycle.injected([mem.id])
            with pytest.raises(StoreUnavailableError):
                store.lifecycle.flush()  # the counts wait
            fwd.mend()
            within(5.0, lambda: _added(store, "Written once it is back"))
        assert [r.getMessage().split(" (")[0] for r in caplog.records if "memory database" in r.getMessage()] == [
            f"memwire: the memory database {store._db.shown} is unavailable",
            f"memwire: the memory database {store._db.shown} is back"]
        store.lifecycle.flush()
        assert PgStore(postgres_url, "team").lifecycle.get(mem).injected == 1
    finally:
        _pg.close(url)
        fwd.close()


def _added(store: PgStore, text: str) -> bool:
    try:
        store.add(text)
    except StoreUnavailableError:
        return False
    return True


# ---------------------------------------------------------------- the rest of the contract


def test_events_keep_the_newest_records(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from memwire.memory.postgres import _store as _postgres

    monkeypatch.setattr(_postgres, "EVENTS_KEEP", 3)
    monkeypatch.setattr(_postgres, "TRIM_EVERY", 1)
    store, other = PgStore(postgres_url, "alice"), PgStore(postgres_url, "bob")
    other.append_event("captured", {"n": "bob's"})
    for i in range(5):
        store.append_event("captured", {"n": i, "nul": "a\0b"})
    assert [r["n"] for r in store.read_events("captured")] == [2, 3, 4]
    assert store.read_events("captured")[0]["nul"] == "a\ufffdb"
    assert other.read_events("captured") == [{"n": "bob's"}]


def test_events_appended_together_are_trimmed_as_one_by_one(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch that passes the 1st, 11th, ... append trims, like appends one at a time would."""
    from memwire.memory.postgres import _store as _postgres

    monkeypatch.setattr(_postgres, "EVENTS_KEEP", 4)
    monkeypatch.setattr(_postgres, "TRIM_EVERY", 10)
    store = PgStore(postgres_url, "carol")
    store.append_events("telemetry", [{"n": i} for i in range(3)])  # the 1st: trimmed to 4 (nothing to do)
    store.append_events("telemetry", [{"n": i} for i in range(3, 9)])  # 4th-9th: not trimmed
    assert [r["n"] for r in store.read_events("telemetry")] == list(range(9))
    store.append_events("telemetry", [{"n": 9}, {"n": 10}, {"n": 11}])  # passes the 11th: trimmed
    assert [r["n"] for r in store.read_events("telemetry")] == [8, 9, 10, 11]
    store.append_events("telemetry", [])
    assert len(store.read_events("telemetry")) == 4


def test_the_store_has_no_files_and_checks_its_arguments(postgres_url: str) -> None:
    store = PgStore(postgres_url, "alice")
    with pytest.raises(UsageError, match="PostgreSQL store .* has no files"):
        store.edit_file("MEMORY.md", lambda text: text)
    with pytest.raises(UsageError, match="has no files"):
        store.rename_file("MEMORY.md", "OTHER.md")
    with pytest.raises(NamespaceError):
        PgStore(postgres_url, "../bob")
    with pytest.raises(ValueError, match="kind must be one of"):
        PgStore(postgres_url, "alice", kind="attic")
    with pytest.raises(UsageError, match="is an archive"):
        store.archive.archive
    mem = store.add("x")
    store.forget(mem.id)
    with pytest.raises(UsageError, match="is an archive"):
        store.archive.forget(mem.id)
    assert store.archive.forget(mem.id, reason=None).id == mem.id and len(store.archive) == 0
    assert isinstance(store.lifecycle, Lifecycle) and store.problems == []


def test_the_inbox_is_its_own_store(postgres_url: str) -> None:
    from memwire.memory._inbox import approve, inbox_of, reject

    store = PgStore(postgres_url, "alice")
    inbox = inbox_of(store)
    a = inbox.add("The project uses pnpm", ["captured"])
    b = inbox.add("Lunch is at noon", ["captured"])
    assert store.search("pnpm") == [] and len(inbox) == 2
    [moved] = approve(store, [a.id])
    assert texts(store.search("which package manager, pnpm?")) == [moved.text] and len(inbox) == 1
    reject(store, [b.id[:6]])
    assert len(inbox) == 0 and "rejected" in store.archive.get(b.id).tags
    assert [e["event"] for e in store.read_events("captured")] == ["approved", "rejected"]


def test_the_location_names_the_database_without_its_password() -> None:
    assert _pg.redacted("postgresql://me:s3cret@db.example:5432/mem?sslmode=require&password=x") == (
        "postgresql://me@db.example:5432/mem?sslmode=require")
    assert _pg.redacted("host=db user=me password='a b' dbname=mem") == "host=db user=me password=*** dbname=mem"
    store = PgStore("postgresql://me:s3cret@127.0.0.1:1/mem", "alice", kind="inbox")
    assert store.location == "postgresql://me@127.0.0.1:1/mem namespace alice (inbox)"


def test_without_psycopg_the_store_names_the_extra(tmp_path: Path) -> None:
    code = ("import sys\nsys.modules['psycopg'] = None\nimport memwire.memory.postgres._store as p\n"
            "try:\n    p.PgStore('postgresql://127.0.0.1/x')\nexcept ModuleNotFoundError as exc:\n    print(repr(exc))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert "MissingDependencyError" in out.stdout and "pip install 'memwire[postgres]'" in out.stdout
    assert issubclass(MissingDependencyError, ModuleNotFoundError)


def test_a_malformed_url_is_a_configuration_error() -> None:
    from memwire import ConfigError

    with pytest.raises(ConfigError, match="not a PostgreSQL connection URL"):
        PgStore("host=db port", "alice")


def test_a_store_made_before_a_fork_uses_the_childs_own_connections(postgres_url: str) -> None:
    # `memwire proxy --workers N` forks after building its stores: a child must neither use nor close
    # the parent's pool and listener, and must still see what the parent and the others write
    store = PgStore(postgres_url, "team")
    parent_mem = store.add("The staging database listens on port 5433")
    settled(store)
    pid = os.fork()
    if pid == 0:  # the child: report by exit code only
        ok = False
        try:
            ok = texts(store.search("staging port")) == [parent_mem.text] and store._db is not _pg._ORPHANS[-1]
            store.add("Written by a forked worker")
            _pg.close(postgres_url)
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    within(1.0, lambda: texts(store.search("forked worker")) == ["Written by a forked worker"])
    assert store.add("The parent's pool still works").text == "The parent's pool still works"


def test_the_version_moves_only_when_the_memories_change(postgres_url: str, other: str) -> None:
    reader, writer = PgStore(postgres_url, "team"), PgStore(other, "team")
    mem = writer.add("The staging database listens on port 5433")
    settled(reader)
    before = reader.version
    writer.add(mem.text)  # the same again: reinforced, nothing to re-read
    writer.lifecycle.flush()  # metadata only
    writer.namespace_store("else").add("Another namespace's memory")
    writer.archive.add("An archived memory")  # another kind of the namespace
    writer.pin(mem.id)  # the one change; its notification comes after the others'
    within(1.0, lambda: reader.pinned())
    settled(reader)
    assert reader.version == before + 1
    writer.archive.add("Another archived memory")  # a version the reader has not read when it writes:
    mine = reader.add("Rollbacks use kubectl rollout undo")  # so it reads its own row again, unchanged
    settled(reader)
    assert reader.version == before + 2 and [m.id for m in reader.memories()][-1] == mine.id
