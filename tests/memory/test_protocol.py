"""Both backends implement the ``Store`` protocol member for member, signature for signature (what a
type checker would check: a runtime ``isinstance`` only looks at names)."""

from __future__ import annotations

import inspect
import typing
from pathlib import Path
from typing import Any

import pytest

from memwire.memory._protocol import Store
from memwire.memory._store import MemoryStore


def _pg_store_class() -> type:
    from memwire.memory.postgres._store import PgStore

    return PgStore


BACKENDS = {"markdown": lambda: MemoryStore, "postgres": _pg_store_class}


def _members() -> tuple[list[str], list[str]]:
    """(the protocol's methods and properties, its data attributes)."""
    data = sorted(typing.get_type_hints(Store))
    methods = sorted(
        name for name, value in vars(Store).items()
        if (callable(value) or isinstance(value, property))
        and (not name.startswith("_") or name in ("__iter__", "__len__", "__contains__"))
        and name not in data
    )
    return methods, data


def _function(value: Any) -> Any:
    return value.fget if isinstance(value, property) else value


def _fits(want: Any, have: Any, impl: type) -> bool:
    """``have`` (the backend's annotation) is at least what the protocol's ``want`` promises."""
    if want is Any or have is Any or want == have:
        return True
    if want is Store:
        return have is impl
    if isinstance(want, type) and isinstance(have, type):
        return issubclass(have, want)
    if typing.get_origin(want) is not None and typing.get_origin(want) == typing.get_origin(have):
        want_args, have_args = typing.get_args(want), typing.get_args(have)
        return len(want_args) == len(have_args) and all(_fits(w, h, impl) for w, h in zip(want_args, have_args))
    return False


def test_the_protocol_lists_what_callers_use() -> None:
    methods, data = _members()
    assert {"search", "add", "add_many", "forget", "restore", "pin", "read_events", "append_event", "lifecycle",
            "namespace_store", "archive", "inbox", "memories", "get"} <= set(methods)
    assert {"remote", "track", "version"} <= set(data)


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_backend_implements_every_member_with_the_same_signature(backend: str) -> None:
    impl = BACKENDS[backend]()
    methods, _ = _members()
    problems = []
    for name in methods:
        want_raw = inspect.getattr_static(Store, name)
        have_raw = inspect.getattr_static(impl, name, None)
        if have_raw is None:
            problems.append(f"{name}: missing")
            continue
        if isinstance(want_raw, property) != isinstance(have_raw, property):
            problems.append(f"{name}: a property in one, not in the other")
            continue
        want_fn, have_fn = _function(want_raw), _function(have_raw)
        want_sig, have_sig = inspect.signature(want_fn), inspect.signature(have_fn)
        shape = [(p.name, p.kind, p.default) for p in want_sig.parameters.values()]
        if shape != [(p.name, p.kind, p.default) for p in have_sig.parameters.values()]:
            problems.append(f"{name}: {have_sig} is not {want_sig}")
            continue
        want_hints, have_hints = typing.get_type_hints(want_fn), typing.get_type_hints(have_fn)
        for param in want_hints:
            if not _fits(want_hints[param], have_hints.get(param, Any), impl):
                problems.append(f"{name}: {param} is {have_hints.get(param)}, the protocol says {want_hints[param]}")
    assert not problems, f"{impl.__name__} does not match Store:\n" + "\n".join(problems)


def test_a_markdown_store_is_a_store(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    assert isinstance(store, Store)
    _, data = _members()
    for name in data:
        assert hasattr(store, name), name
    assert isinstance(store.archive, Store) and isinstance(store.namespace_store("other"), Store)


def test_a_postgres_store_is_a_store(postgres_url: str) -> None:
    store = _pg_store_class()(postgres_url)
    assert isinstance(store, Store)
    _, data = _members()
    for name in data:
        assert hasattr(store, name), name
    assert isinstance(store.inbox, Store) and isinstance(store.namespace_store("other"), Store)

