"""The benchmarks' hybrid stores get their embedding model (issue 32 item 2): before, a hybrid
store opened by ``benchmarks/locomo.py`` (and so ``relevance.py``) had no ``embedding_model``,
warned and searched with BM25 alone, and its figures were BM25's under hybrid's name."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("tokenizers")

from tests.memory.test_embed import make_model2vec

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def locomo(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import locomo as module

    monkeypatch.setattr(module, "EMBEDDING_MODEL", None)
    yield module
    sys.modules.pop("locomo", None)


def test_a_hybrid_benchmark_store_has_its_semantic_side(locomo: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="needs an embedding model"):
        locomo.open_store(tmp_path / "none", "hybrid")
    model = make_model2vec(tmp_path / "m2v")
    assert locomo.use_embedding_model(model, tmp_path / "home") == model  # a model2vec directory: as it is
    store = locomo.open_store(tmp_path / "s", "hybrid")
    assert store._semantic is not None and store.retrieval == "hybrid"
    assert locomo.open_store(tmp_path / "b", "bm25")._semantic is None


def test_the_environment_names_the_model(locomo: ModuleType, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    model = make_model2vec(tmp_path / "env")
    monkeypatch.setenv("MEMWIRE_EMBEDDING_MODEL", str(model))
    assert locomo.use_embedding_model(None, tmp_path / "home") == model
    assert locomo.open_store(tmp_path / "s", "hybrid")._semantic is not None
