"""Shared test setup: no network beyond loopback, no user state, litellm offline."""

from __future__ import annotations

import ipaddress
import logging
import os
import socket

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.stores import BACKENDS, StoreSpec, fresh_schema_name, need_psycopg, with_search_path

# Property tests run the same examples on every run (CI must not pass or fail by luck); a
# developer explores with HYPOTHESIS_PROFILE=explore and turns what it finds into @example lines.
# No deadline: a slow example on a loaded machine is no failure (never a timed assertion).
settings.register_profile("ci", max_examples=60, derandomize=True, database=None, deadline=None)
settings.register_profile("explore", max_examples=2000, derandomize=False, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_LOG", "ERROR")
# a PostgreSQL database the tests may create (and drop) schemas in
TEST_POSTGRES = os.environ.get("MEMWIRE_TEST_POSTGRES")
for _name in [n for n in os.environ if n.startswith("MEMWIRE_") and not n.startswith("MEMWIRE_TEST_")]:
    del os.environ[_name]  # a developer's own settings must not leak into the tests
# The retrieval budget (1000 ms by default) must not decide a test on a loaded machine: a cold
# first search there can take longer. Tests of the budget itself pass their own timeout_ms.
os.environ["MEMWIRE_TIMEOUT_MS"] = "60000"



def _share_default_ssl_context(module_name: str) -> None:
    """Every httpx client made with the default ``verify=True`` gets one SSL context, made once per
    process, instead of a new one that parses certifi's CA bundle (~40 ms of CPU each: the tests
    make several hundred clients, through the SDKs, the proxy and ``httpx.get``). Nothing here
    speaks TLS (only loopback, plain HTTP), so no test can tell; other arguments go through as
    they are. The cache is keyed on what the default context depends on."""
    import importlib

    try:
        transports = importlib.import_module(module_name + "._transports.default")
    except ImportError:
        return
    make = getattr(transports, "create_ssl_context", None)
    if make is None:  # another httpx layout: its clients make their own contexts, as before
        return
    made: dict[tuple[bool, str | None, str | None], object] = {}

    def create_ssl_context(verify: object = True, cert: object = None, trust_env: bool = True):  # type: ignore[no-untyped-def]
        if verify is not True or cert is not None:
            return make(verify=verify, cert=cert, trust_env=trust_env)
        key = (trust_env, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        if key not in made:
            made[key] = make(verify=verify, cert=cert, trust_env=trust_env)
        return made[key]

    transports.create_ssl_context = create_ssl_context


for _module in ("httpx", "httpx2"):  # httpx2: the client anthropic 2 is built on
    _share_default_ssl_context(_module)

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (addopts): one worker per core and one more, at most 5. About a fifth of the
    suite's wall time is a worker waiting (a proxy subprocess starting, a server answering, a
    socket), so one worker per core leaves the cores idle that long (2 cores: 137 s with 2
    workers, 115-122 s with 3, 121 s with 4); each worker imports the whole stack, so more buys
    nothing."""
    return max(1, min(5, (os.cpu_count() or 1) + 1))


def _is_loopback(host: object) -> bool:
    if not isinstance(host, str):
        return True  # AF_UNIX paths and the like
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _guard(address: object) -> None:
    host = address[0] if isinstance(address, tuple) else address
    if not _is_loopback(host):
        raise RuntimeError(f"tests must not touch the network (tried to reach {host!r})")


def _connect(self: socket.socket, address: object) -> None:
    _guard(address)
    return _real_connect(self, address)  # type: ignore[arg-type]


def _connect_ex(self: socket.socket, address: object) -> int:
    _guard(address)
    return _real_connect_ex(self, address)  # type: ignore[arg-type]


def _getaddrinfo(host: object, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
    if isinstance(host, bytes):
        host = host.decode()
    if host is not None and not _is_loopback(host):
        raise socket.gaierror(f"tests must not resolve {host!r}")
    return _real_getaddrinfo(host, *args, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse every connection and name lookup that is not loopback."""
    monkeypatch.setattr(socket.socket, "connect", _connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", _getaddrinfo)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The global memory scope points at an empty temp dir, never the developer's ~/.memwire."""
    monkeypatch.setenv("MEMWIRE_HOME", str(tmp_path_factory.mktemp("memwire-home")))


_LOGGERS = ("", "memwire", "httpx", "httpcore", "uvicorn", "uvicorn.error")


@pytest.fixture(autouse=True)
def _logging_as_it_was():  # type: ignore[no-untyped-def]
    """A command run in-process (``memwire proxy``, ``memwire demo``) configures logging for the
    process, as it should for a user; the next test starts from the logging it found."""
    saved = [(lg, lg.level, list(lg.handlers), lg.propagate) for lg in map(logging.getLogger, _LOGGERS)]
    yield
    for lg, level, handlers, propagate in saved:
        lg.setLevel(level)
        lg.handlers[:] = handlers
        lg.propagate = propagate


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A URL of a fresh, empty schema in the ``MEMWIRE_TEST_POSTGRES`` database (its search_path),
    dropped afterwards with this process's pool and listener of it. Skips without the variable."""
    yield from fresh_schema()


def fresh_schema() -> Iterator[str]:
    """The body of a fixture: a fresh schema's URL, dropped afterwards (see ``postgres_url``)."""
    if not TEST_POSTGRES:
        pytest.skip("set MEMWIRE_TEST_POSTGRES to a PostgreSQL URL (the tests create and drop schemas in it)")
    # set: PostgreSQL is expected (.ci/run sets it), so a missing driver or server fails, never skips
    psycopg = need_psycopg()
    from memwire.memory.postgres import _pg

    schema = fresh_schema_name()
    try:
        with psycopg.connect(TEST_POSTGRES, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
    except psycopg.OperationalError as exc:
        pytest.fail(f"MEMWIRE_TEST_POSTGRES is set but {_pg.redacted(TEST_POSTGRES)} cannot be reached: {exc}",
                    pytrace=False)
    url = with_search_path(TEST_POSTGRES, schema)
    try:
        yield url
    finally:
        _pg.close(url)
        with psycopg.connect(TEST_POSTGRES, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(params=BACKENDS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreSpec:
    """Opens stores of one backend on one set of memories: ``make_store(**kw)`` is a new store on
    them each call (a markdown directory, or a PostgreSQL namespace). The backend-neutral tests
    take it: one suite for both."""
    if request.param == "markdown":
        return StoreSpec("markdown", str(tmp_path / "mem"))
    return StoreSpec("postgres", request.getfixturevalue("postgres_url"))
