"""Static embeddings distilled once from a sentence-transformers model (the model2vec technique).

Every token of the model's vocabulary goes through the transformer on its own (framed by the
model's special tokens, reversed as model2vec found works best), its output positions averaged;
the table is PCA-reduced and each row weighted by SIF with a Zipf estimate of the token's
frequency (WordPiece vocabularies list frequent tokens first), so frequent tokens weigh little in
a mean. Then a text's embedding is the mean of its tokens' rows: microseconds, no transformer.

The result is written as a model2vec model directory (``model.safetensors`` with ``embeddings``,
``tokenizer.json``, ``config.json``) under the cache directory, keyed by the source model's content
hash and this recipe's version, so a changed model or recipe rebuilds and an unchanged one never
does. This runs at start-up or by a command (it takes minutes on two cores), never on a call's path.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ._embed_model import Bert, EmbeddingModelError, content_hash, read_safetensors, write_safetensors

__all__ = ["RECIPE", "Progress", "distil", "distilled_dir"]

# bump when the recipe below changes: caches made by another recipe are then rebuilt
RECIPE = "memwire-static-1:pca256:sif1e-4"
_PCA_DIMS = 256
_SIF = 1e-4
_BATCH = 512
_UNUSED = re.compile(r"\[unused\d+\]")

Progress = Callable[[int, int], None]  # (tokens done, tokens in all)


def distilled_dir(model_dir: Path, cache: Path) -> Path:
    """Where the static embeddings of ``model_dir`` live (or will) under ``cache``."""
    return cache / content_hash(model_dir, RECIPE)[:32]


def distil(model_dir: Path, cache: Path, progress: Progress | None = None) -> Path:
    """The model2vec directory of ``model_dir``'s static embeddings under ``cache``, distilled now
    unless it is already there. ``EmbeddingModelError`` when the model cannot be run."""
    out = distilled_dir(model_dir, cache)
    if (out / "config.json").is_file():
        return out
    config = _json(model_dir / "config.json")
    weights = model_dir / "model.safetensors"
    if not weights.is_file():
        raise EmbeddingModelError(f"{model_dir}: no model.safetensors (memwire reads safetensors weights only)")
    bert = Bert(config, read_safetensors(weights), str(model_dir))
    tokenizer_json = _json(model_dir / "tokenizer.json")
    vocab = _vocab(tokenizer_json, str(model_dir))
    keep = [i for i, tok in sorted((i, t) for t, i in vocab.items())
            if i < bert.vocab_size and not _UNUSED.fullmatch(tok)]
    cls, sep = _special(tokenizer_json, vocab, str(model_dir))
    table = _token_outputs(bert, np.asarray(keep, np.int64), cls, sep, progress)
    vectors = np.zeros((bert.vocab_size, min(_PCA_DIMS, table.shape[1])), np.float32)
    vectors[keep] = _post_process(table)
    tmp = cache / f".{out.name}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write_safetensors(tmp / "model.safetensors", {"embeddings": vectors})
    shutil.copyfile(model_dir / "tokenizer.json", tmp / "tokenizer.json")
    meta = {"model_type": "model2vec", "architectures": ["StaticModel"], "normalize": True,
            "hidden_dim": int(vectors.shape[1]), "memwire_recipe": RECIPE, "memwire_source": str(model_dir),
            "memwire_distilled_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (tmp / "config.json").write_text(json.dumps(meta, indent=1))
    try:
        os.replace(tmp, out)
    except OSError:  # another process finished first: its result is the same
        shutil.rmtree(tmp, ignore_errors=True)
        if not (out / "config.json").is_file():
            raise
    return out


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EmbeddingModelError(f"{path}: missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EmbeddingModelError(f"{path}: unreadable ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise EmbeddingModelError(f"{path}: not a JSON object")
    return data


def _vocab(tokenizer_json: dict[str, Any], where: str) -> dict[str, int]:
    vocab = tokenizer_json.get("model", {}).get("vocab")
    if not isinstance(vocab, dict) or not vocab:
        raise EmbeddingModelError(f"{where}/tokenizer.json: no vocabulary of token -> id (a WordPiece tokenizer)")
    return {str(k): int(v) for k, v in vocab.items()}


def _special(tokenizer_json: dict[str, Any], vocab: dict[str, int], where: str) -> tuple[int, int]:
    """The ids that open and close a sequence for this model (BERT: [CLS], [SEP])."""
    post = tokenizer_json.get("post_processor") or {}
    specials = post.get("special_tokens") or {}
    single = [s["SpecialToken"]["id"] for s in post.get("single", []) if "SpecialToken" in s]
    if len(single) == 2 and all(s in specials for s in single):
        return int(specials[single[0]]["ids"][0]), int(specials[single[1]]["ids"][0])
    if "[CLS]" in vocab and "[SEP]" in vocab:
        return vocab["[CLS]"], vocab["[SEP]"]
    raise EmbeddingModelError(f"{where}/tokenizer.json: cannot tell the tokens that open and close a sequence")


def _token_outputs(bert: Bert, ids: npt.NDArray[np.int64], cls: int, sep: int,
                   progress: Progress | None) -> npt.NDArray[np.float32]:
    """The mean output of [SEP] token [CLS] for each token id (model2vec's order)."""
    out = np.empty((len(ids), bert.hidden), np.float32)
    for start in range(0, len(ids), _BATCH):
        chunk = ids[start:start + _BATCH]
        seq = np.stack([np.full(len(chunk), sep), chunk, np.full(len(chunk), cls)], axis=1)
        out[start:start + len(chunk)] = bert.forward(seq).mean(1)
        if progress is not None:
            progress(start + len(chunk), len(ids))
    return out


def _post_process(table: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """PCA to at most 256 dimensions (centred; the covariance's eigenvectors, a d×d problem, not
    an SVD of the whole table), then SIF weights from Zipf ranks."""
    dims = min(_PCA_DIMS, table.shape[1])
    centred = (table - table.mean(0)).astype(np.float64)
    _, vecs = np.linalg.eigh(centred.T @ centred)  # ascending eigenvalues
    reduced = centred @ vecs[:, ::-1][:, :dims]
    rank = np.arange(2, len(table) + 2, dtype=np.float64)
    proba = (1.0 / rank) / np.sum(1.0 / rank)
    return np.asarray(reduced * (_SIF / (_SIF + proba))[:, None], np.float32)
