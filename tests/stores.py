"""The two store backends as tests open them: a ``StoreSpec`` names one store's memories (a
markdown directory, or a PostgreSQL URL and namespace) and opens as many stores on them as a test
wants (each one as another process would see them). Picklable: spawned processes open it too."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

BACKENDS = ["markdown", "postgres"]


@dataclass(frozen=True)
class StoreSpec:
    backend: str  # "markdown" | "postgres"
    where: str  # the directory, or the database URL
    namespace: str | None = None

    def __call__(self, **kw: Any) -> Any:
        """A new store on these memories (``MemoryStore(dir, **kw)`` or ``PgStore(url, ns, **kw)``)."""
        if self.backend == "markdown":
            from memwire import MemoryStore

            return MemoryStore.for_namespace(self.where, self.namespace, **kw)
        from memwire.memory.postgres._store import PgStore

        return PgStore(self.where, self.namespace, **kw)


def need_psycopg() -> Any:
    """psycopg, for a PostgreSQL test. Without it the test skips, unless ``MEMWIRE_TEST_POSTGRES`` is
    set: then PostgreSQL is expected (``.ci/run`` sets it) and the test fails instead."""
    import pytest

    if not os.environ.get("MEMWIRE_TEST_POSTGRES"):
        return pytest.importorskip("psycopg", reason="the PostgreSQL store needs memwire[postgres]")
    try:
        import psycopg
    except ImportError as exc:
        pytest.fail(f"MEMWIRE_TEST_POSTGRES is set but psycopg cannot be imported ({exc}): install memwire[postgres]",
                    pytrace=False)
    return psycopg


def with_search_path(url: str, schema: str) -> str:
    """``url`` with libpq's ``options`` selecting ``schema`` (the tests' fresh, empty schema)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"] + [("options", f"-csearch_path={schema}")]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), parts.fragment))


def fresh_schema_name() -> str:
    return f"memwire_test_{os.getpid()}_{secrets.token_hex(4)}"
