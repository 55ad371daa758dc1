"""Wrap an Anthropic SDK client: ``client = wrap(Anthropic(), middleware)``.

The result is a client of the SDK's own class (``isinstance(client, Anthropic)`` holds) whose HTTP
transport adds memory to every ``/v1/messages`` and ``/v1/messages/count_tokens`` request:
``messages.create``, ``messages.stream``, ``messages.parse``, ``messages.count_tokens`` and their
``beta.messages`` twins, ``with_raw_response`` and ``with_streaming_response``, sync and async.
Nothing in the ``anthropic`` package is patched. The memory message goes before the latest user
message (inside it, as a text block after its tool results, when it carries tool results), so
``system`` and the cached prefix stay byte-identical.

Per call, the session and the namespace go in headers, which the transport consumes::

    client.messages.create(..., extra_headers={"x-memwire-session": "conv-42",
                                               "x-memwire-namespace": "alice"})

Any exception from memwire is logged once and the original request bytes are sent: memory never
fails the user's call.
"""

from __future__ import annotations

from typing import TypeVar

from .._errors import UsageError
from ..middleware._core import Middleware
from ._http import wrap_sdk_client

__all__ = ["wrap"]

C = TypeVar("C")

ROUTES = {
    "/messages": "anthropic.messages",
    "/messages/count_tokens": "anthropic.messages",  # counts what create() would send: memory included
}


def wrap(client: C, middleware: Middleware, *, session: str | None = None, namespace: str | None = None) -> C:
    """A copy of ``client`` (``Anthropic`` or ``AsyncAnthropic``) that adds memory to Messages
    requests.

    ``session`` and ``namespace`` are the defaults of every call; the ``x-memwire-session`` and
    ``x-memwire-namespace`` headers (``extra_headers=``, or ``default_headers=`` of the client)
    override them per call. ``with_options()`` / ``copy()`` keep the memory (unless given an
    ``http_client`` of their own). ``client`` itself is not changed; the copy shares its connection
    pool, as ``client.copy()`` does.
    """
    import anthropic  # the caller already has it; memwire itself does not depend on it

    if not isinstance(client, (anthropic.Anthropic, anthropic.AsyncAnthropic)):
        raise UsageError(
            "memwire.adapters.anthropic.wrap expects an Anthropic or AsyncAnthropic client, "
            f"got {type(client).__name__}")
    # Claude's tokenizer is not tiktoken's: the budget counts with the default encoding
    return wrap_sdk_client(client, middleware, ROUTES, session=session, namespace=namespace, models=(None,))
