"""Token counting with tiktoken, offline: a tokenizer download is never attempted.

tiktoken downloads an encoding's file on first use and keeps it in its cache. memwire never lets it
download (a call must not wait on the network, and many machines reach only a package index);
it looks for the file, checked against the hash tiktoken expects, in this order:

1. tiktoken's own cache: ``TIKTOKEN_CACHE_DIR``, else ``DATA_GYM_CACHE_DIR``, else
   ``<temp dir>/data-gym-cache``. To use files you downloaded yourself, put them in a directory
   under tiktoken's cache names (the SHA-1 of their URL: ``9b5ad71b2ce5302211f9c61530b329a4922fc6a4``
   for cl100k_base, ``fb374d419588a4632f3f557e76b4b70aebbca790`` for o200k_base) and set
   ``TIKTOKEN_CACHE_DIR`` to it;
2. the copies litellm ships (``litellm/litellm_core_utils/tokenizers``), when litellm is installed
   (``pip install 'memwire[litellm]'``), found with importlib without importing litellm (its import
   takes seconds). ``TIKTOKEN_CACHE_DIR`` points there only while tiktoken loads the file;
3. else an estimate of one token per 4 characters (rounded up), with one warning per process.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import threading
import zlib
from collections.abc import Iterator
from functools import lru_cache
from typing import Protocol

__all__ = ["Encoder", "count_tokens", "encoding_name_for", "get_encoder"]

log = logging.getLogger("memwire")

_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o", "gpt-oss")
# The file of each encoding memwire uses, as tiktoken knows it (tiktoken_ext/openai_public.py): its
# cache name (SHA-1 of the URL it is downloaded from) and the SHA-256 tiktoken checks. A file that
# fails the check is skipped: tiktoken would delete it and download it again.
_FILES = {
    "cl100k_base": ("9b5ad71b2ce5302211f9c61530b329a4922fc6a4",
                    "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"),
    "o200k_base": ("fb374d419588a4632f3f557e76b4b70aebbca790",
                   "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"),
}
_lock = threading.Lock()
_warned = False


class Encoder(Protocol):
    name: str

    def encode(self, text: str) -> list[int]: ...


class EstimateEncoder:
    """Used when no tiktoken encoding is available: about 4 characters per token.

    Each 4-character piece gets an id of its own (its CRC-32), so two texts share a prefix of
    "tokens" as far as they share a prefix of text: the prompt-cache simulator compares ids."""

    name = "estimate"

    def encode(self, text: str) -> list[int]:
        data = text.encode("utf-32-le", "surrogatepass")  # 4 bytes a character: pieces are slices
        return [zlib.crc32(data[i : i + 16]) for i in range(0, len(data), 16)]


def encoding_name_for(model: str | None) -> str:
    """o200k_base for gpt-4o, gpt-4.1, o-series and gpt-5; cl100k_base for everything else."""
    if model:
        base = model.rsplit("/", 1)[-1].lower()  # "openai/gpt-4o", "azure/gpt-4.1"
        if base.startswith(_O200K_PREFIXES):
            return "o200k_base"
    return "cl100k_base"


def tiktoken_cache_dir() -> str | None:
    """The directory tiktoken reads its cache from; None when its caching is off (set to "")."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return os.environ[var] or None
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def litellm_tokenizer_dir() -> str | None:
    """litellm's bundled tiktoken files, located without importing litellm."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(root, "litellm_core_utils", "tokenizers")
        if os.path.isdir(path):
            return path
    return None


def _has_file(directory: str, name: str) -> bool:
    cache_name, sha256 = _FILES[name]
    try:
        with open(os.path.join(directory, cache_name), "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest() == sha256
    except OSError:
        return False


def find_encoding_dir(name: str) -> str | None:
    """The first directory holding a good copy of ``name``'s file (see the module docstring)."""
    if name not in _FILES:
        return None
    for directory in (tiktoken_cache_dir(), litellm_tokenizer_dir()):
        if directory and _has_file(directory, name):
            return directory
    return None


@contextlib.contextmanager
def _tiktoken_cache_at(directory: str) -> Iterator[None]:
    # tiktoken reads the variable when it loads a file; it is put back at once, so the
    # application's own tiktoken keeps its cache (litellm, by contrast, sets it for good)
    before = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = directory
    try:
        yield
    finally:
        if before is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = before


@lru_cache(maxsize=8)
def _load(name: str) -> Encoder:
    global _warned
    with _lock:
        directory = find_encoding_dir(name)
        try:
            if directory is None:
                raise LookupError("no local copy of its file in tiktoken's cache, and litellm is not installed")
            import tiktoken

            with _tiktoken_cache_at(directory):
                enc = tiktoken.get_encoding(name)
            enc.encode("warm up")
            return enc
        except Exception as exc:
            if not _warned:
                _warned = True
                log.warning("memwire: tiktoken encoding %s unavailable (%s); estimating 4 chars/token. Set "
                            "TIKTOKEN_CACHE_DIR to a directory with tiktoken's files, or pip install "
                            "'memwire[litellm]'", name, exc)
            return EstimateEncoder()


def get_encoder(model: str | None = None) -> Encoder:
    """The encoder for a model's encoding; never downloads, never raises."""
    return _load(encoding_name_for(model))


def count_tokens(text: str, model: str | None = None) -> int:
    return len(get_encoder(model).encode(text))
