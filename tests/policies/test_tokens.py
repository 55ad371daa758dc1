"""Token counting offline (memwire.policies._tokens): tiktoken's cache, then litellm's bundled files,
else the estimate with one warning — and never a download."""

from __future__ import annotations

import logging
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import tiktoken
import tiktoken.load
import tiktoken.registry

from memwire.policies import _tokens

CL100K = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"  # tiktoken's cache name of cl100k_base


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """No encoding loaded yet, no warning given, no download possible, and an empty tiktoken cache."""

    def no_download(blobpath: str) -> bytes:
        raise AssertionError(f"a download was attempted: {blobpath}")

    monkeypatch.setattr(tiktoken.load, "read_file", no_download)
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    monkeypatch.setattr(_tokens, "_warned", False)
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    _tokens._load.cache_clear()
    yield cache
    _tokens._load.cache_clear()  # the next tests load the real encodings again


def litellm_files() -> str:
    path = _tokens.litellm_tokenizer_dir()
    if path is None:
        pytest.skip("litellm is not installed: no bundled tiktoken files to copy")
    return path


def test_a_file_in_tiktokens_cache_is_used(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(os.path.join(litellm_files(), CL100K), fresh / CL100K)
    monkeypatch.setattr(_tokens, "litellm_tokenizer_dir", lambda: None)
    enc = _tokens.get_encoder("gpt-4")
    assert enc.name == "cl100k_base" and len(enc.encode("hello world")) == 2
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(fresh)


def test_litellms_bundled_files_are_used_without_importing_litellm(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    litellm_files()
    monkeypatch.delitem(sys.modules, "litellm", raising=False)
    enc = _tokens.get_encoder("gpt-4o")
    assert enc.name == "o200k_base"
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(fresh)  # pointed at litellm's files only while loading
    assert "litellm" not in sys.modules


def test_a_corrupt_cached_file_is_skipped_not_deleted(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (fresh / CL100K).write_bytes(b"not the encoding")
    monkeypatch.setattr(_tokens, "litellm_tokenizer_dir", lambda: None)
    assert _tokens.get_encoder("gpt-4").name == "estimate"
    assert (fresh / CL100K).read_bytes() == b"not the encoding"  # tiktoken would delete it and download


def test_nothing_available_estimates_with_exactly_one_warning(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_tokens, "litellm_tokenizer_dir", lambda: None)
    with caplog.at_level(logging.WARNING, logger="memwire"):
        assert _tokens.count_tokens("x" * 10, "gpt-4") == 3  # ceil(10 / 4)
        assert _tokens.get_encoder("gpt-4o").name == "estimate"
        assert _tokens.count_tokens("abcd", "claude-sonnet-4") == 1
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "TIKTOKEN_CACHE_DIR" in warnings[0].getMessage()


def test_tiktoken_caching_turned_off_is_not_a_cache(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    assert _tokens.tiktoken_cache_dir() is None
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR")
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", str(fresh))
    assert _tokens.tiktoken_cache_dir() == str(fresh)


def test_the_estimate_counts_4_characters_a_token_with_ids_that_follow_the_text() -> None:
    enc = _tokens.EstimateEncoder()
    assert [len(enc.encode("x" * n)) for n in (0, 1, 4, 5, 10)] == [0, 1, 1, 2, 3]
    a, b = enc.encode("You are a coding agent. Memory: A"), enc.encode("You are a coding agent. Memory: B")
    assert a[:-1] == b[:-1] and a[-1] != b[-1]  # the cache simulator sees the same prefix, then a change
