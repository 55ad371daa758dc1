"""litellm: wrap ``completion`` / ``acompletion``, or add memory to a LiteLLM proxy with a callback.

    completion = wrap(litellm.completion, middleware)      # same signature, streaming included
    acompletion = wrap(litellm.acompletion, middleware)    # coroutine function in, coroutine function out

    # LiteLLM proxy config.yaml:  litellm_settings: {callbacks: memwire_callback.proxy_handler_instance}
    proxy_handler_instance = MemwireCallback()             # Middleware.from_config() when none is given

Both start loading the store and the token encodings on a background thread (``warm_up``), so the
first call does not spend its retrieval budget on loading a tiktoken encoding.

Proxy namespaces (:func:`proxy_namespace`): the master key (litellm's admin user ``default_user_id``)
uses the default namespace, the files in the memory directory itself, so what ``memwire add --dir D``
writes is what master-key requests get; a virtual key uses its user's namespace (``user_id``), else
its alias's, else one of its own.

The request reaches litellm in OpenAI chat format whatever provider it routes to. litellm moves
``developer`` and leading ``system`` messages into the system field of Anthropic, Gemini, Bedrock, ...,
so the memory message always has the ``user`` role here, whatever ``memory_role`` says: the
provider's system prompt stays byte-identical (DESIGN rule 2).

The reply is read for ``Middleware.observe_reply`` when memories went into the request: a response
when it is returned; a stream chunk by chunk as the caller iterates it (each chunk passes through
unchanged), handed over at its end. The proxy callback keeps a request's injection from its pre-call
hook to its post-call hooks under litellm's call id (``litellm_call_id``).

Importing this module does not import litellm (that takes seconds), but needs it installed
(``pip install 'memwire[litellm]'``; a :class:`MissingDependencyError` says so otherwise). ``MemwireCallback`` must
subclass litellm's ``CustomLogger``, so the class is built on first access through the module's
``__getattr__`` (PEP 562); ``from memwire.adapters.litellm import MemwireCallback`` works as usual.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import inspect
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .._errors import MissingDependencyError, NamespaceError, UsageError
from .._lru import LRU
from ..memory._store import validate_namespace
from ..middleware._core import Injection, Middleware, Prepared
from ..middleware._reply import ReplyTap, observe, reply_text, tap_reply
from ._common import as_list, fail_open, readable, restore, split_kwargs

if TYPE_CHECKING:
    from litellm.integrations.custom_logger import CustomLogger

    class MemwireCallback(CustomLogger):
        middleware: Middleware

        def __init__(
            self, middleware: Middleware | None = None, *,
            namespace: Callable[[Any, Mapping[str, Any]], str | None] | None = None,
        ) -> None: ...

        async def async_pre_call_hook(
            self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: str,
        ) -> dict[str, Any]: ...

__all__ = ["MemwireCallback", "wrap"]


def _litellm_installed() -> bool:
    try:
        return importlib.util.find_spec("litellm") is not None
    except (ImportError, ValueError):  # a broken or half-removed install
        return False


if not _litellm_installed():  # litellm is an extra: say how to get it, before any use fails obscurely
    raise MissingDependencyError(
        "memwire.adapters.litellm needs litellm, which is not installed: pip install 'memwire[litellm]'",
        name="litellm")

F = TypeVar("F", bound=Callable[..., Any])

log = logging.getLogger("memwire")

# proxy call types whose request memwire understands, and the format it arrives in
CALL_TYPES: dict[str, str] = {
    "completion": "openai.chat",
    "acompletion": "openai.chat",
    "anthropic_messages": "anthropic.messages",
    "aanthropic_messages": "anthropic.messages",
    "responses": "openai.responses",
    "aresponses": "openai.responses",
}

# litellm's own names (litellm.constants, not imported: importing litellm takes seconds):
ADMIN_USER_ID = "default_user_id"  # LITELLM_PROXY_ADMIN_NAME: the user of the master key
MASTER_KEY_ALIAS = "litellm_proxy_master_key"  # LITELLM_PROXY_MASTER_KEY_ALIAS: the master key's token


# ---------------------------------------------------------------------- wrap(completion)


def _positional_names(fn: Callable[..., Any]) -> tuple[str, ...]:
    """Names of the parameters a positional argument can fill (``model``, ``messages``, ...)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return ()
    names = []
    for p in params:
        if p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
            break
        names.append(p.name)
    return tuple(names)


def wrap(fn: F, middleware: Middleware) -> F:
    """Return ``fn`` (``litellm.completion`` or ``litellm.acompletion``) with memory added.

    Same signature (``functools.wraps``); ``memwire_session=`` / ``memwire_namespace=`` keyword
    arguments choose the session and namespace and are removed before the real call. The store and
    token encodings start loading now, on a background thread (``Middleware.warm_up``)."""
    if not callable(fn):
        raise UsageError("memwire.adapters.litellm.wrap expects litellm.completion or acompletion, "
                         f"got {type(fn).__name__}")
    if not isinstance(middleware, Middleware):
        raise UsageError(f"memwire: wrap() expects a memwire.Middleware, got {type(middleware).__name__}")
    names = _positional_names(fn)
    middleware.warm_up(background=True)

    def split(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[dict[str, Any], str | None, str | None]:
        if len(args) > len(names):
            raise UsageError(f"{getattr(fn, '__name__', 'fn')}() got {len(args)} positional arguments")
        # positional arguments become keywords so the body sees ``model`` and ``messages``
        # strict=False: a call may pass fewer positional arguments than the function names
        call, session, namespace = split_kwargs({**dict(zip(names, args, strict=False)), **kwargs})
        as_list(call, "messages")
        return call, session, namespace

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def awrapper(*args: Any, **kwargs: Any) -> Any:
            call, session, namespace = split(args, kwargs)
            injection = None
            try:
                shown, back = readable(call, "messages")
                p = await middleware.aprepare_request(shown, api="openai.chat", session_id=session, namespace=namespace,
                                                      memory_role="user")
                call, injection = restore(p.body, "messages", back), p.injection
            except Exception as exc:
                fail_open("litellm prepare", exc)
            return _watched(await fn(**call), middleware, injection)

        return cast(F, awrapper)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        call, session, namespace = split(args, kwargs)
        injection = None
        try:
            shown, back = readable(call, "messages")  # litellm Message objects passed back
            p = middleware.prepare_request(shown, api="openai.chat", session_id=session, namespace=namespace,
                                           memory_role="user")
            call, injection = restore(p.body, "messages", back), p.injection
        except Exception as exc:
            fail_open("litellm prepare", exc)
        return _watched(fn(**call), middleware, injection)

    return cast(F, wrapper)


def _watched(result: Any, middleware: Middleware, injection: Injection | None) -> Any:
    """``result`` itself, its reply read for ``observe_reply``: a response now, a stream (litellm's
    ``CustomStreamWrapper``) as the caller iterates it."""
    tap = tap_reply(middleware, injection, "openai.chat")
    if tap is None:
        return result
    if hasattr(result, "__next__") or hasattr(result, "__anext__"):
        return _teed(result, tap)
    if tap.injection is not None:  # always, with no on_reply: the tap is there to observe it
        observe(middleware, tap.injection, reply_text("openai.chat", result))
    return result


class _TeedStream:
    """Mixed into a litellm stream's own class (:func:`_teed`): each chunk goes to the caller
    unchanged and to the tap, which hands the reply over when the stream is exhausted."""

    _memwire_tap: ReplyTap

    def __next__(self) -> Any:
        try:
            chunk = super().__next__()  # type: ignore[misc]
        except StopIteration:
            self._memwire_tap.finish()
            raise
        self._memwire_tap.feed_event(chunk)
        return chunk

    async def __anext__(self) -> Any:
        try:
            chunk = await super().__anext__()  # type: ignore[misc]
        except StopAsyncIteration:
            self._memwire_tap.finish()
            raise
        self._memwire_tap.feed_event(chunk)
        return chunk


_teed_classes: dict[type, type] = {}


def _teed(stream: Any, tap: ReplyTap) -> Any:
    """``stream`` with its chunks teed to ``tap``. The caller keeps litellm's own object (its type,
    attributes, ``close``, context manager): only its class becomes a subclass that tees."""
    cls = type(stream)
    teed = _teed_classes.get(cls)
    if teed is None:
        teed = _teed_classes.setdefault(cls, type(cls.__name__, (_TeedStream, cls), {"__module__": cls.__module__}))
    try:
        stream.__class__ = teed
        stream._memwire_tap = tap
    except TypeError as exc:  # a class whose layout forbids it: the stream goes on, unread
        log.warning("memwire: the reply of a %s cannot be read (%s)", cls.__name__, exc)
    return stream


# ---------------------------------------------------------------------- the proxy callback


def _safe_namespace(name: str, prefix: str) -> str:
    """A proxy identity as a namespace: itself when it is a valid name, else a stable hash."""
    try:
        return validate_namespace(name)
    except NamespaceError:
        return f"{prefix}-" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def proxy_namespace(user_api_key_dict: Any, data: Mapping[str, Any]) -> str | None:
    """The namespace of a LiteLLM proxy request, from who is calling (never from a client header,
    which would let one key read another's memories). None is the default namespace: the files in
    the memory directory itself.

    1. the master key: None. litellm gives it the admin user ``default_user_id`` (and the token
       ``litellm_proxy_master_key``); an admin's key without an alias counts as the master key;
    2. else the key's user (``user_id``);
    3. else the key's alias (``key_alias``);
    4. else the key itself, hashed (``key-<hash>``);
    5. else the request's ``user`` field (a proxy running without a master key);
    6. else None.

    Names that are not valid namespace names (spaces, ``/``, ...) become a stable hash."""
    user_id = getattr(user_api_key_dict, "user_id", None)
    alias = getattr(user_api_key_dict, "key_alias", None)
    token = getattr(user_api_key_dict, "token", None) or getattr(user_api_key_dict, "api_key", None)
    if token == MASTER_KEY_ALIAS or (user_id == ADMIN_USER_ID and not alias):
        return None
    if user_id and user_id != ADMIN_USER_ID:
        return _safe_namespace(str(user_id), "user")
    if alias:
        return _safe_namespace(str(alias), "alias")
    if token:  # already a hash of the key; hashed again so the stored hash never shows on disk
        return "key-" + hashlib.sha256(str(token).encode()).hexdigest()[:24]
    end_user = data.get("user")
    if isinstance(end_user, str) and end_user:
        return _safe_namespace(end_user, "enduser")
    return None


def _headers(data: Mapping[str, Any]) -> dict[str, str]:
    for holder in (data.get("proxy_server_request"), data.get("metadata"), data.get("litellm_metadata")):
        headers = holder.get("headers") if isinstance(holder, Mapping) else None
        if isinstance(headers, Mapping):
            return {str(k).lower(): str(v) for k, v in headers.items()}
    return {}


def proxy_session(data: Mapping[str, Any]) -> str | None:
    """The session of a LiteLLM proxy request: the ``x-memwire-session`` header, else
    ``metadata["memwire_session"]``, else the ``x-litellm-session-id`` header, else None (the
    middleware derives one from the system prompt and the first user message)."""
    headers = _headers(data)
    if headers.get("x-memwire-session"):
        return headers["x-memwire-session"]
    for key in ("metadata", "litellm_metadata"):
        meta = data.get(key)
        if isinstance(meta, Mapping) and isinstance(meta.get("memwire_session"), str) and meta["memwire_session"]:
            return str(meta["memwire_session"])
    return headers.get("x-litellm-session-id") or None


async def _pre_call(
    middleware: Middleware, namespace_fn: Callable[[Any, Mapping[str, Any]], str | None],
    user_api_key_dict: Any, data: dict[str, Any], call_type: str, injected: _Injected,
) -> dict[str, Any]:
    api = CALL_TYPES.get(str(getattr(call_type, "value", call_type)))
    if api is None or not isinstance(data, dict):  # embeddings, images, text completion, ...: not ours
        return data
    if ("input" if api == "openai.responses" else "messages") not in data:
        return data
    try:
        p: Prepared = await middleware.aprepare_request(
            data, api=api, session_id=proxy_session(data), namespace=namespace_fn(user_api_key_dict, data),
            memory_role="user", headers=_headers(data),
        )
    except Exception as exc:
        fail_open(f"LiteLLM proxy hook ({call_type})", exc)
        return data
    call_id = data.get("litellm_call_id")
    if isinstance(call_id, str) and p.injection is not None and p.injection.memory_ids:
        injected.setdefault(call_id, (api, p.injection))  # for the post-call hooks, which get the same id
    return p.body


# a request's (api, injection), by litellm call id, from the pre-call hook to the post-call hooks;
# bounded: a call that fails never reaches them
_Injected = LRU[str, tuple[str, Injection]]


def _taken(injected: _Injected, data: Any) -> tuple[str, Injection] | None:
    """The (api, injection) of the request ``data``, taken out: one reply per call."""
    call_id = data.get("litellm_call_id") if isinstance(data, Mapping) else None
    return injected.pop(call_id) if isinstance(call_id, str) else None


async def _stream_through(middleware: Middleware, found: tuple[str, Injection] | None,
                          response: Any) -> AsyncIterator[Any]:
    """Every item of a proxy stream, unchanged; when its request got memories, each is also read
    for the reply: litellm's chunk objects, or the raw server-sent events of ``/v1/messages``."""
    tap = tap_reply(middleware, found[1], found[0], headers={"content-type": "text/event-stream"}) if found else None
    async for item in response:
        if tap is not None:
            if isinstance(item, (bytes, bytearray, str)):
                tap.feed(item.encode() if isinstance(item, str) else bytes(item))
            else:
                tap.feed_event(item)
        yield item
    if tap is not None:
        tap.finish()


def _build_callback_class() -> type:
    from litellm.integrations.custom_logger import CustomLogger

    class MemwireCallback(CustomLogger):
        """A LiteLLM ``CustomLogger`` whose ``async_pre_call_hook`` adds memory to proxy requests.

        ``namespace(user_api_key_dict, data)`` overrides :func:`proxy_namespace`. The store and
        token encodings start loading at construction, on a background thread. A subclass must
        define ``async_pre_call_hook`` itself (it may call ``super()``): the proxy only calls hooks
        defined on the instance's own class."""

        def __init__(
            self, middleware: Middleware | None = None, *,
            namespace: Callable[[Any, Mapping[str, Any]], str | None] | None = None, **kwargs: Any,
        ) -> None:
            super().__init__(**kwargs)
            self.middleware = middleware if middleware is not None else Middleware.from_config()
            self.namespace = namespace or proxy_namespace
            self._injected: _Injected = LRU(4096)
            self.middleware.warm_up(background=True)  # the proxy's first request does not load them

        async def async_pre_call_hook(
            self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: Any,
        ) -> dict[str, Any]:
            return await _pre_call(self.middleware, self.namespace, user_api_key_dict, data, call_type, self._injected)

        async def async_post_call_success_hook(
            self, data: dict[str, Any], user_api_key_dict: Any, response: Any,
        ) -> None:
            found = _taken(self._injected, data)
            if found is not None:  # None back: the response goes on unchanged
                observe(self.middleware, found[1], reply_text(found[0], response))

        async def async_post_call_streaming_iterator_hook(
            self, user_api_key_dict: Any, response: Any, request_data: dict[str, Any],
        ) -> AsyncGenerator[Any, None]:
            async for item in _stream_through(self.middleware, _taken(self._injected, request_data), response):
                yield item

    MemwireCallback.__module__ = __name__
    return MemwireCallback


def __getattr__(name: str) -> Any:
    # PEP 562: litellm is imported only when the callback class is first asked for
    if name == "MemwireCallback":
        cls = _build_callback_class()
        globals()["MemwireCallback"] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
