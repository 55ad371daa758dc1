"""The HTTP memory API (``/memwire/v1``) with a real httpx client: every route, namespaces, the key,
one error shape, the OpenAPI document."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from memwire import MemoryStore, Middleware
from memwire.adapters.server._memory_api import memory_api
from memwire.memory._inbox import inbox_of

V1 = "/memwire/v1"


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    s = MemoryStore(tmp_path / "mem")
    s.add("The staging database listens on port 5433", tags=["infra"])
    s.add("User prefers tabs over spaces", tags=["preference"], pinned=True)
    return s


@pytest.fixture
def mw(store: MemoryStore) -> Middleware:
    return Middleware(store=store)


def client(mw: Middleware, key: str | None = None, **headers: str) -> httpx.AsyncClient:
    app = Starlette(routes=[memory_api(mw, proxy_key=key)])
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                             base_url="http://proxy.test", headers=headers)


@pytest.fixture
async def http(mw: Middleware) -> AsyncIterator[httpx.AsyncClient]:
    async with client(mw) as c:
        yield c


def error(r: httpx.Response) -> tuple[int, str]:
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"} and body["error"]["message"]
    return r.status_code, body["error"]["code"]


async def test_list_and_search(http: httpx.AsyncClient) -> None:
    r = await http.get(f"{V1}/memories")
    assert r.status_code == 200 and r.json()["count"] == 2
    assert {m["text"] for m in r.json()["data"]} == {"The staging database listens on port 5433",
                                                      "User prefers tabs over spaces"}
    tabs = next(m for m in r.json()["data"] if m["pinned"])
    assert tabs["tags"] == ["preference"] and tabs["score"] is None
    r = await http.get(f"{V1}/memories", params={"q": "which port for staging?"})
    [hit] = [m for m in r.json()["data"] if m["score"] and m["score"] > 0.3]
    assert hit["text"].startswith("The staging database") and r.json()["data"][0] == hit
    assert (await http.get(f"{V1}/memories", params={"limit": "1"})).json()["count"] == 1


async def test_add_get_and_forget_to_the_archive(http: httpx.AsyncClient, store: MemoryStore) -> None:
    r = await http.post(f"{V1}/memories", json={"text": "Deploys go out on Tuesdays", "tags": ["process"], "pinned": True})
    assert r.status_code == 201
    mem = r.json()
    assert (mem["text"], mem["tags"], mem["pinned"]) == ("Deploys go out on Tuesdays", ["process"], True)
    assert store.get(mem["id"]).text == "Deploys go out on Tuesdays"
    assert (await http.get(f"{V1}/memories/{mem['id'][:6]}")).json()["id"] == mem["id"]
    r = await http.delete(f"{V1}/memories/{mem['id']}")
    assert r.status_code == 200 and mem["id"] not in store
    assert "forgotten" in store.archive.get(mem["id"]).tags
    assert error(await http.get(f"{V1}/memories/{mem['id']}")) == (404, "not_found")
    assert error(await http.delete(f"{V1}/memories/{mem['id']}")) == (404, "not_found")


@pytest.mark.parametrize(("body", "code"), [
    (b"not json", "invalid_body"),
    (b'{"tags": ["x"]}', "invalid_body"),
    (b'{"text": ""}', "invalid_body"),
    (b'{"text": "x", "colour": "red"}', "invalid_body"),
    (b'{"text": "the deploy token is ghp_abcdefghijklmnopqrstuvwxyz0123456789"}', "secret_refused"),
    (b'{"text": "x", "tags": ["not a tag"]}', "invalid_memory"),
])
async def test_a_bad_body_is_a_400_naming_the_problem_and_stores_nothing(
        http: httpx.AsyncClient, store: MemoryStore, body: bytes, code: str) -> None:
    r = await http.post(f"{V1}/memories", content=body, headers={"content-type": "application/json"})
    assert error(r) == (400, code)
    assert len(store) == 2
    assert "ghp_" not in r.text  # the secret is not echoed back


async def test_a_body_too_large_is_a_413_read_no_further(http: httpx.AsyncClient, store: MemoryStore) -> None:
    r = await http.post(f"{V1}/memories", content=b'{"text": "' + b"x" * 100_000 + b'"}')
    assert error(r) == (413, "body_too_large") and len(store) == 2


@pytest.mark.parametrize("under", ["", "sub"])
async def test_an_unusable_memory_directory_is_a_503_in_the_one_shape(tmp_path: Path, under: str,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "file").write_text("not a directory")
    where = tmp_path / "file" / under if under else tmp_path / "file"
    async with client(Middleware(store=MemoryStore(where))) as c:
        assert error(await c.post(f"{V1}/memories", json={"text": "a fact"})) == (503, "memory_unavailable")
        assert error(await c.get(f"{V1}/memories")) == (503, "memory_unavailable")
    # the log names the path and the problem (issue 34 item 1), not EEXIST or ENOTDIR
    assert f"MemoryFileError: {where}: the memory directory " in caplog.text
    assert "FileExistsError" not in caplog.text and "NotADirectoryError" not in caplog.text


async def test_bad_limits_and_unknown_routes_have_the_one_error_shape(http: httpx.AsyncClient) -> None:
    for bad in ("0", "-1", "x", "100000"):
        assert error(await http.get(f"{V1}/memories", params={"limit": bad})) == (400, "invalid_limit")
    assert error(await http.put(f"{V1}/memories")) == (405, "method_not_allowed")
    assert error(await http.get(f"{V1}/nothing-here")) == (404, "not_found")
    assert error(await http.post(f"{V1}/inbox/abcd/promote")) == (404, "not_found")


async def test_inbox_approve_and_reject(http: httpx.AsyncClient, store: MemoryStore) -> None:
    inbox = inbox_of(store)
    keep = inbox.add("CI runs on Node 20", tags=["fact", "captured"])
    drop = inbox.add("The user likes long answers", tags=["preference", "captured"])
    r = await http.get(f"{V1}/inbox")
    assert sorted(m["text"] for m in r.json()["data"]) == ["CI runs on Node 20", "The user likes long answers"]
    assert (await http.post(f"{V1}/inbox/{keep.id}/approve")).json()["text"] == "CI runs on Node 20"
    assert keep.id in store
    assert (await http.post(f"{V1}/inbox/{drop.id}/reject")).status_code == 200
    assert drop.id not in store and "rejected" in store.archive.get(drop.id).tags
    assert (await http.get(f"{V1}/inbox")).json() == {"data": [], "count": 0}
    assert error(await http.post(f"{V1}/inbox/{keep.id}/approve")) == (404, "not_found")


async def test_every_route_keeps_to_its_namespace(mw: Middleware, store: MemoryStore) -> None:
    async with client(mw, **{"x-memwire-namespace": "alice"}) as alice, \
            client(mw, **{"x-memwire-namespace": "bob"}) as bob:
        mem = (await alice.post(f"{V1}/memories", json={"text": "Alice's cat is called Miso"})).json()
        assert (store.path / "namespaces" / "alice" / "MEMORY.md").exists() and mem["id"] not in store
        assert (await bob.get(f"{V1}/memories")).json()["count"] == 0
        assert (await bob.get(f"{V1}/memories", params={"q": "cat Miso"})).json()["count"] == 0
        assert error(await bob.get(f"{V1}/memories/{mem['id']}")) == (404, "not_found")
        assert error(await bob.delete(f"{V1}/memories/{mem['id']}")) == (404, "not_found")
        inbox_of(mw.store_for("alice")).add("Alice works nights", tags=["captured"])
        assert (await bob.get(f"{V1}/inbox")).json()["count"] == 0
        waiting = (await alice.get(f"{V1}/inbox")).json()["data"][0]["id"]
        assert error(await bob.post(f"{V1}/inbox/{waiting}/approve")) == (404, "not_found")
        assert (await alice.get(f"{V1}/memories/{mem['id']}")).status_code == 200
        assert (await alice.get(f"{V1}/memories")).json()["count"] == 1  # not the default namespace's two
    async with client(mw, **{"x-memwire-namespace": "../etc"}) as evil:
        assert error(await evil.get(f"{V1}/memories")) == (400, "invalid_namespace")


ROUTES: list[tuple[str, str, dict[str, Any]]] = [
    ("GET", f"{V1}/memories", {}), ("POST", f"{V1}/memories", {"json": {"text": "x y"}}),
    ("GET", f"{V1}/memories/abcd", {}), ("DELETE", f"{V1}/memories/abcd", {}), ("GET", f"{V1}/inbox", {}),
    ("POST", f"{V1}/inbox/abcd/approve", {}), ("POST", f"{V1}/inbox/abcd/reject", {}),
    ("GET", f"{V1}/memories/abcd/history", {}),
]


@pytest.mark.parametrize(("method", "path", "kw"), ROUTES)
async def test_with_a_proxy_key_every_route_needs_it(mw: Middleware, store: MemoryStore, method: str, path: str,
                                                     kw: dict[str, Any]) -> None:
    async with client(mw, key="s3cret") as anon, client(mw, key="s3cret", **{"x-memwire-key": "wrong"}) as wrong:
        for c in (anon, wrong):
            assert error(await c.request(method, path, **kw)) == (401, "invalid_memwire_key")
    assert len(store) == 2
    async with client(mw, key="s3cret", **{"x-memwire-key": "s3cret"}) as ok:
        assert (await ok.request(method, path, **kw)).status_code != 401


async def test_the_openapi_document_describes_every_route(http: httpx.AsyncClient) -> None:
    doc = (await http.get(f"{V1}/openapi.json")).json()
    assert doc["openapi"].startswith("3.1")
    described = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    assert described == {(m, p.replace("abcd", "{id}")) for m, p, _ in ROUTES}
    assert set(doc["components"]["schemas"]) >= {"MemoryOut", "MemoryIn", "ErrorOut"}
    assert doc["components"]["schemas"]["MemoryIn"]["required"] == ["text"]
    refs = {v for v in _walk(doc) if isinstance(v, str) and v.startswith("#/")}
    assert all(r.removeprefix("#/components/schemas/") in doc["components"]["schemas"] for r in refs)


def _walk(node: Any) -> list[Any]:
    if isinstance(node, dict):
        return [x for v in node.values() for x in _walk(v)]
    if isinstance(node, list):
        return [x for v in node for x in _walk(v)]
    return [node]


async def test_the_proxy_serves_it_under_its_key_beside_the_pass_through(mw: Middleware, store: MemoryStore) -> None:
    from memwire.adapters.server._proxy import create_app

    seen: list[str] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(200, json={"object": "list", "data": []})

    app = create_app(mw, proxy_key="k", openai_upstream="http://up", client=httpx.AsyncClient(
        transport=httpx.MockTransport(upstream)))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy.test") as c:
        assert error(await c.get(f"{V1}/memories")) == (401, "invalid_memwire_key")
        r = await c.post(f"{V1}/memories", json={"text": "Deploys go out on Tuesdays"}, headers={"x-memwire-key": "k"})
        assert r.status_code == 201 and r.json()["id"] in store
        r = await c.get(f"{V1}/memories", params={"q": "when do deploys go out"}, headers={"x-memwire-key": "k"})
        assert r.json()["data"][0]["text"] == "Deploys go out on Tuesdays"
        assert (await c.get("/v1/models", headers={"x-memwire-key": "k"})).status_code == 200
    assert seen == ["/v1/models"]  # the memory API never reaches the provider
