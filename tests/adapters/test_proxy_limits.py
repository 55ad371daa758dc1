"""The proxy's limits, on a real uvicorn server over real sockets: header and body read timeouts,
the connection limit, the cap on new namespaces, and huge bodies prepared off the event loop; and
what it does when the disk or the memory directory fails it, and what it logs."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import socket
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import uvicorn

from memwire import MemoryStore, Middleware
from memwire.adapters.server._proxy import BUFFER_BYTES, OFFLOAD_BYTES, create_app
from memwire.adapters.server._server import protocol_with_header_timeout
from memwire.cli import main
from memwire.policies.modes import _ledger as ledger
from memwire._sim.fake_provider import FakeProvider, serve_in_thread
from memwire._sim.quick_server import QuickServer

if TYPE_CHECKING:
    from typing_extensions import Self

QUESTION = {"model": "m", "messages": [{"role": "user", "content": "Which database does staging use?"}]}


def _proxy(tmp_path: Path, app_kw: dict[str, Any] | None = None, **config: Any) -> tuple[Any, FakeProvider, Middleware]:
    store = MemoryStore(tmp_path / "mem")
    store.add("The staging database is Postgres 16")
    mw = Middleware(store=store, **config)
    mw.warm_up()  # no test passes or fails on the retrieval budget
    fake = FakeProvider()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=fake))
    app = create_app(mw, openai_upstream="http://up", anthropic_upstream="http://up", client=client, **(app_kw or {}))
    return app, fake, mw


class _Server:
    """uvicorn serving an app on 127.0.0.1 in a thread, the way ``memwire proxy`` runs it."""

    def __init__(self, app: Any, header_timeout: float = 10.0, max_connections: int = 1000, lifespan: str = "off") -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan=lifespan,
                                http=protocol_with_header_timeout(header_timeout), limit_concurrency=max_connections)
        self.server = QuickServer(config)  # uvicorn's, stopped at once rather than at its next 0.1 s tick
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        for _ in range(500):
            if self.server.started:
                break
            threading.Event().wait(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
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
    except TimeoutError:
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
        assert _read_response(s).startswith("HTTP/1.1 200")  # all of it: the next recv must see the close
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


async def _post_ns(app: Any, ns: str, addr: str = "10.0.0.1", credential: str = "sk-a",
                   key: str | None = None) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, client=(addr, 40000))
    headers = {"x-memwire-namespace": ns, "authorization": f"Bearer {credential}"}
    if key:
        headers["x-memwire-key"] = key
    async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as http:
        return await http.post("/v1/chat/completions", json=QUESTION, headers=headers)


async def test_new_namespaces_are_capped_per_client_and_in_all(tmp_path: Path) -> None:
    app, _, _ = _proxy(tmp_path, proxy_new_namespaces_per_minute=2, proxy_max_namespaces=4)
    MemoryStore.for_namespace(tmp_path / "mem", "existing").add("Existing namespace fact")
    codes = [(await _post_ns(app, ns, credential=f"sk-{ns}")).status_code for ns in ("n1", "n2", "n3")]
    assert codes == [200, 200, 429]  # a made-up provider key per request buys no fresh minute
    refused = (await _post_ns(app, "n3")).json()["error"]
    assert refused["code"] == "memwire_namespace_limit" and "at most 2 a minute" in refused["message"]
    assert "proxy_new_namespaces_per_minute" in refused["message"]
    assert (await _post_ns(app, "n1")).status_code == 200 and (await _post_ns(app, "existing")).status_code == 200
    assert (await _post_ns(app, "n4", addr="10.0.0.2")).status_code == 200  # another client has its own minute
    total = await _post_ns(app, "n5", addr="10.0.0.3")  # existing, n1, n2, n4: the total is reached
    assert total.status_code == 429 and "limit of 4 namespaces" in total.json()["error"]["message"]
    assert "proxy_max_namespaces" in total.json()["error"]["message"]
    assert not (tmp_path / "mem" / "namespaces" / "n3").exists()


async def test_with_a_proxy_key_its_clients_share_one_minute_of_new_namespaces(tmp_path: Path) -> None:
    app, _, _ = _proxy(tmp_path, app_kw={"proxy_key": "k"}, proxy_new_namespaces_per_minute=1)
    assert (await _post_ns(app, "a1", addr="10.0.0.1", key="k")).status_code == 200
    refused = await _post_ns(app, "a2", addr="10.0.0.2", key="k", credential="sk-other")
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "memwire_namespace_limit"


async def test_a_namespace_cap_refusal_is_in_anthropics_format_on_its_route(tmp_path: Path) -> None:
    app, _, _ = _proxy(tmp_path, proxy_new_namespaces_per_minute=0)
    body = {"model": "claude", "max_tokens": 10, "messages": [{"role": "user", "content": "Which database?"}]}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy") as http:
        r = await http.post("/v1/messages", json=body, headers={"x-memwire-namespace": "bob", "x-api-key": "sk"})
    assert r.status_code == 429
    assert r.json()["type"] == "error" and r.json()["error"]["type"] == "rate_limit_error"


async def test_a_huge_body_does_not_hold_up_a_small_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app, _, mw = _proxy(tmp_path)
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


# ------------------------------------------------------------------ timeouts never cut a response


def test_a_passthrough_body_that_stalls_gets_a_408_too(tmp_path: Path) -> None:
    app, _, mw = _proxy(tmp_path)
    with serve_in_thread(FakeProvider()) as up:
        app = create_app(mw, openai_upstream=up.base_url, anthropic_upstream=up.base_url, body_timeout=0.3)
        with _Server(app, lifespan="on") as srv:
            s = srv.sock()
            s.sendall(b"POST /v1/files HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                      b"Content-Length: 1000\r\n\r\nfirst bytes")
            answer = _read_response(s)
    assert answer.startswith("HTTP/1.1 408")
    error = json.loads(answer.split("\r\n\r\n", 1)[1])["error"]
    assert error["code"] == "request_timeout" and "11 bytes arrived" in error["message"]


def test_an_upload_bigger_than_the_buffer_streams_through_as_it_arrives(tmp_path: Path) -> None:
    first_part = threading.Event()
    got: list[int] = []

    async def upstream(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        size = 0
        while True:
            message = await receive()
            size += len(message.get("body", b""))
            if size:
                first_part.set()
            if not message.get("more_body"):
                break
        got.append(size)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b"{}"})

    _, _, mw = _proxy(tmp_path)
    size = BUFFER_BYTES + 1
    with serve_in_thread(upstream) as up:
        app = create_app(mw, openai_upstream=up.base_url, anthropic_upstream=up.base_url)
        with _Server(app, lifespan="on") as srv:
            s = srv.sock()
            s.sendall(b"POST /v1/files HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                      b"Content-Length: %d\r\n\r\n" % size + b"x" * (size // 2))
            arrived = first_part.wait(10)  # before the rest is sent: the proxy did not wait for it
            s.sendall(b"x" * (size - size // 2))
            answer = _read_response(s)
    assert arrived and answer.startswith("HTTP/1.1 200") and got == [size]


@pytest.mark.parametrize("path", ["/v1/files", "/v1/chat/completions"])  # streamed through; read first
def test_a_client_that_leaves_mid_body_is_logged_as_499(tmp_path: Path, path: str,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    _, _, mw = _proxy(tmp_path)
    fake = FakeProvider()
    caplog.set_level(logging.INFO)
    with serve_in_thread(fake) as up:
        app = create_app(mw, openai_upstream=up.base_url, anthropic_upstream=up.base_url)
        with _Server(app, lifespan="on") as srv:
            s = srv.sock()
            s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      "Content-Length: 1000\r\n\r\n{\"model\": ".encode())
            threading.Event().wait(0.2)  # the proxy has begun reading the body
            s.close()
            for _ in range(500):
                if any(r.name == "memwire.proxy" for r in caplog.records):
                    break
                threading.Event().wait(0.01)
    lines = [r.getMessage() for r in caplog.records if r.name == "memwire.proxy"]
    assert len(lines) == 1 and lines[0].startswith(f"POST {path} 499 injected=0 "), lines
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert fake.requests == []


def test_a_long_streamed_answer_outlives_the_header_and_body_timeouts(tmp_path: Path) -> None:
    release = threading.Event()

    async def slow_stream(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b"data: first\n\n", "more_body": True})
        for _ in range(2000):  # until the test says so (a hang guard of 20 s)
            if release.is_set():
                break
            await asyncio.sleep(0.01)
        await send({"type": "http.response.body", "body": b"data: last\n\n", "more_body": False})

    _, _, mw = _proxy(tmp_path)
    with serve_in_thread(slow_stream) as up:
        app = create_app(mw, openai_upstream=up.base_url, anthropic_upstream=up.base_url, body_timeout=0.3)
        with _Server(app, header_timeout=0.3, lifespan="on") as srv:
            s = srv.sock()
            body = json.dumps({**QUESTION, "stream": True}).encode()
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: "
                      b"application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            got = b""
            while b"data: first" not in got:
                chunk = s.recv(65536)
                assert chunk, "the stream ended before its first event"
                got += chunk
            # Two requests that start after it and that the server does time out: once both have
            # been timed out, the stream's own header and body timeouts would have fired too.
            idle = srv.sock()
            stalled = srv.sock()
            stalled.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{")
            assert _closed_by_server(idle) and _read_response(stalled).startswith("HTTP/1.1 408")
            release.set()
            while chunk := s.recv(65536):
                got += chunk
    assert got.startswith(b"HTTP/1.1 200") and b"data: last" in got


# ------------------------------------------------------------------ memwire proxy: logs, flags, an unusable dir


@pytest.fixture
def run_proxy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``memwire proxy ARGS`` with uvicorn.run captured: returns (exit code, uvicorn.run's arguments)."""
    monkeypatch.chdir(tmp_path)
    levels = {name: logging.getLogger(name).level for name in ("httpx", "httpcore")}

    def run(*args: str) -> tuple[int, dict[str, Any]]:
        served: dict[str, Any] = {}
        monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.update(app=app, **kw))
        return main(["proxy", "--workers", "1", *args]), served  # one process: uvicorn.run gets the app

    yield run
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


async def test_debug_logs_carry_no_upstream_response_headers(tmp_path: Path, run_proxy: Any,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    async def cookie(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"set-cookie", b"session=SECRET-COOKIE"), (b"x-upstream-token", b"SECRET-TOKEN"),
                (b"content-length", b"2")]})
            await send({"type": "http.response.body", "body": b"{}"})

    caplog.set_level(logging.DEBUG)
    with serve_in_thread(cookie) as up:
        code, served = run_proxy("--dir", str(tmp_path / "mem"), "--log-level", "debug", "--openai-upstream", up.base_url)
        app = served["app"]
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy") as http:
            r = await http.get("/v1/models")
        await app.state.proxy.client.aclose()
    assert code == 0 and r.status_code == 200 and r.headers["set-cookie"] == "session=SECRET-COOKIE"  # relayed
    assert "GET /v1/models 200" in caplog.text  # the proxy's own line: status, path, time
    assert "SECRET" not in caplog.text and "set-cookie" not in caplog.text.lower()


@pytest.mark.parametrize("problem", ["file", "unreadable"])
def test_the_proxy_refuses_to_start_on_an_unusable_dir(
    tmp_path: Path, run_proxy: Any, problem: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A memory directory the person named that cannot be used is said at start in one line, exit 2,
    as `memwire add` says it (issue 34 item 1); the proxy does not serve with memory off."""
    if problem == "file":
        where = tmp_path / "notes.txt"
        where.write_text("x")
    else:  # root reads a mode-000 directory: make it look unreadable to the check instead
        where = tmp_path / "locked"
        MemoryStore(where).add("The staging database is Postgres 16")
        real_access = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == where else real_access(p, mode, **kw))
    code, served = run_proxy("--dir", str(where))
    err = capsys.readouterr().err
    why = "the memory directory is a file, not a directory" if problem == "file" else "is not readable"
    assert code == 2 and served == {} and err.count("\n") == 1 and str(where) in err and why in err
    if problem == "file":
        assert where.read_text() == "x"
    else:
        assert not (where / "namespaces").exists()


def test_proxy_flags_reach_the_server_and_the_app(tmp_path: Path, run_proxy: Any) -> None:
    code, served = run_proxy("--dir", str(tmp_path / "mem"), "--header-timeout", "3", "--body-timeout", "7",
                             "--max-connections", "50", "--new-namespaces-per-minute", "5", "--max-namespaces", "9")
    proxy = served["app"].state.proxy
    assert code == 0 and served["limit_concurrency"] == 50 and served["http"].header_timeout == 3
    assert proxy.body_timeout == 7 and proxy.quota.per_minute == 5 and proxy.quota.total == 9 and proxy.memory


@pytest.mark.parametrize("flag", ["--new-namespaces-per-minute", "--max-namespaces"])
def test_namespace_cap_flags_are_checked(tmp_path: Path, run_proxy: Any, flag: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, served = run_proxy("--dir", str(tmp_path / "mem"), flag, "-1")
    err = capsys.readouterr().err
    assert code == 2 and flag in err and "Traceback" not in err and not served


# ------------------------------------------------------------------ a full or unreadable disk


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
async def test_a_full_disk_never_fails_the_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                caplog: pytest.LogCaptureFixture) -> None:
    app, fake, _ = _proxy(tmp_path)
    mem = str(tmp_path / "mem")
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    real_mkstemp, real_open, real_mkdir = tempfile.mkstemp, os.open, os.mkdir

    def mkstemp(*a: Any, **kw: Any) -> Any:
        if str(kw.get("dir", "")).startswith(mem):
            raise full
        return real_mkstemp(*a, **kw)

    def open_(path: Any, flags: int, *a: Any, **kw: Any) -> int:
        if str(path).startswith(mem) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise full
        return real_open(path, flags, *a, **kw)

    def mkdir(path: Any, *a: Any, **kw: Any) -> None:
        if str(path).startswith(mem):
            raise full
        real_mkdir(path, *a, **kw)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    monkeypatch.setattr(os, "open", open_)
    monkeypatch.setattr(os, "mkdir", mkdir)
    caplog.set_level(logging.WARNING)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy") as http:
        answers = []
        for ns in ("default", "default", "carol"):  # a turn twice (tool loop), then a new namespace
            answers.append(await http.post("/v1/chat/completions", json=QUESTION, headers={"x-memwire-namespace": ns}))
            ledger.flush()  # the ledger is saved off the request path: wait for it to have failed
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert [a.headers["x-memwire-injected"] for a in answers[:2]] == ["1", "1"]
    assert fake.requests[0].raw == fake.requests[1].raw  # the same block on the turn's second request
    assert not any("Traceback" in a.text for a in answers)
    saves = [r for r in caplog.records if "could not save ledger" in r.getMessage()]
    assert saves and all("No space left" in r.getMessage() and r.exc_info is None for r in saves)


async def test_an_unreadable_namespaces_directory_passes_the_request_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, fake, _ = _proxy(tmp_path)
    namespaces = tmp_path / "mem" / "namespaces"
    namespaces.mkdir()
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:
        if Path(path) == namespaces:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    raw = json.dumps(QUESTION).encode()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy") as http:
        r = await http.post("/v1/chat/completions", content=raw, headers={"x-memwire-namespace": "dave",
                                                                          "content-type": "application/json"})
    assert r.status_code == 200 and r.headers["x-memwire-injected"] == "0" and fake.last.raw == raw
    assert not (namespaces / "dave").exists()
