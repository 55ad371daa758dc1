"""The HTTP layer of the SDK adapters: a transport that adds memory to the requests it understands.

``wrap()`` gives an SDK client (openai, anthropic) a new http client whose transport runs the memwire
transform and then hands the request to the original client's transport. The SDK object keeps its
own class, so every path that reaches a known endpoint gets memory: ``create`` and ``parse``,
``stream()`` helpers, ``with_raw_response``, retries, frameworks that call the SDK (instructor, the
Agents SDK). Everything else goes through byte for byte; only ``x-memwire-*`` headers are removed.

Works with httpx and httpx2 clients alike (the anthropic SDK 2.x is built on httpx2): requests are
rebuilt with the classes of the module the client came from.

The reply is read as the SDK reads it (for ``Middleware.observe_reply``): when memories went into a
request, the response's byte stream is wrapped so that each chunk is copied as it passes, unchanged,
and the reply's text is handed over when the stream ends or the SDK closes it.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

import httpx

from .._errors import RequestFormatError, UsageError
from .._json import load_json
from ..middleware._core import Middleware, Prepared
from ..middleware._reply import ReplyTap, tap_reply
from ._common import NAMESPACE_HEADER, SESSION_HEADER, dump_json, fail_open

__all__ = ["AsyncMemwireTransport", "MemwireTransport", "wrap_sdk_client"]

C = TypeVar("C")

_PREFIX = "x-memwire-"


@dataclass(frozen=True)
class _Call:
    """A request memwire understands, read: its format, body and per-call memwire settings."""

    api: str
    body: dict[str, Any]
    session: str | None
    namespace: str | None


@dataclass(frozen=True)
class _Rewrite:
    """What both transports do to a request, except the prepare call (sync or async)."""

    middleware: Middleware
    routes: Mapping[str, str]  # path suffix -> api ("/chat/completions" -> "openai.chat")
    session: str | None = None
    namespace: str | None = None

    def read(self, request: httpx.Request) -> _Call | None:
        """The request as memwire reads it, or None when it is not memwire's (or cannot be read:
        then one warning, and the request goes on unchanged)."""
        if request.method != "POST":
            return None
        path = request.url.path
        api = next((a for suffix, a in self.routes.items() if path.endswith(suffix)), None)
        if api is None:
            return None
        try:
            raw = request.content  # SDKs send JSON bodies as bytes; a streamed body is not read here
            body = load_json(raw)
            if not isinstance(body, dict):
                raise RequestFormatError(f"{api}: the request body is not a JSON object")
        except Exception as exc:
            fail_open(f"{api} request", exc)
            return None
        headers = request.headers
        return _Call(api, body, headers.get(SESSION_HEADER) or self.session,
                     headers.get(NAMESPACE_HEADER) or self.namespace)

    def build(self, request: httpx.Request, call: _Call | None, prepared: Prepared | None) -> httpx.Request:
        """The request to send: the new body if memwire changed it, else the original bytes; never
        memwire's own headers."""
        ours = [name for name in request.headers if name.lower().startswith(_PREFIX)]
        body = prepared.body if prepared is not None else None
        changed = call is not None and body is not None and body != call.body
        if not changed and not ours:
            return request
        headers = request.headers.copy()
        for name in ours:
            del headers[name]
        cls = type(request)  # httpx.Request or httpx2.Request: whichever the client uses
        if not changed:
            return cls(request.method, request.url, headers=headers, stream=request.stream,
                       extensions=request.extensions)
        data = dump_json(body)  # compact, UTF-8 rather than \u escapes (as the SDKs send it)
        headers["content-length"] = str(len(data))
        return cls(request.method, request.url, headers=headers, content=data, extensions=request.extensions)

    def watch(self, response: httpx.Response, call: _Call | None, prepared: Prepared | None, tee: type[Any]) -> None:
        """When memories went into the request, read the reply as the SDK reads the response's
        stream (wrapped in ``tee``), or at once when a mock transport handed it over read already."""
        if call is None or prepared is None:
            return
        tap = tap_reply(self.middleware, prepared.injection, call.api, response.status_code, response.headers)
        if tap is None:
            return
        if response.is_stream_consumed:
            tap.feed(response.content)
            tap.finish()
        else:
            response.stream = tee(response.stream, tap)


class _TeeStream(httpx.SyncByteStream):
    """The response's byte stream, each chunk copied to ``tap`` as the SDK reads it."""

    def __init__(self, stream: Any, tap: ReplyTap) -> None:
        self.stream, self.tap = stream, tap

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.stream:
            self.tap.feed(chunk)
            yield chunk
        self.tap.finish()

    def close(self) -> None:
        try:
            self.stream.close()
        finally:
            self.tap.finish(ended=False)  # the SDK stops reading a stream at its end marker ([DONE])


class _AsyncTeeStream(httpx.AsyncByteStream):
    """The async face of :class:`_TeeStream`."""

    def __init__(self, stream: Any, tap: ReplyTap) -> None:
        self.stream, self.tap = stream, tap

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.stream:
            self.tap.feed(chunk)
            yield chunk
        self.tap.finish()

    async def aclose(self) -> None:
        try:
            await self.stream.aclose()
        finally:
            self.tap.finish(ended=False)


class MemwireTransport(httpx.BaseTransport):
    """Adds memory to the requests ``rewrite`` understands, then sends them with ``inner``, and
    reads the replies to them as the SDK does.

    ``owner`` is the http client ``inner`` belongs to: held so that it is not garbage-collected
    (the SDKs' default http clients close their transport when they are)."""

    tee: type[_TeeStream] = _TeeStream  # a byte stream class of the client's http module

    def __init__(self, inner: Any, rewrite: _Rewrite, owner: Any = None) -> None:
        self.inner, self.rewrite, self._owner = inner, rewrite, owner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        call = self.rewrite.read(request)
        prepared = None
        if call is not None:
            try:
                prepared = self.rewrite.middleware.prepare_request(
                    call.body, call.api, session_id=call.session, namespace=call.namespace, headers=request.headers
                )
            except Exception as exc:
                fail_open(f"{call.api} prepare", exc)
        response: httpx.Response = self.inner.handle_request(self.rewrite.build(request, call, prepared))
        self.rewrite.watch(response, call, prepared, self.tee)
        return response

    def close(self) -> None:
        # the wrapped client shares the original's connections, as ``client.copy()`` does
        self.inner.close()


class AsyncMemwireTransport(httpx.AsyncBaseTransport):
    """The async face of :class:`MemwireTransport`."""

    tee: type[_AsyncTeeStream] = _AsyncTeeStream

    def __init__(self, inner: Any, rewrite: _Rewrite, owner: Any = None) -> None:
        self.inner, self.rewrite, self._owner = inner, rewrite, owner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        call = self.rewrite.read(request)
        prepared = None
        if call is not None:
            try:
                prepared = await self.rewrite.middleware.aprepare_request(
                    call.body, call.api, session_id=call.session, namespace=call.namespace, headers=request.headers
                )
            except Exception as exc:
                fail_open(f"{call.api} prepare", exc)
        response: httpx.Response = await self.inner.handle_async_request(self.rewrite.build(request, call, prepared))
        self.rewrite.watch(response, call, prepared, self.tee)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


_classes: dict[str, tuple[type[MemwireTransport], type[AsyncMemwireTransport]]] = {}


def _transport_classes(http: ModuleType) -> tuple[type[MemwireTransport], type[AsyncMemwireTransport]]:
    """The transport classes for an http module: httpx's own, or subclasses that are also httpx2's
    base transports (httpx2 calls them by duck typing; the subclass keeps ``isinstance`` true), with
    byte streams that are httpx2's too (its client checks the class of a response's stream)."""
    if http is httpx:
        return MemwireTransport, AsyncMemwireTransport
    if http.__name__ not in _classes:
        tee = type("TeeStream", (_TeeStream, http.SyncByteStream), {})
        async_tee = type("AsyncTeeStream", (_AsyncTeeStream, http.AsyncByteStream), {})
        _classes[http.__name__] = (
            type("MemwireTransport", (MemwireTransport, http.BaseTransport), {"tee": tee}),
            type("AsyncMemwireTransport", (AsyncMemwireTransport, http.AsyncBaseTransport), {"tee": async_tee}),
        )
    return _classes[http.__name__]


def _http_module(http_client: Any) -> tuple[ModuleType, bool]:
    """The module (httpx or httpx2) an SDK's http client comes from, and whether it is async."""
    for name in ("httpx", "httpx2"):
        module = sys.modules.get(name)
        if module is None:  # not imported: the client cannot be one of its classes
            continue
        if isinstance(http_client, module.AsyncClient):
            return module, True
        if isinstance(http_client, module.Client):
            return module, False
    raise UsageError(f"memwire: the client's http client is a {type(http_client).__name__}, not an httpx client")


def wrap_sdk_client(
    client: C, middleware: Middleware, routes: Mapping[str, str], *, session: str | None, namespace: str | None,
    models: Sequence[str | None],
) -> C:
    """``client.copy()`` with an http client whose transport adds memory (see the module docstring).

    The copy keeps the client's settings and the original http client's transports (connection
    pool, proxies, mounts), its headers, auth, timeout, redirects and event hooks."""
    if not isinstance(middleware, Middleware):
        raise UsageError(f"memwire: wrap() expects a memwire.Middleware, got {type(middleware).__name__}")
    original: Any = getattr(client, "_client", None)  # the SDK's http client (every Stainless SDK has it)
    http, is_async = _http_module(original)
    sync_cls, async_cls = _transport_classes(http)
    inner = getattr(original, "_transport", None)
    if isinstance(inner, (MemwireTransport, AsyncMemwireTransport)):
        raise UsageError("memwire: this client is already wrapped (wrap the original client, or use this one)")
    if inner is None:
        raise UsageError(f"memwire: cannot wrap {type(original).__name__}: it has no transport to wrap")
    if namespace is not None:
        middleware.store_for(namespace)  # a bad namespace name is the caller's error: raise it now
    rewrite = _Rewrite(middleware, routes, session, namespace)
    cls: Any = async_cls if is_async else sync_cls

    def ours(transport: Any) -> Any:
        return None if transport is None else cls(transport, rewrite, owner=original)

    mounts = {pattern.pattern: ours(t) for pattern, t in getattr(original, "_mounts", {}).items()}
    http_client = (http.AsyncClient if is_async else http.Client)(
        auth=original.auth, params=original.params, headers=original.headers, cookies=original.cookies,
        timeout=original.timeout, follow_redirects=original.follow_redirects, max_redirects=original.max_redirects,
        event_hooks=original.event_hooks, base_url=original.base_url, trust_env=original.trust_env,
        default_encoding=getattr(original, "_default_encoding", "utf-8"),
        transport=ours(inner), mounts=mounts,
    )
    wrapped: C = client.copy(http_client=http_client)  # type: ignore[attr-defined]
    # load the store and the token encodings now, off the request path, so the first call does
    # not spend its retrieval budget on them
    middleware.warm_up(models, background=True)
    return wrapped
