"""The proxy's upstream connections on aiohttp.

httpx + httpcore + h11 + anyio spend about a millisecond of CPU on each upstream call (pure
Python: an HTTP/1.1 state machine, a cancel scope per read and write, a pool that scans its
connections); aiohttp's client parses in C on asyncio's own transports. The proxy sends its own
requests with :meth:`AioTransport.send`: an :class:`Outgoing` in (what the proxy has: method, URL,
raw headers, body), an :class:`Answer` out (status, raw headers, the body as it arrives), httpx's
exceptions for failures. Building an ``httpx.Request`` and ``httpx.Response`` around each call cost
a tenth of the proxy's CPU per request. ``AioTransport`` stays an httpx transport too, for an
``httpx.AsyncClient`` built on it. Used when aiohttp is installed (``memwire[fast]``); otherwise
the proxy keeps httpx's own pools.

What it keeps from the httpx path: the request goes out with exactly the headers and the raw path
given (no quoting, no cookies, no default headers of aiohttp's, no proxy variables); the body comes
back as it was on the wire (still compressed if it was, de-chunked); a connection the upstream
closed while pooled fails as ``httpx.RemoteProtocolError`` (the proxy sends once more, through
``fresh``: a new connection, for any other pooled one may be as stale), timeouts as
``httpx.TimeoutException`` subclasses, anything else as ``httpx.NetworkError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Iterator, Mapping
from functools import lru_cache
from typing import Any, NamedTuple

import httpx

KEEPALIVE_S = 4.0  # under uvicorn's 5 s: a pooled connection is dropped before the upstream drops it


def available() -> bool:
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        return False
    return True


class Outgoing(NamedTuple):
    """A request for the upstream, as the proxy has it: no ``httpx.Request`` built (its header
    normalization cost more than sending)."""

    method: str
    url: str
    headers: list[tuple[bytes, bytes]]  # raw (ASGI gives names in lower case)
    content: bytes | AsyncIterable[bytes] | None
    timeout: Mapping[str, float | None]  # httpx's timeouts (``Timeout.as_dict()``)


class AioTransport(httpx.AsyncBaseTransport):
    """Sends with one pooled ``aiohttp.ClientSession`` (made on first use, inside the event loop
    that serves the requests): :meth:`send` for the proxy's own requests, and httpx's transport
    interface for an ``httpx.AsyncClient`` built on it."""

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

    async def send(self, out: Outgoing, request: httpx.Request | None = None) -> Answer:
        """Send ``out``; what fails is raised as httpx would raise it (``request``: the httpx
        request it stands for, if any, named in those errors)."""
        import aiohttp

        if self._session is None:
            self._session = self._open()
        # aiohttp writes Host from the URL, and chunks a body of unknown length itself
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in out.headers
                   if k.lower() not in (b"host", b"transfer-encoding")]
        content = out.content
        body = None if content is None or isinstance(content, bytes) else _Body(content)
        try:
            answer = await self._session.request(
                out.method, _yarl(out.url), headers=headers, data=(content or None) if body is None else body.chunks(),
                allow_redirects=False, timeout=_timeout(**out.timeout),
            )
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            if body is not None and body.failed is not None:  # the client's body failed: a stall, a disconnect
                raise body.failed from None
            raise _httpx_error(exc, request) from exc
        return Answer(answer, request)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        stream = request.stream
        content = request.content if isinstance(stream, httpx.ByteStream) else stream
        assert isinstance(content, (bytes, httpx.AsyncByteStream))  # an async client's request
        answer = await self.send(Outgoing(request.method, str(request.url), request.headers.raw, content,
                                          request.extensions.get("timeout", {})), request)
        return httpx.Response(answer.status_code, headers=answer.headers.raw, stream=_Stream(answer), request=request,
                              extensions={"http_version": b"HTTP/1.1"})

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self.fresh is not self:
            await self.fresh.aclose()


@lru_cache(maxsize=256)
def _yarl(url: str) -> Any:
    """An upstream URL as aiohttp takes it, unquoted as given (calls repeat a few URLs)."""
    from yarl import URL

    return URL(url, encoded=True)


@lru_cache(maxsize=16)
def _timeout(connect: float | None = None, read: float | None = None, write: float | None = None,
             pool: float | None = None) -> Any:
    """httpx's timeouts as aiohttp's (made once: its attrs class costs more than the lookup)."""
    import aiohttp

    return aiohttp.ClientTimeout(total=None, connect=pool, sock_connect=connect, sock_read=read)


def _httpx_error(exc: BaseException, request: httpx.Request | None) -> httpx.HTTPError:
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

    def __init__(self, stream: AsyncIterable[bytes]) -> None:
        self.stream = stream
        self.failed: BaseException | None = None

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.stream:
                yield chunk
        except Exception as exc:
            self.failed = exc
            raise


class RawHeaders(Mapping[str, str]):
    """An answer's headers as the relay and the reply reader use them: the raw list, and a
    read-only mapping by name, whatever its case (a repeated header: its first value)."""

    __slots__ = ("raw",)

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self.raw = raw

    def get(self, name: str, default: Any = None) -> Any:  # Mapping's own would raise and catch
        key = name.lower().encode("latin-1")
        for k, v in self.raw:
            if k.lower() == key:
                return v.decode("latin-1")
        return default

    def __getitem__(self, name: str) -> str:
        value: str | None = self.get(name)
        if value is None:
            raise KeyError(name)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(k.decode("latin-1").lower() for k, _ in self.raw))

    def __len__(self) -> int:
        return sum(1 for _ in self)


class Answer:
    """The upstream's answer as the proxy relays it (what it reads of an ``httpx.Response``):
    status, headers, the body as it came over the wire (still compressed if it was, de-chunked).
    Closing it before the end of the body closes the connection (the rest of that answer must not
    be read as the next one's)."""

    def __init__(self, answer: Any, request: httpx.Request | None = None) -> None:
        self.status_code: int = answer.status
        self.headers = RawHeaders(list(answer.raw_headers))
        self._answer = answer
        self._request = request

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        import aiohttp

        try:
            async for chunk in self._answer.content.iter_any():
                yield chunk
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            error = _httpx_error(exc, self._request)
            raise (httpx.ReadError(str(error), request=self._request) if type(error) is httpx.NetworkError
                   else error) from exc

    async def aclose(self) -> None:
        if self._answer.content.is_eof():
            self._answer.release()
        else:
            self._answer.close()


class _Stream(httpx.AsyncByteStream):
    """An :class:`Answer`'s body as an httpx response's stream."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.answer.aiter_raw():
            yield chunk

    async def aclose(self) -> None:
        await self.answer.aclose()
