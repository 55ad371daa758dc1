"""The middleware: ``prepare`` turns a request into the request the provider should see.

The transform does no I/O (httpx ``auth_flow`` style): it reads the request, decides what memory it
needs, and places a block. Only retrieval has two faces, sync and async; both run it inline when
the store is warm and unchanged, else in a worker thread under the time budget. Anything that fails
in memory leaves the request unchanged and is logged (fail open); only a malformed request raises.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from .._config import Config, load_config, make_config, normalize_mode
from .._errors import NamespaceError, RequestFormatError, StoreBusyError
from ..memory._model import Memory
from ..memory._store import MemoryStore
from ..policies._gate import gate
from ..policies._query import query_from_messages
from ..policies._side_requests import is_side_request
from ..policies._tokens import count_tokens, get_encoder
from ._formats import Format, View, get_format
from ._replay import Ledger, LedgerEntry, message_keys
from ._render import fit_budget, memory_line, render_lines
from ._session import LRU, resolve_session, turn_key

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
    skipped: str | None = None     # gate | nothing_relevant | over_budget | error | timeout | stateful | side_request
    elapsed_ms: float = 0.0
    position: int | None = None    # index of the memory message (or of the merged user message)
    placement: str | None = None   # message | merge | system
    session: str = ""
    reused: bool = False           # the block came from the turn / session memo
    error: str | None = None
    compacted: bool = False        # history="replay": earlier blocks changed (compaction, forgotten memory)
    replayed: int = 0              # history="replay": earlier blocks re-inserted at their places

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
    """The memory chosen for a turn (or a session, in startup mode); what the memos keep."""

    ids: tuple[str, ...] = ()
    lines: tuple[str, ...] = ()
    text: str = ""
    tokens: int = 0
    skipped: str | None = None
    error: str | None = None
    replay: tuple[LedgerEntry, ...] = ()  # history="replay": every entry of the session, this turn's last
    compacted: bool = False
    looked_at: int | None = None  # store version a search found nothing relevant in (may look again)

    def may_look_again(self, store: MemoryStore) -> bool:
        """A turn whose search found nothing, and that so has sent no block, looks again once the
        store has changed: a memory added since (even by hand, even across a restart) then reaches
        the turn's next request."""
        return self.looked_at is not None and not self.ids and (self.looked_at != store.version or not store.ready())


class _Memo:
    """Turn / session memo: the first block stored for a key is what every later request gets."""

    def __init__(self, lru: LRU[tuple[str, ...], _Block], key: tuple[str, ...], store: MemoryStore) -> None:
        self.lru, self.key, self.store = lru, key, store

    def get(self) -> _Block | None:
        block = self.lru.get(self.key)
        return None if block is not None and block.may_look_again(self.store) else block

    def settle(self, block: _Block) -> _Block:
        return self.lru.setdefault(self.key, block, replace=lambda old: old.may_look_again(self.store))


class _LedgerMemo:
    """history="replay": the session's ledger is the memo, keyed by the latest user message.
    ``looked`` remembers, in this process, the store version an empty turn was searched at."""

    def __init__(self, ledger: Ledger, key: str, store: MemoryStore, looked: LRU[tuple[int, str], int]) -> None:
        self.ledger, self.key, self.store, self.looked = ledger, key, store, looked

    def _block(self, entry: LedgerEntry, entries: tuple[LedgerEntry, ...], **kw: Any) -> _Block:
        skipped = kw.pop("skipped", None) or entry.skipped or (None if entry.ids else "nothing_relevant")
        return _Block(entry.ids, entry.lines, entry.text, entry.tokens, skipped=skipped, replay=entries, **kw)

    def get(self) -> _Block | None:
        entries = self.ledger.entries
        entry = self.ledger.get(self.key)
        if entry is None:
            return None
        found = self._block(entry, entries)
        if found.skipped == "nothing_relevant":  # no block was sent: look again if the store changed
            found = replace(found, looked_at=self.looked.get((id(self.ledger), self.key)))
            if found.looked_at is None or found.may_look_again(self.store):
                return None
        return found

    def settle(self, block: _Block) -> _Block:
        if block.looked_at is not None:
            self.looked.setdefault((id(self.ledger), self.key), block.looked_at, replace=lambda _: True)
        if not block.replay:  # retrieval failed: record an empty entry, keep the earlier ones as they are
            entry = LedgerEntry(self.key)
            if self.ledger.commit(self.key, (*self.ledger.entries, entry), persist=False):
                return self._block(entry, self.ledger.entries, skipped=block.skipped, error=block.error)
        elif self.ledger.commit(self.key, block.replay, relook=block.looked_at is not None or bool(block.ids)):
            return block
        return self.get() or block


@dataclass
class _Plan:
    """What the transform decided before retrieval: where the block is kept and how to compute it."""

    fmt: Format
    body: Mapping[str, Any]
    view: View
    mode: str
    session: str
    memo: _Memo | _LedgerMemo
    compute: Callable[[bool], _Block]  # fresh=False: read the store as loaded, never wait for it
    store: MemoryStore
    keys: dict[int, str] = field(default_factory=dict)  # replay: ledger key of each user message
    role: str = "user"  # of the memory message (OpenAI chat / Responses)
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
        self._looked: LRU[tuple[int, str], int] = LRU(self.config.memo_size)
        self._ledgers: LRU[tuple[str, str], Ledger] = LRU(self.config.memo_size)

    @classmethod
    def from_config(cls, path: str | None = None, **overrides: Any) -> "Middleware":
        """Read ``path`` (or ./memwire.toml) and the ``MEMWIRE_*`` environment."""
        return cls(config=load_config(path, **overrides))

    @property
    def mode(self) -> str:
        return self.config.mode

    def warm_up(self, models: Sequence[str | None] = ("gpt-4o", None), *, background: bool = False) -> threading.Thread | None:
        """Load and index the store and the token encodings of ``models`` now, so the first call is
        not the one that pays for it (a cold encoding takes 0.5-1 s). ``background=True`` does it
        on a daemon thread and returns it; failures are only logged (a first call then fails open)."""

        def run() -> None:
            try:
                self.store.search("warm up")
                for model in models:
                    get_encoder(model).encode("warm up")
            except Exception as exc:  # noqa: BLE001 - warming is an optimization
                log.warning("memwire: warm-up failed (%s: %s)", type(exc).__name__, exc)

        if not background:
            run()
            return None
        thread = threading.Thread(target=run, name="memwire-warm-up", daemon=True)
        thread.start()
        return thread

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
        headers: Mapping[str, str] | None = None,
    ) -> Prepared:
        """Prepare a whole request body of ``api`` ("openai.chat", "anthropic.messages", "openai.responses").

        ``memory_role`` overrides the configured role of the memory message for this call (the
        litellm adapter forces ``user``: litellm hoists system messages into the system field).
        ``headers`` are the HTTP request's headers, where the client names its session
        (``x-memwire-session``, Claude Code's and Codex's session headers)."""
        flow = self._flow(body, api, session_id, namespace, mode, memory_role, headers)
        try:
            plan = next(flow)
            while True:
                plan = flow.send(self._run_sync(plan))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def aprepare_request(
        self, body: Mapping[str, Any], api: str = "openai.chat", *, session_id: str | None = None,
        namespace: str | None = None, mode: str | None = None, memory_role: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Prepared:
        flow = self._flow(body, api, session_id, namespace, mode, memory_role, headers)
        try:
            plan = next(flow)
            while True:
                plan = flow.send(await self._run_async(plan))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def _flow(
        self, body: Mapping[str, Any], api: str, session_id: str | None, namespace: str | None,
        mode: str | None, memory_role: str | None, headers: Mapping[str, str] | None = None,
    ) -> Generator[_Plan, _Block, Prepared]:
        """The whole transform, I/O-free (httpx ``auth_flow`` style): it yields the retrieval it
        needs and is sent the result; the sync and async faces only differ in how they run it."""
        try:
            plan = self._plan(body, api, session_id, namespace, mode, memory_role, headers)
            if isinstance(plan, Prepared):
                return plan
            block = plan.memo.get()
            reused = block is not None
            if block is None:
                block = plan.memo.settle((yield plan))
            return self._finish(plan, block, reused)
        except (RequestFormatError, NamespaceError):
            raise
        except Exception as exc:  # noqa: BLE001 - a bug in memwire must not fail the user's call
            return _unchanged(body, api, exc, mode or self.config.mode)

    # ------------------------------------------------------------------ retrieval, two faces

    # A store that is loaded and unchanged on disk answers from memory in well under a millisecond
    # (the query is capped in length, so a huge prompt costs no more): less than a hop to a worker
    # thread costs, so it runs inline, reading the store as loaded and never waiting for its lock.
    # A cold or changed store (files to parse and index), or one another thread holds, runs in a
    # worker with the budget enforced, so neither a slow load nor a writer holds the call up.

    def _run_sync(self, plan: _Plan) -> _Block:
        if plan.store.ready():
            with contextlib.suppress(StoreBusyError):
                return self._inline(plan.compute)
        future = _executor().submit(plan.compute, True)
        try:
            return future.result(timeout=self.config.timeout_ms / 1000)
        except concurrent.futures.TimeoutError:
            return self._timed_out()
        except Exception as exc:  # noqa: BLE001 - fail open
            return _failed(exc)

    async def _run_async(self, plan: _Plan) -> _Block:
        if plan.store.ready():
            with contextlib.suppress(StoreBusyError):
                return self._inline(plan.compute)
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(loop.run_in_executor(_executor(), plan.compute, True), self.config.timeout_ms / 1000)
        except asyncio.TimeoutError:
            return self._timed_out()
        except Exception as exc:  # noqa: BLE001 - fail open
            return _failed(exc)

    def _inline(self, fn: Callable[[bool], _Block]) -> _Block:
        start = time.perf_counter()
        try:
            block = fn(False)
        except StoreBusyError:
            raise  # the worker path takes over, under the budget
        except Exception as exc:  # noqa: BLE001 - fail open
            return _failed(exc)
        if (time.perf_counter() - start) * 1000 > self.config.timeout_ms:
            return self._timed_out()
        return block

    def _timed_out(self) -> _Block:
        log.warning("memwire: retrieval exceeded its %.0f ms budget; request sent unchanged", self.config.timeout_ms)
        return _Block(skipped="timeout", error=f"retrieval exceeded {self.config.timeout_ms:.0f} ms")

    # ------------------------------------------------------------------ the transform (no I/O)

    def _plan(
        self, body: Mapping[str, Any], api: str, session_id: str | None, namespace: str | None, mode: str | None,
        memory_role: str | None = None, headers: Mapping[str, str] | None = None,
    ) -> _Plan | Prepared:
        fmt = get_format(api)
        view = fmt.view(body)  # raises RequestFormatError on a malformed request
        mode = normalize_mode(mode) if mode else self.config.mode
        if view.latest_user is None:  # nothing the human wrote: nothing to do
            return Prepared(dict(body), None, api)
        session = resolve_session(session_id, headers, body, view.system_text, view.first_user_text)
        if self.config.side_requests == "skip" and is_side_request(body, headers, view.user_text):  # no block, no ledger entry
            return Prepared(dict(body), Injection(mode, skipped="side_request", session=session), api)
        ns = namespace or ""
        store = self.store_for(namespace)  # a bad namespace name raises NamespaceError
        model = _model(body)
        role = memory_role or self.config.memory_role
        if role not in ("user", "system", "developer"):
            raise RequestFormatError(f"memory_role must be user, system or developer, got {role!r}")
        if mode == "startup":
            if view.stateful:  # the provider keeps the history: the block went in with the first call
                return Prepared(dict(body), Injection(mode, skipped="stateful", session=session), api)
            max_tokens = self.config.startup_max_tokens
            return _Plan(fmt, body, view, mode, session, _Memo(self._sessions, ("startup", ns, session), store),
                         lambda fresh: self._startup_block(store, max_tokens, model, fresh), store, role=role)
        # a stateful Responses call sends only the new input (the provider keeps the history and
        # the blocks sent with it): nothing to replay, and no ledger per call
        replay = mode == "contextPerTurn" and self.config.history == "replay" and not view.stateful
        decision = gate(view.user_text, view.previous_assistant)
        if decision.skip and not replay:
            return Prepared(dict(body), Injection(mode, skipped="gate", session=session), api)
        query = query_from_messages(view.user_text, view.earlier)  # joins a question the user answers
        cfg = self.config

        def retrieve(fresh: bool, exclude: frozenset[str] = frozenset()) -> _Block:
            if decision.skip:
                return _Block(skipped="gate")
            version = store.version
            hits = store.search(query.text, cfg.top_k, min_score=cfg.min_score, context=query.context,
                                exclude=exclude, refresh=fresh, wait=fresh)
            memories = [h.memory for h in hits]
            if not memories:
                return _Block(skipped="nothing_relevant", looked_at=store.version if fresh else version)
            return _render(memories, cfg.max_tokens, model)

        if not replay:
            key = ("turn", ns, session, mode, turn_key(view.latest_user, fmt.identity(view.items[view.latest_user], view.system_text)))
            return _Plan(fmt, body, view, mode, session, _Memo(self._turns, key, store), retrieve, store, role=role)
        keys = message_keys({i: fmt.identity(view.items[i], view.system_text) for i in view.user_indices})
        ledger = self._ledger(store, ns, session)
        return _Plan(fmt, body, view, mode, session, _LedgerMemo(ledger, keys[view.latest_user], store, self._looked),
                     lambda fresh: self._replay_turn(ledger, store, keys, view, model, retrieve, fresh), store, keys, role)

    def _ledger(self, store: MemoryStore, ns: str, session: str) -> Ledger:
        cached = self._ledgers.get((ns, session))
        if cached is None:  # loaded from disk once per session (I/O, but only on a session's first call)
            cached = self._ledgers.setdefault((ns, session), Ledger.load(store.path, session))
        return cached

    def _replay_turn(
        self, ledger: Ledger, store: MemoryStore, keys: dict[int, str], view: View, model: str | None,
        retrieve: Callable[[bool, frozenset[str]], _Block], fresh: bool,
    ) -> _Block:
        """A new turn with history="replay": refresh the earlier blocks, retrieve only new memories."""
        assert view.latest_user is not None
        latest_key = keys[view.latest_user]
        present = {keys[i] for i in view.user_indices if i != view.latest_user}
        entries = list(ledger.entries)
        compacted = False
        # retrieval reads the files first, so the check for forgotten memories below sees them as
        # this search did (a forgotten id is not in the index anyway: excluding it changes nothing)
        block = retrieve(fresh, frozenset(mid for e in entries if e.key in present for mid in e.ids))
        gone = store.missing({mid for e in entries for mid in e.ids}, refresh=False, wait=fresh)
        for j, e in enumerate(entries):  # a forgotten or edited memory is rendered out of its block
            if gone.intersection(e.ids):
                kept = [(mid, line) for mid, line in zip(e.ids, e.lines) if mid not in gone]
                entries[j] = _entry(e.key, kept, model)
                compacted = compacted or e.key in present
        shown = [e for e in entries if e.key in present and e.text]
        cap = self.config.replay_max_tokens
        total = sum(e.tokens for e in shown)
        if total + block.tokens > cap:  # compact once: drop the oldest blocks down to half the cap
            budget = cap // 2 - block.tokens
            for j, e in enumerate(entries):
                if total <= budget:
                    break
                if e.key in present and e.text:
                    entries[j] = LedgerEntry(e.key)
                    total -= e.tokens
                    compacted = True
        new = LedgerEntry(latest_key, block.ids, block.lines, block.text, block.tokens, block.skipped)
        entries = [e for e in entries if e.key != latest_key] + [new]
        return replace(block, replay=tuple(entries), compacted=compacted)

    def _startup_block(self, store: MemoryStore, max_tokens: int, model: str | None, fresh: bool) -> _Block:
        memories = store.memories(refresh=fresh, wait=fresh)
        ordered = [m for m in memories if m.pinned] + [m for m in memories if not m.pinned]
        if not ordered:
            return _Block(skipped="nothing_relevant")
        return _render(ordered, max_tokens, model)

    def _finish(self, plan: _Plan, block: _Block, reused: bool) -> Prepared:
        elapsed = (time.perf_counter() - plan.start) * 1000
        base = Injection(plan.mode, session=plan.session, elapsed_ms=elapsed, reused=reused,
                         skipped=block.skipped, error=block.error, compacted=block.compacted and not reused)
        fmt, view, body = plan.fmt, plan.view, plan.body
        assert view.latest_user is not None
        replayed: list[tuple[int, str]] = []
        if block.replay:  # earlier blocks go back where they were, byte-identical
            by_key = {e.key: e for e in block.replay}
            for i in view.user_indices[:-1]:
                e = by_key.get(plan.keys[i])
                if e is not None and e.text:
                    replayed.append((i, e.text))
            base = replace(base, replayed=len(replayed))
        if block.skipped or not block.ids:
            if not replayed:
                return Prepared(dict(body), replace(base, skipped=block.skipped or "nothing_relevant"), fmt.api)
            new_body = self._insert_all(fmt, body, replayed, plan.role)
            return Prepared(new_body, replace(base, skipped=block.skipped or "nothing_relevant"), fmt.api)
        if plan.mode == "systemPromptPerTurn":
            new_body, position, placement = fmt.append_system(body, block.text), None, "system"
        elif plan.mode == "startup":
            position = view.leading_system
            new_body, placement = fmt.insert(body, position, block.text, plan.role), "message"
        else:
            merge = self.config.placement == "merge"
            new_body = self._insert_all(fmt, body, [*replayed, (view.latest_user, block.text)], plan.role)
            position = view.latest_user + _added_before(fmt, view.items, replayed, view.latest_user, merge)
            placement = "message" if not merge and fmt.adds_item(view.items, view.latest_user) else "merge"
        return Prepared(new_body, replace(base, memory_ids=block.ids, text=block.text,
                                          tokens=block.tokens, position=position, placement=placement), fmt.api)

    def _insert_all(
        self, fmt: Format, body: Mapping[str, Any], blocks: Sequence[tuple[int, str]], role: str
    ) -> dict[str, Any]:
        """Insert blocks before the messages at their indices, in one pass over the list (a merge into
        a message, for ``placement="merge"`` or Anthropic tool results, goes through the format)."""
        items = fmt.items(body)
        at = dict(blocks)
        merges = {i for i in at if self.config.placement == "merge" or not fmt.adds_item(items, i)}
        out: dict[str, Any] = dict(body)
        for index in sorted(merges, reverse=True):
            out = fmt.merge(out, index, at.pop(index))
        if at:
            merged = fmt.items(out)
            new_items: list[Any] = []
            for i, item in enumerate(merged):
                if i in at:
                    new_items.append(fmt.memory_item(at[i], role))
                new_items.append(item)
            out[fmt.items_key] = new_items
        return out


def _added_before(fmt: Format, items: list[Any], blocks: Sequence[tuple[int, str]], index: int, merge: bool) -> int:
    """How many items the blocks inserted before ``index`` added (a merged block adds none)."""
    return 0 if merge else sum(1 for i, _ in blocks if i < index and fmt.adds_item(items, i))


def _entry(key: str, kept: Sequence[tuple[str, str]], model: str | None) -> LedgerEntry:
    if not kept:
        return LedgerEntry(key)
    lines = tuple(line for _, line in kept)
    text = render_lines(lines)
    return LedgerEntry(key, tuple(mid for mid, _ in kept), lines, text, count_tokens(text, model))


def _unchanged(body: Mapping[str, Any], api: str, exc: BaseException, mode: str) -> Prepared:
    log.warning("memwire: prepare failed (%s: %s); request sent unchanged", type(exc).__name__, exc, exc_info=exc)
    return Prepared(dict(body), Injection(mode, skipped="error", error=f"{type(exc).__name__}: {exc}"), api)


def _with(config: Config, updates: dict[str, Any]) -> Config:
    return make_config({**config.model_dump(), **updates}) if updates else config


def _model(body: Mapping[str, Any]) -> str | None:
    model = body.get("model")
    return model if isinstance(model, str) else None


def _render(memories: Sequence[Memory], max_tokens: int, model: str | None) -> _Block:
    kept, text, tokens = fit_budget(memories, max_tokens, model)
    if not kept:  # relevant memories were found, but none fits the block's token budget
        return _Block(skipped="over_budget")
    return _Block(tuple(m.id for m in kept), tuple(memory_line(m) for m in kept), text, tokens)


def _failed(exc: BaseException) -> _Block:
    log.warning("memwire: memory retrieval failed (%s: %s); request sent unchanged", type(exc).__name__, exc)
    return _Block(skipped="error", error=f"{type(exc).__name__}: {exc}")


def _chat_body(messages: Any, model: str | None) -> dict[str, Any]:
    if not isinstance(messages, list):
        raise RequestFormatError(f"openai.chat: messages must be a list, got {type(messages).__name__}")
    return {"messages": messages, "model": model} if model else {"messages": messages}


def _messages_only(p: Prepared) -> Prepared:
    """prepare() hands back a message list: the body holds nothing else."""
    p.body = {"messages": p.body["messages"]}
    return p
