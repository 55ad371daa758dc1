"""The HTTP memory API the proxy serves under ``/memwire/v1``: list, search, add, get and forget
memories, and review the capture inbox, per namespace (``x-memwire-namespace``), under the proxy's
key (``x-memwire-key``) when it has one. With a keys file, a client key decides the namespace: the
header may only narrow it to a sub-namespace (else 403). Adding to a namespace that does not exist
yet spends the caller's budget of new namespaces, as on the proxy's memory routes.

Every error has one shape, ``{"error": {"code": ..., "message": ...}}``, with a 4xx status, or 503
when the store cannot be used: then the message holds an error id, and the log line with the
details (the path, the database) carries it; an outage is logged once, not once per call
(:class:`~memwire.adapters._common.Failures`). The OpenAPI document is at
``/memwire/v1/openapi.json``, under the proxy's keys like every route. Store calls are blocking
file work, so the endpoints are plain functions Starlette runs in its thread pool. A forgotten
memory goes to the archive, never away. A text that looks like it holds a secret is refused, as
capture refuses it: agents write here too.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field, ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from ..._errors import InvalidMemoryError, MemoryNotFoundError, MemwireError, NamespaceError
from ...memory._inbox import approve, inbox_of, reject
from ...memory._model import Memory
from ...memory._protocol import Store
from ...middleware._core import Middleware
from ...policies._secrets import find_secret
from .._common import Failures, error_id, public_message
from ._keys import KEY_HEADER, Access
from ._limits import NamespaceQuota
from ._refusal import Refusal, refusal_response

__all__ = ["PREFIX", "memory_api"]

PREFIX = "/memwire/v1"
MAX_LIMIT = 1000
MAX_BODY_BYTES = 64 * 1024

log = logging.getLogger("memwire")


class MemoryOut(BaseModel):
    id: str
    text: str
    tags: list[str]
    pinned: bool
    topic: str | None
    date: str | None
    score: float | None = Field(None, description="with ?q=: the share of the query's weight the memory matches "
                                                  "(related words can take it past 1)")


class MemoryIn(BaseModel, extra="forbid"):
    text: str = Field(min_length=1, description="the memory, one statement")
    tags: list[str] = Field(default_factory=list)
    pinned: bool = False
    topic: str | None = None


class ErrorOut(BaseModel):
    class Detail(BaseModel):
        code: str
        message: str

    error: Detail


def _out(mem: Memory, score: float | None = None) -> dict[str, Any]:
    return MemoryOut(id=mem.id, text=mem.text, tags=list(mem.tags), pinned=mem.pinned, topic=mem.topic,
                     date=mem.date, score=score).model_dump()


# complexity over 15: the count sums the routes' handlers, nested here as closures over the
# middleware; each handler is short
def memory_api(  # noqa: C901
    middleware: Middleware, *, proxy_key: str | None = None, access: Access | None = None,
    quota: NamespaceQuota | None = None,
) -> Mount:
    """The memory API's routes, mounted at ``PREFIX``, with their own error shape. ``access``: the
    proxy's keys (default: ``proxy_key`` alone); ``quota``: the proxy's namespace caps, for adds."""
    access = access if access is not None else Access(proxy_key)
    failures = Failures("memory API")

    def store(request: Request, write: bool = False) -> Store:
        caller, ns = access.request(request.headers)
        try:
            s = middleware.store_for(ns)
        except NamespaceError as exc:
            raise Refusal(400, f"x-memwire-namespace: {exc}", "invalid_namespace") from None
        if write and quota is not None and ns not in (None, "default"):
            try:  # a cap reached: a 429 Refusal
                quota.admit(ns, caller.budget(request.client.host if request.client else None))
            except NamespaceError as exc:  # another spelling of an existing namespace's name
                raise Refusal(400, f"x-memwire-namespace: {exc}", "invalid_namespace") from None
        return s

    def limit(request: Request) -> int:
        raw = request.query_params.get("limit", "100")
        if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
            raise Refusal(400, f"limit must be an integer from 1 to {MAX_LIMIT}, got {raw!r}", "invalid_limit")
        return int(raw)

    def list_or_search(request: Request) -> JSONResponse:
        s, n, q = store(request), limit(request), request.query_params.get("q")
        if q:
            items = [_out(h.memory, h.score) for h in s.search(q, n, min_score=0.0)]
        else:
            items = [_out(m) for m in s.memories()[:n]]
        return JSONResponse({"data": items, "count": len(items)})

    async def add(request: Request) -> JSONResponse:
        s = await run_in_threadpool(store, request, True)  # the quota may look at the disk
        raw = b""
        async for chunk in request.stream():  # a memory is at most a few KiB: never buffer more
            raw += chunk
            if len(raw) > MAX_BODY_BYTES:
                raise Refusal(413, f"a memory API body is at most {MAX_BODY_BYTES:,} bytes", "body_too_large")
        try:
            body = MemoryIn.model_validate_json(raw)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())
            raise Refusal(400, problems, "invalid_body") from None
        secret = find_secret(body.text)
        if secret is not None:
            raise Refusal(400, f"the text looks like it holds a secret ({secret}); not stored", "secret_refused")
        try:
            mem = await run_in_threadpool(s.add, body.text, body.tags, body.pinned, topic=body.topic)
        except InvalidMemoryError as exc:
            raise Refusal(400, public_message(exc), "invalid_memory") from None
        return JSONResponse(_out(mem), status_code=201)

    def get_one(request: Request) -> JSONResponse:
        return JSONResponse(_out(_found(store(request), request.path_params["id"])))

    def history(request: Request) -> JSONResponse:
        from ...memory._supersede import history as chain  # start-up time

        try:  # oldest first: each value, until when it held, what replaced or merged it
            steps = [step.to_json() for step in chain(store(request), request.path_params["id"])]
        except MemoryNotFoundError as exc:
            raise Refusal(404, public_message(exc), "not_found") from None
        return JSONResponse({"data": steps, "count": len(steps)})

    def forget(request: Request) -> JSONResponse:
        s = store(request)
        return JSONResponse(_out(s.forget(_found(s, request.path_params["id"]).id)))  # to the archive

    def inbox(request: Request) -> JSONResponse:
        items = [_out(m) for m in inbox_of(store(request)).memories()[: limit(request)]]
        return JSONResponse({"data": items, "count": len(items)})

    def review(move: Any) -> Any:
        def endpoint(request: Request) -> JSONResponse:
            try:
                done = move(store(request), [request.path_params["id"]])
            except MemoryNotFoundError as exc:
                raise Refusal(404, public_message(exc), "not_found") from None
            return JSONResponse(_out(done[0]))
        return endpoint

    def openapi(request: Request) -> JSONResponse:
        access.caller(request.headers.get(KEY_HEADER))  # like every route but /memwire/healthz
        return JSONResponse(_openapi())

    def tracked(endpoint: Callable[[Request], Any]) -> Callable[[Request], Any]:
        """``endpoint``, telling ``failures`` when it worked (a store failure going on is over); an
        error it was not made for is a 500 in the API's shape with an error id, as the log line."""
        if inspect.iscoroutinefunction(endpoint):
            async def run_async(request: Request) -> Any:
                try:
                    response = await endpoint(request)
                except (Refusal, HTTPException, MemwireError, OSError):
                    raise
                except Exception as exc:
                    raise _unexpected(request, exc) from None
                failures.ok()
                return response
            return run_async

        def run(request: Request) -> Any:
            try:
                response = endpoint(request)
            except (Refusal, HTTPException, MemwireError, OSError):
                raise
            except Exception as exc:
                raise _unexpected(request, exc) from None
            failures.ok()
            return response
        return run

    async def failed(request: Request, exc: Exception) -> Response:
        if isinstance(exc, (MemwireError, OSError)):  # the memory store cannot be read or written
            eid = failures.failed(exc)  # the details (a path, the database) go to the log, once
            exc = Refusal(503, f"the memory store cannot be used now (error {eid}; the proxy's log has the details)",
                          "memory_unavailable")
        return refusal_response(Refusal.of(exc), "memory_api")

    app = Starlette(routes=[
        Route("/memories", tracked(list_or_search), methods=["GET"]),
        Route("/memories", tracked(add), methods=["POST"]),
        Route("/memories/{id}", tracked(get_one), methods=["GET"]),
        Route("/memories/{id}", tracked(forget), methods=["DELETE"]),
        Route("/memories/{id}/history", tracked(history), methods=["GET"]),
        Route("/inbox", tracked(inbox), methods=["GET"]),
        Route("/inbox/{id}/approve", tracked(review(approve)), methods=["POST"]),
        Route("/inbox/{id}/reject", tracked(review(reject)), methods=["POST"]),
        Route("/openapi.json", openapi, methods=["GET"]),
    ], exception_handlers={Refusal: failed, HTTPException: failed, MemwireError: failed, OSError: failed})
    return Mount(PREFIX, app=app)


def _unexpected(request: Request, exc: Exception) -> Refusal:
    eid = error_id()
    log.error("memwire: memory API: %s %s failed: unexpected %s [error %s]", request.method, request.url.path,
              type(exc).__name__, eid)
    log.debug("memwire: memory API: error %s", eid, exc_info=exc)
    return Refusal(500, f"the memory API failed on this request (error {eid}; the proxy's log has the details)",
                   "memwire_error")


def _found(s: Store, mid: str) -> Memory:
    try:
        return s.get(mid)
    except MemoryNotFoundError as exc:
        raise Refusal(404, public_message(exc), "not_found") from None


def _openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 document, its schemas from the pydantic models the endpoints use."""
    ref = {name: {"$ref": f"#/components/schemas/{name}"} for name in ("MemoryOut", "MemoryIn", "ErrorOut")}
    page = {"type": "object", "properties": {"data": {"type": "array", "items": ref["MemoryOut"]},
                                             "count": {"type": "integer"}}}
    headers = [
        {"name": "x-memwire-namespace", "in": "header", "required": False, "schema": {"type": "string"},
         "description": "the namespace (default: the proxy's memory directory itself; with a client key, "
                        "the key's namespace, which this may narrow to NAMESPACE.NAME)"},
        {"name": "x-memwire-key", "in": "header", "required": False, "schema": {"type": "string"},
         "description": "the proxy key, or a client key of its keys file (which decides the namespace)"},
    ]
    step = {"type": "object", "properties": {
        "id": {"type": "string"}, "text": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}},
        "state": {"type": "string", "description": "current, superseded, merged, forgotten, ..."},
        "since": {"type": "string"}, "until": {"type": ["string", "null"]}, "date": {"type": ["string", "null"]},
        "supersedes": {"type": "array", "items": {"type": "string"}}, "superseded_by": {"type": "string"},
        "conflicts": {"type": "array", "items": {"type": "string"}},
        "merged": {"type": "array", "items": {"type": "string"}}, "merged_into": {"type": "string"}}}
    history_page = {"type": "object", "properties": {"data": {"type": "array", "items": step},
                                                     "count": {"type": "integer"}}}
    lim = {"name": "limit", "in": "query",
           "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 100}}
    idp = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"},
           "description": "a memory id or a unique prefix of 4 or more characters"}

    def ok(schema: dict[str, Any], status: str = "200") -> dict[str, Any]:
        return {status: {"description": "OK", "content": {"application/json": {"schema": schema}}},
                "4XX": {"description": "error", "content": {"application/json": {"schema": ref["ErrorOut"]}}}}

    schemas: dict[str, Any] = {}
    for model in (MemoryOut, MemoryIn, ErrorOut):
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    return {
        "openapi": "3.1.0",
        "info": {"title": "memwire memory API", "version": "1"},
        "paths": {
            f"{PREFIX}/memories": {
                "get": {"summary": "List memories, or search them with q", "parameters": [
                    *headers, lim, {"name": "q", "in": "query", "schema": {"type": "string"}}], "responses": ok(page)},
                "post": {"summary": "Add a memory", "parameters": headers, "requestBody": {
                    "required": True, "content": {"application/json": {"schema": ref["MemoryIn"]}}},
                    "responses": ok(ref["MemoryOut"], "201")},
            },
            f"{PREFIX}/memories/{{id}}": {
                "get": {"summary": "One memory", "parameters": [*headers, idp], "responses": ok(ref["MemoryOut"])},
                "delete": {"summary": "Forget a memory (it moves to the archive)", "parameters": [*headers, idp],
                           "responses": ok(ref["MemoryOut"])},
            },
            f"{PREFIX}/memories/{{id}}/history": {"get": {
                "summary": "A memory's values over time, oldest first (current or archived: superseded, merged), "
                           "each with since/until and its links (supersedes, superseded_by, conflicts, merged)",
                "parameters": [*headers, idp], "responses": ok(history_page)}},
            f"{PREFIX}/inbox": {"get": {"summary": "Captured memories waiting for review",
                                        "parameters": [*headers, lim], "responses": ok(page)}},
            f"{PREFIX}/inbox/{{id}}/approve": {"post": {"summary": "Approve: the memory is injected from now on",
                                                       "parameters": [*headers, idp],
                                                       "responses": ok(ref["MemoryOut"])}},
            f"{PREFIX}/inbox/{{id}}/reject": {"post": {"summary": "Reject: archived, not proposed again",
                                                      "parameters": [*headers, idp],
                                                      "responses": ok(ref["MemoryOut"])}},
        },
        "components": {"schemas": schemas},
    }
