"""Streaming relay on real sockets: the proxy and a slow upstream each served by uvicorn on 127.0.0.1."""

from __future__ import annotations

import gzip
import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, Literal

import anyio
import httpx
import pytest
import uvicorn

from memwire import MemoryStore, Middleware
from memwire._sim.quick_server import QuickServer
from memwire.adapters.server._proxy import create_app

from ..replies import wait_records

WAIT = 5.0  # seconds the slow upstream waits to be released; a buffering proxy would show it


class SlowUpstream:
    """Sends one SSE event, then waits for ``release`` (or a client disconnect) before the last."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.disconnected = threading.Event()
        self.timed_out = False
        self.middleware: Any = None  # the proxy's, set by the fixture
        self.bodies: list[bytes] = []
        self.client_ports: list[int] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.bodies.append(body)
        if scope["method"] == "GET":  # a quick JSON answer, for connection reuse
            self.client_ports.append(scope["client"][1])
            payload = b'{"object":"list","data":[]}'
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
            await send({"type": "http.response.body", "body": payload})
            return
        hold = scope["path"] == "/v1/responses"  # a slow non-streaming call: no headers until released
        if not hold:
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream"), (b"x-upstream", b"slow")]})
            await send({"type": "http.response.body", "body": b"data: first\n\n", "more_body": True})
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                self.disconnected.set()
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            deadline = time.monotonic() + WAIT
            while not self.release.is_set():
                if time.monotonic() > deadline:
                    self.timed_out = True
                    break
                await anyio.sleep(0.005)
            if hold:
                await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": b"data: last\n\n", "more_body": False})
            tg.cancel_scope.cancel()


class Served:
    """uvicorn on 127.0.0.1 (a free port) in a daemon thread."""

    def __init__(self, app: Any, lifespan: Literal["on", "off"] = "on") -> None:
        # proto TCP: asyncio sets TCP_NODELAY on the connections (else each response waits ~40 ms for an ACK)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = QuickServer(uvicorn.Config(app, log_level="warning", lifespan=lifespan, timeout_graceful_shutdown=1))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.005)

    def stop(self) -> None:
        self.server.stop()  # at once, not at uvicorn's next 0.1 s tick
        self.thread.join(5)
        self.sock.close()


@pytest.fixture
def servers(tmp_path: Any) -> Iterator[tuple[SlowUpstream, str]]:
    store = MemoryStore(tmp_path / "mem")
    store.add_many(["The project database is PostgreSQL 16", "Deploys run through GitHub Actions",
                    "The user lives in Lisbon"])
    upstream = SlowUpstream()
    up = Served(upstream, lifespan="off")
    mw = Middleware(store=store, mode="contextPerTurn")
    mw.warm_up()  # no test passes or fails on the retrieval budget of a cold start
    upstream.middleware = mw  # the tests read its records
    proxy = Served(create_app(mw, openai_upstream=up.url, anthropic_upstream=up.url))
    try:
        yield upstream, proxy.url
    finally:
        upstream.release.set()
        proxy.stop()
        up.stop()


CHAT = {"model": "gpt-4o-mini", "stream": True,
        "messages": [{"role": "user", "content": "which database does the project use?"}]}


def test_first_chunk_arrives_before_the_upstream_finishes(servers: tuple[SlowUpstream, str]) -> None:
    upstream, proxy = servers
    with httpx.Client(timeout=10) as client, client.stream("POST", proxy + "/v1/chat/completions", json=CHAT) as r:
        assert r.status_code == 200
        assert r.headers["x-memwire-injected"] == "1" and r.headers["x-upstream"] == "slow"
        chunks = r.iter_raw()
        first = next(chunks)
        released_early = not upstream.release.is_set() and not upstream.timed_out
        upstream.release.set()
        rest = b"".join(chunks)
    assert first == b"data: first\n\n"
    assert released_early, "the first chunk only came after the upstream finished: the proxy buffered"
    assert rest == b"data: last\n\n"
    assert b"PostgreSQL" in upstream.bodies[0]


def test_client_disconnect_closes_the_upstream_stream(servers: tuple[SlowUpstream, str]) -> None:
    upstream, proxy = servers
    body = {"model": "claude-haiku-4-5", "max_tokens": 5, "stream": True,
            "messages": [{"role": "user", "content": "where do deploys run?"}]}
    with httpx.Client(timeout=10) as client, client.stream("POST", proxy + "/v1/messages", json=body) as r:
        assert next(r.iter_raw()) == b"data: first\n\n"
    # leaving the block closed the connection mid-stream
    assert upstream.disconnected.wait(WAIT - 1), "the upstream stream stayed open after the client left"
    assert not upstream.timed_out
    wait_records(upstream.middleware, 1)  # a request the client left still gets its record (an SDK leaves at [DONE])
    [record] = upstream.middleware.records.recent()
    assert (record.api, record.status, record.memory_ids != ()) == ("anthropic.messages", 200, True)


def test_client_leaving_a_slow_call_cancels_the_upstream_request(servers: tuple[SlowUpstream, str]) -> None:
    upstream, proxy = servers
    body = {"model": "gpt-4o-mini", "input": "which database does the project use?"}
    with httpx.Client(timeout=httpx.Timeout(10, read=0.3)) as client, pytest.raises(httpx.ReadTimeout):
        client.post(proxy + "/v1/responses", json=body)  # gives up while the upstream has not answered
    assert upstream.disconnected.wait(WAIT - 1), "the upstream request stayed open after the client left"
    assert not upstream.timed_out


def test_upstream_connections_are_reused(servers: tuple[SlowUpstream, str]) -> None:
    upstream, proxy = servers
    with httpx.Client(timeout=10) as client:
        for _ in range(24):
            r = client.get(proxy + "/v1/models")
            assert r.status_code == 200 and r.json() == {"object": "list", "data": []}
    # a response read to its end hands its connection back to the pool: far fewer connections than calls
    assert len(set(upstream.client_ports)) <= 8


def _wait_for_log(caplog: pytest.LogCaptureFixture, name: str, seconds: float = 5.0) -> list[str]:
    """The messages of logger ``name``, once there is one (the proxy logs on its own thread)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        lines = [r.getMessage() for r in caplog.records if r.name == name]
        if lines:
            return lines
        time.sleep(0.01)
    return []


def test_a_client_that_left_is_logged_as_499_and_nothing_else_is_said(
    servers: tuple[SlowUpstream, str], caplog: pytest.LogCaptureFixture
) -> None:
    upstream, proxy = servers
    caplog.set_level(logging.INFO, logger="memwire.proxy")
    body = {"model": "gpt-4o-mini", "input": "which database does the project use?"}
    with httpx.Client(timeout=httpx.Timeout(10, read=0.3)) as client, pytest.raises(httpx.ReadTimeout):
        client.post(proxy + "/v1/responses", json=body)
    assert upstream.disconnected.wait(WAIT - 1)
    lines = _wait_for_log(caplog, "memwire.proxy")
    assert len(lines) == 1 and lines[0].startswith("POST /v1/responses 499 injected=1 "), lines
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []  # no traceback either


async def _broken_off(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An upstream that declares 100 bytes, sends 10 and closes the connection."""
    assert scope["type"] == "http"
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"100")]})
    await send({"type": "http.response.body", "body": b"0123456789", "more_body": True})
    raise RuntimeError("upstream crashed mid-body")


def test_an_upstream_that_breaks_off_cuts_the_clients_stream(tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    up = Served(_broken_off, lifespan="off")
    proxy = Served(create_app(Middleware(store=MemoryStore(tmp_path / "mem")), openai_upstream=up.url))
    caplog.set_level(logging.INFO)
    try:
        with httpx.Client(timeout=10) as client, pytest.raises(httpx.RemoteProtocolError):
            client.get(proxy.url + "/v1/models")  # never a short body that looks complete
    finally:
        proxy.stop()
        up.stop()
    assert "memwire proxy: upstream stream broke off (RemoteProtocolError)" in caplog.text


async def _gzipped(scope: dict[str, Any], receive: Any, send: Any) -> None:
    assert scope["type"] == "http"
    body = gzip.compress(b'{"object":"list","data":[]}')
    await send({"type": "http.response.start", "status": 200, "headers": [
        (b"content-type", b"application/json"), (b"content-encoding", b"gzip"),
        (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def test_a_compressed_answer_is_relayed_as_it_came(tmp_path: Any) -> None:
    up = Served(_gzipped, lifespan="off")
    proxy = Served(create_app(Middleware(store=MemoryStore(tmp_path / "mem")), openai_upstream=up.url))
    try:
        with httpx.Client(timeout=10) as client, client.stream(
                "GET", proxy.url + "/v1/models", headers={"accept-encoding": "gzip"}) as r:
            raw = b"".join(r.iter_raw())
    finally:
        proxy.stop()
        up.stop()
    assert r.headers["content-encoding"] == "gzip" and r.headers["content-length"] == str(len(raw))
    assert gzip.decompress(raw) == b'{"object":"list","data":[]}'
