"""Proxy mode: an ASGI app in front of OpenAI-compatible and Anthropic APIs.

``create_app(middleware)`` returns a Starlette app. Four POST routes get memory:
``/v1/chat/completions`` and ``/v1/responses`` (OpenAI upstream), ``/v1/messages`` and
``/v1/messages/count_tokens`` (Anthropic upstream). Everything else is relayed untouched: to the
Anthropic upstream when the path starts with ``/v1/messages`` or the request carries ``x-api-key``
or ``anthropic-version``, else to the OpenAI upstream.

Responses are relayed chunk by chunk as they arrive (server-sent events are never buffered) and a
client that goes away closes the upstream stream. Memory fails open: if preparing the request
breaks, the original bytes go upstream. When memories went into a request, a copy of its answer's
chunks is kept as they pass and, once the last one is out, the reply's text goes to
``Middleware.observe_reply`` (``memwire.middleware._reply``).

Limits (docs/proxy.md, "Limits"): a request body must arrive within ``body_timeout`` seconds (else
408, on every route); a client may start ``proxy_new_namespaces_per_minute`` new namespaces a minute
(each client key's clients together; the proxy key's together; else each client address) and the
memory directory holds ``proxy_max_namespaces`` at most (else 429); bodies over :data:`OFFLOAD_BYTES` are
parsed and prepared in a worker thread. The header timeout and the connection limit belong to the
server (:mod:`memwire.adapters.server._server`, ``memwire proxy``). Responses are never cut by a limit.

Keys (:mod:`memwire.adapters.server._keys`): with a keys file, a client's ``x-memwire-key`` decides its
namespace on every route that uses one (the memory routes, ``/memwire/v1``, ``/memwire/ui``); the
proxy key stays the operator's, which may name any namespace and alone reads ``/metrics``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from contextvars import ContextVar
from functools import lru_cache, partial
from typing import Any, TypeVar

import httpx
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware as AsgiMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..._errors import ConfigError, NamespaceError, RequestFormatError, StoreUnavailableError
from ..._json import load_json
from ...memory._store import validate_namespace
from ...middleware._core import Injection, Middleware, Prepared
from ...middleware._distill import Complete, upstream_complete
from ...middleware._records import record_of
from ...middleware._reply import Reply, ReplyTap, tap_reply
from ...middleware.formats import FORMATS, format_for, format_for_path

# the Anthropic cache-breakpoint rule's names, where they were (tests, callers)
from ...middleware.formats.anthropic_messages import (  # noqa: F401
    MAX_CACHE_BREAKPOINTS,
    add_cache_breakpoint,
    count_cache_breakpoints,
)
from .._common import dump_json, error_id
from ._aio import AioTransport, Answer, Outgoing
from ._aio import available as aio_available
from ._clients import client_name
from ._keys import KEY_HEADER, Access, Caller, KeyRing
from ._limits import NamespaceQuota, declared_length, read_all, read_body
from ._memory_api import memory_api
from ._metrics import Metrics
from ._refusal import Refusal, refusal_response
from ._ui import ui_routes

__all__ = ["create_app", "default_client"]

log = logging.getLogger("memwire.proxy")

T = TypeVar("T")
_Answer = httpx.Response | Answer  # what the upstream answered: httpx's, or aiohttp's through AioTransport.send

DEFAULT_OPENAI_UPSTREAM = "https://api.openai.com"
DEFAULT_ANTHROPIC_UPSTREAM = "https://api.anthropic.com"
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024  # Anthropic's own limit for the Messages API
OFFLOAD_BYTES = 256 * 1024  # bodies bigger than this are parsed and prepared in a worker thread
# a pass-through body of a declared length up to this is read whole before it is sent: one write
# upstream instead of a stream, and sent again when a pooled connection turns out closed; a bigger
# one (a file upload) streams through as it arrives
BUFFER_BYTES = 1024 * 1024

OPENAI, ANTHROPIC = "openai", "anthropic"
_NAMES = {OPENAI: "OpenAI-compatible", ANTHROPIC: "Anthropic"}


# Never forwarded upstream: hop-by-hop headers (RFC 9110 7.6.1), headers httpx recomputes, ours.
_DROP_REQUEST = frozenset({
    b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"proxy-connection",
    b"te", b"trailer", b"transfer-encoding", b"upgrade", b"expect", b"host", b"content-length",
})
# Never relayed back: hop-by-hop; content-length/encoding stay (the raw bytes are relayed as is).
_DROP_RESPONSE = frozenset({
    b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-connection", b"te", b"trailer",
    b"transfer-encoding", b"upgrade",
})

def default_client(timeout: float = 600.0, shards: int = 8,
                   transport: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncClient:
    """The shared upstream client: pooled keep-alive connections; long reads (model calls can take
    minutes); never follows redirects or reads proxy variables (the upstream is given explicitly)."""
    return httpx.AsyncClient(
        transport=transport or _sharded(shards),
        timeout=httpx.Timeout(timeout, connect=10.0, pool=30.0),
        follow_redirects=False,
        trust_env=False,
    )


def _sharded(shards: int = 8) -> _ShardedTransport:
    # keep-alive expiry under uvicorn's 5 s (vLLM, a LiteLLM proxy, local servers): a pooled
    # connection is dropped before the upstream closes it, not reused in the instant it does
    return _ShardedTransport(shards, limits=httpx.Limits(max_connections=64, max_keepalive_connections=32,
                                                         keepalive_expiry=4.0))


class _ShardedTransport(httpx.AsyncBaseTransport):
    """Several connection pools used in turn. httpcore's pool does bookkeeping quadratic in its
    connection count on every request; small pools keep that flat when many calls are in flight."""

    def __init__(self, shards: int, limits: httpx.Limits) -> None:
        self._pools = [httpx.AsyncHTTPTransport(limits=limits) for _ in range(max(1, shards))]
        self._turn = itertools.cycle(self._pools)
        # each request a new connection: the retry after a pooled one failed (another may be as stale)
        self.fresh = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_keepalive_connections=0))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await next(self._turn).handle_async_request(request)

    async def aclose(self) -> None:
        for pool in [*self._pools, self.fresh]:
            await pool.aclose()


def create_app(
    middleware: Middleware,
    *,
    openai_upstream: str = DEFAULT_OPENAI_UPSTREAM,
    anthropic_upstream: str = DEFAULT_ANTHROPIC_UPSTREAM,
    client: httpx.AsyncClient | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    proxy_key: str | None = None,
    keys_file: str | os.PathLike[str] | None = None,
    anthropic_cache_breakpoint: bool | None = None,
    timeout: float = 600.0,
    body_timeout: float | None = None,
    memory: bool = True,
    ui: bool = True,
) -> Starlette:
    """Build the proxy app. A ``client`` passed in stays the caller's to close; one created here
    (with ``timeout`` seconds for reads) is closed by the app's lifespan.
    ``anthropic_cache_breakpoint``, ``body_timeout`` and the namespace limits come from the
    middleware's config unless given. ``memory=False`` (the memory directory cannot be used):
    every request passes through unchanged, without a warning per request. ``ui``: serve the
    memories page at ``/memwire/ui`` (``memwire proxy`` turns it off on a non-loopback bind
    without a proxy key). ``keys_file`` (default: config ``proxy_keys_file``): client keys bound to
    namespaces (``memwire keys``); it must exist (ConfigError)."""
    if proxy_key is not None and not proxy_key.strip():  # "" or spaces would be a key anyone can send
        raise ConfigError("the proxy key must not be empty or whitespace")
    if keys_file is None:
        keys_file = middleware.config.proxy_keys_file
    access = Access(proxy_key, KeyRing(keys_file) if keys_file is not None else None)
    own_client = client is None
    # our own client has no auth, cookies, event hooks or redirects to honour: requests go
    # straight to its transport (httpx's client layers cost ~0.1 ms a request)
    direct = (AioTransport() if aio_available() else _sharded()) if own_client else None
    upstream_client = default_client(timeout, transport=direct) if client is None else client
    if anthropic_cache_breakpoint is None:
        anthropic_cache_breakpoint = middleware.config.anthropic_cache_breakpoint
    proxy = _Proxy(
        middleware,
        {OPENAI: _base_url(openai_upstream), ANTHROPIC: _base_url(anthropic_upstream)},
        upstream_client,
        max_body_bytes=max_body_bytes,
        access=access,
        cache_breakpoint=anthropic_cache_breakpoint,
        body_timeout=body_timeout if body_timeout is not None else middleware.config.proxy_body_timeout,
        quota=NamespaceQuota(middleware.store, middleware.config.proxy_new_namespaces_per_minute,
                             middleware.config.proxy_max_namespaces),
        memory=memory,
        direct=direct,
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if own_client:
                await upstream_client.aclose()

    if middleware.config.proxy_request_log is not None:
        middleware.records.path = middleware.config.proxy_request_log
    metrics = Metrics(store_size=lambda: len(middleware.store))
    middleware.records.listeners.append(metrics.observe)
    if memory:  # every worker's and replica's records, kept in each namespace's store (the page's sessions)
        middleware.records.listeners.append(middleware.kept_records.offer)
    middleware.capture.listeners.append(metrics.capture)
    # the model routes first: Starlette tries the routes in order, and nearly every request is one
    # (the POST routes whose body memwire transforms: each format names its own, and its upstream)
    routes: list[BaseRoute] = [Route(path, _Endpoint(partial(proxy.with_memory, api=fmt.api)), methods=["POST"])
                               for fmt in FORMATS.values() for path in fmt.paths]
    routes.append(memory_api(middleware, access=access, quota=proxy.quota))  # /memwire/v1/...
    if ui:
        routes += ui_routes(middleware, access=access, quota=proxy.quota)  # /memwire/ui
    routes += [Route("/metrics", partial(_metrics, metrics, access)),
               Route("/memwire/healthz", partial(_healthz, middleware, memory))]
    routes.append(Route("/{path:path}", proxy))  # any other method or path: the provider's
    app = Starlette(routes=routes, lifespan=lifespan, middleware=[AsgiMiddleware(_AccessLog)],
                    exception_handlers={Refusal: _error_response, HTTPException: _error_response})
    app.state.proxy = proxy
    _quiet_cut_relays()
    return app


class _Endpoint:
    """A request handler as a plain ASGI app (what Starlette's ``request_response`` makes of it, less
    its own exception layer: a refusal goes to the app's ``ExceptionMiddleware``, which answers it
    alike; one wrapper fewer for each message sent)."""

    def __init__(self, handle: Callable[[Request], Awaitable[Response]]) -> None:
        self.handle = handle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self.handle(Request(scope, receive, send))
        await response(scope, receive, send)


def _base_url(url: str) -> str:
    """``https://host/v1`` and ``https://host`` both mean the origin: request paths carry ``/v1``."""
    return url.rstrip("/").removesuffix("/v1")


def upstream_family(path: str, headers: Mapping[str, str]) -> str:
    """Which upstream a request goes to: its route, else Anthropic-looking path or headers."""
    fmt = format_for_path(path)
    if fmt is not None:
        return fmt.upstream
    if path.startswith("/v1/messages") or "x-api-key" in headers or "anthropic-version" in headers:
        return ANTHROPIC
    return OPENAI


class _Proxy:
    """The endpoints: the memory routes and the pass-through."""

    def __init__(
        self, middleware: Middleware, upstreams: dict[str, str], client: httpx.AsyncClient, *,
        max_body_bytes: int, access: Access, cache_breakpoint: bool, body_timeout: float,
        quota: NamespaceQuota, memory: bool = True, direct: _ShardedTransport | AioTransport | None = None,
    ) -> None:
        self.middleware = middleware
        self.memory = memory
        self.body_timeout = body_timeout
        self.quota = quota
        self.upstreams = upstreams
        self.client = client
        self.direct = direct
        # what httpx.AsyncClient.build_request adds to every request: its default headers (those the
        # caller did not send: user-agent, accept, ...) and its timeouts
        self._defaults = [(k.lower(), k, v) for k, v in client.headers.raw]
        self._timeout = client.timeout.as_dict()
        self._extensions = {"timeout": self._timeout}
        self.max_body_bytes = max_body_bytes
        self.access = access
        self.proxy_key = access.proxy_key
        self.cache_breakpoint = cache_breakpoint
        self._pass_through = _Endpoint(self.pass_through)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The catch-all route as an ASGI app: Starlette routes every method to one (a function
        endpoint gets GET only)."""
        await self._pass_through(scope, receive, send)

    async def with_memory(self, request: Request, api: str) -> Response:
        caller = self._check(request)
        namespace = self.access.namespace(caller, request.headers.get("x-memwire-namespace"))
        raw = await read_all(request, self.body_timeout, self.max_body_bytes)
        body, injection, model = (await self._prepare(request, raw, api, caller, namespace) if self.memory
                                  else (raw, None, ""))
        injected = len(injection.memory_ids) if injection is not None and injection.injected else 0
        request.state.injected = injected  # for the access log
        mode = injection.mode if injection is not None else self.middleware.mode
        headers = {"x-memwire-injected": str(injected), "x-memwire-mode": mode}
        if injection is not None and injection.profile_ids:  # contextPerTurn with profile=true
            headers["x-memwire-profile"] = str(len(injection.profile_ids))
        return await self._forward(request, body, headers, partial(self._tap, injection, api, model,
                                                                   client_name(request.headers)))

    def _tap(self, injection: Injection | None, api: str, model: str, client: str, status: int,
             headers: Mapping[str, str]) -> ReplyTap | None:
        """The reader of a memory route's reply: telemetry (when memories went in) and the request's
        record (``Middleware.records``: /metrics and the figures), from the reply's usage."""
        def record(reply: Reply) -> None:
            self.middleware.records.add(record_of(injection, api, model, status, reply.usage, client=client))

        return tap_reply(self.middleware, injection, api, status, headers, on_reply=record)

    async def pass_through(self, request: Request) -> Response:
        self._check(request)
        return await self._forward(request, None, {})

    def _check(self, request: Request) -> Caller:
        """Who is calling: the proxy key (compared in constant time) or a client key of the keys
        file, when either is set; no ``.`` or ``..`` path segments (also percent-encoded), which
        could leave the upstream's path prefix (``https://host/api`` + ``/../admin``)."""
        caller = self.access.caller(request.headers.get(KEY_HEADER))
        for segment in _raw_path(request).split("?", 1)[0].split("/"):
            if segment.replace("%2e", ".").replace("%2E", ".") in (".", ".."):
                raise Refusal(400, "request path must not contain '.' or '..' segments", "invalid_path")
        return caller

    # ---------------------------------------------------------------- the memory routes

    async def _prepare(self, request: Request, raw: bytes, api: str, caller: Caller,
                       namespace: str | None) -> tuple[bytes, Injection | None, str]:
        """The bytes to send upstream, the injection (None: the caller's bytes go unchanged) and
        the request's model. ``namespace``: the one the caller may use (``Access.namespace``)."""
        if namespace is not None and namespace != "default":
            try:
                validate_namespace(namespace)
            except NamespaceError as exc:
                raise Refusal(400, f"x-memwire-namespace: {exc}", "invalid_namespace") from None
            try:  # a namespace not seen yet is looked up in the store: off the event loop (a database)
                if not self.quota.known(namespace):  # a cap reached: a 429 Refusal
                    client = caller.budget(request.client.host if request.client else None)
                    await run_in_threadpool(self.quota.admit, namespace, client)
            except NamespaceError as exc:  # the name of an existing namespace but for its case
                raise Refusal(400, f"x-memwire-namespace: {exc}", "invalid_namespace") from None
            except (OSError, StoreUnavailableError) as exc:  # the namespaces cannot be read: no memory for this call
                return (*_unchanged(raw, exc), "")
        big = len(raw) > OFFLOAD_BYTES  # parsing and searching a huge body must not hold the event loop
        data = await _run(big, _parse, raw, api)
        model = data.get("model")
        model = model if isinstance(model, str) else ""
        kw: dict[str, Any] = {"namespace": namespace, "headers": request.headers,
                              "distill_with": self._distill_with(request, api)}
        try:
            if big:
                prepared = await run_in_threadpool(partial(self.middleware.prepare_request, data, api, **kw))
            else:
                prepared = await self.middleware.aprepare_request(data, api, **kw)
            return await _run(big, self._encode, prepared, data, raw, api), prepared.injection, model
        except (RequestFormatError, NamespaceError) as exc:
            raise Refusal(400, str(exc)) from None
        except Exception as exc:
            return (*_unchanged(raw, exc), model)

    def _distill_with(self, request: Request, api: str) -> Complete | None:
        """With ``distill_via_upstream`` (the operator's opt-in), distillation goes to this
        request's upstream with the caller's own credentials."""
        cfg = self.middleware.config
        if not (cfg.distill_model and cfg.distill_via_upstream):
            return None
        base = self.upstreams[upstream_family(request.scope["path"], request.headers)]
        return upstream_complete(base, api, request.headers, cfg.distill_model, timeout=cfg.distill_timeout)

    def _encode(self, prepared: Prepared, data: dict[str, Any], raw: bytes, api: str) -> bytes:
        body = prepared.body
        if body == data:  # nothing changed: the caller's exact bytes go upstream
            return raw
        if self.cache_breakpoint:  # the format's own rule (Anthropic's: formats/anthropic_messages.py)
            body = format_for(api).cache_breakpoint(body, prepared.injection)
        return dump_json(body)

    # ---------------------------------------------------------------- upstream

    async def _forward(self, request: Request, body: bytes | None, extra: Mapping[str, str],
                       tap: _Tap | None = None) -> Response:
        """Send the request upstream and relay the answer. ``body=None``: stream the client's body
        through untouched. ``tap(status, headers)``: what reads the reply, if anything."""
        headers = request.headers
        family = upstream_family(request.scope["path"], headers)
        base = self.upstreams[family]
        declared = declared_length(headers)
        if body is None and declared is not None and declared <= BUFFER_BYTES and "transfer-encoding" not in headers:
            body = await read_all(request, self.body_timeout)
        streamed = body is None and ("content-length" in headers or "transfer-encoding" in headers)
        url = base + _raw_path(request)
        if request.scope.get("query_string"):
            url += "?" + request.scope["query_string"].decode("latin-1")
        upstream = self._request(request.method, url, _upstream_headers(headers.raw, keep_length=streamed),
                                 read_body(request, self.body_timeout) if streamed else body)
        if streamed:  # read from the client's messages, which the relay listens to for a disconnect: sent first
            return _Relay(await self._send(upstream, family, retry=False), extra, tap)
        return _Relay(partial(self._send, upstream, family, retry=True), extra, tap)  # sent while the relay listens

    def _request(self, method: str, url: str, headers: list[tuple[bytes, bytes]],
                 content: bytes | AsyncIterator[bytes] | None) -> httpx.Request | Outgoing:
        if self.direct is None:
            return self.client.build_request(method, url, headers=headers, content=content)
        names = {k for k, _ in headers}  # lower-case already (ASGI)
        merged = [(raw, v) for k, raw, v in self._defaults if k not in names] + headers
        if isinstance(self.direct, AioTransport):
            return Outgoing(method, url, merged, content, self._timeout)
        return httpx.Request(method, _url(url), headers=merged, content=content, extensions=self._extensions)

    async def _send_once(self, request: httpx.Request | Outgoing, fresh: bool = False) -> _Answer:
        if self.direct is None:
            assert isinstance(request, httpx.Request)
            return await self.client.send(request, stream=True)
        transport = self.direct.fresh if fresh else self.direct
        if isinstance(request, Outgoing):  # made for an AioTransport (``_request``)
            assert isinstance(transport, AioTransport)
            return await transport.send(request)
        response = await transport.handle_async_request(request)
        response.request = request
        return response

    async def _send(self, request: httpx.Request | Outgoing, family: str, retry: bool) -> _Answer:
        """Send upstream; failures become 504 and 502 refusals naming the upstream by ``family``
        (its address is the operator's). ``retry``: the body can be sent again."""
        try:
            try:
                return await self._send_once(request)
            except httpx.RemoteProtocolError:
                if not retry:
                    raise
                # A pooled connection the upstream closed while idle fails like this before the
                # request was read: send it once more, on a fresh connection.
                log.info("upstream closed a pooled connection; retrying once")
                return await self._send_once(request, fresh=True)
        except httpx.TimeoutException:  # the upstream's address is the operator's: not in the client's error
            raise Refusal(504, f"the {_NAMES[family]} upstream timed out", "upstream_timeout") from None
        except httpx.HTTPError as exc:
            raise Refusal(502, f"the {_NAMES[family]} upstream is unreachable ({type(exc).__name__})",
                          "upstream_unreachable") from None


@lru_cache(maxsize=256)
def _url(url: str) -> httpx.URL:
    """A parsed upstream URL (parsing costs a third of building the request; calls repeat a few)."""
    return httpx.URL(url)


async def _metrics(metrics: Metrics, access: Access, request: Request) -> Response:
    """``/metrics`` (Prometheus text): the whole proxy's figures, the operator's. With a proxy key
    or a keys file, the scrape carries the proxy key: ``x-memwire-key``, or ``Authorization:
    Bearer KEY`` (what Prometheus's scrape config sends); a client key gets 403."""
    bearer = request.headers.get("authorization", "")
    key = bearer[7:].strip() if bearer[:7].lower() == "bearer " and KEY_HEADER not in request.headers else None
    caller = access.caller(request.headers.get(KEY_HEADER, key))
    if access.guarded and not caller.admin:
        raise Refusal(403, "/metrics holds every tenant's figures: it needs the proxy key, not a client key",
                      "metrics_forbidden")
    body, ctype = await run_in_threadpool(metrics.render)
    return Response(body, media_type=ctype)


async def _healthz(middleware: Middleware, memory: bool, request: Request) -> Response:
    """Liveness (answered at all: 200) and whether the default store can be read (a problem is
    named, its details are in the log)."""
    store = "off" if not memory else "readable"
    if memory:
        try:
            await run_in_threadpool(middleware.store.refresh)
        except Exception as exc:
            log.warning("memwire proxy: health check: the store cannot be read (%s: %s)", type(exc).__name__, exc)
            store = "unreadable"
    return JSONResponse({"status": "ok", "store": store})


def _raw_path(request: Request) -> str:
    """The path as the client encoded it (``%2F`` stays ``%2F``)."""
    raw = request.scope.get("raw_path")
    return raw.decode("latin-1") if raw else str(request.scope["path"])


def _upstream_headers(raw: Sequence[tuple[bytes, bytes]], keep_length: bool) -> list[tuple[bytes, bytes]]:
    named_hop = {v.strip().lower() for k, val in raw if k == b"connection" for v in val.split(b",")}
    out = [
        (k, v) for k, v in raw
        if (k not in _DROP_REQUEST or (keep_length and k == b"content-length"))
        and k not in named_hop and not k.startswith(b"x-memwire-")
    ]
    if not any(k == b"accept-encoding" for k, _ in raw):
        out.append((b"accept-encoding", b"identity"))  # else httpx would ask for gzip on the client's behalf
    return out


_Tap = Callable[[int, Mapping[str, str]], ReplyTap | None]  # reads the reply of an answer (status, headers)


class _Relay(StreamingResponse):
    """The upstream's answer as it arrives: its status, its headers but hop-by-hop ones, and its
    body as it came over the wire (still compressed if it was). The answer is awaited here, while
    Starlette listens for the client leaving: that stops the wait or the relay. The upstream
    response is closed however the relay ends. ``tap`` reads the reply of an answer relayed whole."""

    def __init__(self, answer: _Answer | Callable[[], Awaitable[_Answer]],
                 extra: Mapping[str, str], tap: _Tap | None = None) -> None:
        super().__init__((), headers=extra)  # the body comes with the answer
        self.answer = answer
        self.tap = tap

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Relay while watching for the client leaving, which cancels the wait or the relay: what
        Starlette does before ASGI 2.4, with two asyncio tasks instead of anyio's task group (a
        tenth of a request's CPU in the proxy)."""
        if _spec(scope) >= (2, 4):  # the server says so when send fails
            return await super().__call__(scope, receive, send)
        relay = asyncio.ensure_future(self.stream_response(send))
        watch = asyncio.ensure_future(_client_left(receive))
        try:
            await asyncio.wait((relay, watch), return_when=asyncio.FIRST_COMPLETED)
        finally:  # the relay done, the client gone, or this request cancelled (the server stopping)
            for task in (watch, relay):
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task  # the relay's own cleanup runs (the upstream answer is closed)
        if not relay.cancelled():
            relay.result()  # what the relay raised: a Refusal before anything was sent, say

    async def stream_response(self, send: Send) -> None:
        try:
            upstream = await self.answer() if callable(self.answer) else self.answer
        except Refusal as refused:  # no answer (unreachable, timed out): the tap records the failure
            tap = self.tap(refused.status, httpx.Headers()) if self.tap is not None else None
            if tap is not None:
                tap.finish()
            raise
        tap = None
        try:
            self.status_code = upstream.status_code
            self.raw_headers[:0] = [(k.lower(), v) for k, v in upstream.headers.raw if k.lower() not in _DROP_RESPONSE]
            tap = self.tap(upstream.status_code, upstream.headers) if self.tap is not None else None
            self.body_iterator = _raw_chunks(upstream, tap)
            await super().stream_response(send)
            if tap is not None:  # the client has it all, end of body included: only now the reply is read
                tap.finish()
        except httpx.HTTPError as exc:  # the headers are gone already: all we can do is cut the stream
            log.warning("memwire proxy: upstream stream broke off (%s)", type(exc).__name__)
            _cut()  # the server closes the client's connection (a short body must not pass for a whole one)
        finally:
            if tap is not None:  # the client left (an SDK closes at [DONE]) or the stream broke: the
                tap.finish(ended=False)  # request still gets its record (a no-op after the finish above)
            # runs once the relay was cancelled too (the client left): a cancel is delivered once,
            # so this await completes (anyio's shield would not stop a second, native one anyway)
            await upstream.aclose()


def _spec(scope: Scope) -> tuple[int, ...]:
    return tuple(int(p) for p in scope.get("asgi", {}).get("spec_version", "2.0").split("."))


async def _client_left(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _raw_chunks(upstream: _Answer, tap: ReplyTap | None = None) -> AsyncIterator[bytes]:
    """The body as it came over the wire (mock transports hand over responses that are already
    read), each chunk copied to ``tap`` on its way."""
    if isinstance(upstream, httpx.Response) and upstream.is_stream_consumed:
        chunks = _one(upstream.content)
    else:
        chunks = upstream.aiter_raw()
    async for chunk in chunks:
        if tap is not None:
            tap.feed(chunk)
        yield chunk


async def _one(chunk: bytes) -> AsyncIterator[bytes]:
    yield chunk


async def _run(offload: bool, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``func(*args, **kwargs)``, in a worker thread when ``offload``."""
    return await run_in_threadpool(func, *args, **kwargs) if offload else func(*args, **kwargs)


def _parse(raw: bytes, api: str) -> dict[str, Any]:
    try:
        data = load_json(raw)
    except ValueError as exc:  # UnicodeDecodeError is a ValueError too
        raise Refusal(400, f"request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise Refusal(400, "request body is nested too deeply") from None
    if not isinstance(data, dict):
        raise Refusal(400, f"{api}: request body must be a JSON object, got {type(data).__name__}")
    return data


def _unchanged(raw: bytes, exc: BaseException) -> tuple[bytes, None]:
    # a database's outage is logged once, by the database: not once per request
    (log.debug if isinstance(exc, StoreUnavailableError) else log.warning)(
        "memwire proxy: preparing the request failed (%s: %s); sent unchanged", type(exc).__name__, exc)
    return raw, None


async def _error_response(request: Request, exc: Exception) -> Response:
    """A refusal (or any HTTP error Starlette raises) in the format of the API the request was for."""
    family = upstream_family(request.scope["path"], request.headers)
    return refusal_response(Refusal.of(exc), "anthropic" if family == ANTHROPIC else "openai")


# uvicorn's words when an app returns with its response unfinished: it then closes the connection
_UNFINISHED = "ASGI callable returned without completing response."
# per request (set by _AccessLog in the request's task; the relay's task shares it): [cut on purpose]
_CUT: ContextVar[list[bool] | None] = ContextVar("memwire_cut", default=None)


def _cut() -> None:
    """This request's response is left unfinished on purpose: the server closes the connection, and
    its line about it is not logged (memwire said why in one line)."""
    mark = _CUT.get()
    if mark is not None:
        mark[0] = True


class _QuietCut(logging.Filter):
    """Drops uvicorn's ERROR line about an unfinished response when memwire left it so on purpose
    (an upstream stream that broke off: the client must see the break, not a short body that looks
    whole)."""

    def filter(self, record: logging.LogRecord) -> bool:
        mark = _CUT.get()
        return not (mark is not None and mark[0] and record.msg == _UNFINISHED)


def _quiet_cut_relays() -> None:
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _QuietCut) for f in logger.filters):
        logger.addFilter(_QuietCut())


class _AccessLog:
    """One log line per request: method, path, status, memories injected, time; never headers or
    bodies (they carry keys and user data). A client that left before its answer gets none and is
    logged as 499. An unexpected error is one line with an error id (the traceback at debug
    level), and the client gets a 500 in the API's format with that id, never a server's path;
    when the answer had begun, its connection is closed."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = "-"
        _CUT.set([False])

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = str(message["status"])
            await send(message)

        try:
            with suppress(ClientDisconnect):  # the client left while sending its body, or (ASGI 2.4) mid-answer
                await self.app(scope, receive, sending)
            if status == "-":  # Starlette stops, without a word, a response whose client left
                status = "499"
        except Exception as exc:  # a bug: one line, and the client an answer in its API's format
            eid = error_id()
            tb = exc.__traceback__
            while tb is not None and tb.tb_next is not None:
                tb = tb.tb_next
            at = f"{os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}" if tb is not None else "?"
            log.error("memwire proxy: %s %s failed: unexpected %s at %s [error %s]", scope["method"], scope["path"],
                      type(exc).__name__, at, eid)
            log.debug("memwire proxy: error %s", eid, exc_info=exc)
            if status == "-":
                refusal = Refusal(500, f"memwire failed on this request (error {eid}; the proxy's log has the details)",
                                  "memwire_error")
                await (await _error_response(Request(scope), refusal))(scope, receive, sending)
            else:
                _cut()
        finally:
            injected = scope.get("state", {}).get("injected", 0)  # set by the memory routes (request.state)
            log.info("%s %s %s injected=%d %.1fms", scope["method"], scope["path"], status, injected,
                     (time.perf_counter() - start) * 1000)
