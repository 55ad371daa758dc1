"""The compact id maps (``_idmap.IdMap``) and the index's per-slot arrays sized to fit."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from memwire.memory import _idmap
from memwire.memory._idmap import IdMap
from memwire.memory._index import BM25Index


class Clash(str):
    """An id whose hash is one of a few values: long runs of collisions, wrapping past the end."""

    def __hash__(self) -> int:
        return -(len(self) % 3) - 2  # negative, like half of all str hashes


@pytest.fixture(params=["numpy", "one by one"])
def build(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables built with numpy (as large ones are) or one id at a time (small ones)."""
    monkeypatch.setattr(_idmap, "_NUMPY_FROM", 0 if request.param == "numpy" else 1 << 30)


def check(m: IdMap, want: dict[str, int], probes: list[str]) -> None:
    assert len(m) == len(want)
    assert sorted(m) == sorted(want) and dict(m.items()) == want
    for key in probes:
        assert m.get(key) == want.get(key)
        assert (key in m) == (key in want)


@pytest.mark.usefixtures("build")
@pytest.mark.parametrize("kind", [str, Clash])
def test_an_id_map_is_a_dict_through_puts_pops_reused_numbers_and_rebuilds(kind: type) -> None:
    rng = random.Random(3)
    keys: list[str | None] = []
    m, want, free = IdMap(keys), {}, []
    names = [kind(f"id{i}") for i in range(120)]
    for step in range(3000):
        r = rng.random()
        if r < 0.55 or not want:
            key = rng.choice(names)
            if key in want:
                continue
            n = free.pop() if free and rng.random() < 0.5 else len(keys)
            if n == len(keys):
                keys.append(None)
            keys[n] = key
            m.put(key, n)
            want[key] = n
        elif r < 0.95:
            key = rng.choice(sorted(want))
            n = want.pop(key)
            assert m.pop(key) == n
            keys[n] = None
            free.append(n)
            assert m.pop(key, "gone") == "gone"
        else:
            m = IdMap.of(keys)  # what a restore builds
        if step % 50 == 0:
            check(m, want, names)


@pytest.mark.usefixtures("build")
def test_an_id_map_built_at_once_finds_every_id_and_no_other() -> None:
    keys: list[str | None] = [f"{i:020x}" for i in range(5000)] + [Clash("x" * i) for i in range(1, 40)]
    keys[17] = keys[4000] = None  # free numbers
    m = IdMap.of(keys)
    check(m, {k: i for i, k in enumerate(keys) if k is not None}, ["nope", Clash("y"), *filter(None, keys[:50])])
    assert m[Clash("xxx")] == 5002
    with pytest.raises(KeyError):
        m["nope"]


@pytest.mark.usefixtures("build")
def test_numbers_looks_up_many_ids_at_once() -> None:
    keys: list[str | None] = [Clash("a" * i) for i in range(1, 30)] + [f"{i:x}" for i in range(300)]
    m = IdMap.of(keys)
    m.pop(keys[5])  # a hole in a run of collisions
    keys[5] = None
    asked = [keys[7], None, "nope", Clash("zz" * 40), *keys[::-1], keys[5]]
    assert m.numbers(asked).tolist() == [m.get(k, -1) if k is not None else -1 for k in asked]
    assert m.numbers(asked)[0] == 7 and m.numbers([]).tolist() == []


@pytest.mark.usefixtures("build")
def test_an_id_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        IdMap.of(["a", "b", "c", "b"])
    with pytest.raises(ValueError, match="twice"):
        IdMap.of([Clash("ab"), Clash("cd"), Clash("ab")])


class _Dirty:
    """numpy, with ``empty`` returning garbage (as reused memory may hold)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)

    @staticmethod
    def empty(shape: Any, dtype: Any = float) -> Any:
        return np.full(shape, 7, dtype=dtype)


def test_a_restored_index_grows_on_add_and_answers_as_one_built_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The restored per-slot arrays are exactly as long as the slots; adds grow them (what is
    not copied is left as it was: a new slot's links must be set) and removes free slots."""
    monkeypatch.setattr("memwire.memory._index_postings._np", _Dirty())
    rng = random.Random(8)
    words = [f"w{i}" for i in range(40)]
    text = lambda: " ".join(rng.choices(words, k=rng.randint(2, 9)))  # noqa: E731
    docs = {f"d{i:03d}": (text(), f"day {i // 5}") for i in range(70)}
    idx = BM25Index()
    idx.add_many((d, t, dt) for d, (t, dt) in docs.items())
    idx.remove("d003")
    del docs["d003"]
    restored = BM25Index()
    restored.restore(idx.export())
    assert len(restored._data.lens) == len(restored._data.ids) == 70
    for i in range(70, 200):  # past the restored size, undated ones among them
        docs[f"d{i:03d}"] = (text(), f"day {i // 5}" if i % 3 else None)
        restored.add(f"d{i:03d}", *docs[f"d{i:03d}"])
    for d in rng.sample(sorted(docs), 40):
        restored.remove(d)
        del docs[d]
    fresh = BM25Index()
    fresh.add_many((d, t, dt) for d, (t, dt) in sorted(docs.items()))
    assert len(restored) == len(fresh) == len(docs)
    for d in docs:
        assert restored.neighbors(d) == fresh.neighbors(d)
    for _ in range(20):
        q = text()
        assert restored.search(q, k=10, min_score=0) == fresh.search(q, k=10, min_score=0)
