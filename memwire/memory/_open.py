"""The store a configuration names: the markdown directory, or PostgreSQL (``store`` setting)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._config_model import Config

__all__ = ["open_store"]


def open_store(config: "Config", namespace: str | None = None, *, dir: Path | None = None, alone: bool = False,
               store: str | None = None) -> Any:
    """The store of ``namespace`` as ``config`` says: ``store`` (or ``config.store``) a PostgreSQL
    URL gives a ``PgStore``, else the markdown directory ``dir`` (or ``config.dir``). The default
    namespace of a directory also reads the global scope (``use_global``) unless ``alone``: a
    command that writes or moves a scope works on that scope only."""
    url = store or (None if dir is not None else config.store)
    kw: dict[str, Any] = {"min_score": config.min_score, "scoring": config.scoring()}
    if url:
        from ._postgres import PgStore

        return PgStore(url, namespace, **kw)
    from ._store import MemoryStore

    root = dir if dir is not None else config.dir
    if namespace not in (None, "", "default") or alone or not config.use_global:
        return MemoryStore.for_namespace(root, namespace, **kw)
    return MemoryStore(root, global_dir=config.global_dir, **kw)
