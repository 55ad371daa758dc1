"""The floor of memwire's proxy stack: a bare pass-through on the same parts (uvicorn with uvloop
and httptools serving a plain ASGI function, aiohttp's client upstream), with no routing, no
middleware, no memory, no access log. ``benchmarks/proxy.py --workers`` measures it beside
memwire: what any proxy built on these parts adds, before doing anything.

    python benchmarks/bare_proxy.py PORT UPSTREAM_URL
"""

from __future__ import annotations

import sys
from typing import Any

import aiohttp
import uvicorn

_DROP_REQUEST = {b"host", b"content-length", b"transfer-encoding", b"connection"}  # aiohttp writes its own
_DROP_RESPONSE = {b"transfer-encoding", b"connection", b"keep-alive"}  # hop-by-hop, as memwire drops them


class BareProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.session: aiohttp.ClientSession | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            if self.session is not None:
                await self.session.close()
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if self.session is None:  # made inside the serving loop
            self.session = aiohttp.ClientSession(
                cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False,
                skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"))
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"] if k not in _DROP_REQUEST]
        path = scope["raw_path"].decode("latin-1")
        async with self.session.request(scope["method"], self.upstream + path, data=body or None,
                                        headers=headers, allow_redirects=False) as answer:
            await send({"type": "http.response.start", "status": answer.status,
                        "headers": [(k.lower(), v) for k, v in answer.raw_headers if k.lower() not in _DROP_RESPONSE]})
            async for chunk in answer.content.iter_any():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})


def main() -> None:
    port, upstream = int(sys.argv[1]), sys.argv[2]
    uvicorn.run(BareProxy(upstream), host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
