"""Wrap an OpenAI SDK client: ``client = wrap(OpenAI(), middleware)``.

The result is a client of the SDK's own class (``isinstance(client, OpenAI)`` holds, instructor and
the Agents SDK take it) whose HTTP transport adds memory to every ``/chat/completions``,
``/responses`` and ``/responses/input_tokens`` request: ``create``, ``parse``, the ``stream()``
helpers, ``with_raw_response`` and ``with_streaming_response``, sync and async. Nothing in the
``openai`` package is patched.

Per call, the session and the namespace go in headers, which the transport consumes::

    client.chat.completions.create(..., extra_headers={"x-memwire-session": "conv-42",
                                                       "x-memwire-namespace": "alice"})

Any exception from memwire (a broken memory directory, a body it cannot read, ...) is logged once
and the original request bytes are sent: memory never fails the user's call.
"""

from __future__ import annotations

from typing import TypeVar

from .._errors import UsageError
from ..middleware._core import Middleware
from ._http import wrap_sdk_client

__all__ = ["wrap"]

C = TypeVar("C")

ROUTES = {
    "/chat/completions": "openai.chat",
    "/responses": "openai.responses",
    "/responses/input_tokens": "openai.responses",  # counts what create() would send: memory included
}


def wrap(client: C, middleware: Middleware, *, session: str | None = None, namespace: str | None = None) -> C:
    """A copy of ``client`` (``OpenAI``, ``AsyncOpenAI``, ``AzureOpenAI``, ``AsyncAzureOpenAI``) that
    adds memory to chat completions and Responses requests.

    ``session`` and ``namespace`` are the defaults of every call; the ``x-memwire-session`` and
    ``x-memwire-namespace`` headers (``extra_headers=``, or ``default_headers=`` of the client)
    override them per call. ``with_options()`` / ``copy()`` keep the memory (unless given an
    ``http_client`` of their own). ``client`` itself is not changed; the copy shares its connection
    pool, as ``client.copy()`` does.
    """
    import openai  # the caller already has it; memwire itself does not depend on it

    if not isinstance(client, (openai.OpenAI, openai.AsyncOpenAI)):
        raise UsageError(
            f"memwire.adapters.openai.wrap expects an OpenAI or AsyncOpenAI client, got {type(client).__name__}")
    # gpt-4o's encoding and the default one: the budget counts with whichever the model uses
    return wrap_sdk_client(client, middleware, ROUTES, session=session, namespace=namespace, models=("gpt-4o", None))
