"""Token counting with tiktoken, offline.

tiktoken downloads its encodings on first use. litellm ships the cl100k and o200k files under the
names tiktoken's cache expects, so we point ``TIKTOKEN_CACHE_DIR`` there — found with importlib,
without importing litellm (its import takes seconds). When no encoding can be loaded we fall back
to an estimate of one token per 4 characters (rounded up), and warn once.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import os
import threading
from functools import lru_cache
from typing import Protocol

__all__ = ["Encoder", "encoding_name_for", "get_encoder", "count_tokens"]

log = logging.getLogger("memwire")

_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o", "gpt-oss")
_lock = threading.Lock()
_warned = False


class Encoder(Protocol):
    name: str

    def encode(self, text: str) -> list[int]: ...


class EstimateEncoder:
    """Used when no tiktoken encoding is available: about 4 characters per token."""

    name = "estimate"

    def encode(self, text: str) -> list[int]:
        return [0] * math.ceil(len(text) / 4)


def encoding_name_for(model: str | None) -> str:
    """o200k_base for gpt-4o, gpt-4.1, o-series and gpt-5; cl100k_base for everything else."""
    if model:
        base = model.rsplit("/", 1)[-1].lower()  # "openai/gpt-4o", "azure/gpt-4.1"
        if base.startswith(_O200K_PREFIXES):
            return "o200k_base"
    return "cl100k_base"


def _bundled_tokenizer_dir() -> str | None:
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = os.path.join(root, "litellm_core_utils", "tokenizers")
        if os.path.isdir(path):
            return path
    return None


def _point_tiktoken_at_bundled_files() -> None:
    if os.environ.get("TIKTOKEN_CACHE_DIR"):
        return
    path = _bundled_tokenizer_dir()
    if path:
        os.environ["TIKTOKEN_CACHE_DIR"] = path


@lru_cache(maxsize=8)
def _load(name: str) -> Encoder:
    global _warned
    with _lock:
        _point_tiktoken_at_bundled_files()
        try:
            import tiktoken

            # Refuse to download: if the file is not in the cache dir, tiktoken would fetch it.
            cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR", "")
            if not cache_dir or not os.path.isdir(cache_dir):
                raise LookupError("no local tiktoken cache")
            enc = tiktoken.get_encoding(name)
            enc.encode("warm up")
            return enc  # type: ignore[return-value]
        except Exception as exc:  # noqa: BLE001 - any failure means: estimate
            if not _warned:
                _warned = True
                log.warning("memwire: tiktoken encoding %s unavailable (%s); estimating 4 chars/token", name, exc)
            return EstimateEncoder()


def get_encoder(model: str | None = None) -> Encoder:
    """The encoder for a model's encoding; never downloads, never raises."""
    return _load(encoding_name_for(model))


def count_tokens(text: str, model: str | None = None) -> int:
    return len(get_encoder(model).encode(text))
