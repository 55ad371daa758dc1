"""A fake OpenAI + Anthropic server for tests and demos: a plain ASGI app, no network.

It serves the three request formats memwire handles, streaming and not, in the providers' wire
formats (close enough that the official ``openai`` and ``anthropic`` SDKs parse every field):

- ``POST /v1/chat/completions``  OpenAI chat completions (``stream_options.include_usage``)
- ``POST /v1/responses``         OpenAI Responses (``previous_response_id`` is resolved)
- ``POST /v1/messages``          Anthropic messages (more than 4 ``cache_control`` → 400)
- ``POST /v1/messages/count_tokens``, ``GET /v1/models``
- anything else is recorded too (``api`` None) and answered 404 (405: a known path, another method)

Replies are scripted and deterministic (ids are counters, ``created`` is fixed). Input usage comes
from one :class:`CacheSimulator` per provider, so ``cached_tokens`` / ``cache_read_input_tokens``
behave as the real caches would for the same request sequence. Every request is recorded.

OpenAI SDK: ``base_url=f"{url}/v1"``. Anthropic SDK: ``base_url=url``. In process, without a
socket: ``AsyncOpenAI(base_url="http://fake/v1", http_client=httpx.AsyncClient(
transport=httpx.ASGITransport(app=app)))``; the installed anthropic SDK is built on ``httpx2``, so
it takes ``httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app))``. Sync clients need a real
socket: ``serve_in_thread(app)``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from memwire._errors import RequestFormatError
from memwire._sim.cache import CacheSimulator, Usage
from memwire._sim.serialize import request_blocks
from memwire.middleware._formats import text_of
from memwire.policies._tokens import get_encoder

__all__ = [
    "ErrorReply",
    "FakeProvider",
    "RecordedRequest",
    "Reply",
    "ServerThread",
    "ToolCall",
    "ToolLoop",
    "default_reply",
    "json_schema_of",
    "last_user_text",
    "schema_example",
    "serve_in_thread",
    "structured_reply",
    "tool_names",
    "tool_result_pending",
]

CREATED = 1_700_000_000  # fixed timestamp: responses are byte-deterministic
DEFAULT_MODELS = ("gpt-4o-mini", "gpt-4.1", "claude-sonnet-4-6", "claude-haiku-4-5")


@dataclass(frozen=True)
class ToolCall:
    """A function/tool call the fake model makes. ``arguments`` may be a dict or a JSON string."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(dict(self.arguments))

    def arguments_dict(self) -> dict[str, Any]:
        if isinstance(self.arguments, str):
            parsed = json.loads(self.arguments or "{}")
            return parsed if isinstance(parsed, dict) else {"value": parsed}
        return dict(self.arguments)


@dataclass(frozen=True)
class Reply:
    """What the fake model answers: text, tool calls, or both."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()

    @classmethod
    def tool(cls, name: str, arguments: Mapping[str, Any] | str | None = None, *, text: str = "") -> Reply:
        return cls(text=text, tool_calls=(ToolCall(name, arguments if arguments is not None else {}),))


@dataclass(frozen=True)
class ErrorReply:
    """Make the fake provider fail this request with an HTTP error in the API's error format."""

    status: int = 500
    message: str = "fake provider error"


ReplyFn = Callable[[dict[str, Any], str], Reply | ErrorReply | str]


@dataclass
class RecordedRequest:
    """One request as the fake provider received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or the raw text when it was not JSON
    api: str | None
    usage: Usage | None = None
    status: int = 200
    raw: bytes = b""  # the body's bytes as they arrived


def last_user_text(body: Mapping[str, Any], api: str) -> str:
    """The text of the last user message that has text (tool results are not user text)."""
    if api == "openai.responses":
        items = body.get("input")
        if isinstance(items, str):
            return items
        messages = [i for i in items or [] if isinstance(i, dict) and i.get("type", "message") == "message"]
        kinds: tuple[str, ...] = ("input_text", "text")
    else:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        kinds = ("text",)
    for msg in reversed(messages):
        if msg.get("role") == "user":
            text = text_of(msg.get("content"), kinds).strip()
            if text:
                return text
    return ""


_CONTEXT_ROLES = ("system", "developer")  # messages a harness adds around the conversation


def tool_result_pending(body: Mapping[str, Any], api: str) -> bool:
    """Whether the conversation ends with a tool's result, i.e. the model is to go on after a tool
    call. System and developer messages placed after it (Claude Code sends mid-conversation
    ``system`` messages) are skipped. Anthropic: a ``user`` message with ``tool_result`` blocks;
    chat completions: a ``tool`` message; Responses: a ``*_call_output`` item."""
    if api == "openai.responses":
        items = body.get("input")
        if not isinstance(items, list):
            return False
        for item in reversed(items):
            if not isinstance(item, Mapping):
                return False
            kind = item.get("type", "message")
            if kind == "message" and item.get("role") in _CONTEXT_ROLES:
                continue
            return isinstance(kind, str) and kind.endswith("_call_output")
        return False
    for msg in reversed([m for m in body.get("messages") or [] if isinstance(m, Mapping)]):
        role = msg.get("role")
        if role in _CONTEXT_ROLES:
            continue
        if api == "openai.chat":
            return role == "tool"
        content = msg.get("content")
        return role == "user" and isinstance(content, list) and any(
            isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content)
    return False


def tool_names(body: Mapping[str, Any], api: str) -> list[str]:
    """Names of the tools a request offers (chat completions: ``function.name``; Responses tools
    without a name, such as ``web_search``, by their type)."""
    names: list[str] = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, Mapping):
            continue
        if api == "openai.chat" and isinstance(tool.get("function"), Mapping):
            name = tool["function"].get("name")
        else:
            name = tool.get("name") or tool.get("type")
        if isinstance(name, str):
            names.append(name)
    return names


def json_schema_of(body: Mapping[str, Any], api: str) -> dict[str, Any] | None:
    """The JSON schema a request asks the answer to follow, or None. Anthropic: ``output_format``
    or ``output_config.format`` of type ``json_schema``; Responses: ``text.format``; chat
    completions: ``response_format`` (``json_schema.schema``)."""
    if api == "openai.chat":
        fmt = body.get("response_format")
        if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
            inner = fmt.get("json_schema")
            schema = inner.get("schema") if isinstance(inner, Mapping) else None
            return dict(schema) if isinstance(schema, Mapping) else {}
        return None
    if api == "openai.responses":
        text = body.get("text")
        candidates = [text.get("format")] if isinstance(text, Mapping) else []
    else:
        config = body.get("output_config")
        candidates = [body.get("output_format"), config.get("format") if isinstance(config, Mapping) else None]
    for fmt in candidates:
        if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
            schema = fmt.get("schema")
            return dict(schema) if isinstance(schema, Mapping) else {}
    return None


def schema_example(schema: Any, _defs: Mapping[str, Any] | None = None) -> Any:
    """A small value that satisfies a (simple) JSON schema: ``const``, the first ``enum`` value,
    the first ``anyOf`` / ``oneOf`` branch, every property of an object, ``minItems`` items."""
    if not isinstance(schema, Mapping):
        return None
    defs = _defs if _defs is not None else {**(schema.get("$defs") or {}), **(schema.get("definitions") or {})}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.rsplit("/", 1)[-1] in defs:
        return schema_example(defs[ref.rsplit("/", 1)[-1]], defs)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return schema_example(schema[key][0], defs)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties") or {}
        return {name: schema_example(sub, defs) for name, sub in props.items()}
    if kind == "array":
        return [schema_example(schema.get("items"), defs) for _ in range(int(schema.get("minItems") or 0))]
    if kind == "string":
        return "x" * int(schema.get("minLength") or 0) or "example"
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    return None


def structured_reply(body: Mapping[str, Any], api: str) -> Reply | None:
    """For a request that asks for JSON-schema output (a title or a summary a harness requests for
    itself): a reply whose text is a JSON value following that schema. None for other requests."""
    schema = json_schema_of(body, api)
    if schema is None:
        return None
    return Reply(text=json.dumps(schema_example(schema)))


def default_reply(body: dict[str, Any], api: str) -> Reply:
    """``ok: <first 40 characters of the last user text>``."""
    return Reply(text=f"ok: {last_user_text(body, api)[:40]}")


@dataclass
class ToolLoop:
    """A reply function for agent loops: one tool call per turn, then text once its result is back.

    ``call(body, api)`` gives the tool call to make (a :class:`Reply`, or None when the request
    offers no suitable tool: then it is answered with text); ``text(body, api)`` the final answer
    (default :func:`default_reply`). A request asking for JSON-schema output gets
    :func:`structured_reply` instead. For example::

        ToolLoop(lambda body, api: Reply.tool("Bash", {"command": "echo hi"})
                 if "Bash" in tool_names(body, api) else None)
    """

    call: Callable[[dict[str, Any], str], Reply | None]
    text: ReplyFn = default_reply

    def __call__(self, body: dict[str, Any], api: str) -> Reply | ErrorReply | str:
        structured = structured_reply(body, api)
        if structured is not None:
            return structured
        if not tool_result_pending(body, api):
            call = self.call(body, api)
            if call is not None:
                return call
        return self.text(body, api)


def _pieces(text: str) -> list[str]:
    """Stream text word by word (trailing spaces kept), so deltas re-join to the exact text."""
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])


def _json_pieces(text: str, size: int = 12) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {payload}\n\n".encode()


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


_ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
_SERVED_PATHS = frozenset(
    {"/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/messages/count_tokens", "/v1/models"}
)


class FakeProvider:
    """The ASGI app. ``FakeProvider()`` is itself callable as an ASGI application.

    ``reply(body, api)`` scripts the answers (``api`` is "openai.chat", "openai.responses" or
    "anthropic.messages"); it may return a :class:`Reply`, a plain string, or an
    :class:`ErrorReply`. ``chunk_delay`` (seconds) is slept before each streamed event.
    """

    def __init__(
        self,
        reply: ReplyFn | None = None,
        *,
        chunk_delay: float = 0.0,
        openai_sim: CacheSimulator | None = None,
        anthropic_sim: CacheSimulator | None = None,
        models: Iterable[str] = DEFAULT_MODELS,
    ) -> None:
        self.reply = reply or default_reply
        self.chunk_delay = chunk_delay
        self.openai = openai_sim or CacheSimulator("openai")
        self.anthropic = anthropic_sim or CacheSimulator("anthropic")
        self.models = list(models)
        self.requests: list[RecordedRequest] = []
        self._ids = itertools.count(1)
        self._responses: dict[str, list[Any]] = {}  # response id -> its full input + output items
        self._app: ASGIApp = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/responses", self._responses_api, methods=["POST"]),
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/{path:path}", self._other, methods=_ALL_METHODS),  # last: every other path and method
            ]
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)

    @property
    def last(self) -> RecordedRequest:
        return self.requests[-1]

    def usages(self, provider: str | None = None) -> list[Usage]:
        """Usage of every answered request, in order (optionally of one provider)."""
        return [r.usage for r in self.requests if r.usage and (provider is None or r.usage.provider == provider)]

    def reset(self) -> None:
        """Forget recorded requests, stored responses and both caches."""
        self.requests.clear()
        self._responses.clear()
        self.openai.reset()
        self.anthropic.reset()

    # -- plumbing ------------------------------------------------------------------------------

    def _id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):06d}"

    async def _record(self, request: Request, api: str | None) -> tuple[RecordedRequest, Any]:
        raw = await request.body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        rec = RecordedRequest(request.method, request.url.path, dict(request.headers), body, api, raw=raw)
        self.requests.append(rec)
        return rec, body

    def _error(self, rec: RecordedRequest, status: int, message: str, anthropic: bool) -> Response:
        rec.status = status
        kind = _ERROR_TYPES.get(status, "api_error")
        if anthropic:
            return JSONResponse({"type": "error", "error": {"type": kind, "message": message}}, status)
        return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": None}}, status)

    def _answer(self, body: dict[str, Any], api: str) -> Reply | ErrorReply:
        reply = self.reply(body, api)
        return Reply(text=reply) if isinstance(reply, str) else reply

    def _output_tokens(self, reply: Reply, model: str | None) -> int:
        enc = get_encoder(model)
        n = len(enc.encode(reply.text)) if reply.text else 0
        for call in reply.tool_calls:
            n += len(enc.encode(call.name)) + len(enc.encode(call.arguments_json()))
        return max(n, 1)

    def _stream(self, events: Iterable[bytes]) -> StreamingResponse:
        async def gen() -> AsyncIterator[bytes]:
            for event in events:
                if self.chunk_delay:
                    await asyncio.sleep(self.chunk_delay)
                yield event

        return StreamingResponse(gen(), media_type="text/event-stream", headers={"cache-control": "no-cache"})

    async def _prepare(
        self, request: Request, api: str, sim: CacheSimulator, anthropic: bool
    ) -> tuple[RecordedRequest, dict[str, Any], dict[str, Any], Reply, Usage] | Response:
        """Record, validate, simulate the cache and script the reply; or an error response.

        Returns the body as sent and as the cache saw it (Responses: with the stored
        conversation of ``previous_response_id`` in front)."""
        rec, body = await self._record(request, api)
        if not isinstance(body, dict):
            return self._error(rec, 400, "request body must be a JSON object", anthropic)
        if not isinstance(body.get("model"), str):
            return self._error(rec, 400, "model: Field required", anthropic)
        if anthropic and not isinstance(body.get("max_tokens"), int):
            return self._error(rec, 400, "max_tokens: Field required", anthropic)
        seen = body
        if api == "openai.responses" and body.get("previous_response_id"):
            prior = self._responses.get(body["previous_response_id"])
            if prior is None:
                missing = f"Previous response with id '{body['previous_response_id']}' not found."
                return self._error(rec, 404, missing, False)
            items = body.get("input")
            items = [{"role": "user", "content": items}] if isinstance(items, str) else list(items or [])
            seen = {**body, "input": prior + items}
        try:
            usage = sim.observe(seen, api)
        except RequestFormatError as exc:  # includes CacheRuleError (> 4 breakpoints)
            return self._error(rec, 400, str(exc), anthropic)
        reply = self._answer(body, api)
        if isinstance(reply, ErrorReply):
            return self._error(rec, reply.status, reply.message, anthropic)
        usage = replace(usage, output_tokens=self._output_tokens(reply, body["model"]))
        rec.usage = usage
        return rec, body, seen, reply, usage

    # -- OpenAI chat completions ---------------------------------------------------------------

    async def _chat(self, request: Request) -> Response:
        prepared = await self._prepare(request, "openai.chat", self.openai, anthropic=False)
        if isinstance(prepared, Response):
            return prepared
        _, body, _, reply, usage = prepared
        cid, model = self._id("chatcmpl-fake"), body["model"]
        calls = [(c.id or self._id("call_fake"), c) for c in reply.tool_calls]
        finish = "tool_calls" if calls else "stop"
        usage_obj = {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.prompt_tokens + usage.output_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }
        base = {"id": cid, "created": CREATED, "model": model, "system_fingerprint": "fp_memwire"}

        if not body.get("stream"):
            message: dict[str, Any] = {
                "role": "assistant",
                "content": reply.text if (reply.text or not calls) else None,
                "refusal": None,
                "annotations": [],
            }
            if calls:
                message["tool_calls"] = [
                    {"id": i, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json()}}
                    for i, c in calls
                ]
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            return JSONResponse({**base, "object": "chat.completion", "choices": [choice], "usage": usage_obj})

        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
            data: dict[str, Any] = {
                **base,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
            }
            if include_usage:
                data["usage"] = None
            return _sse(data)

        events = [chunk({"role": "assistant", "content": "", "refusal": None})]
        events += [chunk({"content": piece}) for piece in _pieces(reply.text)]
        for index, (call_id, call) in enumerate(calls):
            head = {"index": index, "id": call_id, "type": "function", "function": {"name": call.name, "arguments": ""}}
            events.append(chunk({"tool_calls": [head]}))
            events += [
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                for piece in _json_pieces(call.arguments_json())
            ]
        events.append(chunk({}, finish))
        if include_usage:
            events.append(_sse({**base, "object": "chat.completion.chunk", "choices": [], "usage": usage_obj}))
        events.append(_sse("[DONE]"))
        return self._stream(events)

    # -- OpenAI Responses ----------------------------------------------------------------------

    async def _responses_api(self, request: Request) -> Response:
        prepared = await self._prepare(request, "openai.responses", self.openai, anthropic=False)
        if isinstance(prepared, Response):
            return prepared
        _, body, seen, reply, usage = prepared
        rid = self._id("resp_fake")
        output: list[dict[str, Any]] = []
        if reply.text or not reply.tool_calls:
            part: dict[str, Any] = {"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}
            output.append({"type": "message", "id": self._id("msg_fake"), "status": "completed", "role": "assistant",
                           "content": [part]})
        for call in reply.tool_calls:
            output.append(
                {
                    "type": "function_call",
                    "id": self._id("fc_fake"),
                    "call_id": call.id or self._id("call_fake"),
                    "name": call.name,
                    "arguments": call.arguments_json(),
                    "status": "completed",
                }
            )
        # Keep the conversation so a later previous_response_id sees the same token prefix.
        items = seen.get("input")
        items = [{"role": "user", "content": items}] if isinstance(items, str) else list(items or [])
        self._responses[rid] = items + output

        usage_obj = {
            "input_tokens": usage.prompt_tokens,
            "input_tokens_details": {"cached_tokens": usage.cached_tokens},
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.prompt_tokens + usage.output_tokens,
        }

        def response(status: str, items: list[dict[str, Any]], usage_value: Any) -> dict[str, Any]:
            return {
                "id": rid,
                "object": "response",
                "created_at": CREATED,
                "status": status,
                "model": body["model"],
                "output": items,
                "error": None,
                "incomplete_details": None,
                "instructions": body.get("instructions"),
                "metadata": body.get("metadata") or {},
                "parallel_tool_calls": body.get("parallel_tool_calls", True),
                "temperature": body.get("temperature", 1.0),
                "top_p": body.get("top_p", 1.0),
                "tool_choice": body.get("tool_choice", "auto"),
                "tools": body.get("tools") or [],
                "previous_response_id": body.get("previous_response_id"),
                "max_output_tokens": body.get("max_output_tokens"),
                "reasoning": {"effort": None, "summary": None},
                "store": body.get("store", True),
                "text": {"format": {"type": "text"}},
                "truncation": "disabled",
                "user": None,
                "usage": usage_value,
            }

        if not body.get("stream"):
            return JSONResponse(response("completed", output, usage_obj))

        seq = itertools.count()

        def event(kind: str, **data: Any) -> bytes:
            return _sse({"type": kind, "sequence_number": next(seq), **data}, event=kind)

        events = [
            event("response.created", response=response("in_progress", [], None)),
            event("response.in_progress", response=response("in_progress", [], None)),
        ]
        for index, item in enumerate(output):
            where = {"item_id": item["id"], "output_index": index}
            if item["type"] == "message":
                part = item["content"][0]
                started = {**item, "status": "in_progress", "content": []}
                events.append(event("response.output_item.added", output_index=index, item=started))
                events.append(event("response.content_part.added", **where, content_index=0, part={**part, "text": ""}))
                events += [
                    event("response.output_text.delta", **where, content_index=0, delta=piece, logprobs=[])
                    for piece in _pieces(part["text"])
                ]
                events.append(
                    event("response.output_text.done", **where, content_index=0, text=part["text"], logprobs=[])
                )
                events.append(event("response.content_part.done", **where, content_index=0, part=part))
            else:
                started = {**item, "status": "in_progress", "arguments": ""}
                events.append(event("response.output_item.added", output_index=index, item=started))
                events += [
                    event("response.function_call_arguments.delta", **where, delta=piece)
                    for piece in _json_pieces(item["arguments"])
                ]
                events.append(event("response.function_call_arguments.done", **where, name=item["name"],
                                    arguments=item["arguments"]))
            events.append(event("response.output_item.done", output_index=index, item=item))
        events.append(event("response.completed", response=response("completed", output, usage_obj)))
        return self._stream(events)

    # -- Anthropic messages --------------------------------------------------------------------

    async def _messages(self, request: Request) -> Response:
        prepared = await self._prepare(request, "anthropic.messages", self.anthropic, anthropic=True)
        if isinstance(prepared, Response):
            return prepared
        _, body, _, reply, usage = prepared
        content: list[dict[str, Any]] = []
        if reply.text or not reply.tool_calls:
            content.append({"type": "text", "text": reply.text})
        for call in reply.tool_calls:
            content.append({"type": "tool_use", "id": call.id or self._id("toolu_fake"), "name": call.name,
                            "input": call.arguments_dict()})
        stop = "tool_use" if reply.tool_calls else "end_turn"
        input_usage = {
            "input_tokens": usage.input_tokens,
            "cache_creation_input_tokens": usage.cache_write,
            "cache_read_input_tokens": usage.cache_read,
        }
        usage_obj = {
            **input_usage,
            "output_tokens": usage.output_tokens,
            "cache_creation": {"ephemeral_5m_input_tokens": usage.cache_write, "ephemeral_1h_input_tokens": 0},
            "server_tool_use": None,
            "service_tier": "standard",
        }
        message = {
            "id": self._id("msg_fake"),
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage_obj,
        }
        if not body.get("stream"):
            return JSONResponse(message)

        def event(kind: str, **data: Any) -> bytes:
            return _sse({"type": kind, **data}, event=kind)

        start = {**message, "content": [], "stop_reason": None, "usage": {**usage_obj, "output_tokens": 1}}
        events = [event("message_start", message=start), event("ping")]
        for index, block in enumerate(content):
            if block["type"] == "text":
                events.append(event("content_block_start", index=index, content_block={"type": "text", "text": ""}))
                events += [
                    event("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
                    for piece in _pieces(block["text"])
                ]
            else:
                events.append(event("content_block_start", index=index, content_block={**block, "input": {}}))
                events += [
                    event("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": piece})
                    for piece in _json_pieces(json.dumps(block["input"]))
                ]
            events.append(event("content_block_stop", index=index))
        events.append(
            event(
                "message_delta",
                delta={"stop_reason": stop, "stop_sequence": None},
                usage={**input_usage, "output_tokens": usage.output_tokens},
            )
        )
        events.append(event("message_stop"))
        return self._stream(events)

    async def _count_tokens(self, request: Request) -> Response:
        rec, body = await self._record(request, "anthropic.count_tokens")
        if not isinstance(body, dict):
            return self._error(rec, 400, "request body must be a JSON object", True)
        try:
            blocks = request_blocks(body, "anthropic.messages")
        except RequestFormatError as exc:
            return self._error(rec, 400, str(exc), True)
        return JSONResponse({"input_tokens": sum(len(b.tokens) for b in blocks)})

    async def _other(self, request: Request) -> Response:
        """A path (or method) the fake does not serve: recorded, so a test sees what a client tried,
        then answered 404 (405 for a served path) in the error format the request looks like."""
        rec, _ = await self._record(request, None)
        path = request.url.path
        served = path in _SERVED_PATHS
        anthropic = path.startswith("/v1/messages") or "anthropic-version" in request.headers
        return self._error(rec, 405 if served else 404,
                           f"{request.method} {path} is not served by the fake provider", anthropic)

    async def _models(self, request: Request) -> Response:
        await self._record(request, None)  # listed in self.requests like every other call
        if "anthropic-version" in request.headers:
            data = [
                {"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
                for m in self.models
            ]
            first, last = (self.models[0], self.models[-1]) if self.models else (None, None)
            return JSONResponse({"data": data, "has_more": False, "first_id": first, "last_id": last})
        models = [{"id": m, "object": "model", "created": CREATED, "owned_by": "memwire-fake"} for m in self.models]
        return JSONResponse({"object": "list", "data": models})


# -- running it on a real socket ---------------------------------------------------------------


class ServerThread:
    """An ASGI app served by uvicorn on 127.0.0.1 (a free port) in a daemon thread.

    >>> with serve_in_thread(FakeProvider()) as server:   # doctest: +SKIP
    ...     OpenAI(base_url=server.base_url + "/v1", api_key="x")
    """

    def __init__(self, app: ASGIApp, host: str = "127.0.0.1") -> None:
        import uvicorn  # imported here: only needed when a real socket is wanted

        from memwire._sim.quick_server import QuickServer

        # proto TCP, not 0: asyncio sets TCP_NODELAY only on connections whose socket says TCP (and
        # they inherit it from this one); without it a response's second write waits for the
        # client's delayed ACK, ~40 ms on every request
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))  # port 0: the OS picks a free port, no race with other tests
        self.port: int = self._sock.getsockname()[1]
        self.base_url = f"http://{host}:{self.port}"
        # a Starlette app (the proxy) gets its lifespan: what it opens at start is closed at the end
        lifespan: Literal["on", "off"] = "on" if hasattr(app, "router") else "off"
        config = uvicorn.Config(
            app, log_level="warning", lifespan=lifespan, access_log=False, timeout_graceful_shutdown=1
        )
        self._server = QuickServer(config)  # stops when told, not at uvicorn's next 0.1 s tick
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, name=f"memwire-sim:{self.port}", daemon=True
        )

    def start(self, timeout: float = 10.0) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"uvicorn did not start on {self.base_url}")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        self._server.stop()
        if self._thread.is_alive():
            self._thread.join(timeout=3)
            if self._thread.is_alive():  # a client kept a stream open: stop waiting for it
                self._server.force_exit = True
                self._thread.join(timeout=3)
        self._sock.close()

    def __enter__(self) -> ServerThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_in_thread(app: ASGIApp, host: str = "127.0.0.1") -> ServerThread:
    """Start serving ``app``; use as a context manager or call ``.stop()``. ``.base_url`` has no
    trailing slash and no ``/v1``."""
    return ServerThread(app, host).start()
