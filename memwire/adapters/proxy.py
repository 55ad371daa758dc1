"""Proxy mode: an ASGI app in front of OpenAI-compatible and Anthropic APIs.

``create_app(middleware)`` returns a Starlette app. Four POST routes get memory:
``/v1/chat/completions`` and ``/v1/responses`` (OpenAI upstream), ``/v1/messages`` and
``/v1/messages/count_tokens`` (Anthropic upstream). Everything else is relayed untouched: to the
Anthropic upstream when the path starts with ``/v1/messages`` or the request carries ``x-api-key``
or ``anthropic-version``, else to the OpenAI upstream.

Responses are relayed chunk by chunk as they arrive (server-sent events are never buffered) and a
client that goes away closes the upstream stream. Memory fails open: if preparing the request
breaks, the original bytes go upstream.

Limits (docs/proxy.md, "Limits"): a request body must arrive within ``body_timeout`` seconds (else
408, on every route); a client may start ``proxy_new_namespaces_per_minute`` new namespaces a minute
(the proxy key's clients together when there is a key, else each client address) and the memory
directory holds ``proxy_max_namespaces`` at most (else 429); bodies over :data:`OFFLOAD_BYTES` are
parsed and prepared in a worker thread. The header timeout and the connection limit belong to the
server (:mod:`memwire.adapters._server`, ``memwire proxy``). Responses are never cut by a limit.
"""

from __future__ import annotations

import hmac
import itertools
import json
import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .._errors import ConfigError, NamespaceError, RequestFormatError
from ..memory._store import validate_namespace
from ..middleware._core import Injection, Middleware, Prepared
from ._common import dump_json
from ._limits import NamespaceQuota

__all__ = ["create_app", "default_client"]

log = logging.getLogger("memwire.proxy")

DEFAULT_OPENAI_UPSTREAM = "https://api.openai.com"
DEFAULT_ANTHROPIC_UPSTREAM = "https://api.anthropic.com"
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024  # Anthropic's own limit for the Messages API
MAX_CACHE_BREAKPOINTS = 4  # Anthropic rejects a request with more cache_control blocks
OFFLOAD_BYTES = 256 * 1024  # bodies bigger than this are parsed and prepared in a worker thread

OPENAI, ANTHROPIC = "openai", "anthropic"

# POST routes whose body memwire transforms: path -> (request format, upstream)
_ROUTES: dict[str, tuple[str, str]] = {
    "/v1/chat/completions": ("openai.chat", OPENAI),
    "/v1/responses": ("openai.responses", OPENAI),
    "/v1/messages": ("anthropic.messages", ANTHROPIC),
    "/v1/messages/count_tokens": ("anthropic.messages", ANTHROPIC),
}

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

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 413: "request_too_large",
    429: "rate_limit_error", 502: "api_error", 504: "timeout_error",
}


def default_client(timeout: float = 600.0, shards: int = 8) -> httpx.AsyncClient:
    """The shared upstream client: pooled keep-alive connections; long reads (model calls can take
    minutes); never follows redirects or reads proxy variables (the upstream is given explicitly)."""
    return httpx.AsyncClient(
        transport=_ShardedTransport(shards, limits=httpx.Limits(max_connections=64, max_keepalive_connections=32)),
        timeout=httpx.Timeout(timeout, connect=10.0, pool=30.0),
        follow_redirects=False,
        trust_env=False,
    )


class _ShardedTransport(httpx.AsyncBaseTransport):
    """Several connection pools used in turn. httpcore's pool does bookkeeping quadratic in its
    connection count on every request; small pools keep that flat when many calls are in flight."""

    def __init__(self, shards: int, limits: httpx.Limits) -> None:
        self._pools = [httpx.AsyncHTTPTransport(limits=limits) for _ in range(max(1, shards))]
        self._turn = itertools.cycle(self._pools)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await next(self._turn).handle_async_request(request)

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()


def create_app(
    middleware: Middleware,
    *,
    openai_upstream: str = DEFAULT_OPENAI_UPSTREAM,
    anthropic_upstream: str = DEFAULT_ANTHROPIC_UPSTREAM,
    client: httpx.AsyncClient | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    proxy_key: str | None = None,
    anthropic_cache_breakpoint: bool | None = None,
    timeout: float = 600.0,
    body_timeout: float | None = None,
    memory: bool = True,
) -> Starlette:
    """Build the proxy app. A ``client`` passed in stays the caller's to close; one created here
    (with ``timeout`` seconds for reads) is closed by the app's lifespan.
    ``anthropic_cache_breakpoint``, ``body_timeout`` and the namespace limits come from the
    middleware's config unless given. ``memory=False`` (the memory directory cannot be used):
    every request passes through unchanged, without a warning per request."""
    if proxy_key is not None and not proxy_key.strip():  # "" or spaces would be a key anyone can send
        raise ConfigError("the proxy key must not be empty or whitespace")
    own_client = client is None
    upstream_client = default_client(timeout) if client is None else client
    if anthropic_cache_breakpoint is None:
        anthropic_cache_breakpoint = middleware.config.anthropic_cache_breakpoint
    proxy = _Proxy(
        middleware,
        {OPENAI: _base_url(openai_upstream), ANTHROPIC: _base_url(anthropic_upstream)},
        upstream_client,
        max_body_bytes=max_body_bytes,
        proxy_key=proxy_key,
        cache_breakpoint=anthropic_cache_breakpoint,
        body_timeout=body_timeout if body_timeout is not None else middleware.config.proxy_body_timeout,
        quota=NamespaceQuota(middleware.store.path, middleware.config.proxy_new_namespaces_per_minute,
                             middleware.config.proxy_max_namespaces),
        memory=memory,
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if own_client:
                await upstream_client.aclose()

    # An ASGI callable as endpoint: every method on every path reaches the proxy.
    app = Starlette(routes=[Route("/{path:path}", proxy)], lifespan=lifespan)
    app.state.proxy = proxy
    return app


def _base_url(url: str) -> str:
    """``https://host/v1`` and ``https://host`` both mean the origin: request paths carry ``/v1``."""
    return url.rstrip("/").removesuffix("/v1")


def upstream_family(path: str, headers: Mapping[str, str]) -> str:
    """Which upstream a request goes to: its route, else Anthropic-looking path or headers."""
    route = _ROUTES.get(path)
    if route is not None:
        return route[1]
    if path.startswith("/v1/messages") or "x-api-key" in headers or "anthropic-version" in headers:
        return ANTHROPIC
    return OPENAI


class _Reject(Exception):
    """A request memwire answers itself, with an error in the API's own format."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


class _Proxy:
    """The ASGI callable behind the catch-all route."""

    def __init__(
        self, middleware: Middleware, upstreams: dict[str, str], client: httpx.AsyncClient, *,
        max_body_bytes: int, proxy_key: str | None, cache_breakpoint: bool, body_timeout: float,
        quota: NamespaceQuota, memory: bool = True,
    ) -> None:
        self.middleware = middleware
        self.memory = memory
        self.body_timeout = body_timeout
        self.quota = quota
        self.upstreams = upstreams
        self.client = client
        self.max_body_bytes = max_body_bytes
        self.proxy_key = proxy_key.encode() if proxy_key else None
        self.cache_breakpoint = cache_breakpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # websockets are not proxied
            return
        start = time.perf_counter()
        method, path = scope["method"], scope["path"]
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        route = _ROUTES.get(path) if method == "POST" else None
        family = route[1] if route else upstream_family(path, headers)
        injected, status = 0, 0
        try:
            self._check_key(headers)
            _check_path(scope)
            if route is None:
                status = await self._forward(scope, receive, send, family, None, [])
                return
            body, injection, mode = await self._prepare(scope, receive, headers, route[0])
            injected = len(injection.memory_ids) if injection is not None and injection.injected else 0
            extra = [(b"x-memwire-injected", str(injected).encode()), (b"x-memwire-mode", mode.encode())]
            status = await self._forward(scope, receive, send, family, body, extra)
        except _Reject as exc:
            status = exc.status
            await _send_error(send, family, exc.status, exc.message, exc.code)
        finally:  # one line per request; never headers or bodies (they carry keys and user data)
            log.info("%s %s %s injected=%d %.1fms", method, path, status or "-", injected,
                     (time.perf_counter() - start) * 1000)

    def _check_key(self, headers: Mapping[str, str]) -> None:
        if self.proxy_key is None:
            return
        given = headers.get("x-memwire-key", "").encode("latin-1")
        if not hmac.compare_digest(given, self.proxy_key):  # constant time
            raise _Reject(401, "missing or wrong x-memwire-key header", "invalid_memwire_key")

    # ---------------------------------------------------------------- the memory routes

    async def _prepare(self, scope: Scope, receive: Receive, headers: Mapping[str, str],
                       api: str) -> tuple[bytes, Injection | None, str]:
        """Read and transform the body. Returns (bytes to send, injection, mode)."""
        raw = await self._read_body(receive, headers)
        if not self.memory:  # the memory directory is unusable (said once at start): pass through
            return raw, None, self.middleware.mode
        namespace = headers.get("x-memwire-namespace") or None
        if namespace is not None and namespace != "default":
            try:
                validate_namespace(namespace)
            except NamespaceError as exc:
                raise _Reject(400, f"x-memwire-namespace: {exc}", "invalid_namespace") from None
            try:
                refused = self.quota.admit(namespace, self._quota_client(scope))
            except OSError as exc:  # the namespaces directory cannot be read: no memory for this call
                return _unchanged(raw, exc, self.middleware.mode)
            if refused:
                raise _Reject(429, refused, "memwire_namespace_limit")
        if len(raw) > OFFLOAD_BYTES:  # parsing and searching a huge body must not hold the event loop
            return await run_in_threadpool(self._transform, raw, api, namespace, headers)
        data = _parse(raw, api)
        try:
            prepared = await self.middleware.aprepare_request(data, api, namespace=namespace, headers=headers)
        except (RequestFormatError, NamespaceError) as exc:
            raise _Reject(400, str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - fail open: memory never fails the user's call
            return _unchanged(raw, exc, self.middleware.mode)
        return self._encode(prepared, data, raw, api)

    def _quota_client(self, scope: Scope) -> str:
        """Whose budget of new namespaces a request spends: the proxy key's (every client that
        passed the key check) when there is one, else the client address's. Never a header the
        client picks freely (a made-up provider key per request would get a fresh budget each)."""
        if self.proxy_key is not None:
            return "proxy-key"
        client = scope.get("client")
        return f"addr:{client[0]}" if client else "addr:?"

    def _transform(self, raw: bytes, api: str, namespace: str | None, headers: Mapping[str, str]) -> tuple[bytes, Injection | None, str]:
        """``_prepare``'s work for a big body, in a worker thread."""
        data = _parse(raw, api)
        try:
            prepared = self.middleware.prepare_request(data, api, namespace=namespace, headers=headers)
        except (RequestFormatError, NamespaceError) as exc:
            raise _Reject(400, str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - fail open
            return _unchanged(raw, exc, self.middleware.mode)
        return self._encode(prepared, data, raw, api)

    def _encode(self, prepared: Prepared, data: dict[str, Any], raw: bytes, api: str) -> tuple[bytes, Injection | None, str]:
        injection = prepared.injection
        mode = injection.mode if injection is not None else self.middleware.mode
        try:
            body = prepared.body
            if body == data:  # nothing changed: the caller's exact bytes go upstream
                return raw, injection, mode
            if api == "anthropic.messages" and self.cache_breakpoint:
                body = add_cache_breakpoint(body, injection)
            return dump_json(body), injection, mode
        except Exception as exc:  # noqa: BLE001 - fail open: memory never fails the user's call
            return _unchanged(raw, exc, mode)

    async def _read_body(self, receive: Receive, headers: Mapping[str, str]) -> bytes:
        limit = self.max_body_bytes
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise _Reject(413, f"request body of {declared} bytes exceeds the proxy's limit of {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        try:
            with anyio.fail_after(self.body_timeout):  # a body that trickles in or stalls holds a slot
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise _Reject(499, "client disconnected")
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        raise _Reject(413, f"request body exceeds the proxy's limit of {limit} bytes")
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            raise _body_timed_out(self.body_timeout, size) from None

    # ---------------------------------------------------------------- upstream

    async def _forward(
        self, scope: Scope, receive: Receive, send: Send, family: str, body: bytes | None,
        extra: list[tuple[bytes, bytes]],
    ) -> int:
        """Send the request upstream and relay the answer. ``body=None``: stream the client's body
        through untouched. Returns the status sent (499: the client left first)."""
        raw_headers: Sequence[tuple[bytes, bytes]] = scope["headers"]
        content: bytes | AsyncIterator[bytes] | None = body
        streamed_body = body is None and any(k in (b"content-length", b"transfer-encoding") for k, _ in raw_headers)
        if streamed_body:
            content = _stream_body(receive, self.body_timeout)
        raw_path = scope.get("raw_path")  # as the client encoded it (%2F stays %2F)
        url = self.upstreams[family] + (raw_path.decode("latin-1") if raw_path else scope["path"])
        if scope.get("query_string"):
            url += "?" + scope["query_string"].decode("latin-1")
        request = self.client.build_request(
            scope["method"], url, headers=_upstream_headers(raw_headers, keep_length=streamed_body), content=content)
        status, failure = 499, None
        async with anyio.create_task_group() as tg:

            async def watch_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                tg.cancel_scope.cancel()  # the client left: stop waiting for or reading the upstream

            if not streamed_body:  # else the body stream reads receive() until the request is sent
                tg.start_soon(watch_disconnect)
            try:
                try:
                    upstream = await self.client.send(request, stream=True)
                except httpx.RemoteProtocolError:
                    if streamed_body:
                        raise  # the client's body is consumed: nothing to send again
                    # A pooled connection the upstream closed while idle fails like this before the
                    # request was read: send it once more, on a fresh connection.
                    log.info("upstream closed a pooled connection; retrying once")
                    upstream = await self.client.send(self.client.build_request(
                        request.method, request.url, headers=request.headers, content=body), stream=True)
            except httpx.TimeoutException:
                failure = _Reject(504, f"upstream {self.upstreams[family]} timed out", "upstream_timeout")
            except httpx.HTTPError as exc:
                failure = _Reject(502, f"upstream {self.upstreams[family]} unreachable: {type(exc).__name__}",
                                  "upstream_unreachable")
            except _Reject as exc:  # the client went away while sending its body
                failure = exc
            else:
                if streamed_body:
                    tg.start_soon(watch_disconnect)
                try:
                    status = upstream.status_code
                    await _relay(upstream, send, extra)
                finally:
                    await upstream.aclose()
            tg.cancel_scope.cancel()
        if failure is not None:
            raise failure
        return status


def _check_path(scope: Scope) -> None:
    """A path with ``.`` or ``..`` segments (also percent-encoded) could leave the upstream's path
    prefix (``https://host/api`` + ``/../admin``): refused."""
    raw = scope.get("raw_path") or scope["path"].encode("latin-1")
    for segment in raw.decode("latin-1").split("?", 1)[0].split("/"):
        if segment.replace("%2e", ".").replace("%2E", ".") in (".", ".."):
            raise _Reject(400, "request path must not contain '.' or '..' segments", "invalid_path")


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


async def _stream_body(receive: Receive, timeout: float) -> AsyncIterator[bytes]:
    """The client's body as it arrives, all of it within ``timeout`` seconds (else 408)."""
    deadline = anyio.current_time() + timeout
    size = 0
    while True:
        try:
            with anyio.fail_after(max(0.0, deadline - anyio.current_time())):
                message = await receive()
        except TimeoutError:
            raise _body_timed_out(timeout, size) from None
        if message["type"] == "http.disconnect":
            raise _Reject(499, "client disconnected")
        chunk = message.get("body", b"")
        size += len(chunk)
        yield chunk
        if not message.get("more_body", False):
            return


def _body_timed_out(timeout: float, size: int) -> _Reject:
    return _Reject(408, f"request body not received within {timeout:g} s ({size} bytes arrived)", "request_timeout")


async def _relay(upstream: httpx.Response, send: Send, extra: list[tuple[bytes, bytes]]) -> None:
    """Relay status, headers and raw body chunks as they arrive."""
    headers = [(k.lower(), v) for k, v in upstream.headers.raw if k.lower() not in _DROP_RESPONSE]
    await send({"type": "http.response.start", "status": upstream.status_code, "headers": headers + extra})
    declared = upstream.headers.get("content-length", "")
    length = int(declared) if declared.isdigit() else None
    sent, done = 0, False
    try:
        # Read to the end even after the last declared byte: a fully read response returns its
        # connection to the pool, a half-read one is closed.
        async for chunk in _raw_chunks(upstream):
            if done:
                continue
            sent += len(chunk)
            done = length is not None and sent >= length  # all declared bytes: end with this send
            await send({"type": "http.response.body", "body": chunk, "more_body": not done})
    except httpx.HTTPError as exc:  # headers are gone already: all we can do is cut the stream
        log.warning("memwire proxy: upstream stream broke off (%s)", type(exc).__name__)
        return
    except OSError:  # ASGI 2.4 servers raise on send once the client is gone
        return
    if not done:
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _raw_chunks(upstream: httpx.Response) -> AsyncIterator[bytes]:
    """The body as it came over the wire (still compressed if it was); mock transports hand over
    responses that are already read."""
    if upstream.is_stream_consumed:
        yield upstream.content
        return
    async for chunk in upstream.aiter_raw():
        yield chunk


def _parse(raw: bytes, api: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError as exc:  # UnicodeDecodeError is a ValueError too
        raise _Reject(400, f"request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise _Reject(400, "request body is nested too deeply") from None
    if not isinstance(data, dict):
        raise _Reject(400, f"{api}: request body must be a JSON object, got {type(data).__name__}")
    return data


def _unchanged(raw: bytes, exc: BaseException, mode: str) -> tuple[bytes, None, str]:
    log.warning("memwire proxy: preparing the request failed (%s: %s); sent unchanged", type(exc).__name__, exc)
    return raw, None, mode


def _error_body(family: str, status: int, message: str, code: str | None) -> bytes:
    if family == ANTHROPIC:
        kind = _ANTHROPIC_ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()


async def _send_error(send: Send, family: str, status: int, message: str, code: str | None) -> None:
    if status == 499:  # the client is gone: nobody to answer
        return
    body = _error_body(family, status, message, code)
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


# -------------------------------------------------------------------- Anthropic prompt caching


def count_cache_breakpoints(body: Mapping[str, Any]) -> int:
    """``cache_control`` markers at the top level (automatic caching), in tools, system and messages
    (Anthropic allows 4 in all)."""

    def count(blocks: Any) -> int:
        if not isinstance(blocks, list):
            return 0
        n = 0
        for b in blocks:
            if isinstance(b, Mapping):
                n += bool(b.get("cache_control"))
                if b.get("type") == "tool_result":
                    n += count(b.get("content"))
        return n

    messages = body.get("messages")
    total = bool(body.get("cache_control")) + count(body.get("tools")) + count(body.get("system"))
    if isinstance(messages, list):
        total += sum(count(m.get("content")) for m in messages if isinstance(m, Mapping))
    return total


def add_cache_breakpoint(body: dict[str, Any], injection: Injection | None) -> dict[str, Any]:
    """Mark the last content block before the memory with ``cache_control`` so the history prefix is
    written to the cache. Returns ``body`` itself when there is nothing to do; otherwise a new body
    in which only the changed message and block are copies."""
    if injection is None or not injection.injected or injection.position is None:
        return body
    messages = body.get("messages")
    if not isinstance(messages, list) or not 0 <= injection.position < len(messages):
        return body
    target = _block_before_memory(messages, injection)
    if target is None or count_cache_breakpoints(body) >= MAX_CACHE_BREAKPOINTS:
        return body
    index, end = target
    msg = messages[index]
    content = msg["content"]
    marker = _marker(messages, index)
    if isinstance(content, str):
        new_content: list[Any] = [{"type": "text", "text": content, "cache_control": marker}]
    else:
        j = _cacheable(content[:end])
        if j is None:
            return body
        new_content = list(content)
        new_content[j] = {**content[j], "cache_control": marker}
    new_messages = list(messages)
    new_messages[index] = {**msg, "content": new_content}
    return {**body, "messages": new_messages}


def _block_before_memory(messages: list[Any], injection: Injection) -> tuple[int, int] | None:
    """(message index, number of its leading blocks) holding the content just before the memory."""
    position = injection.position
    assert position is not None
    if injection.placement == "merge":  # the block is a part of the message at position
        content = messages[position].get("content") if isinstance(messages[position], Mapping) else None
        if isinstance(content, list):
            k = next((i for i, p in enumerate(content) if isinstance(p, Mapping) and p.get("text") == injection.text), 0)
            if k > 0:  # tool results come first in that message
                return position, k
    elif injection.placement != "message":  # "system": appended to the system prompt, no history split
        return None
    if position == 0 or not isinstance(messages[position - 1], Mapping):
        return None
    content = messages[position - 1].get("content")
    if isinstance(content, str):
        return (position - 1, 1) if content else None
    if isinstance(content, list) and content:
        return position - 1, len(content)
    return None


def _cacheable(blocks: Sequence[Any]) -> int | None:
    """Index of the last block that may carry cache_control; None if it already has one or none may."""
    for j in range(len(blocks) - 1, -1, -1):
        b = blocks[j]
        if not isinstance(b, Mapping):
            return None
        if b.get("cache_control"):
            return None  # already a breakpoint right there
        # Thinking blocks and empty text blocks cannot be marked (the API rejects them).
        if b.get("type") in ("thinking", "redacted_thinking") or (b.get("type") == "text" and not b.get("text")):
            continue
        return j
    return None


def _marker(messages: list[Any], index: int) -> dict[str, str]:
    """Anthropic wants longer TTLs before shorter ones: match a 1h breakpoint that comes later."""
    for m in messages[index + 1 :]:
        content = m.get("content") if isinstance(m, Mapping) else None
        if isinstance(content, list):
            for b in content:
                cc = b.get("cache_control") if isinstance(b, Mapping) else None
                if isinstance(cc, Mapping) and cc.get("ttl") == "1h":
                    return {"type": "ephemeral", "ttl": "1h"}
    return {"type": "ephemeral"}
