"""The proxy's limits, on a real uvicorn server over real sockets: header and body read timeouts,
the connection limit, the cap on new namespaces, and huge bodies prepared off the event loop."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from memwire import MemoryStore, Middleware
from memwire.adapters.proxy import OFFLOAD_BYTES, create_app
from memwire.adapters.server import protocol_with_header_timeout
from memwire.sim.fake_provider import FakeProvider

QUESTION = {"model": "m", "messages": [{"role": "user", "content": "Which database does staging use?"}]}


def _proxy(tmp_path: Path, **config: Any) -> tuple[Any, FakeProvider, Middleware]:
    store = MemoryStore(tmp_path / "mem")
    store.add("The staging database is Postgres 16")
    mw = Middleware(store=store, **config)
    mw.warm_up()  # no test passes or fails on the retrieval budget
    fake = FakeProvider()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=fake))
    return create_app(mw, openai_upstream="http://up", anthropic_upstream="http://up", client=client), fake, mw


class _Server:
    """uvicorn serving an app on 127.0.0.1 in a thread, the way ``memwire proxy`` runs it."""

    def __init__(self, app: Any, header_timeout: float = 10.0, max_connections: int = 1000) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off",
                                http=protocol_with_header_timeout(header_timeout), limit_concurrency=max_connections)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> _Server:
        self.thread.start()
        for _ in range(500):
            if self.server.started:
                break
            threading.Event().wait(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(10)

    def url(self, path: str = "/v1/chat/completions") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def sock(self) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        return s


def _closed_by_server(s: socket.socket) -> bool:
    """True when the server closed the connection (recv returns b"" or the reset), within the
    socket's timeout (a hang guard, not the behaviour under test)."""
    try:
        return s.recv(1024) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def _read_response(s: socket.socket) -> str:
    data = b""
    while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < _length(data):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return data.decode()


def _length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":", 1)[1])
    return 0


def test_a_connection_that_never_finishes_its_headers_is_closed(tmp_path: Path) -> None:
    app, _, _ = _proxy(tmp_path)
    with _Server(app, header_timeout=0.3) as srv:
        slow = srv.sock()
        slow.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: appl")
        silent = srv.sock()  # opens and sends nothing at all
        assert _closed_by_server(slow) and _closed_by_server(silent)
        r = httpx.post(srv.url(), json=QUESTION, timeout=10)  # everyone else is served
        assert r.status_code == 200 and r.headers["x-memwire-injected"] == "1"


def test_a_keep_alive_connection_gets_the_header_timeout_for_its_next_request(tmp_path: Path) -> None:
    app, _, _ = _proxy(tmp_path)
    with _Server(app, header_timeout=0.3) as srv:
        s = srv.sock()
        body = json.dumps(QUESTION).encode()
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        first = s.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        s.sendall(b"GET /v1/models HTTP/1.1\r\nHost:")  # the next request starts, and stalls
        assert _closed_by_server(s)


def test_a_body_that_stalls_gets_a_408_in_the_apis_format(tmp_path: Path) -> None:
    app, fake, _ = _proxy(tmp_path, proxy_body_timeout=0.3)
    with _Server(app) as srv:
        s = srv.sock()
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000\r\n\r\n{\"model\": ")
        answer = _read_response(s)
    assert answer.startswith("HTTP/1.1 408")
    error = json.loads(answer.split("\r\n\r\n", 1)[1])["error"]
    assert "not received within 0.3 s" in error["message"] and error["code"] == "request_timeout"
    assert fake.requests == []


def test_past_the_connection_limit_requests_get_503_not_a_hang(tmp_path: Path) -> None:
    app, _, _ = _proxy(tmp_path)
    with _Server(app, max_connections=3) as srv:
        idle = [srv.sock() for _ in range(3)]
        r = httpx.post(srv.url(), json=QUESTION, timeout=10)
        assert r.status_code == 503
        for s in idle:
            s.close()
        for _ in range(200):  # the server notices the closes on its loop
            r = httpx.post(srv.url(), json=QUESTION, timeout=10)
            if r.status_code == 200:
                break
            threading.Event().wait(0.02)
        assert r.status_code == 200


async def test_new_namespaces_are_capped_per_client_and_in_all(tmp_path: Path) -> None:
    app, _, _ = _proxy(tmp_path, proxy_new_namespaces_per_minute=2, proxy_max_namespaces=4)
    MemoryStore.for_namespace(tmp_path / "mem", "existing").add("Existing namespace fact")
    transport = httpx.ASGITransport(app=app)

    async def post(ns: str, key: str = "sk-a") -> httpx.Response:
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as http:
            return await http.post("/v1/chat/completions", json=QUESTION,
                                   headers={"x-memwire-namespace": ns, "authorization": f"Bearer {key}"})

    assert [(await post(ns)).status_code for ns in ("n1", "n2", "n3")] == [200, 200, 429]
    refused = (await post("n3")).json()["error"]
    assert refused["code"] == "memwire_namespace_limit" and "a minute per client" in refused["message"]
    assert (await post("n1")).status_code == 200 and (await post("existing")).status_code == 200
    assert (await post("n4", key="sk-b")).status_code == 200  # another client has its own minute
    total = await post("n5", key="sk-c")  # existing, n1, n2, n4: the total is reached
    assert total.status_code == 429 and "limit of 4 namespaces" in total.json()["error"]["message"]
    assert not (tmp_path / "mem" / "namespaces" / "n3").exists()


async def test_a_huge_body_does_not_hold_up_a_small_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app, fake, mw = _proxy(tmp_path)
    started, release = threading.Event(), threading.Event()
    held_everyone: list[bool] = []
    prepare, aprepare = mw.prepare_request, mw.aprepare_request

    def slow_if_big(body: dict[str, Any], *a: Any, **k: Any) -> Any:
        if len(json.dumps(body)) > OFFLOAD_BYTES:  # stands for the CPU a huge body costs
            started.set()
            if not release.wait(10):  # only the test's release ends it, unless the loop was held
                held_everyone.append(True)
        return prepare(body, *a, **k)

    async def aslow_if_big(body: dict[str, Any], *a: Any, **k: Any) -> Any:
        slow_if_big(body)  # on the event loop, this would hold up everyone
        return await aprepare(body, *a, **k)

    monkeypatch.setattr(mw, "prepare_request", slow_if_big)
    monkeypatch.setattr(mw, "aprepare_request", aslow_if_big)
    huge = {"model": "m", "messages": [{"role": "user", "content": "x " * OFFLOAD_BYTES + "Which database?"}]}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy") as http:
        big = asyncio.create_task(http.post("/v1/chat/completions", json=huge))
        while not started.is_set():
            await asyncio.sleep(0.01)
        small = await asyncio.wait_for(http.post("/v1/chat/completions", json=QUESTION), 20)
        release.set()
        assert (await big).status_code == 200
    assert small.status_code == 200 and not held_everyone  # the small one was served while the big one was prepared
