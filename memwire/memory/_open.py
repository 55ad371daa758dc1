"""The store a configuration names: the markdown directory, or PostgreSQL (``store`` setting)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

from .. import _paths
from .._errors import MemwireError
from ._lifecycle import Scoring
from ._protocol import Store
from ._store import MemoryStore

__all__ = ["StoreSettings", "check_dir", "open_store"]


class StoreSettings(Protocol):
    """What opening a store reads of the settings (``memwire.Config``: memory takes its settings
    as arguments and never imports the config)."""

    @property
    def store(self) -> str | None: ...

    @property
    def dir(self) -> Path: ...

    @property
    def use_global(self) -> bool: ...

    @property
    def global_dir(self) -> Path: ...

    @property
    def min_score(self) -> float | None: ...

    @property
    def timezone(self) -> str | None: ...

    def scoring(self) -> Scoring: ...


def open_store(config: StoreSettings, namespace: str | None = None, *, dir: Path | None = None, alone: bool = False,
               store: str | None = None) -> Store:
    """The store of ``namespace`` as ``config`` says: ``store`` (or ``config.store``) a PostgreSQL
    URL gives a ``PgStore``, else the markdown directory ``dir`` (or ``config.dir``). The default
    namespace of a directory also reads the global scope (``use_global``) unless ``alone``: a
    command that writes or moves a scope works on that scope only."""
    url = store or (None if dir is not None else config.store)
    kw: dict[str, Any] = {"min_score": config.min_score, "scoring": config.scoring(), "timezone": config.timezone}
    if url:
        if getattr(config, "retrieval", "bm25") == "hybrid":
            from ._embed import _warn_once  # numpy: only with hybrid

            _warn_once("", "postgres", "semantic retrieval is off: the PostgreSQL store has no vector side yet; "
                       "searching with BM25 only")
        from .postgres._store import (
            PgStore,  # start-up time: the PostgreSQL backend, for a PostgreSQL store only (psycopg is an extra)
        )

        return PgStore(url, namespace, **kw)
    root = dir if dir is not None else config.dir
    # retrieval = "hybrid" (issue 32): markdown stores only so far; read with defaults, so settings
    # objects without these keys still open a BM25 store
    kw["retrieval"] = getattr(config, "retrieval", "bm25")
    kw["embedding_model"] = getattr(config, "embedding_model", None)
    if namespace not in (None, "", "default") or alone or not config.use_global:
        return MemoryStore.for_namespace(root, namespace, **kw)
    return MemoryStore(root, global_dir=config.global_dir, **kw)


def check_dir(path: str | os.PathLike[str], *, readable: bool = True) -> None:
    """A memory directory must be a directory (or not exist yet, under directories); say which
    path is in the way instead of failing on it later with a traceback."""
    p = Path(path).expanduser()
    problem = _paths.not_a_directory(p)  # the store raises the same error
    if problem is not None:
        raise problem
    if readable and p.is_dir() and not os.access(p, os.R_OK | os.X_OK):
        raise MemwireError(f"memory directory {p} is not readable (permissions)")
