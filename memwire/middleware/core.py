"""The middleware: ``prepare`` turns a request into the request the provider should see.

The transform does no I/O (httpx ``auth_flow`` style): it reads the request, decides what memory it
needs, and places a block. Only retrieval has two faces, sync (a worker thread with a time budget)
and async (``asyncio.wait_for`` on a worker thread). Anything that fails in memory leaves the
request unchanged and is logged (fail open); only a malformed request raises.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from ..config import Config, load_config, make_config, normalize_mode
from ..errors import RequestFormatError
from ..memory.model import Memory
from ..memory.store import MemoryStore
from ..policies.gate import gate
from ..policies.retrieval import query_from_messages
from .formats import Format, View, get_format
from .render import fit_budget
from .session import LRU, session_key, turn_key

__all__ = ["Middleware", "Prepared", "Injection"]

log = logging.getLogger("memwire")

_pool: concurrent.futures.ThreadPoolExecutor | None = None


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="memwire-retrieval")
    return _pool


@dataclass(frozen=True)
class Injection:
    """What memwire did to one request."""

    mode: str
    memory_ids: tuple[str, ...] = ()
    text: str = ""                 # the rendered block ("" when nothing was injected)
    tokens: int = 0                # its size in the target model's encoding
    skipped: str | None = None     # gate | nothing_relevant | error | timeout | stateful
    elapsed_ms: float = 0.0
    position: int | None = None    # index of the memory message (or of the merged user message)
    placement: str | None = None   # message | merge | system
    session: str = ""
    reused: bool = False           # the block came from the turn / session memo
    error: str | None = None
    compacted: bool = False        # history="replay": the replayed blocks were compacted

    @property
    def injected(self) -> bool:
        return bool(self.memory_ids) and self.skipped is None


@dataclass
class Prepared:
    """The request to send: ``body`` (``prepare_request``) or ``messages`` (``prepare``)."""

    body: dict[str, Any]
    injection: Injection | None
    api: str = "openai.chat"

    @property
    def messages(self) -> Any:
        return self.body["input" if self.api == "openai.responses" else "messages"]


@dataclass(frozen=True)
class _Block:
    """A memo entry: the memory chosen for a turn (or a session, in startup mode)."""

    memories: tuple[Memory, ...] = ()
    text: str = ""
    tokens: int = 0
    skipped: str | None = None
    error: str | None = None


@dataclass
class _Plan:
    """What the transform decided before retrieval: the memo key and how to retrieve."""

    fmt: Format
    body: Mapping[str, Any]
    view: View
    mode: str
    session: str
    memo: LRU[tuple[str, ...], _Block]
    key: tuple[str, ...]
    retrieve: Callable[[], _Block] | None = None
    start: float = field(default_factory=time.perf_counter)


class Middleware:
    """Per-turn memory for LLM requests, without breaking the prompt cache.

    ``Middleware(store=MemoryStore(dir), mode="contextPerTurn")``; other settings as keyword
    arguments (see :class:`memwire.Config`) or ``config=``. ``Middleware.from_config()`` reads
    ``memwire.toml`` and ``MEMWIRE_*`` variables.
    """

    def __init__(
        self,
        store: MemoryStore | None = None,
        mode: str | None = None,
        *,
        config: Config | None = None,
        **options: Any,
    ) -> None:
        updates = dict(options)
        if mode is not None:
            updates["mode"] = mode
        if config is None:  # like the SDKs: the environment and ./memwire.toml apply by default
            self.config = load_config(**updates)
        else:
            self.config = _with(config, updates)
        if store is None:
            store = MemoryStore(
                self.config.dir,
                global_dir=self.config.global_dir if self.config.use_global else None,
                min_score=self.config.min_score,
            )
        self.store = store
        self._stores: LRU[str, MemoryStore] = LRU(256)
        self._turns: LRU[tuple[str, ...], _Block] = LRU(self.config.memo_size)
        self._sessions: LRU[tuple[str, ...], _Block] = LRU(self.config.memo_size)

    @classmethod
    def from_config(cls, path: str | None = None, **overrides: Any) -> "Middleware":
        """Read ``path`` (or ./memwire.toml) and the ``MEMWIRE_*`` environment."""
        return cls(config=load_config(path, **overrides))

    @property
    def mode(self) -> str:
        return self.config.mode

    def store_for(self, namespace: str | None) -> MemoryStore:
        """The store of a namespace (``None``: this middleware's own store)."""
        if namespace in (None, "", "default"):
            return self.store
        cached = self._stores.get(namespace)
        if cached is None:
            cached = self._stores.setdefault(
                namespace, MemoryStore.for_namespace(self.store.path, namespace, min_score=self.store.min_score)
            )
        return cached

    # ------------------------------------------------------------------ public API

    def prepare(
        self, messages: Sequence[Any], session_id: str | None = None, *, model: str | None = None,
        namespace: str | None = None, mode: str | None = None,
    ) -> Prepared:
        """Prepare an OpenAI chat message list. Returns ``Prepared`` with a new ``.messages``."""
        if not isinstance(messages, list):
            raise RequestFormatError(f"openai.chat: messages must be a list, got {type(messages).__name__}")
        return self.prepare_request({"messages": messages, "model": model} if model else {"messages": messages},
                                    api="openai.chat", session_id=session_id, namespace=namespace, mode=mode,
                                    _strip_model=model is not None)

    async def aprepare(
        self, messages: Sequence[Any], session_id: str | None = None, *, model: str | None = None,
        namespace: str | None = None, mode: str | None = None,
    ) -> Prepared:
        if not isinstance(messages, list):
            raise RequestFormatError(f"openai.chat: messages must be a list, got {type(messages).__name__}")
        return await self.aprepare_request({"messages": messages, "model": model} if model else {"messages": messages},
                                           api="openai.chat", session_id=session_id, namespace=namespace,
                                           mode=mode, _strip_model=model is not None)

    def prepare_request(
        self, body: Mapping[str, Any], api: str = "openai.chat", *, session_id: str | None = None,
        namespace: str | None = None, mode: str | None = None, _strip_model: bool = False,
    ) -> Prepared:
        """Prepare a whole request body of ``api`` ("openai.chat", "anthropic.messages", "openai.responses")."""
        plan_or_done = self._plan(body, api, session_id, namespace, mode)
        if isinstance(plan_or_done, Prepared):
            return _strip(plan_or_done, _strip_model)
        plan = plan_or_done
        block = plan.memo.get(plan.key)
        reused = block is not None
        if block is None and plan.retrieve is not None:
            block = self._run_sync(plan.retrieve)
            block = plan.memo.setdefault(plan.key, block)
        return _strip(self._finish(plan, block or _Block(), reused), _strip_model)

    async def aprepare_request(
        self, body: Mapping[str, Any], api: str = "openai.chat", *, session_id: str | None = None,
        namespace: str | None = None, mode: str | None = None, _strip_model: bool = False,
    ) -> Prepared:
        plan_or_done = self._plan(body, api, session_id, namespace, mode)
        if isinstance(plan_or_done, Prepared):
            return _strip(plan_or_done, _strip_model)
        plan = plan_or_done
        block = plan.memo.get(plan.key)
        reused = block is not None
        if block is None and plan.retrieve is not None:
            block = await self._run_async(plan.retrieve)
            block = plan.memo.setdefault(plan.key, block)
        return _strip(self._finish(plan, block or _Block(), reused), _strip_model)

    # ------------------------------------------------------------------ retrieval, two faces

    def _run_sync(self, fn: Callable[[], _Block]) -> _Block:
        timeout = self.config.timeout_ms / 1000
        future = _executor().submit(fn)
        try:
            return future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            log.warning("memwire: retrieval exceeded its %.0f ms budget; request sent unchanged", self.config.timeout_ms)
            return _Block(skipped="timeout", error=f"retrieval exceeded {self.config.timeout_ms:.0f} ms")
        except Exception as exc:  # noqa: BLE001 - fail open
            return _failed(exc)

    async def _run_async(self, fn: Callable[[], _Block]) -> _Block:
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(loop.run_in_executor(_executor(), fn), self.config.timeout_ms / 1000)
        except asyncio.TimeoutError:
            log.warning("memwire: retrieval exceeded its %.0f ms budget; request sent unchanged", self.config.timeout_ms)
            return _Block(skipped="timeout", error=f"retrieval exceeded {self.config.timeout_ms:.0f} ms")
        except Exception as exc:  # noqa: BLE001 - fail open
            return _failed(exc)

    # ------------------------------------------------------------------ the transform (no I/O)

    def _plan(
        self, body: Mapping[str, Any], api: str, session_id: str | None, namespace: str | None, mode: str | None,
    ) -> _Plan | Prepared:
        fmt = get_format(api)
        view = fmt.view(body)  # raises RequestFormatError on a malformed request
        mode = normalize_mode(mode) if mode else self.config.mode
        if view.latest_user is None:  # nothing the human wrote: nothing to do
            return Prepared(dict(body), None, api)
        session = session_key(session_id, view.system_text, view.first_user_text)
        ns = namespace or ""
        store = self.store_for(namespace)  # a bad namespace name raises NamespaceError
        if mode == "startup":
            if view.stateful:  # the provider keeps the history: the block went in with the first call
                return Prepared(dict(body), Injection(mode, skipped="stateful", session=session), api)
            max_tokens = self.config.startup_max_tokens
            model = _model(body)
            return _Plan(fmt, body, view, mode, session, self._sessions, ("startup", ns, session),
                         lambda: self._startup_block(store, max_tokens, model))
        decision = gate(view.user_text, view.previous_assistant)
        if decision.skip:
            return Prepared(dict(body), Injection(mode, skipped="gate", session=session), api)
        query = query_from_messages(decision.query, view.earlier)
        key = ("turn", ns, session, mode, turn_key(view.latest_user, view.user_text))
        top_k, min_score, max_tokens, model = self.config.top_k, self.config.min_score, self.config.max_tokens, _model(body)

        def retrieve() -> _Block:
            hits = store.search(query.text, top_k, min_score=min_score, context=query.context)
            if not hits:
                return _Block(skipped="nothing_relevant")
            return _render([h.memory for h in hits], max_tokens, model)

        return _Plan(fmt, body, view, mode, session, self._turns, key, retrieve)

    def _startup_block(self, store: MemoryStore, max_tokens: int, model: str | None) -> _Block:
        memories = list(store)
        ordered = [m for m in memories if m.pinned] + [m for m in memories if not m.pinned]
        if not ordered:
            return _Block(skipped="nothing_relevant")
        return _render(ordered, max_tokens, model)

    def _finish(self, plan: _Plan, block: _Block, reused: bool) -> Prepared:
        elapsed = (time.perf_counter() - plan.start) * 1000
        base = Injection(plan.mode, session=plan.session, elapsed_ms=elapsed, reused=reused,
                         skipped=block.skipped, error=block.error)
        if block.skipped or not block.memories:
            return Prepared(dict(plan.body), replace(base, skipped=block.skipped or "nothing_relevant"), plan.fmt.api)
        fmt, view, body = plan.fmt, plan.view, plan.body
        assert view.latest_user is not None
        if plan.mode == "systemPromptPerTurn":
            new_body, position, placement = fmt.append_system(body, block.text), None, "system"
        elif plan.mode == "startup":
            position = view.leading_system
            new_body, placement = fmt.insert(body, position, block.text, self.config.memory_role), "message"
        elif self.config.placement == "merge":
            position = view.latest_user
            new_body, placement = fmt.merge(body, position, block.text), "merge"
        else:
            position = view.latest_user
            new_body = fmt.insert(body, position, block.text, self.config.memory_role)
            placement = "message" if len(fmt.items(new_body)) > len(view.items) else "merge"
        return Prepared(new_body, replace(base, memory_ids=tuple(m.id for m in block.memories), text=block.text,
                                          tokens=block.tokens, position=position, placement=placement), fmt.api)


def _with(config: Config, updates: dict[str, Any]) -> Config:
    return make_config({**config.model_dump(), **updates}) if updates else config


def _model(body: Mapping[str, Any]) -> str | None:
    model = body.get("model")
    return model if isinstance(model, str) else None


def _render(memories: Sequence[Memory], max_tokens: int, model: str | None) -> _Block:
    kept, text, tokens = fit_budget(memories, max_tokens, model)
    if not kept:
        return _Block(skipped="nothing_relevant")
    return _Block(tuple(kept), text, tokens)


def _failed(exc: BaseException) -> _Block:
    log.warning("memwire: memory retrieval failed (%s: %s); request sent unchanged", type(exc).__name__, exc)
    return _Block(skipped="error", error=f"{type(exc).__name__}: {exc}")


def _strip(p: Prepared, strip_model: bool) -> Prepared:
    if strip_model:
        p.body.pop("model", None)
    return p
