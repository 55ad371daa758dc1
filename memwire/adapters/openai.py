"""Wrap an OpenAI SDK client: ``client = wrap(OpenAI(), middleware)``.

Composition, like instructor: the wrapper holds the client, exposes the same
``chat.completions.create`` / ``parse`` and ``responses.create`` / ``parse`` (sync or async, streaming
or not) and forwards every other attribute to the client. Nothing in the ``openai`` package is
patched. Per call, ``memwire_session=`` and ``memwire_namespace=`` choose the session and the
namespace; they are removed before the real call.

Any exception from memwire (a broken memory directory, a malformed request, ...) is logged once and
the original request is sent: memory never fails the user's call.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

import pydantic

from ..middleware.core import Middleware
from ._common import as_list, fail_open, split_kwargs

__all__ = ["wrap"]

C = TypeVar("C")

_ITEMS = {"openai.chat": "messages", "openai.responses": "input"}


def _plain(item: Any) -> Any:
    """An SDK object passed back as input (``response.output`` items, a ``ChatCompletionMessage``)
    as the dict the SDK itself would send (openai/_utils/_transform.py), so memwire can read it."""
    if isinstance(item, pydantic.BaseModel):
        return item.model_dump(exclude_unset=True, mode="json", exclude=getattr(item, "__api_exclude__", None))
    return item


class _Proxy:
    """Forwards every attribute it does not define itself to the object it holds."""

    def __init__(self, target: Any, **attrs: Any) -> None:
        self.__dict__["_target"] = target
        self.__dict__.update(attrs)

    def __getattr__(self, name: str) -> Any:
        if name == "_target":  # not set yet (copy/pickle): do not recurse
            raise AttributeError(name)
        return getattr(self._target, name)

    def __repr__(self) -> str:
        return f"<memwire {self._target!r}>"


class _Endpoint(_Proxy):
    """``chat.completions`` or ``responses``: prepares the request body, then calls the real method."""

    def __init__(self, target: Any, middleware: Middleware, api: str) -> None:
        super().__init__(target, _mw=middleware, _api=api)

    def _split(self, kwargs: dict[str, Any]) -> tuple[dict[str, Any], str | None, str | None]:
        call, session, namespace = split_kwargs(kwargs)
        key = _ITEMS[self._api]
        as_list(call, key)
        if isinstance(call.get(key), list) and any(isinstance(m, pydantic.BaseModel) for m in call[key]):
            call[key] = [_plain(m) for m in call[key]]
        return call, session, namespace

    def _prepare(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        call, session, namespace = self._split(kwargs)
        try:
            # the whole kwargs are the body: the model picks the token encoding; keys memwire does
            # not touch keep the caller's own objects
            return self._mw.prepare_request(call, api=self._api, session_id=session, namespace=namespace).body
        except Exception as exc:  # noqa: BLE001 - fail open
            fail_open(f"{self._api} prepare", exc)
            return call

    async def _aprepare(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        call, session, namespace = self._split(kwargs)
        try:
            p = await self._mw.aprepare_request(call, api=self._api, session_id=session, namespace=namespace)
            return p.body
        except Exception as exc:  # noqa: BLE001 - fail open
            fail_open(f"{self._api} prepare", exc)
            return call


class _SyncEndpoint(_Endpoint):
    def create(self, **kwargs: Any) -> Any:
        return self._target.create(**self._prepare(kwargs))

    def parse(self, **kwargs: Any) -> Any:
        return self._target.parse(**self._prepare(kwargs))


class _AsyncEndpoint(_Endpoint):
    async def create(self, **kwargs: Any) -> Any:
        return await self._target.create(**await self._aprepare(kwargs))

    async def parse(self, **kwargs: Any) -> Any:
        return await self._target.parse(**await self._aprepare(kwargs))


class _Client(_Proxy):
    def __init__(self, client: Any, middleware: Middleware) -> None:
        import openai  # the caller already has it; memwire itself does not depend on it

        endpoint = _AsyncEndpoint if isinstance(client, openai.AsyncOpenAI) else _SyncEndpoint
        attrs: dict[str, Any] = {"_mw": middleware}
        chat = client.chat
        attrs["chat"] = _Proxy(chat, completions=endpoint(chat.completions, middleware, "openai.chat"))
        responses = getattr(client, "responses", None)  # openai < 1.66 has no Responses API
        if responses is not None:
            attrs["responses"] = endpoint(responses, middleware, "openai.responses")
        super().__init__(client, **attrs)

    # a derived client keeps its memory
    def with_options(self, **kwargs: Any) -> Any:
        return _Client(self._target.with_options(**kwargs), self._mw)

    def copy(self, **kwargs: Any) -> Any:
        return _Client(self._target.copy(**kwargs), self._mw)


def wrap(client: C, middleware: Middleware) -> C:
    """Return ``client`` (``OpenAI``, ``AsyncOpenAI``, ``AzureOpenAI``, ``AsyncAzureOpenAI``) with
    memory added to ``chat.completions.create/parse`` and ``responses.create/parse``.

    The result is typed as the client for editors and type checkers; at run time it is a wrapper
    (``isinstance(wrapped, OpenAI)`` is False) that forwards everything else to the client.
    """
    import openai

    if isinstance(client, _Client):
        raise TypeError("memwire: this client is already wrapped")
    if not isinstance(client, (openai.OpenAI, openai.AsyncOpenAI)):
        raise TypeError(f"memwire.adapters.openai.wrap expects an OpenAI or AsyncOpenAI client, got {type(client).__name__}")
    return cast(C, _Client(client, middleware))
