"""Two proxies on one PostgreSQL database give a session the bytes one proxy would.

Real processes (``memwire proxy`` with ``MEMWIRE_STORE``) against a fake upstream on 127.0.0.1 and
a real PostgreSQL server; one conversation alternates between them, with a memory added mid-turn by
a third writer. The reference is the same app in this process over another schema seeded alike.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memwire._sim.fake_provider import FakeProvider
from tests.stores import need_psycopg

from ..middleware.conftest import MEMORIES
from .test_proxy_workers import MODES, Proxy, conversation, first_difference, page_counts, reference, sent, upstream  # noqa: F401 - upstream: a fixture


def seed(url: str) -> None:
    from memwire.memory.postgres._store import PgStore

    PgStore(url).add_many([text for text, _ in MEMORIES])


def add_mid_turn(url: str, i: int) -> None:
    """A memory that would answer the turn better, added between a turn's question and its tool
    loop by another writer: the turn's block must not change, whichever proxy serves."""
    from memwire.memory.postgres._store import PgStore

    if i % 2 == 1:
        PgStore(url).add(f"Staging database and test suite and migrations and deploys: note {i}")


@pytest.fixture
def other_schema(postgres_url: str) -> Iterator[str]:
    """A second fresh schema in the same database (the reference's)."""
    from ..conftest import fresh_schema

    yield from fresh_schema()


@pytest.mark.parametrize("mode", ["replay", "drop"])
async def test_a_conversation_alternating_between_two_proxies_on_one_database(
        tmp_path: Path, upstream: tuple[FakeProvider, str], postgres_url: str, other_schema: str, mode: str) -> None:
    fake, url = upstream
    seed(postgres_url)
    seed(other_schema)
    bodies = list(conversation())
    a, b = (Proxy(tmp_path, postgres_url, url, "--workers", "1", **MODES[mode]) for _ in range(2))
    try:
        a.wait(), b.wait()
        for i, body in enumerate(bodies):
            add_mid_turn(postgres_url, i)
            worker = (a, b)[((i + 1) // 2) % 2]  # a turn's tool loop on the other proxy
            r = httpx.post(worker.url + "/v1/chat/completions", json=body, timeout=30)
            assert r.status_code == 200, r.text
        served = sent(fake, len(bodies))
        assert page_counts(b, len(bodies)) == [str(len(bodies))]  # either replica's page: the whole session
    finally:
        a.stop(), b.stop()
    assert not (tmp_path / ".memwire").exists()  # nothing went to a directory
    expected = await reference(other_schema, url, MODES[mode], bodies, fake, add_mid_turn)
    assert served == expected, first_difference(served, expected)
    if mode == "replay":  # an append-only log: the provider's prefix cache keeps matching
        for i in range(1, len(served)):
            assert served[i][: len(served[i - 1])] == served[i - 1]
    assert sum("<memory" in json.dumps(m) for m in served) >= 2


def test_a_session_waiting_on_the_database_holds_up_no_other_request(
        tmp_path: Path, upstream: tuple[FakeProvider, str], postgres_url: str) -> None:
    """The ledger's database calls run off the event loop: while one session's commit waits for a
    lock another replica holds, the same proxy answers other requests."""
    import threading

    import psycopg

    _, url = upstream
    seed(postgres_url)
    proxy = Proxy(tmp_path, postgres_url, url, "--workers", "1")
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "How do I run the test suite?"}]}
    try:
        proxy.wait()
        with psycopg.connect(postgres_url, autocommit=True) as other:
            other.execute("SELECT pg_advisory_lock(hashtextextended('memwire-ledger:default:held', 0))")
            done: list[int] = []
            chat = threading.Thread(target=lambda: done.append(httpx.post(
                proxy.url + "/v1/chat/completions", json=body, headers={"x-memwire-session": "held"},
                timeout=60).status_code))
            chat.start()
            waiting = 0
            for _ in range(600):  # until the proxy waits for the lock (a hang guard, not a timing)
                waiting = other.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                                        "AND NOT granted").fetchone()[0]
                if waiting:
                    break
                chat.join(0.05)
            assert waiting and not done
            health = httpx.get(proxy.url + "/memwire/healthz", timeout=20)  # answered while the lock is held
            assert health.status_code == 200 and not done
            other.execute("SELECT pg_advisory_unlock_all()")
            chat.join(60)
        assert done == [200]
    finally:
        proxy.stop()


def test_a_database_that_cannot_be_reached_is_said_once_and_calls_go_through(
        caplog: pytest.LogCaptureFixture) -> None:
    import logging

    need_psycopg()
    from memwire import Middleware
    from memwire._sim.fake_provider import serve_in_thread
    from memwire.adapters.server._proxy import create_app
    from memwire.memory.postgres._store import PgStore

    mw = Middleware(store=PgStore("postgresql://postgres@127.0.0.1:1/proxy-test"), mode="contextPerTurn")  # closed port
    fake = FakeProvider()
    with serve_in_thread(fake) as up, serve_in_thread(create_app(mw, openai_upstream=up.base_url)) as proxy:
        for i in range(6):
            body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"Which database, question {i}?"}]}
            r = httpx.post(proxy.base_url + "/v1/chat/completions", json=body, timeout=30,
                           headers={"x-memwire-session": f"s{i % 3}", "x-memwire-namespace": f"team{i % 2}"})
            assert r.status_code == 200 and r.headers["x-memwire-injected"] == "0"
    assert len(fake.requests) == 6
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("memwire")]
    assert len(said) == 1 and "127.0.0.1:1/proxy-test is unavailable" in said[0], said
