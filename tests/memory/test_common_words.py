"""The frequent English words of the relevance decision (``memory/common_words.txt``, made by
``tools/common_words.py``): generic words weigh less than a question's rare words and names."""

from __future__ import annotations

import logging
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest

from memwire.memory import _index_relevance, _text
from memwire.memory._index import BM25Index
from memwire.memory._text import COMMON_WORDS, STOPWORDS, analyze, common_terms, generic_terms

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
LIST = ROOT / "memwire" / "memory" / _text.GENERIC_FILE

# a store of more than SMALL_STORE memories about a payments service (idf-weighted rule 2)
PAYMENTS = [
    "Lesson: refunds over 10,000 EUR need a second approver; the check lives in payments/approvals.py",
    "Never push directly to main; every change goes through a pull request with one approving review",
    "Feature flags live in LaunchDarkly; the refunds_v2 flag gates the new refund flow",
    "Partial refunds are allowed; the sum of refunds may never exceed the captured amount",
    "Refund status moves pending -> approved -> settled, or pending -> rejected; nothing else",
    "Lesson: the refund webhook is retried for 72 hours, so refund handlers must be idempotent",
    "The refunds table has columns id, payment_id, amount_cents, currency, status, created_at",
] + [f"Deploy note {i}: the pods of region eu-{i} roll out at night after the smoke checks" for i in range(50)]


def test_the_list_is_frequent_words_not_names() -> None:
    words = LIST.read_text("utf-8").split()
    assert len(words) == len(set(words)) >= 2000
    assert all(w.isascii() and w.isalpha() and w.islower() and len(w) >= 3 for w in words)
    assert not set(words) & STOPWORDS
    terms = generic_terms()
    for word in ("implement", "step", "column", "research", "approval"):
        assert analyze(word)[0] in terms
    for name in ("python", "google", "caroline", "march", "refund", "alembic", "haiku"):  # names, rare words
        assert analyze(name)[0] not in terms
    assert not terms & common_terms()  # COMMON_WORDS keep their own, stronger rule
    assert "large" in COMMON_WORDS


def test_a_wheel_carries_the_list() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    patterns = data["tool"]["setuptools"]["package-data"]["memwire"]
    assert any(fnmatch(f"memory/{_text.GENERIC_FILE}", p) for p in patterns)


def test_generic_words_weigh_less_than_what_a_question_is_about(monkeypatch: pytest.MonkeyPatch) -> None:
    idx = BM25Index()
    idx.add_many((t, t, None) for t in PAYMENTS)
    q = "Now implement the approval step for large refunds in the refund flow"
    assert idx.abstains(q) is None  # about approvals and refunds; "implement" and "step" say little
    assert PAYMENTS[0] in [d for d, _ in idx.search(q, k=6)]
    # an everyday prompt in generic words and a rare one still knows nothing of the store
    assert idx.abstains("Explain how photosynthesis works step by step") == "unknown topic"
    assert idx.abstains("Which columns does the refunds table have?") is None  # known generic words count too
    monkeypatch.setattr(_index_relevance, "GENERIC_WEIGHT", 1.0)  # every word as specific as any
    assert idx.abstains(q) == "unknown topic"


def test_without_the_list_a_search_still_works(monkeypatch: pytest.MonkeyPatch,
                                                caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(_text, "GENERIC_FILE", "no_such_list.txt")
    _text.generic_terms.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="memwire"):
            assert generic_terms() == frozenset()
        assert "no_such_list.txt" in caplog.text
        idx = BM25Index()
        idx.add_many((t, t, None) for t in PAYMENTS)
        assert idx.search("When is a second approver needed for refunds?", k=1)
    finally:
        _text.generic_terms.cache_clear()
