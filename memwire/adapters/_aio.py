"""The proxy's upstream connections on aiohttp, behind httpx's transport interface.

httpx + httpcore + h11 + anyio spend about a millisecond of CPU on each upstream call (pure
Python: an HTTP/1.1 state machine, a cancel scope per read and write, a pool that scans its
connections); aiohttp's client parses in C on asyncio's own transports. The proxy keeps speaking
httpx (``httpx.Request`` in, ``httpx.Response`` out, httpx's exceptions), so everything above the
transport, and tests that hand the app an httpx client, stay as they are. Used when aiohttp is
installed (``memwire[fast]``); otherwise the proxy keeps httpx's own pools.

What it keeps from the httpx path: the request goes out with exactly the headers and the raw path
given (no quoting, no cookies, no default headers of aiohttp's, no proxy variables); the body comes
back as it was on the wire (still compressed if it was, de-chunked); a connection the upstream
closed while pooled fails as ``httpx.RemoteProtocolError`` (the proxy sends once more, through
``fresh``: a new connection, for any other pooled one may be as stale), timeouts as
``httpx.TimeoutException`` subclasses, anything else as ``httpx.NetworkError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from functools import lru_cache
from typing import Any

import httpx

KEEPALIVE_S = 4.0  # under uvicorn's 5 s: a pooled connection is dropped before the upstream drops it


def available() -> bool:
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        return False
    return True


class AioTransport(httpx.AsyncBaseTransport):
    """An httpx transport sending with one pooled ``aiohttp.ClientSession`` (made on first use,
    inside the event loop that serves the requests)."""

    def __init__(self, max_connections: int = 64, pooled: bool = True) -> None:
        self._max = max_connections
        self._pooled = pooled
        self._session: Any = None
        self.fresh: AioTransport = AioTransport(pooled=False) if pooled else self  # each request a new connection

    def _open(self) -> Any:
        import aiohttp

        connector = (aiohttp.TCPConnector(limit=self._max, keepalive_timeout=KEEPALIVE_S) if self._pooled
                     else aiohttp.TCPConnector(limit=0, force_close=True))
        return aiohttp.ClientSession(
            connector=connector, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False, trust_env=False,
            skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
            timeout=aiohttp.ClientTimeout(total=None),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        import aiohttp
        from yarl import URL

        if self._session is None:
            self._session = self._open()
        timeout = _timeout(**request.extensions.get("timeout", {}))
        # aiohttp writes Host from the URL, and chunks a body of unknown length itself
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw
                   if k.lower() not in (b"host", b"transfer-encoding")]
        stream = request.stream
        body = None if isinstance(stream, httpx.ByteStream) else _Body(stream)  # type: ignore[arg-type]
        try:
            answer = await self._session.request(
                request.method, URL(str(request.url), encoded=True), headers=headers,
                data=(request.content or None) if body is None else body.chunks(), allow_redirects=False,
                timeout=timeout,
            )
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            if body is not None and body.failed is not None:  # the client's body failed: a stall, a disconnect
                raise body.failed from None
            raise _httpx_error(exc, request) from exc
        return httpx.Response(answer.status, headers=list(answer.raw_headers), stream=_Stream(answer, request),
                              request=request, extensions={"http_version": b"HTTP/1.1"})

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self.fresh is not self:
            await self.fresh.aclose()


@lru_cache(maxsize=16)
def _timeout(connect: float | None = None, read: float | None = None, write: float | None = None,
             pool: float | None = None) -> Any:
    """httpx's timeouts as aiohttp's (made once: its attrs class costs more than the lookup)."""
    import aiohttp

    return aiohttp.ClientTimeout(total=None, connect=pool, sock_connect=connect, sock_read=read)


def _httpx_error(exc: BaseException, request: httpx.Request) -> httpx.HTTPError:
    """What httpx raises where aiohttp raised ``exc``."""
    import aiohttp

    message = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx.ConnectError(message, request=request)
    if isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError, aiohttp.ClientPayloadError)):
        return httpx.RemoteProtocolError(message, request=request)  # closed under us (a stale pooled connection)
    if isinstance(exc, aiohttp.ConnectionTimeoutError) or (
            isinstance(exc, asyncio.TimeoutError) and not isinstance(exc, aiohttp.ServerTimeoutError)):
        return httpx.ConnectTimeout(message, request=request)  # connecting, or waiting for a pooled connection
    if isinstance(exc, asyncio.TimeoutError):
        return httpx.ReadTimeout(message, request=request)
    return httpx.NetworkError(message, request=request)


class _Body:
    """The client's body streamed upstream; what its source raised is kept, for aiohttp wraps it."""

    def __init__(self, stream: httpx.AsyncByteStream) -> None:
        self.stream = stream
        self.failed: BaseException | None = None

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.stream:
                yield chunk
        except Exception as exc:
            self.failed = exc
            raise


class _Stream(httpx.AsyncByteStream):
    """The answer's body as it arrives; closing it before the end closes the connection (the
    rest of that answer must not be read as the next one's)."""

    def __init__(self, answer: Any, request: httpx.Request) -> None:
        self.answer = answer
        self.request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        import aiohttp

        try:
            async for chunk in self.answer.content.iter_any():
                yield chunk
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            error = _httpx_error(exc, self.request)
            raise (httpx.ReadError(str(error), request=self.request) if type(error) is httpx.NetworkError
                   else error) from exc

    async def aclose(self) -> None:
        if self.answer.content.is_eof():
            self.answer.release()
        else:
            self.answer.close()
