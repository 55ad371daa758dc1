"""The PostgreSQL backend of the ``Store`` protocol (``memory._protocol``): ``_store.PgStore`` keeps a
namespace's memories, archive, inbox, lifecycle records and event logs in tables, ``_pg`` the
database (the connection pool, the schema's migrations, the change listener). psycopg is an extra
(``memwire[postgres]``): nothing here is imported until a PostgreSQL store is opened."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._store import PgStore

__all__ = ["PgStore"]


def __getattr__(name: str) -> Any:
    if name == "PgStore":
        # start-up time: the backend (and its index) only when asked for
        from ._store import PgStore

        return PgStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
