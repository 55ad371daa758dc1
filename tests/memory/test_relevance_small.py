"""The relevance decision in a coding agent's small store (issue 32): a prompt naming files,
paths and functions the store never saw still gets the memory its other words are about; a
person or a library the store never heard of still gets nothing (``memory/_index_relevance.py``).
Figures: ``benchmarks/relevance_small.py``."""

from __future__ import annotations

import pytest

from memwire.memory._index import BM25Index
from memwire.memory._index_relevance import Code, code_weights, names
from memwire.memory._text import analyze

from .test_relevance import found, index

# the store aider was run against through ``memwire proxy`` (benchmarks/clients_py.py)
AIDER = [
    "This project indents Python code with tabs, never with spaces",
    "Run the unit tests with `make test`; it wraps pytest -x",
    "Deploys go out on Tuesdays only, through the deploy workflow",
]
# ten memories of another project
SERVICE = [
    "Use ruff for linting and formatting; the config is in pyproject.toml",
    "Secrets come from environment variables, never from files in the repo",
    "Imports are grouped: standard library first, then third party, then local",
    "Log with the standard logging module; no print statements",
    "Money amounts are stored as integer cents, never floats",
    "Background jobs run on Celery with Redis as the broker",
    "Every public function needs a docstring and type hints",
    "Error tracking goes to Sentry",
    "Refunds over 500 dollars need a manager's approval",
    "The staging environment is at staging.example.com",
]


@pytest.fixture(scope="module")
def aider() -> BM25Index:
    return index(AIDER)


@pytest.fixture(scope="module")
def service() -> BM25Index:
    return index(SERVICE)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Fix the failing test in refund_service.py", [Code(("refund", "servic", "py"))]),
        ("Which style should app.py use?", [Code(("app", "py"))]),
        ("How do I run the linter on src/api?", [Code(("src", "api"))]),  # a path is one identifier
        ("Add a docstring to parse_invoice", [Code(("pars", "invoic"))]),  # snake_case
        ("Where should uploadAvatar put the images?", [Code(("uploadavatar",))]),  # lower camelCase
        ("Is checkout.spec.ts flaky?", [Code(("checkout", "spec", "ts"))]),  # a file, by its extension
        # not code: a library's dotted name, a product, a host, a person (names: the store must know them)
        ("What does numpy.argsort return?", [("numpi", "argsort")]),
        ("Where does the LaunchDarkly key live?", [("launchdark",)]),
        ("Which Next.js version?", [("next", "js")]),
        ("Is staging.acme.dev up?", [("stage", "acm", "dev")]),
        ("What did Gina buy?", [("gina",)]),
    ],
)
def test_code_identifiers_are_told_from_names(text: str, expected: list[tuple[str, ...]]) -> None:
    (found,) = names(text)
    assert list(found) == expected
    assert [isinstance(n, Code) for n in found] == [isinstance(n, Code) for n in expected]


@pytest.mark.parametrize(
    ("store", "prompt", "memory"),
    [
        # an unknown file or function in the prompt: the rest of it says what it is about
        ("aider", "Which indentation style should new code in app.py use?", AIDER[0]),
        ("aider", "Which indentation style should new code use?", AIDER[0]),  # indentation is indent
        ("aider", "Fix the failing test in refund_service.py", AIDER[1]),
        ("aider", "How do I run the tests for billing/invoice.py?", AIDER[1]),
        ("aider", "Can I deploy the fix for checkout_view on Friday?", AIDER[2]),  # a weekday says when, not what
        ("service", "How do I run the linter on src/api?", SERVICE[0]),  # a linter lints
        ("service", "Which formatter should format_amount.py go through?", SERVICE[0]),
        ("service", "How should I order the imports in models.py?", SERVICE[2]),  # "import" is not "important"
        ("service", "Replace the print calls in worker.py with proper logging", SERVICE[3]),
        ("service", "Should total_price be a float?", SERVICE[4]),
        ("service", "Add a docstring to parse_invoice", SERVICE[6]),
        ("service", "What's the staging URL?", SERVICE[9]),  # a frequent word the store holds counts whole
    ],
)
def test_a_coding_prompt_naming_unknown_code_finds_its_memory(
    aider: BM25Index, service: BM25Index, store: str, prompt: str, memory: str
) -> None:
    idx = aider if store == "aider" else service
    assert idx.abstains(prompt) is None
    assert memory in found(idx, prompt)


@pytest.mark.parametrize(
    ("store", "prompt", "why"),
    [
        ("aider", "What did Gina buy?", "unknown name"),  # a person the store never heard of
        ("aider", "What does numpy.argsort return?", "unknown name"),  # a library's name, asked about
        ("aider", "What does the -p flag do in mkdir?", "unknown name"),
        ("aider", "Write a haiku about autumn leaves", "unknown topic"),
        ("aider", "Explain what __init__.py is for", "unknown topic"),  # a file and nothing the store knows
        ("service", "Write a thank-you note to my neighbour Marcus", "unknown name"),
        ("service", "Why is it important to sleep well?", "unknown topic"),  # "important" is no import
        ("service", "Recommend a good sci-fi novel", "unknown topic"),
        ("service", "How do I fix a flat bicycle tire?", "unknown topic"),
    ],
)
def test_an_unrelated_prompt_still_gets_nothing(
    aider: BM25Index, service: BM25Index, store: str, prompt: str, why: str
) -> None:
    idx = aider if store == "aider" else service
    assert idx.abstains(prompt) == why
    assert idx.search(prompt, k=6) == []


@pytest.mark.parametrize(
    ("words", "same", "apart"),
    [
        ("indentation indentations", "indent", None),  # a noun of action in -ation keeps its verb's stem
        ("documentation", "document", None),
        ("configuration", "configure", None),
        ("linter linters", "lint", None),  # tools named after what they do
        ("formatter", "format", None),
        ("installation", "installation", "install"),  # a longer derivation stays apart
        ("productivity", "productivity", "production"),
        ("important importance", "important", "import"),  # a word the stemmer joins to another's
        ("user", "user", "use"),  # most nouns in -er are no agent of a verb
    ],
)
def test_stems_for_a_coding_store(words: str, same: str, apart: str | None) -> None:
    assert set(analyze(words)) == set(analyze(same))
    if apart is not None:
        assert set(analyze(same)).isdisjoint(analyze(apart))


def test_a_weekday_the_store_lacks_weighs_nothing_but_one_it_holds_counts() -> None:
    idx = index(["Deploys go out on Tuesdays", "The team meets in May"])
    assert idx.abstains("Can we deploy on Friday?") is None  # "deploy" and nothing else
    assert idx.abstains("What happens on Friday?") is None  # no topic: the cut judges (nothing matches)
    assert idx.search("What happens on Friday?", k=6) == []
    assert found(idx, "What happens in May?") == ["The team meets in May"]


def test_an_unknown_identifier_weighs_one_word_between_its_terms(service: BM25Index) -> None:
    lex = service._data.lex
    terms = {"fix": 1.0, "refund": 1.0, "servic": 1.0, "py": 1.0}
    # "refund" is known (a memory about refunds), "servic" and "py" are not: a third of a word each
    assert code_weights(lex, names("Fix refund_service.py"), terms) == {"fix": 1.0, "refund": 1.0, "servic": 1 / 3,
                                                                  "py": 1 / 3}
    assert code_weights(lex, names("Fix the refund service"), terms) is terms  # no identifier: as it was


def test_a_name_in_a_large_store_keeps_its_weight() -> None:
    # 60 memories (idf-weighted rule): a person the store never heard of still abstains, a file does not
    idx = index(SERVICE + [f"Note {i}: the weekly report {i} went out by email" for i in range(50)])
    assert idx.abstains("What did Gina say about the Celery broker?") == "unknown name"
    q = "Why does the Celery broker drop jobs from gina_jobs.py?"
    assert idx.abstains(q) is None and found(idx, q) == [SERVICE[5]]
