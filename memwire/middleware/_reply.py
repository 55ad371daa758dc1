"""The model's reply, read as it passes on its way to the caller, for telemetry
(``Middleware.observe_reply``: did the reply use the memories injected into its request?).

A :class:`ReplyReader` is fed the response body chunk by chunk, as the caller receives it, and only
appends the bytes; the body is parsed once, at the end (:meth:`ReplyReader.text`). A
:class:`ReplyTap` is a reader for one call with memories injected: when the body is over it hands
the reply's text to ``observe_reply``. Nothing here changes or holds back a byte.

What the reply's text is: the assistant's text, and a refusal (what the model said to the person
instead: a reply too). Not text: tool calls and their arguments, reasoning and thinking, images,
audio. The pieces of one answer are joined as the SDKs join them (Responses ``output_text``,
Anthropic text blocks): end to end; several choices (chat ``n > 1``) by a blank line. A reply
without text (tool calls only), an error status, a body that cannot be read: no text (None).

Bodies: JSON, or server-sent events (``text/event-stream``) of the API's events; what a body or an
event of an API holds is read by that API's format (``Format.read_reply``, ``Format.read_event``,
in its module of :mod:`memwire.middleware.formats`).
Compressed bodies (the proxy relays them as they came): gzip and deflate are decompressed from the
copy; other encodings are not read (a debug log). At most ``cap`` bytes are kept (one log line
past it); the reply is then read from what was kept: a stream's first events, a JSON body not at all.
"""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

from .._worker import Worker
from ._core import Middleware
from ._prepared import Injection
from ._usage import Usage, usage_of
from .formats import Format, ReplyText, format_for

__all__ = ["MAX_REPLY_BYTES", "Reply", "ReplyReader", "ReplyTap", "observe", "reply_text", "tap_reply"]

log = logging.getLogger("memwire")

MAX_REPLY_BYTES = 1 << 20  # of body kept per reply: a longer one is read from its first MiB
INLINE_BYTES = 64 << 10    # a bigger body is parsed in a worker thread, not where the stream ended
MAX_PENDING = 64           # big replies waiting to be parsed at most (each holds up to MAX_REPLY_BYTES)

# its own thread: a big reply's parse never waits behind, or holds up, a retrieval or a capture
_parser = Worker("memwire-reply", "reading replies", "replies", lambda: MAX_PENDING)


# ---------------------------------------------------------------------- reading one reply


def _api(api: str) -> Format:
    """The format that reads replies of ``api`` (its own module: what its bodies and events hold)."""
    return format_for(api)


class Reply(NamedTuple):
    """What a reply said (None: no text) and what the provider says it cost (None: not reported)."""

    text: str | None = None
    usage: Usage | None = None


def _reply(api: str, out: ReplyText) -> Reply:
    return Reply(out.text() or None, usage_of(api, out.usage))


def read_reply(api: str, body: Any) -> Reply:
    """A whole reply of ``api``: parsed JSON, or an SDK object (a litellm ``ModelResponse``, a
    Responses object). An odd body is an empty :class:`Reply`, never an error."""
    spec = _api(api)
    out = ReplyText(spec.reply_sep)
    try:
        spec.read_reply(out, body)
        return _reply(api, out)
    except Exception as exc:
        log.debug("memwire: reply not read (%s: %s)", type(exc).__name__, exc)
        return Reply()


def reply_text(api: str, body: Any) -> str | None:
    """The text of a whole reply of ``api`` (see :func:`read_reply`). None when it has none."""
    return read_reply(api, body).text


def _sse_data(body: str) -> Iterator[str]:
    """The data of each server-sent event, in order (its ``data:`` lines joined)."""
    for event in body.replace("\r\n", "\n").replace("\r", "\n").split("\n\n"):
        lines = [line[5:].removeprefix(" ") for line in event.split("\n") if line.startswith("data:")]
        if lines:
            yield "\n".join(lines)


def _inflate(data: bytes, cap: int) -> bytes:
    """gzip or zlib data (raw deflate as a fallback), decompressed up to ``cap`` bytes: what a
    truncated stream holds is kept; a compression bomb stops at the cap."""
    try:
        return zlib.decompressobj(wbits=zlib.MAX_WBITS | 32).decompress(data, cap)
    except zlib.error:
        return zlib.decompressobj(wbits=-zlib.MAX_WBITS).decompress(data, cap)


class ReplyReader:
    """Reads the reply of ``api`` (a ``Format.api`` name) from a
    response with ``status`` and ``headers`` (content type and encoding), fed as it passes:
    :meth:`feed` for body bytes, :meth:`feed_event` for stream events already parsed (litellm's
    chunks); :meth:`text` at the end. Never raises on what it is fed."""

    def __init__(self, api: str, status: int = 200, headers: Mapping[str, str] | None = None, *,
                 cap: int = MAX_REPLY_BYTES) -> None:
        self.api = api
        self._spec = _api(api)
        self.ok = 200 <= status < 300  # an error's body is no reply: not even kept
        headers = headers or {}
        self.sse = (headers.get("content-type") or "").split(";")[0].strip().lower() == "text/event-stream"
        self.encoding = (headers.get("content-encoding") or "identity").strip().lower()
        self.cap = cap
        self.size = 0  # bytes (and event text) kept
        self._body = bytearray()
        self._events = ReplyText(self._spec.reply_sep)
        self._full = False

    def feed(self, chunk: bytes) -> None:
        """Keep a copy of the next body chunk (up to the cap)."""
        if self.ok and self._room(len(chunk)):
            self._body += chunk[: self.cap - len(self._body)]

    def feed_event(self, event: Any) -> None:
        """Read one event of a streamed reply (a dict, or an SDK object such as litellm's chunk)."""
        if not (self.ok and self._room(0)):
            return
        before = self._events.size
        try:
            self._spec.read_event(self._events, event)
        except Exception as exc:
            log.debug("memwire: reply event not read (%s: %s)", type(exc).__name__, exc)
        self._room(self._events.size - before)

    def _room(self, n: int) -> bool:
        """Count ``n`` more bytes; False once the cap was passed (logged once, when it is)."""
        if self._full:
            return False
        self.size += n
        if self.size > self.cap:
            self._full = True
            log.info("memwire: reply longer than %d bytes; its text is read from the first %d", self.cap, self.cap)
        return True

    def text(self, ended: bool = True) -> str | None:
        """The reply's text, or None (see the module docstring). ``ended``: the body ran to its
        end; False: the caller closed it first, and a stream counts only if its end marker was read."""
        return self.read(ended).text

    def read(self, ended: bool = True) -> Reply:
        """The reply's text and usage, parsed once from what was fed. A stream the caller closed
        before its end marker has no text; its usage is what was reported by then."""
        if not self.ok:
            return Reply()
        try:
            if self._body and not self.sse:
                body = self._decoded()
                return read_reply(self.api, json.loads(body)) if body else Reply()
            out = self._read_events() if self._body else self._events
            reply = _reply(self.api, out)
            return reply if ended or out.done else reply._replace(text=None)
        except Exception as exc:
            log.debug("memwire: reply not read (%s: %s)", type(exc).__name__, exc)
            return Reply()

    def _read_events(self) -> ReplyText:
        out = ReplyText(self._spec.reply_sep)
        body = self._decoded() or b""
        for data in _sse_data(body.decode("utf-8", "replace")):
            if data == "[DONE]":  # chat completions' end marker
                out.done = True
                continue
            try:
                event = json.loads(data)
            except ValueError:
                continue  # a cut or broken event: the others still count
            self._spec.read_event(out, event)
        return out

    def _decoded(self) -> bytes | None:
        data = bytes(self._body)
        if self.encoding == "identity":
            return data
        if self.encoding in ("gzip", "x-gzip", "deflate"):
            return _inflate(data, self.cap)
        log.debug("memwire: a reply in %r encoding is not read", self.encoding)
        return None


# ---------------------------------------------------------------------- handing it over


def observe(middleware: Middleware, injection: Injection, text: str | None) -> None:
    """``middleware.observe_reply(injection, text)`` when there is text; a failure is logged, never
    raised: telemetry must not fail the call it watches."""
    if not text:
        return
    try:
        middleware.observe_reply(injection, text)
    except Exception as exc:
        log.warning("memwire: observing the reply failed (%s: %s)", type(exc).__name__, exc)


class ReplyTap(ReplyReader):
    """The reader of one call's reply that, when the body is over (:meth:`finish`), hands its text
    to ``middleware.observe_reply`` (when memories went into the request) and the whole
    :class:`Reply` to ``on_reply`` (the request's record), once. Finishing costs little where it is
    called (the end of a stream, on the caller's thread or the event loop): a big body is parsed
    in a worker thread."""

    def __init__(self, middleware: Middleware, injection: Injection | None, api: str, status: int = 200,
                 headers: Mapping[str, str] | None = None, on_reply: Callable[[Reply], None] | None = None) -> None:
        super().__init__(api, status, headers)
        self.middleware = middleware
        self.injection = injection
        self.on_reply = on_reply
        self._finished = False

    def finish(self, ended: bool = True) -> None:
        """The body is over: ``ended`` (it ran to its end) or closed by the caller before its end."""
        if self._finished:
            return
        self._finished = True
        if self.size > INLINE_BYTES:
            _parser.submit(self._observe, ended)
        else:
            self._observe(ended)

    def _observe(self, ended: bool) -> None:
        reply = self.read(ended)
        if self.injection is not None:
            observe(self.middleware, self.injection, reply.text)
        if self.on_reply is not None:
            try:
                self.on_reply(reply)
            except Exception as exc:
                log.warning("memwire: the request's record failed (%s: %s)", type(exc).__name__, exc)


def _observed(injection: Injection | None) -> bool:
    return injection is not None and bool(injection.memory_ids or injection.profile_ids)


def tap_reply(middleware: Middleware, injection: Injection | None, api: str, status: int = 200,
              headers: Mapping[str, str] | None = None,
              on_reply: Callable[[Reply], None] | None = None) -> ReplyTap | None:
    """A tap on the reply of a call, or None when nothing reads it: its request got no memories
    (nothing to observe) and no ``on_reply`` wants its usage."""
    observed = _observed(injection)
    if on_reply is None and not observed:
        return None
    return ReplyTap(middleware, injection if observed else None, api, status, headers, on_reply)
