"""The proxy's own upstream client sends straight to its transport (no httpx client layers): what
the upstream receives must be what an injected ``httpx.AsyncClient`` sends, byte for byte, and
the answer must come back the same."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from memwire import MemoryStore, Middleware
from memwire.adapters.proxy import create_app, default_client

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
