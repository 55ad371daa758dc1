"""QuickServer: uvicorn's server that stops when told, with uvicorn's shutdown steps.

Each test runs a server in a thread over a real socket. Bounds on joins are hang guards (60 s),
never timings: a server that does not wake, or waits for a connection nobody closes, never ends.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from memwire._sim import quick_server
from memwire._sim.quick_server import QuickServer

HANG = 60  # seconds: longer than any stop, on any machine


def app_with(events: list[str], forever: asyncio.Event | None = None,
             cancelled: asyncio.Event | None = None) -> Starlette:
    """``/`` answers at once; ``/stream`` sends one chunk, then another only when ``forever`` is set.
    With ``cancelled``, the lifespan's shutdown first waits for a stream to be cancelled."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        events.append("startup")
        yield
        if cancelled is not None:
            try:
                await asyncio.wait_for(cancelled.wait(), HANG)
            except asyncio.TimeoutError:
                events.append("never cancelled")
        events.append("shutdown")

    async def hello(request: Request) -> Response:
        return PlainTextResponse("hello")

    async def stream(request: Request) -> Response:
        async def body() -> AsyncIterator[bytes]:
            yield b"first\n"
            try:
                await (forever or asyncio.Event()).wait()
            except asyncio.CancelledError:
                events.append("cancelled")
                if cancelled is not None:
                    cancelled.set()
                raise
            yield b"never\n"

        return StreamingResponse(body(), media_type="text/plain")

    return Starlette(routes=[Route("/", hello), Route("/stream", stream)], lifespan=lifespan)


@contextmanager
def serving(app: Any, grace: float | None, keep_alive: int = 5) -> Iterator[tuple[QuickServer, threading.Thread, str]]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    # log_config None: uvicorn's records reach the root logger (caplog)
    server = QuickServer(uvicorn.Config(app, log_config=None, timeout_graceful_shutdown=grace,
                                        timeout_keep_alive=keep_alive))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            assert thread.is_alive(), "the server did not start"
            thread.join(0.005)
        yield server, thread, f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.force_exit = True  # a failed test leaves no server behind
        server.stop()
        thread.join(HANG)
        sock.close()


def test_stop_wakes_the_server_without_waiting_for_a_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quick_server, "_TICK_S", 3600.0)  # uvicorn's loop would notice in an hour
    events: list[str] = []
    with serving(app_with(events), grace=3600) as (server, thread, url):
        assert httpx.get(url + "/").text == "hello"
        server.stop()
        thread.join(HANG)
        assert not thread.is_alive()
    assert events == ["startup", "shutdown"]


def test_an_idle_keep_alive_connection_is_closed_and_the_lifespan_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shutdown asks every open connection to close (a kept-alive one would otherwise be
    waited for: here for an hour) and then runs the app's lifespan shutdown."""
    events: list[str] = []
    with serving(app_with(events), grace=3600, keep_alive=3600) as (server, thread, url), httpx.Client() as client:
        assert client.get(url + "/").text == "hello"  # the connection stays open in the client's pool
        assert server.server_state.connections
        server.stop()
        thread.join(HANG)
        assert not thread.is_alive()
        assert not server.server_state.connections
    assert events == ["startup", "shutdown"]


def test_a_response_still_going_after_the_grace_is_cancelled(caplog: pytest.LogCaptureFixture) -> None:
    """Cancelled by the shutdown, before the app's lifespan shutdown (which waits for it here), not
    only when the loop closes."""
    events: list[str] = []
    app = app_with(events, cancelled=asyncio.Event())
    with serving(app, grace=0.2) as (server, thread, url), httpx.Client() as client:
        with client.stream("GET", url + "/stream") as response:
            lines = response.iter_lines()  # held: a dropped iterator closes the response
            assert next(lines) == "first"
            with caplog.at_level(logging.INFO, logger="uvicorn.error"):
                server.stop()
                thread.join(HANG)
            assert not thread.is_alive()
    assert events == ["startup", "cancelled", "shutdown"]
    said = [r.getMessage() for r in caplog.records if r.name == "uvicorn.error"]
    assert "Shutting down" in said
    assert "Cancel 1 running task(s), timeout graceful shutdown exceeded" in said


def test_a_response_that_ends_within_the_grace_is_waited_for() -> None:
    events: list[str] = []
    go_on = asyncio.Event()
    with serving(app_with(events, forever=go_on), grace=3600) as (server, thread, url), httpx.Client() as client:
        with client.stream("GET", url + "/stream") as response:
            lines = response.iter_lines()
            assert next(lines) == "first"
            server.stop()
            thread.join(0.2)
            assert thread.is_alive()  # still sending: the shutdown waits for it
            loop = server._loop
            assert loop is not None
            loop.call_soon_threadsafe(go_on.set)
            assert list(lines) == ["never"]
        thread.join(HANG)
        assert not thread.is_alive()
    assert events == ["startup", "shutdown"]


def test_force_exit_stops_waiting_and_skips_the_lifespan() -> None:
    events: list[str] = []
    with serving(app_with(events), grace=3600) as (server, thread, url), httpx.Client() as client:
        with client.stream("GET", url + "/stream") as response:
            lines = response.iter_lines()  # held: a dropped iterator closes the response
            assert next(lines) == "first"
            server.stop()
            server.force_exit = True  # as ServerThread.stop does when a stream is held open
            thread.join(HANG)
            assert not thread.is_alive()
    assert "shutdown" not in events  # the lifespan is not waited for either (the stream is cancelled as the loop ends)
