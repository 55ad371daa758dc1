"""Limits the proxy puts on its clients: how fast a request body must arrive and how big it may be,
and how fast and how many new namespaces they may start.

A slow client holds a connection slot: its body must arrive within a deadline (else 408). A
namespace directory appears on its first write, and any client may name any namespace in
``x-memwire-namespace``: without a cap, a client could fill the disk with directories. A client
may start ``per_minute`` new namespaces a minute, and the memory directory holds ``total``
namespaces at most; namespaces that exist keep working. Namespaces compare NFKC case-folded: a
namespace whose folded name is an existing one's (``ALICE`` beside ``alice``) is refused, for on a
case-insensitive filesystem the two would be one directory.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
from starlette.requests import ClientDisconnect, Request
from starlette.types import Message

from ..._errors import NamespaceError
from ._refusal import Refusal

__all__ = ["NamespaceQuota", "read_all", "read_body"]

_WINDOW_S = 60.0
_CLIENTS = 10_000  # clients whose recent namespace starts are remembered (the oldest go first)
_LIMITED = "memwire_namespace_limit"  # a namespace cap's refusal code


async def read_body(request: Request, timeout: float, limit: int | None = None) -> AsyncIterator[bytes]:
    """The request body as it arrives, all of it within ``timeout`` seconds (else 408) and, given a
    ``limit``, no more than ``limit`` bytes (else 413). A client that leaves raises Starlette's
    ``ClientDisconnect``."""
    _check_declared(request, limit)
    deadline = anyio.current_time() + timeout
    size = 0

    async def receive() -> Message:
        with anyio.fail_after(max(0.0, deadline - anyio.current_time())):
            return await request.receive()

    try:
        async for chunk in Request(request.scope, receive).stream():
            size += len(chunk)
            _check_size(size, limit)
            yield chunk
    except TimeoutError:
        raise _too_slow(timeout, size) from None


async def read_all(request: Request, timeout: float, limit: int | None = None) -> bytes:
    """The whole request body, as :func:`read_body` reads it, under one deadline: a body the proxy
    parses is read in one piece, so it needs no cancel scope per message (each costs ~20 us)."""
    _check_declared(request, limit)
    chunks: list[bytes] = []
    try:
        if sys.version_info >= (3, 11):  # asyncio's own deadline: no anyio cancel scope
            async with asyncio.timeout(timeout):
                return await _receive_all(request, chunks, limit)
        with anyio.fail_after(timeout):
            return await _receive_all(request, chunks, limit)
    except TimeoutError:
        raise _too_slow(timeout, sum(map(len, chunks))) from None


async def _receive_all(request: Request, chunks: list[bytes], limit: int | None) -> bytes:
    size = 0
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = message.get("body", b"")
        size += len(chunk)
        _check_size(size, limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def declared_length(headers: Mapping[str, str]) -> int | None:
    """The body length the request's ``content-length`` declares, or None (none, or not a number)."""
    declared = headers.get("content-length", "")
    return int(declared) if declared.isascii() and declared.isdigit() else None


def _check_declared(request: Request, limit: int | None) -> None:
    declared = declared_length(request.headers)
    if limit is not None and declared is not None and declared > limit:
        raise Refusal(413, f"request body of {declared} bytes exceeds the proxy's limit of {limit} bytes")


def _check_size(size: int, limit: int | None) -> None:
    if limit is not None and size > limit:
        raise Refusal(413, f"request body exceeds the proxy's limit of {limit} bytes")


def _too_slow(timeout: float, size: int) -> Refusal:
    return Refusal(408, f"request body not received within {timeout:g} s ({size} bytes arrived)", "request_timeout")


class NamespaceQuota:
    """Admits a namespace when it exists, or when the client and the directory have room for it."""

    def __init__(self, store: Any, per_minute: int, total: int) -> None:
        self.store = store  # the default namespace's store: it knows its tree's namespaces
        self.per_minute, self.total = per_minute, total
        self._known: set[str] = set()
        self._count: int | None = None  # namespaces on disk, counted once, then kept up to date
        self._starts: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def known(self, namespace: str) -> bool:
        """Whether ``namespace`` was admitted already (no look at the store)."""
        return namespace in self._known

    def admit(self, namespace: str, client: str) -> None:
        """Returns when the request may go on, else raises a 429 :class:`Refusal` saying why.
        ``NamespaceError`` (each route's 400) when ``namespace`` is another spelling of an existing
        namespace's name."""
        if namespace in self._known:
            return
        twin = self._twin(namespace)
        if twin is not None:
            raise NamespaceError(
                f"namespace {namespace[:130]!r} differs from the existing namespace {twin!r} only in case: namespaces "
                f"are compared case-insensitively (NFKC case-folded), as a case-insensitive filesystem would; "
                f"use {twin!r}")
        if self.store.has_namespace(namespace):
            self._known.add(namespace)
            return
        with self._lock:
            if namespace in self._known:
                return
            if self._count is None:
                self._count = self.store.count_namespaces()
            if self._count >= self.total:
                raise Refusal(429, f"this proxy holds its limit of {self.total} namespaces "
                                   "(proxy_max_namespaces); use an existing one", _LIMITED)
            now = time.monotonic()
            starts = self._starts.setdefault(client, deque())
            self._starts.move_to_end(client)
            while starts and now - starts[0] > _WINDOW_S:
                starts.popleft()
            if len(starts) >= self.per_minute:
                raise Refusal(429, f"too many new namespaces: at most {self.per_minute} a minute per client "
                                   "(proxy_new_namespaces_per_minute); try again later", _LIMITED)
            starts.append(now)
            while len(self._starts) > _CLIENTS:
                self._starts.popitem(last=False)
            self._known.add(namespace)
            self._count += 1

    def _twin(self, namespace: str) -> str | None:
        """An existing namespace whose name folds to ``namespace``'s, if ``namespace`` itself does
        not exist (two that exist already, made before this rule, keep being served). A directory
        tree only: a database's names are never one another's (``Store.case_twin``)."""
        twin: str | None = self.store.case_twin(namespace)
        return twin

