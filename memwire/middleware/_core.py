"""The middleware: ``prepare`` turns a request into the request the provider should see.

It only orchestrates: view the request (``_formats``), find its session (``_session``), run the
gate and build the query (``policies``), ask the mode what the request needs
(``policies/modes``), retrieve, and let the mode place the block. The transform does no I/O
(httpx ``auth_flow`` style): only retrieval has two faces, sync and async; both run it inline when
the store is warm and unchanged, else in a worker thread under the time budget. Anything that fails
in memory leaves the request unchanged and is logged (fail open); only a malformed request raises.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import _trust
from .._config import make_config, normalize_mode
from .._errors import NamespaceError, RequestFormatError, StoreBusyError, StoreUnavailableError
from .._lru import LRU
from .._worker import Traffic
from ..memory._open import open_store
from ..memory._protocol import Store
from ..memory._telemetry import Telemetry
from ..policies._gate import gate
from ..policies._query import query_from_messages
from ..policies._side_requests import is_side_request
from ..policies._tokens import get_encoder
from ..policies.modes import Mode, Plan, Skip, Turn, mode_from_config
from ..policies.modes._ledger import flush as flush_ledgers
from ..policies.modes._render import Block, failed
from ._capture import Capture
from ._distill import Complete, Distiller, litellm_complete
from ._formats import get_format
from ._incremental import Views
from ._prepared import Injection, Prepared
from ._records import Records, SharedRecords
from ._session import resolve_session, session_hint, session_signals

if TYPE_CHECKING:  # start-up time: the config model is pydantic's, loaded on the first config built
    from .._config_model import Config

__all__ = ["Injection", "Middleware", "Prepared"]

log = logging.getLogger("memwire")

_pool: concurrent.futures.ThreadPoolExecutor | None = None

# How long a retrieval waits at most for a background warm-up already under way (then its own time
# budget starts): the warm-up loads what the retrieval needs (the store, a token encoding: 0.5-1 s
# cold, several seconds on a busy machine), so the first calls get memory instead of running out of
# budget behind it, and a warm-up that hangs still delays a call by no more than this.
WARM_UP_WAIT_S = 10.0


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="memwire-retrieval")
    return _pool


class Middleware:
    """Per-turn memory for LLM requests, without breaking the prompt cache.

    ``Middleware(store=MemoryStore(dir), mode="contextPerTurn")``; other settings as keyword
    arguments (see :class:`memwire.Config`) or ``config=``. ``mode`` may also be a mode object
    (``memwire.policies.modes``), with its own settings: ``mode=ContextPerTurn(history="drop")``.

    Without ``config``, the ``MEMWIRE_*`` environment applies, as the SDKs read theirs;
    ``Middleware.from_config(FILE)`` reads a config file you name. What memwire finds by itself in
    the working directory follows the command line's trust rules (``memwire._trust.resolve_config``,
    docs/trust.md): ``./memwire.toml`` and ``./.memwire`` are used only once the directory is
    trusted (``memwire trust``) or memwire created ``./.memwire``; otherwise a warning is logged and
    the global memory is used. What you pass (``store=``, ``dir=``, a file, a ``Config`` naming its
    ``dir``) is yours and needs no trust.
    """

    def __init__(
        self,
        store: Store | None = None,
        mode: str | Mode | None = None,
        *,
        config: Config | None = None,
        **options: Any,
    ) -> None:
        updates = dict(options)
        if mode is not None:
            updates["mode"] = mode.name if isinstance(mode, Mode) else mode
        self.config = _settings(config, updates, own_store=store is not None)
        if store is None:
            store = open_store(self.config)
        self.store = store
        self._stores: LRU[str, Store] = LRU(256)
        given = mode if isinstance(mode, Mode) else None
        self._modes: dict[str, Mode] = {self.config.mode: given or mode_from_config(self.config.mode, self.config)}
        self._modes_lock = threading.Lock()
        # capture and telemetry run in the background, and wait for a quiet moment between requests
        self.traffic = Traffic()
        self.capture = Capture(self.config.capture, memo_size=self.config.memo_size, distiller=_distiller(self.config),
                               traffic=self.traffic, timezone=self.config.timezone)
        self.telemetry = Telemetry(self.traffic)
        self.records = Records()  # per request, what memwire did and what the provider reported (adapters add them)
        # the proxy also keeps each record in its namespace's store: every worker's and replica's page sees it
        self.kept_records = SharedRecords(self.store_for, self.traffic)
        self._views = Views()  # each conversation's previous request: a request reads only what is new
        self.warm_up_wait = WARM_UP_WAIT_S  # seconds a retrieval waits for a warm-up under way
        self._warming: list[concurrent.futures.Future[None]] = []  # background warm-ups not finished yet
        self._warming_lock = threading.Lock()

    @classmethod
    def from_config(cls, path: str | os.PathLike[str] | None = None, **overrides: Any) -> Middleware:
        """Read the config file ``path`` (or ``$MEMWIRE_CONFIG``; yours, every key applies) and the
        ``MEMWIRE_*`` environment. Without a file named, ``./memwire.toml`` applies once the
        directory is trusted, as on the command line."""
        return cls(config=_settings(None, overrides, path=path))

    @property
    def mode(self) -> str:
        return self.config.mode

    def mode_for(self, name: str | None = None) -> Mode:
        """The mode object of ``name`` (default: the configured mode); built once, with its memos."""
        name = normalize_mode(name) if name else self.config.mode
        mode = self._modes.get(name)
        if mode is None:
            with self._modes_lock:  # one object per mode: it holds that mode's memos
                mode = self._modes.get(name) or self._modes.setdefault(name, mode_from_config(name, self.config))
        return mode

    def warm_up(
        self, models: Sequence[str | None] = ("gpt-4o", None), *, background: bool = False,
    ) -> threading.Thread | None:
        """Load and index the store and the token encodings of ``models`` now, so the first call is
        not the one that pays for it (a cold encoding takes 0.5-1 s). ``background=True`` does it
        on a daemon thread and returns it; failures are only logged (a first call then fails open).
        A retrieval that starts while a background warm-up runs waits for it (``warm_up_wait``
        seconds at most) before its time budget starts: the first call gets memory."""

        def run() -> None:
            try:
                self.store.search("warm up")
                for model in models:
                    get_encoder(model).encode("warm up")
            except Exception as exc:
                log.warning("memwire: warm-up failed (%s: %s)", type(exc).__name__, exc)

        if not background:
            run()
            return None
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        done.set_running_or_notify_cancel()  # nobody can cancel it: only its thread ends it

        def run_then_done() -> None:
            try:
                run()
            finally:
                done.set_result(None)

        with self._warming_lock:
            self._warming = [f for f in self._warming if not f.done()] + [done]
        thread = threading.Thread(target=run_then_done, name="memwire-warm-up", daemon=True)
        thread.start()
        return thread

    def _warm_ups_under_way(self) -> list[concurrent.futures.Future[None]]:
        if not self._warming:  # the common case, once warmed: no lock
            return []
        with self._warming_lock:
            self._warming = [f for f in self._warming if not f.done()]
            return list(self._warming)

    def store_for(self, namespace: str | None) -> Store:
        """The store of a namespace (``None``: this middleware's own store)."""
        if namespace in (None, "", "default"):
            return self.store
        cached = self._stores.get(namespace)
        if cached is None:
            cached = self._stores.setdefault(namespace, self.store.namespace_store(namespace))
        return cached

    # ------------------------------------------------------------------ public API

    def prepare(
        self, messages: Sequence[Any], session_id: str | None = None, *, model: str | None = None,
        namespace: str | None = None, mode: str | None = None,
    ) -> Prepared:
        """Prepare an OpenAI chat message list. Returns ``Prepared`` with a new ``.messages``;
        ``model`` picks the token encoding of the budget."""
        return _messages_only(self.prepare_request(_chat_body(messages, model), api="openai.chat",
                                                   session_id=session_id, namespace=namespace, mode=mode))

    async def aprepare(
        self, messages: Sequence[Any], session_id: str | None = None, *, model: str | None = None,
        namespace: str | None = None, mode: str | None = None,
    ) -> Prepared:
        return _messages_only(await self.aprepare_request(_chat_body(messages, model), api="openai.chat",
                                                          session_id=session_id, namespace=namespace, mode=mode))

    def prepare_request(
        self, body: Mapping[str, Any], api: str = "openai.chat", *, session_id: str | None = None,
        namespace: str | None = None, mode: str | None = None, memory_role: str | None = None,
        headers: Mapping[str, str] | None = None, distill_with: Complete | None = None,
    ) -> Prepared:
        """Prepare a whole request body of ``api`` ("openai.chat", "anthropic.messages", "openai.responses").

        ``memory_role`` overrides the configured role of the memory message for this call (the
        litellm adapter forces ``user``: litellm hoists system messages into the system field).
        ``headers`` are the HTTP request's headers, where the client names its session
        (``x-memwire-session``, Claude Code's and Codex's session headers). ``distill_with``
        is the model call that distills the exchange this request finishes, instead of the
        configured one (the proxy's upstream with the caller's credentials)."""
        flow = self._flow(body, api, session_id, namespace, mode, memory_role, headers, distill_with)
        try:
            job = next(flow)
            while True:
                job = flow.send(self._run_sync(*job))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def aprepare_request(
        self, body: Mapping[str, Any], api: str = "openai.chat", *, session_id: str | None = None,
        namespace: str | None = None, mode: str | None = None, memory_role: str | None = None,
        headers: Mapping[str, str] | None = None, distill_with: Complete | None = None,
    ) -> Prepared:
        if self.store.remote:  # its ledgers and memos are database round trips: never on the event loop
            import asyncio
            from functools import partial

            return await asyncio.get_running_loop().run_in_executor(None, partial(
                self.prepare_request, body, api, session_id=session_id, namespace=namespace, mode=mode,
                memory_role=memory_role, headers=headers, distill_with=distill_with))
        flow = self._flow(body, api, session_id, namespace, mode, memory_role, headers, distill_with)
        try:
            job = next(flow)
            while True:
                job = flow.send(await self._run_async(*job))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def _flow(
        self, body: Mapping[str, Any], api: str, session_id: str | None, namespace: str | None,
        mode: str | None, memory_role: str | None, headers: Mapping[str, str] | None = None,
        distill_with: Complete | None = None,
    ) -> Generator[tuple[Store, Callable[[bool], Block]], Block, Prepared]:
        """The whole transform, I/O-free (httpx ``auth_flow`` style): it yields the retrieval it
        needs and is sent the result; the sync and async faces only differ in how they run it."""
        start = time.perf_counter()
        self.traffic.touch()
        try:
            m = self.mode_for(mode)
            turn = self._read(body, api, m.name, session_id, namespace, memory_role, headers)
            if isinstance(turn, Prepared):
                return turn
            plan = m.plan(turn)
            if isinstance(plan, Skip):
                self._offer(turn, distill_with)
                return Prepared(dict(body), Injection(m.name, skipped=plan.reason, session=turn.session), api,
                                turn.query)
            block = plan.memo.get()
            reused = block is not None
            if block is None:
                block = plan.memo.settle((yield turn.store, plan.compute))
            self._offer(turn, distill_with)  # after retrieval: what this turn says is memory from the next turn on
            return self._finish(m, turn, plan, block, reused, start)
        except (RequestFormatError, NamespaceError):
            raise
        except Exception as exc:
            return _unchanged(body, api, exc, mode or self.config.mode)

    def _offer(self, turn: Turn, distill_with: Complete | None) -> None:
        try:
            self.capture.offer(turn, distill_with)
        except Exception as exc:
            log.warning("memwire: capture failed (%s: %s)", type(exc).__name__, exc)

    def flush(self, timeout: float | None = None) -> None:
        """Wait for what runs in the background: captures and replies offered so far, replay
        ledgers, and the memories' metadata."""
        self.capture.flush(timeout)
        self.telemetry.flush(timeout)
        self.kept_records.flush(timeout)
        flush_ledgers()
        for store in {id(s): s for s in (self.store, *self._stores.values())}.values():
            if store.track:
                try:
                    store.lifecycle.flush()
                except Exception as exc:
                    log.warning("memwire: could not save memory metadata to %s (%s: %s)", store.lifecycle.where,
                                type(exc).__name__, exc)

    def observe_reply(self, injection: Injection | None, text: str) -> None:
        """The model's reply to a request memwire prepared: which of the injected memories it used
        is recorded in the background (``memory/_telemetry``). Called by the adapters and the
        proxy once the reply has fully arrived; never raises."""
        if injection is None or not text:
            return
        ids = (() if injection.skipped else injection.memory_ids) + injection.profile_ids
        if not ids:
            return
        try:
            store = self.store_for(injection.namespace or None)
            self.telemetry.offer(store, ids, text, injection.session, injection.mode)
        except Exception as exc:
            log.warning("memwire: telemetry not recorded (%s: %s)", type(exc).__name__, exc)

    # ------------------------------------------------------------------ retrieval, two faces

    # A store that is loaded and unchanged on disk answers from memory in well under a millisecond
    # (the query is capped in length, so a huge prompt costs no more): less than a hop to a worker
    # thread costs, so it runs inline, reading the store as loaded and never waiting for its lock.
    # A cold or changed store (files to parse and index), or one another thread holds, runs in a
    # worker with the budget enforced, so neither a slow load nor a writer holds the call up.

    # A retrieval that starts while a background warm-up is loading the store or an encoding waits
    # for it first (``warm_up_wait`` at most): it would otherwise spend its budget waiting for the
    # same loads behind the warm-up's locks and go out without memory. The budget starts after.

    def _run_sync(self, store: Store, compute: Callable[[bool], Block]) -> Block:
        late: set[Any] = set()
        warming = self._warm_ups_under_way()
        if warming:
            late = concurrent.futures.wait(warming, timeout=self.warm_up_wait).not_done
            self._still_warming(late)
        if store.ready() and not late:  # inline would wait, unbounded, for what the warm-up still loads
            with contextlib.suppress(StoreBusyError):
                return self._inline(compute)
        future = _executor().submit(compute, True)
        try:
            return future.result(timeout=self.config.timeout_ms / 1000)
        except concurrent.futures.TimeoutError:
            return self._timed_out()
        except Exception as exc:
            return failed(exc)

    async def _run_async(self, store: Store, compute: Callable[[bool], Block]) -> Block:
        import asyncio  # already loaded by whoever runs the loop: costs nothing here, ~20 ms at import

        late: set[Any] = set()
        warming = self._warm_ups_under_way()
        if warming:  # awaited, not joined: the event loop goes on serving meanwhile
            _, late = await asyncio.wait([asyncio.wrap_future(f) for f in warming], timeout=self.warm_up_wait)
            self._still_warming(late)
        if store.ready() and not late:
            with contextlib.suppress(StoreBusyError):
                return self._inline(compute)
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(loop.run_in_executor(_executor(), compute, True),
                                          self.config.timeout_ms / 1000)
        except asyncio.TimeoutError:
            return self._timed_out()
        except Exception as exc:
            return failed(exc)

    def _still_warming(self, late: set[Any]) -> None:
        if late:
            log.warning("memwire: warm-up still running after %.0f s; retrieval goes on under its budget",
                        self.warm_up_wait)

    def _inline(self, fn: Callable[[bool], Block]) -> Block:
        start = time.perf_counter()
        try:
            block = fn(False)
        except StoreBusyError:
            raise  # the worker path takes over, under the budget
        except Exception as exc:
            return failed(exc)
        if (time.perf_counter() - start) * 1000 > self.config.timeout_ms:
            return self._timed_out()
        return block

    def _timed_out(self) -> Block:
        log.warning("memwire: retrieval exceeded its %.0f ms budget; request sent unchanged", self.config.timeout_ms)
        return Block(skipped="timeout", error=f"retrieval exceeded {self.config.timeout_ms:.0f} ms")

    # ------------------------------------------------------------------ the transform (no I/O)

    def _read(
        self, body: Mapping[str, Any], api: str, mode: str, session_id: str | None, namespace: str | None,
        memory_role: str | None, headers: Mapping[str, str] | None,
    ) -> Turn | Prepared:
        """The request as a ``Turn`` for the mode, or the request unchanged when it has no human
        text or is a side request."""
        fmt = get_format(api)
        # raises RequestFormatError on a malformed request
        signals = session_signals(session_id, headers, body)  # read once: the view's hint and the session
        view = self._views.view(fmt, body, session_hint(signals))
        if view.latest_user is None:  # nothing the human wrote: nothing to do
            return Prepared(dict(body), None, api)
        session = resolve_session(session_id, headers, body, view.system_text, view.first_user_text, signals)
        # a side request: no block, no ledger entry
        if self.config.side_requests == "skip" and is_side_request(body, headers, view.user_text):
            return Prepared(dict(body), Injection(mode, skipped="side_request", session=session), api)
        store = self.store_for(namespace)  # a bad namespace name raises NamespaceError
        role = memory_role or self.config.memory_role
        if role not in ("user", "system", "developer"):
            raise RequestFormatError(f"memory_role must be user, system or developer, got {role!r}")
        model = body.get("model")
        return Turn(
            fmt, body, view, session, namespace or "", store, model if isinstance(model, str) else None, role,
            gate(view.user_text, view.previous_assistant),
            query_from_messages(view.user_text, view.earlier),  # joins a question the user answers
            self.config.top_k, self.config.min_score,
        )

    def _finish(self, mode: Mode, turn: Turn, plan: Plan, block: Block, reused: bool, start: float) -> Prepared:
        placed = mode.place(turn, plan, block)
        # one Injection built once (dataclasses.replace per field group costs more than the rest)
        extra: dict[str, Any] = {}
        skipped = block.skipped
        if skipped or not block.ids:
            skipped = skipped or "nothing_relevant"
        else:
            extra.update(memory_ids=block.ids, text=block.text, tokens=block.tokens,
                         position=placed.position, placement=placed.placement)
        profile = block.profile
        if profile is not None and profile.ids:
            extra.update(profile_ids=profile.ids, profile_tokens=profile.tokens)
        injection = Injection(
            mode.name, session=turn.session, namespace=turn.namespace, reused=reused, replayed=placed.replayed,
            skipped=skipped, error=block.error, compacted=block.compacted and not reused,
            elapsed_ms=(time.perf_counter() - start) * 1000, **extra,
        )
        return Prepared(placed.body, injection, turn.fmt.api, turn.query)


def _distiller(config: Config) -> Distiller | None:
    if not config.distill_model:
        return None
    complete = litellm_complete(config.distill_model, api_base=config.distill_api_base, timeout=config.distill_timeout)
    return Distiller(complete, min_confidence=config.distill_min_confidence,
                     session_tokens=config.distill_session_tokens, memo_size=config.memo_size)


def _unchanged(body: Mapping[str, Any], api: str, exc: BaseException, mode: str) -> Prepared:
    if isinstance(exc, StoreUnavailableError):  # the database's outage is logged once, by the database
        log.debug("memwire: prepare failed (%s); request sent unchanged", exc)
    else:
        log.warning("memwire: prepare failed (%s: %s); request sent unchanged", type(exc).__name__, exc, exc_info=exc)
    return Prepared(dict(body), Injection(mode, skipped="error", error=f"{type(exc).__name__}: {exc}"), api)


def _settings(config: Config | None, updates: dict[str, Any], *, path: str | os.PathLike[str] | None = None,
              own_store: bool = False) -> Config:
    """A middleware's settings. The caller's own (``config``, ``updates``, the file ``path``, the
    environment) apply as given; what memwire would find by itself in the working directory
    (``./memwire.toml``, ``./.memwire`` as the default ``dir`` when no store is given) is decided by
    the command line's one trust check, :func:`memwire._trust.resolve_config`. What it ignores is
    logged as a warning; a project directory not there yet is created and recorded as memwire's,
    as ``memwire proxy`` does, so what this middleware writes there is used next time."""
    if config is not None and (own_store or "dir" in config.model_fields_set):
        return _with(config, updates)  # nothing to find: the caller's settings as they are
    res = _trust.resolve_config(path, config=config, memory_dir=not own_store, **updates)
    for notice in res.notices:
        log.warning("memwire: %s", notice)
    if res.missing_dir is not None and not res.config.store:  # a PostgreSQL store needs no directory
        warning = _trust.create_project_dir(res.missing_dir, res.config.global_dir)
        if warning:
            log.warning("memwire: %s", warning)
    return res.config


def _with(config: Config, updates: dict[str, Any]) -> Config:
    return make_config({**config.model_dump(), **updates}) if updates else config


def _chat_body(messages: Any, model: str | None) -> dict[str, Any]:
    if not isinstance(messages, list):
        raise RequestFormatError(f"openai.chat: messages must be a list, got {type(messages).__name__}")
    return {"messages": messages, "model": model} if model else {"messages": messages}


def _messages_only(p: Prepared) -> Prepared:
    """prepare() hands back a message list: the body holds nothing else."""
    p.body = {"messages": p.body["messages"]}
    return p
