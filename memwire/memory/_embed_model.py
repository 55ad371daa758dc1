"""The files of an embedding model, read with numpy alone: safetensors tensors, a model directory's
content hash, and a BERT encoder's forward pass.

The forward pass runs only while static embeddings are distilled (``_embed_distil``), once per
model, never on a request's path; it is here so that distilling needs no torch. It covers the BERT
family that sentence-transformers ships (``all-MiniLM-L6-v2``, ``bge-small``, ``e5-small``): word,
position and token-type embeddings, post-LayerNorm layers, erf GELU. Anything else is refused with
an ``EmbeddingModelError`` naming what was found.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._errors import MemwireError

__all__ = [
    "Bert",
    "EmbeddingModelError",
    "content_hash",
    "read_safetensors",
    "write_safetensors",
]

Array = npt.NDArray[np.float32]

# safetensors dtype names -> numpy; BF16 is widened by hand (numpy has no bfloat16)
_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
           "U8": "u1", "BOOL": "?"}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}


class EmbeddingModelError(MemwireError, ValueError):
    """An embedding model directory cannot be used (missing, unreadable, of a kind memwire does not
    run); the message names the directory or file and the problem, never any memory text."""


def read_safetensors(path: Path) -> dict[str, npt.NDArray[Any]]:
    """Every tensor of a ``.safetensors`` file, as numpy arrays (read-only views of one buffer).
    The format: an 8-byte little-endian header length, a JSON header of {name: {dtype, shape,
    data_offsets}}, then the raw bytes."""
    data = path.read_bytes()
    if len(data) < 8:
        raise EmbeddingModelError(f"{path}: not a safetensors file (too short)")
    (size,) = struct.unpack("<Q", data[:8])
    if size > len(data) - 8:
        raise EmbeddingModelError(f"{path}: not a safetensors file (header length {size} past the end)")
    try:
        header = json.loads(data[8:8 + size])
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise EmbeddingModelError(f"{path}: not a safetensors file (its header is not JSON)") from None
    if not isinstance(header, dict):
        raise EmbeddingModelError(f"{path}: not a safetensors file (its header is not an object)")
    base, out = 8 + size, {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (start, end) = spec["dtype"], tuple(spec["shape"]), spec["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise EmbeddingModelError(f"{path}: tensor {name!r} has no dtype, shape or offsets") from None
        raw = data[base + start:base + end]
        if dtype == "BF16":  # the high half of a float32
            arr: npt.NDArray[Any] = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        elif dtype in _DTYPES:
            arr = np.frombuffer(raw, _DTYPES[dtype])
        else:
            raise EmbeddingModelError(f"{path}: tensor {name!r} has dtype {dtype}, which memwire does not read")
        if arr.size != int(np.prod(shape, dtype=np.int64)):
            raise EmbeddingModelError(f"{path}: tensor {name!r} holds {arr.size} values, not shape {list(shape)}")
        out[name] = arr.reshape(shape)
    return out


def write_safetensors(path: Path, tensors: Mapping[str, npt.NDArray[Any]]) -> None:
    """Write ``tensors`` as a ``.safetensors`` file (readable by the safetensors package too),
    atomically: a temp file beside it, renamed."""
    header: dict[str, Any] = {}
    blobs, offset = [], 0
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        little = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        blob = little.tobytes()
        header[name] = {"dtype": _NAMES[np.dtype(little.dtype.str.replace(">", "<"))],
                        "shape": list(arr.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # the format aligns the data to 8 bytes
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        for blob in blobs:
            f.write(blob)
    os.replace(tmp, path)


# what identifies a model's behaviour: its weights, its tokenizer, its configs (names relative to
# the model directory; those that are absent count as absent)
_HASHED = ("config.json", "tokenizer.json", "model.safetensors", "modules.json", "1_Pooling/config.json",
           "sentence_bert_config.json", "config_sentence_transformers.json")


def content_hash(model_dir: Path, extra: str = "") -> str:
    """SHA-256 over the files that define the model (name, size, bytes) and ``extra`` (the
    distillation recipe): changing any of them changes the key its static embeddings cache under."""
    h = hashlib.sha256(extra.encode())
    for name in _HASHED:
        path = model_dir / name
        if not path.is_file():
            continue
        h.update(f"\0{name}\0{path.stat().st_size}\0".encode())
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
    return h.hexdigest()


def _erf(x: Array) -> Array:
    """erf to ~1.5e-7 (Abramowitz and Stegun 7.1.26): numpy has none, and HF's "gelu" is the erf one."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.asarray(sign * (1.0 - poly * np.exp(-a * a)), np.float32)


def _layer_norm(x: Array, w: Array, b: Array, eps: float) -> Array:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return np.asarray((x - mu) / np.sqrt(var + eps) * w + b, np.float32)


class Bert:
    """A BERT encoder's weights and its forward pass (``last_hidden_state``), in float32 numpy."""

    def __init__(self, config: Mapping[str, Any], tensors: Mapping[str, npt.NDArray[Any]], where: str) -> None:
        kind = config.get("model_type")
        if kind != "bert":
            raise EmbeddingModelError(f"{where}: model_type {kind!r}; memwire distils BERT encoders only "
                                      "(give a model2vec directory for other models)")
        act = config.get("hidden_act", "gelu")
        if act != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
            raise EmbeddingModelError(f"{where}: hidden_act {act!r} / position_embedding_type "
                                      f"{config.get('position_embedding_type')!r} is not the BERT memwire runs")
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in tensors else ""
        self._t = {k[len(prefix):]: np.asarray(v, np.float32) for k, v in tensors.items() if k.startswith(prefix)}
        try:
            self.word = self._t["embeddings.word_embeddings.weight"]
            for i in range(self.layers):
                self._layer(i)
            self._t["embeddings.LayerNorm.weight"]
            self._t["embeddings.position_embeddings.weight"]
        except KeyError as exc:
            raise EmbeddingModelError(f"{where}: no tensor {exc.args[0]!r}; not a BERT checkpoint") from None
        self.vocab_size, self.hidden = self.word.shape

    def _layer(self, i: int) -> dict[str, Array]:
        p = f"encoder.layer.{i}."
        names = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
                 "o": "attention.output.dense", "ln1": "attention.output.LayerNorm", "i": "intermediate.dense",
                 "out": "output.dense", "ln2": "output.LayerNorm"}
        out = {}
        for short, name in names.items():
            w, b = ("weight", "bias")
            out[short + "w"] = self._t[f"{p}{name}.{w}"]
            out[short + "b"] = self._t[f"{p}{name}.{b}"]
        return out

    def forward(self, ids: npt.NDArray[np.int64]) -> Array:
        """``last_hidden_state`` for a batch of equal-length id sequences (no padding: every
        position attends to every other), shape (batch, length, hidden)."""
        t = self._t
        batch, length = ids.shape
        x = self.word[ids] + t["embeddings.position_embeddings.weight"][:length] \
            + t["embeddings.token_type_embeddings.weight"][0]
        x = _layer_norm(x, t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"], self.eps)
        d = self.hidden // self.heads
        for i in range(self.layers):
            w = self._layer(i)
            flat = x.reshape(-1, self.hidden)

            def heads(m: Array) -> Array:
                split: Array = m.reshape(batch, length, self.heads, d).transpose(0, 2, 1, 3)
                return split

            q = heads(flat @ w["qw"].T + w["qb"])
            k = heads(flat @ w["kw"].T + w["kb"])
            v = heads(flat @ w["vw"].T + w["vb"])
            scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(d))
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(-1, self.hidden)
            x = _layer_norm(flat + ctx @ w["ow"].T + w["ob"], w["ln1w"], w["ln1b"], self.eps)
            h = x @ w["iw"].T + w["ib"]
            h = h * 0.5 * (1.0 + _erf(h / np.float32(np.sqrt(2.0))))
            x = _layer_norm(x + h @ w["outw"].T + w["outb"], w["ln2w"], w["ln2b"], self.eps)
            x = x.reshape(batch, length, self.hidden)
        out: Array = np.asarray(x, np.float32)
        return out
