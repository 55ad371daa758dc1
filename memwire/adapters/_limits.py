"""Limits the proxy puts on its clients: how fast and how many new namespaces they may start.

A namespace directory appears on its first write, and any client may name any namespace in
``x-memwire-namespace``: without a cap, a client could fill the disk with directories. A client
(its provider credential, else its address) may start ``per_minute`` new namespaces a minute, and
the memory directory holds ``total`` namespaces at most; namespaces that exist keep working.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["NamespaceQuota", "client_identity"]

_WINDOW_S = 60.0
_CLIENTS = 10_000  # clients whose recent namespace starts are remembered (the oldest go first)


def client_identity(scope: Mapping[str, Any], headers: Mapping[str, str]) -> str:
    """Who is asking: a hash of the provider credential the client sends, else its address."""
    credential = headers.get("authorization") or headers.get("x-api-key") or headers.get("api-key")
    if credential:
        return "key:" + hashlib.sha256(credential.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    client = scope.get("client")
    return f"addr:{client[0]}" if client else "addr:?"


class NamespaceQuota:
    """Admits a namespace when it exists, or when the client and the directory have room for it."""

    def __init__(self, root: Path, per_minute: int, total: int) -> None:
        self.root = Path(root) / "namespaces"
        self.per_minute, self.total = per_minute, total
        self._known: set[str] = set()
        self._count: int | None = None  # namespaces on disk, counted once, then kept up to date
        self._starts: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def admit(self, namespace: str, client: str) -> str | None:
        """None when the request may go on, else why not (for a 429)."""
        if namespace in self._known:
            return None
        if (self.root / namespace).is_dir():
            self._known.add(namespace)
            return None
        with self._lock:
            if namespace in self._known:
                return None
            if self._count is None:
                self._count = _count_dirs(self.root)
            if self._count >= self.total:
                return (f"this proxy holds its limit of {self.total} namespaces "
                        "(proxy_max_namespaces); use an existing one")
            now = time.monotonic()
            starts = self._starts.setdefault(client, deque())
            self._starts.move_to_end(client)
            while starts and now - starts[0] > _WINDOW_S:
                starts.popleft()
            if len(starts) >= self.per_minute:
                return (f"too many new namespaces: at most {self.per_minute} a minute per client "
                        "(proxy_new_namespaces_per_minute); try again later")
            starts.append(now)
            while len(self._starts) > _CLIENTS:
                self._starts.popitem(last=False)
            self._known.add(namespace)
            self._count += 1
            return None


def _count_dirs(path: Path) -> int:
    try:
        with os.scandir(path) as it:
            return sum(1 for e in it if e.is_dir(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return 0
