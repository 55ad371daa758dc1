"""Faults and bad input at the proxy's edges, on a real server (uvicorn on 127.0.0.1) with real
clients: errors name no server path or database address (an error id instead, carried by the one
log line that has the details), every route wants its key, a store outage is one log line, a
stream that breaks off is one memwire line and a cut connection, and namespaces compare
case-folded."""

from __future__ import annotations

import json
import logging
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from memwire import MemoryStore, Middleware
from memwire._errors import ConfigError
from memwire._sim.fake_provider import FakeProvider, serve_in_thread
from memwire.adapters.server._keys import KeyRing, add_key
from memwire.adapters.server._proxy import create_app
from memwire.cli import main
from tests.stores import need_psycopg

from .test_proxy_stream import Served

V1 = "/memwire/v1"
ERROR_ID = re.compile(r"mw-[0-9a-f]{8}")
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Which database does staging use?"}]}


class Lines(logging.Handler):
    """The records of a logger, as its handlers get them (after its filters)."""

    def __init__(self, name: str) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.logger = logging.getLogger(name)

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def __enter__(self) -> Lines:
        self.logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self)

    def messages(self, level: int = logging.DEBUG) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno >= level]


@pytest.fixture
def upstream() -> Iterator[tuple[FakeProvider, str]]:
    fake = FakeProvider()
    with serve_in_thread(fake) as server:
        yield fake, server.base_url


def serve(mw: Middleware, upstream: str = "http://127.0.0.1:9", **kw: Any) -> Served:
    return Served(create_app(mw, openai_upstream=upstream, anthropic_upstream=upstream, **kw))


def warmed(store: Any) -> Middleware:
    mw = Middleware(store=store, mode="contextPerTurn")
    mw.warm_up()  # no test passes or fails on the retrieval budget of a cold start
    return mw


def one_id(text: str) -> str:
    [eid] = set(ERROR_ID.findall(text))
    return eid


# ------------------------------------------------------------------ errors name no server path


def test_a_store_that_cannot_be_used_is_named_by_an_error_id_only(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "file").write_text("not a directory")
    where = str(tmp_path)
    caplog.set_level(logging.WARNING, logger="memwire")
    proxy = serve(Middleware(store=MemoryStore(tmp_path / "file")))
    try:
        with Lines("uvicorn.error") as server_lines:
            api = [httpx.get(proxy.url + f"{V1}/memories"), httpx.get(proxy.url + f"{V1}/memories/abcd1234"),
                   httpx.post(proxy.url + f"{V1}/memories", json={"text": "Deploys go out on Tuesdays"})]
            page = httpx.get(proxy.url + "/memwire/ui")
    finally:
        proxy.stop()
    for r in api:
        body = r.json()
        assert r.status_code == 503 and body["error"]["code"] == "memory_unavailable", r.text
        assert where not in r.text and "file" not in body["error"]["message"]
    assert page.status_code == 503 and where not in page.text and "Traceback" not in page.text
    logged = [r.getMessage() for r in caplog.records if ERROR_ID.search(r.getMessage())]
    # each error id the clients got is in a log line, and that line has the details
    for text in [r.text for r in api] + [page.text]:
        eid = one_id(text)
        assert any(eid in line and where in line for line in logged), (eid, logged)
    assert server_lines.messages(logging.ERROR) == []  # no traceback from the server


def test_a_client_error_names_the_id_not_the_directory(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")
    store.add("The staging database listens on port 5433")
    proxy = serve(Middleware(store=store))
    try:
        missing = httpx.get(proxy.url + f"{V1}/memories/deadbeef00")
        forget = httpx.delete(proxy.url + f"{V1}/memories/deadbeef00", headers={"x-memwire-namespace": "alice"})
        page = httpx.post(proxy.url + "/memwire/ui/memories/deadbeef00/forget",
                          headers={"origin": proxy.url})
    finally:
        proxy.stop()
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert "no memory with id 'deadbeef00'" in missing.json()["error"]["message"]
    assert forget.status_code == 404
    assert page.status_code == 404 and "deadbeef00" in page.text
    for r in (missing, forget, page):
        assert str(tmp_path) not in r.text and "/mem" not in r.text, r.text


async def test_the_mcp_server_names_a_broken_store_by_an_error_id(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from mcp import Client

    from memwire.adapters.server._mcp import build_server

    store = MemoryStore(tmp_path / "mem")
    store.add("The staging database listens on port 5433")
    caplog.set_level(logging.WARNING, logger="memwire")
    async with Client(build_server(store)) as client:
        missing = await client.call_tool("memory_forget", {"id": "deadbeef00"})
        (tmp_path / "mem" / ".lock").unlink(missing_ok=True)
        (tmp_path / "mem" / ".lock").mkdir()  # the directory's write lock cannot be taken
        broken = [await client.call_tool("memory_add", {"text": f"Builds need Python 3.1{i}"}) for i in range(3)]
    said = " ".join(getattr(c, "text", "") for c in missing.content)
    assert missing.is_error and "no memory with id 'deadbeef00'" in said and str(tmp_path) not in said
    texts = [" ".join(getattr(c, "text", "") for c in r.content) for r in broken]
    assert all(r.is_error for r in broken) and all(str(tmp_path) not in t for t in texts)
    eid = one_id(" ".join(texts))  # one failure going on: one id
    logged = [r.getMessage() for r in caplog.records if "memwire mcp" in r.getMessage()]
    assert len(logged) == 1 and eid in logged[0] and str(tmp_path) in logged[0], logged


def test_an_unexpected_error_is_a_500_in_the_apis_format_with_an_id(
        tmp_path: Path, upstream: tuple[FakeProvider, str], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    fake, url = upstream
    mw = warmed(MemoryStore(tmp_path / "mem"))
    proxy = serve(mw, url)
    secret_path = str(tmp_path / "deep" / "inside")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"something broke under {secret_path}")

    monkeypatch.setattr(_proxy_of(proxy), "_check", broken)
    caplog.set_level(logging.DEBUG, logger="memwire.proxy")
    try:
        with Lines("uvicorn.error") as server_lines:
            with pytest.raises(openai.InternalServerError) as oa:
                openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0).chat.completions.create(**CHAT)
            with pytest.raises(anthropic.InternalServerError) as an:
                anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-test", max_retries=0).messages.create(
                    model="claude-sonnet-4-5", max_tokens=20, messages=CHAT["messages"])
    finally:
        proxy.stop()
    assert oa.value.status_code == 500 and oa.value.body["code"] == "memwire_error"  # type: ignore[index]
    assert an.value.status_code == 500 and an.value.body["error"]["type"] == "api_error"  # type: ignore[index]
    for err in (oa.value, an.value):
        text = json.dumps(err.body)
        eid = one_id(text)
        assert secret_path not in text and "TypeError" not in text
        [line] = [r for r in caplog.records if r.levelno >= logging.ERROR and eid in r.getMessage()]
        assert "unexpected TypeError" in line.getMessage()
    assert server_lines.messages(logging.ERROR) == []  # one memwire line, not uvicorn's traceback
    assert fake.requests == []


def _proxy_of(served: Served) -> Any:
    app = served.server.config.loaded_app
    while not hasattr(app, "state"):
        app = app.app  # uvicorn's own middleware around the app
    return app.state.proxy


def test_an_unreachable_upstream_is_not_named_by_its_address(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}/internal-prefix"
    proxy = serve(warmed(MemoryStore(tmp_path / "mem")), closed)
    try:
        with pytest.raises(openai.APIStatusError) as oa:
            openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0).chat.completions.create(**CHAT)
    finally:
        proxy.stop()
    assert oa.value.status_code == 502 and "internal-prefix" not in json.dumps(oa.value.body)
    assert "OpenAI-compatible upstream is unreachable" in oa.value.message


# ------------------------------------------------------------------ the OpenAPI document wants a key


def test_the_openapi_document_needs_a_key_like_every_route_but_healthz(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    client_key, _ = add_key(keys, "alice")
    proxy = serve(Middleware(store=MemoryStore(tmp_path / "mem")), keys_file=keys, proxy_key="admin-key")
    try:
        anonymous = httpx.get(proxy.url + f"{V1}/openapi.json")
        wrong = httpx.get(proxy.url + f"{V1}/openapi.json", headers={"x-memwire-key": "mwk_nope"})
        by_client = httpx.get(proxy.url + f"{V1}/openapi.json", headers={"x-memwire-key": client_key})
        by_admin = httpx.get(proxy.url + f"{V1}/openapi.json", headers={"x-memwire-key": "admin-key"})
        health = httpx.get(proxy.url + "/memwire/healthz")
    finally:
        proxy.stop()
    for r in (anonymous, wrong):
        assert r.status_code == 401 and r.json() == {"error": {"code": "invalid_memwire_key",
                                                               "message": "missing or wrong x-memwire-key header"}}
    assert by_client.status_code == 200 and by_client.json()["openapi"].startswith("3.1")
    assert by_admin.status_code == 200 and health.status_code == 200


def test_without_keys_the_openapi_document_is_open(tmp_path: Path) -> None:
    proxy = serve(Middleware(store=MemoryStore(tmp_path / "mem")))
    try:
        assert httpx.get(proxy.url + f"{V1}/openapi.json").status_code == 200
    finally:
        proxy.stop()


# ------------------------------------------------------------------ a database outage: one line


def _api_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("memwire: memory API")]


def test_a_database_that_cannot_be_reached_is_one_line_of_the_memory_api(caplog: pytest.LogCaptureFixture) -> None:
    need_psycopg()
    from memwire.memory.postgres._store import PgStore

    caplog.set_level(logging.WARNING, logger="memwire")
    proxy = serve(Middleware(store=PgStore("postgresql://postgres:hunter2@127.0.0.1:1/outage-test")))
    try:
        answers = [httpx.post(proxy.url + f"{V1}/memories", json={"text": f"Deploys go out on day {i}"},
                              headers={"x-memwire-namespace": f"team{i % 2}"}, timeout=30) for i in range(6)]
    finally:
        proxy.stop()
    assert {r.status_code for r in answers} == {503}
    assert all("127.0.0.1:1" not in r.text and "postgresql" not in r.text and "hunter2" not in r.text
               for r in answers)
    ids = {one_id(r.text) for r in answers}
    lines = _api_lines(caplog)
    assert len(ids) == 1 and len(lines) == 1 and ids.pop() in lines[0], lines  # once, not once per write
    assert "hunter2" not in caplog.text


def test_a_database_outage_is_said_once_and_its_end_once(
        postgres_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from urllib.parse import urlsplit

    from memwire.memory.postgres import _pg
    from memwire.memory.postgres._store import PgStore

    from ..memory.test_postgres import Forwarder

    monkeypatch.setattr(_pg, "POOL_TIMEOUT_S", 0.3)
    monkeypatch.setattr(_pg, "RETRY_S", 0.2)
    parts = urlsplit(postgres_url)
    fwd = Forwarder(parts.port or 5432)
    url = postgres_url.replace(parts.netloc, f"{parts.username}@127.0.0.1:{fwd.port}")
    caplog.set_level(logging.WARNING, logger="memwire")
    proxy = serve(Middleware(store=PgStore(url)))
    try:
        assert httpx.post(proxy.url + f"{V1}/memories", json={"text": "Deploys go out on Tuesdays"},
                          timeout=30).status_code == 201
        fwd.cut()
        refused = [httpx.post(proxy.url + f"{V1}/memories", json={"text": f"Refused write {i}"}, timeout=30)
                   for i in range(5)]
        fwd.mend()
        deadline, back = time.monotonic() + 30, None  # a hang guard: the pool reconnects within a second
        while time.monotonic() < deadline:
            back = httpx.post(proxy.url + f"{V1}/memories", json={"text": "Written once it is back"}, timeout=30)
            if back.status_code == 201:
                break
            time.sleep(0.1)
        assert back is not None and back.status_code == 201, back.text if back is not None else None
        for i in range(3):  # more writes: nothing more to say
            assert httpx.post(proxy.url + f"{V1}/memories", json={"text": f"Later write {i}"},
                              timeout=30).status_code == 201
    finally:
        proxy.stop()
        _pg.close(url)
        fwd.close()
    assert {r.status_code for r in refused} == {503}
    lines = _api_lines(caplog)
    assert len(lines) == 2 and "cannot be used" in lines[0] and "works again" in lines[1], lines
    assert one_id(lines[0]) == one_id(lines[1]) == one_id(" ".join(r.text for r in refused))


# ------------------------------------------------------------------ a stream that breaks off


class BreakingUpstream:
    """A raw socket server: answers any request with the headers and first event of a stream,
    then closes the connection (a crash, a dropped route)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
                while len(body) < length:
                    body += conn.recv(65536)
                event = b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",' \
                        b'"choices":[{"index":0,"delta":{"role":"assistant","content":"Post"}}]}\n\n'
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                             + f"{len(event):x}\r\n".encode() + event + b"\r\n")
                time.sleep(0.05)

    def close(self) -> None:
        self.sock.close()


def test_a_stream_that_breaks_off_is_one_memwire_line_and_a_cut_for_the_client(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    up = BreakingUpstream()
    store = MemoryStore(tmp_path / "mem")
    store.add("The staging database is PostgreSQL 16")
    proxy = serve(warmed(store), up.url)
    caplog.set_level(logging.INFO, logger="memwire")
    try:
        with Lines("uvicorn.error") as server_lines:
            client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0)
            got = []
            with pytest.raises((httpx.RemoteProtocolError, openai.APIError)):  # never a short stream that looks whole
                for chunk in client.chat.completions.create(**CHAT, stream=True):
                    got.append(chunk.choices[0].delta.content)
            assert got == ["Post"]
            time.sleep(0.3)  # the server's own line, if any, comes after the response
    finally:
        proxy.stop()
        up.close()
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert said == ["memwire proxy: upstream stream broke off (RemoteProtocolError)"], said
    assert server_lines.messages(logging.WARNING) == []  # not uvicorn's ERROR


# ------------------------------------------------------------------ namespaces compare case-folded


def keys_cli(capsys: pytest.CaptureFixture[str], keys: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``memwire keys ARGS --keys-file KEYS`` in this process (as tests/test_cli.py runs commands;
    a subprocess each cost ~0.4 s of CPU): its exit code, stdout and stderr."""
    capsys.readouterr()
    code = main(["keys", *args, "--keys-file", str(keys)])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["memwire", "keys", *args], code, out, err)


def test_memwire_keys_add_refuses_a_namespace_that_differs_only_in_case(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    keys = tmp_path / "keys.json"
    first = keys_cli(capsys, keys, "add", "tenA")
    assert first.returncode == 0 and first.stdout.startswith("mwk_"), first.stderr
    before = keys.read_bytes()
    for other in ("TENA", "tena", "TenA.team", "ｔｅｎＡ"):
        refused = keys_cli(capsys, keys, "add", other)
        assert refused.returncode != 0 and refused.stdout == "", (other, refused)
        assert keys.read_bytes() == before, other
    assert "only in case" in keys_cli(capsys, keys, "add", "TENA").stderr
    again = keys_cli(capsys, keys, "add", "tenA", "--label", "second")  # the same namespace, another key: fine
    assert again.returncode == 0, again.stderr


def test_a_keys_file_holding_two_spellings_of_one_namespace_is_refused(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    add_key(keys, "tenA")
    data = json.loads(keys.read_text())
    data["keys"].append({**data["keys"][0], "sha256": "0" * 64, "namespace": "TENA"})  # a hand edit
    keys.write_text(json.dumps(data))
    keys.chmod(0o600)
    with pytest.raises(ConfigError, match="only in case"):
        KeyRing(keys)


def test_a_key_names_its_namespace_in_any_case_and_never_anothers(
        tmp_path: Path, upstream: tuple[FakeProvider, str]) -> None:
    fake, url = upstream
    keys = tmp_path / "keys.json"
    ten_a, _ = add_key(keys, "tenA")
    bob, _ = add_key(keys, "bob")
    root = tmp_path / "mem"
    MemoryStore.for_namespace(root, "tenA").add("The staging database is PostgreSQL 16")
    proxy = serve(warmed(MemoryStore(root)), url, keys_file=keys)
    try:
        def chat(key: str, ns: str) -> Any:
            client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0,
                                   default_headers={"x-memwire-key": key, "x-memwire-namespace": ns})
            return client.chat.completions.with_raw_response.create(**CHAT)

        for ns in ("tenA", "TENA", "tena"):  # (HTTP headers are latin-1: no full-width look-alike gets here)
            r = chat(ten_a, ns)
            assert r.headers["x-memwire-injected"] == "1", ns
            assert "PostgreSQL 16" in fake.requests[-1].raw.decode()
        added = httpx.post(proxy.url + f"{V1}/memories", json={"text": "Deploys go out on Tuesdays"},
                           headers={"x-memwire-key": ten_a, "x-memwire-namespace": "TENA.Team"})
        assert added.status_code == 201
        with pytest.raises(openai.PermissionDeniedError):
            chat(bob, "TENA")
        with pytest.raises(openai.PermissionDeniedError):
            chat(bob, "tena.x")
    finally:
        proxy.stop()
    assert sorted(p.name for p in (root / "namespaces").iterdir()) == ["tenA", "tenA.Team"]


def test_a_sub_namespace_bound_to_another_key_in_another_case_is_theirs(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    alice, _ = add_key(keys, "alice")
    data = json.loads(keys.read_text())  # a hand edit `memwire keys add` would refuse: a key inside alice's
    data["keys"].append({**data["keys"][0], "sha256": "0" * 64, "namespace": "ALICE.team"})
    keys.write_text(json.dumps(data))
    keys.chmod(0o600)
    proxy = serve(Middleware(store=MemoryStore(tmp_path / "mem")), keys_file=keys)
    try:
        answers = {ns: httpx.get(proxy.url + f"{V1}/memories", headers={"x-memwire-key": alice,
                                                                       "x-memwire-namespace": ns})
                   for ns in ("alice.team", "Alice.Team", "alice.team.x", "alice.other")}
    finally:
        proxy.stop()
    assert {ns: r.status_code for ns, r in answers.items()} == {
        "alice.team": 403, "Alice.Team": 403, "alice.team.x": 403, "alice.other": 200}


def test_a_new_namespace_may_not_be_another_spelling_of_an_existing_one(
        tmp_path: Path, upstream: tuple[FakeProvider, str]) -> None:
    fake, url = upstream
    root = tmp_path / "mem"
    MemoryStore.for_namespace(root, "alice").add("Alice keeps her notes in Obsidian")
    proxy = serve(warmed(MemoryStore(root)), url)
    try:
        api = httpx.post(proxy.url + f"{V1}/memories", json={"text": "Planted"}, headers={"x-memwire-namespace": "ALICE"})
        page = httpx.post(proxy.url + "/memwire/ui/memories", params={"ns": "Alice"}, data={"text": "Planted"},
                          headers={"origin": proxy.url})
        with pytest.raises(openai.BadRequestError) as oa:
            openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0,
                          default_headers={"x-memwire-namespace": "ALICE"}).chat.completions.create(**CHAT)
        with pytest.raises(anthropic.BadRequestError) as an:
            anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-test", max_retries=0,
                                default_headers={"x-memwire-namespace": "aLiCe"}).messages.create(
                model="claude-sonnet-4-5", max_tokens=20, messages=CHAT["messages"])
        same = httpx.post(proxy.url + f"{V1}/memories", json={"text": "Alice deploys on Fridays"},
                          headers={"x-memwire-namespace": "alice"})
        fresh = httpx.post(proxy.url + f"{V1}/memories", json={"text": "Bob deploys on Mondays"},
                           headers={"x-memwire-namespace": "Bob"})
    finally:
        proxy.stop()
    assert api.status_code == 400 and api.json()["error"]["code"] == "invalid_namespace"
    assert "'alice'" in api.json()["error"]["message"] and "only in case" in api.json()["error"]["message"]
    assert page.status_code == 400 and "only in case" in page.text
    assert oa.value.body["code"] == "invalid_namespace"  # type: ignore[index]
    assert an.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert fake.requests == []  # nothing went upstream
    assert same.status_code == 201 and fresh.status_code == 201
    assert sorted(p.name for p in (root / "namespaces").iterdir()) == ["Bob", "alice"]


def test_two_spellings_made_before_the_rule_are_both_served(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    MemoryStore.for_namespace(root, "alice").add("Alice keeps her notes in Obsidian")
    if (root / "namespaces" / "ALICE").exists():
        pytest.skip("a case-insensitive filesystem: the two names are one directory")
    (root / "namespaces" / "ALICE").mkdir()  # made before the rule (the store now refuses a twin)
    (root / "namespaces" / "ALICE" / "MEMORY.md").write_text("- ALICE keeps her notes on paper\n")
    proxy = serve(Middleware(store=MemoryStore(root)))
    try:
        for ns in ("alice", "ALICE"):
            r = httpx.post(proxy.url + f"{V1}/memories", json={"text": f"{ns} deploys on Fridays"},
                           headers={"x-memwire-namespace": ns})
            assert r.status_code == 201, r.text
    finally:
        proxy.stop()


# ------------------------------------------------------------------ bad input: the API's own format


@pytest.mark.parametrize(("path", "headers", "body"), [
    ("/v1/chat/completions", {}, b"not json"),
    ("/v1/chat/completions", {}, b"[1, 2]"),
    ("/v1/chat/completions", {}, b'{"model": "m", "messages": [{"role": "wizard", "content": "hi"}]}'),
    ("/v1/chat/completions", {}, b'{"model": "m", "messages": "hello"}'),
    ("/v1/chat/completions", {"x-memwire-namespace": "../etc"}, json.dumps(CHAT).encode()),
    ("/v1/chat/completions", {"x-memwire-namespace": "a" * 300}, json.dumps(CHAT).encode()),
    ("/v1/responses", {}, b'{"model": "m", "input": 42}'),
    ("/v1/messages", {}, b"\xff\xfe not utf-8"),
    ("/v1/messages", {}, b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": 5}]}'),
    ("/v1/messages", {"x-memwire-namespace": "x/y"}, b'{"model": "m", "max_tokens": 5, "messages": []}'),
    ("/v1/messages/count_tokens", {}, b'{"model": "m", "messages": {"a": 1}}'),
    ("/v1/%2e%2e/admin", {}, b"{}"),
])
def test_bad_input_on_a_provider_route_is_a_4xx_in_that_apis_format(
        tmp_path: Path, upstream: tuple[FakeProvider, str], path: str, headers: dict[str, str], body: bytes) -> None:
    fake, url = upstream
    proxy = serve(Middleware(store=MemoryStore(tmp_path / "mem")), url)
    try:
        r = httpx.post(proxy.url + path, content=body, headers={"content-type": "application/json", **headers})
    finally:
        proxy.stop()
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    data = r.json()
    if path.startswith("/v1/messages"):
        assert data["type"] == "error" and data["error"]["type"] == "invalid_request_error" and data["error"]["message"]
    else:
        assert set(data) == {"error"} and data["error"]["type"] == "invalid_request_error" and data["error"]["message"]
    assert fake.requests == []


@pytest.mark.parametrize(("method", "path", "kw", "status", "code"), [
    ("POST", f"{V1}/memories", {"content": b"not json"}, 400, "invalid_body"),
    ("POST", f"{V1}/memories", {"content": b'{"text": 5}'}, 400, "invalid_body"),
    ("POST", f"{V1}/memories", {"content": b'{"text": "ok"}', "headers": {"x-memwire-namespace": "../x"}},
     400, "invalid_namespace"),
    ("GET", f"{V1}/memories", {"params": {"limit": "many"}}, 400, "invalid_limit"),
    ("GET", f"{V1}/memories/%2e%2e", {}, 404, "not_found"),
    ("PUT", f"{V1}/memories", {}, 405, "method_not_allowed"),
    ("GET", f"{V1}/nowhere", {}, 404, "not_found"),
])
def test_bad_input_on_the_memory_api_is_an_error_in_its_own_shape(
        tmp_path: Path, method: str, path: str, kw: dict[str, Any], status: int, code: str | None) -> None:
    proxy = serve(Middleware(store=MemoryStore(tmp_path / "mem")))
    try:
        r = httpx.request(method, proxy.url + path, **kw)
    finally:
        proxy.stop()
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"} and body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code
