"""The proxy's own upstream client sends straight to its transport (no httpx client layers): what
the upstream receives must be what an injected ``httpx.AsyncClient`` sends, byte for byte, and
the answer must come back the same."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from memwire import MemoryStore, Middleware
from memwire.adapters.server._proxy import create_app, default_client

from .test_proxy_stream import Served


class Recorder:
    """Records each request's headers (as raw as ASGI gives them) and body; answers with a cookie."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, list[tuple[bytes, bytes]], bytes]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.seen.append((scope["method"], scope["path"] + "?" + scope["query_string"].decode(), scope["headers"], body))
        payload = b'{"choices":[{"index":0,"message":{"role":"assistant","content":"PostgreSQL 16."}}]}'
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"application/json"), (b"set-cookie", b"__cf_bm=abc; Path=/"),
            (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})


@pytest.fixture
def upstream() -> Iterator[tuple[Recorder, str]]:
    rec = Recorder()
    up = Served(rec, lifespan="off")
    try:
        yield rec, up.url
    finally:
        up.stop()


def _exchange(app: Any) -> list[httpx.Response]:
    proxy = Served(app)
    try:
        with httpx.Client(timeout=10) as client:
            chat = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "which database do we use?"}]}
            calls = [
                lambda: client.post(proxy.url + "/v1/chat/completions", json=chat, headers={"authorization": "Bearer sk-1"}),
                lambda: client.get(proxy.url + "/v1/models?limit=2", headers={"user-agent": "mine/1.0", "x-memwire-session": "s"}),
                lambda: client.post(proxy.url + "/v1/chat/completions", json=chat),  # after the upstream set a cookie
            ]
            out = []
            for call in calls:
                client.cookies.clear()  # the caller keeps none: a cookie upstream can only come from the proxy
                out.append(call())
            return out
    finally:
        proxy.stop()


def test_own_client_sends_what_an_injected_client_sends(upstream: tuple[Recorder, str], tmp_path: Any) -> None:
    rec, url = upstream
    store = MemoryStore(tmp_path / "mem")
    store.add("The project database is PostgreSQL 16")
    mw = Middleware(store=store, mode="contextPerTurn")
    mw.warm_up()
    own = _exchange(create_app(mw, openai_upstream=url))
    direct, rec.seen = rec.seen, []
    injected = _exchange(create_app(mw, openai_upstream=url, client=default_client()))
    through_client = rec.seen

    assert [r.status_code for r in own] == [r.status_code for r in injected] == [200, 200, 200]
    assert [r.content for r in own] == [r.content for r in injected]
    assert [r.headers.get("x-memwire-injected") for r in own] == ["1", None, "1"]

    def norm(seen: list[tuple[str, str, list[tuple[bytes, bytes]], bytes]]) -> list[Any]:
        # the cookie the upstream set: httpx's client keeps it and sends it on every later request
        # (anyone's); the proxy's own client never does. Everything else must be identical.
        return [(m, p, [(k, v) for k, v in h if k != b"cookie"], b) for m, p, h, b in seen]

    assert norm(direct) == norm(through_client)
    assert [dict(h).get(b"user-agent") for _, _, h, _ in direct][:2] == [b"python-httpx/" + httpx.__version__.encode(),
                                                                        b"mine/1.0"]
    assert all(b"cookie" not in dict(h) for _, _, h, _ in direct)
    assert dict(through_client[2][2]).get(b"cookie") == b"__cf_bm=abc"  # what httpx's cookie jar does
    assert direct[1][1] == "/v1/models?limit=2"


class RawUpstream:
    """A raw TCP server on 127.0.0.1 handing each connection to ``_take`` (until its socket is
    closed)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self._take(conn)

    def _take(self, conn: socket.socket) -> None:
        raise NotImplementedError


class ClosesIdleConnections(RawUpstream):
    """A raw HTTP/1.1 upstream that answers one request per connection with keep-alive, then
    closes the connection when the next request arrives on it: a pooled connection the upstream
    dropped while idle, met at the moment it is reused."""

    def __init__(self) -> None:
        self.answered = 0
        self.dropped = 0
        super().__init__()

    def _take(self, conn: socket.socket) -> None:
        threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _read_request(conn: socket.socket) -> bool:
        data = b""
        while b"\r\n\r\n" not in data:
            more = conn.recv(65536)
            if not more:
                return False
            data += more
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(next(v for k, _, v in (line.partition(b":") for line in head.split(b"\r\n"))
                          if k.lower() == b"content-length") or 0)
        while len(body) < length:
            body += conn.recv(65536)
        return True

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            self._read_request(conn)
            payload = b'{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"}}]}'
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                         % (len(payload), payload))
            self.answered += 1
            # the next request on this connection: read whole (a clean close, not a reset), never answered
            if self._read_request(conn):
                self.dropped += 1


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/embeddings"])  # a memory route; a pass-through one
@pytest.mark.parametrize("aio", [True, False], ids=["aiohttp", "httpx"])
def test_a_pooled_connection_the_upstream_closed_is_retried_once(tmp_path: Any, aio: bool, path: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("memwire.adapters.server._proxy.aio_available", lambda: aio)
    up = ClosesIdleConnections()
    mw = Middleware(store=MemoryStore(tmp_path / "mem"), mode="contextPerTurn")
    app = create_app(mw, openai_upstream=up.url)
    proxy = Served(app)
    try:
        with httpx.Client(timeout=10) as client:
            chat = {"model": "m", "messages": [{"role": "user", "content": "hello there"}]}
            # 10: httpx's transport has 8 pools used in turn, so the 9th request reuses a connection
            answers = [client.post(proxy.url + path, json=chat) for _ in range(10)]
    finally:
        proxy.stop()
        up.sock.close()
    assert [r.status_code for r in answers] == [200] * 10
    assert up.answered == 10 and up.dropped >= 1  # each reuse of a dropped connection was sent again


class Silent(RawUpstream):
    """An upstream that accepts connections, reads, and never answers."""

    def __init__(self) -> None:
        self.held: list[socket.socket] = []
        super().__init__()

    def _take(self, conn: socket.socket) -> None:
        self.held.append(conn)  # kept open, never answered

    def close(self) -> None:
        for conn in self.held:
            conn.close()
        self.sock.close()


@pytest.mark.parametrize("aio", [True, False], ids=["aiohttp", "httpx"])
def test_an_upstream_that_never_answers_is_a_504_and_one_that_refuses_a_502(
        tmp_path: Any, aio: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("memwire.adapters.server._proxy.aio_available", lambda: aio)
    silent = Silent()
    refused = socket.create_server(("127.0.0.1", 0))
    refused_url = f"http://127.0.0.1:{refused.getsockname()[1]}"
    refused.close()  # nothing listens there any more
    mw = Middleware(store=MemoryStore(tmp_path / "mem"), mode="contextPerTurn")
    chat = {"model": "m", "messages": [{"role": "user", "content": "hello there"}]}
    try:
        for upstream, status, code in ((silent.url, 504, "upstream_timeout"), (refused_url, 502, "upstream_unreachable")):
            proxy = Served(create_app(mw, openai_upstream=upstream, timeout=0.5))
            try:
                r = httpx.post(proxy.url + "/v1/chat/completions", json=chat, timeout=10)
            finally:
                proxy.stop()
            assert (r.status_code, r.json()["error"]["code"]) == (status, code)
    finally:
        silent.close()


def test_answer_headers_are_found_whatever_case_the_upstream_wrote_them_in() -> None:
    from memwire.adapters.server._aio import RawHeaders

    headers = RawHeaders([(b"Content-Type", b"text/event-stream"), (b"x-a", b"1"), (b"X-A", b"2")])
    assert headers.get("content-type") == "text/event-stream"
    assert headers.get("x-a") == "1"  # the first, as httpx.Headers.get would not: none of ours repeat
    assert headers.get("content-encoding") is None and headers.get("content-encoding", "identity") == "identity"
    assert headers["Content-type"] == "text/event-stream" and list(headers) == ["content-type", "x-a"] and len(headers) == 2
    with pytest.raises(KeyError):
        headers["content-encoding"]


async def test_the_aiohttp_transport_is_an_httpx_transport_too(upstream: tuple[Recorder, str]) -> None:
    """What ``default_client(transport=AioTransport())`` gives: an httpx client sending through
    aiohttp, with httpx's answers and errors."""
    pytest.importorskip("aiohttp")
    from memwire.adapters.server._aio import AioTransport

    rec, url = upstream
    async with httpx.AsyncClient(transport=AioTransport()) as client:
        r = await client.post(url + "/v1/chat/completions?x=1", content=b'{"a": 1}',
                              headers={"authorization": "Bearer k"})
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "PostgreSQL 16."
        assert r.headers["content-type"] == "application/json"

        async def body():
            yield b'{"b": '
            yield b"2}"
        r = await client.post(url + "/v1/embeddings", content=body())
        assert r.status_code == 200
        closed = socket.create_server(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        closed.close()
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://127.0.0.1:{port}/v1/models")
    assert [(m, p, b) for m, p, _, b in rec.seen] == [("POST", "/v1/chat/completions?x=1", b'{"a": 1}'),
                                                      ("POST", "/v1/embeddings?", b'{"b": 2}')]
    assert dict(rec.seen[0][2])[b"authorization"] == b"Bearer k"
