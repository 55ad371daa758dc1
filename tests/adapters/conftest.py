"""Fixtures shared by the adapter tests: a small store and a warmed-up middleware over it; an empty
memory directory and Anthropic's memory tool over it (tests of ``anthropic_memory``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memwire import MemoryStore, Middleware


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    store = MemoryStore(tmp_path / "mem")
    store.add("User prefers tabs over spaces, width 4, in every Python file", tags=["preference"])
    store.add("Deploys go out on Tuesdays only, via the GitHub Actions deploy workflow")
    store.add("The staging database is Postgres 15 on port 5433")
    return store


@pytest.fixture
def mw(store: MemoryStore) -> Middleware:
    mw = Middleware(store=store, mode="contextPerTurn")
    mw.warm_up()  # store and encodings loaded here: no test passes or fails on the retrieval budget
    return mw


@pytest.fixture
def mem(tmp_path: Path) -> Path:
    return tmp_path / "mem"


@pytest.fixture
def tool(mem: Path) -> Any:
    from memwire.adapters.anthropic_memory import MemoryTool  # imports anthropic: only for its tests

    return MemoryTool(MemoryStore(mem))
