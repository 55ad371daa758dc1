"""`memwire search` and `memwire preview` say why each memory came (the query's words it holds, or
its similarity) and, when none did, why (issue 32 item 4): on both stores, as a person runs them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from memwire.cli import main
from tests.stores import StoreSpec

CODING = [
    "The staging server runs on port 8443",
    "User prefers pnpm over npm",
    "Production deploys go out on Tuesdays",
    "Run the tests with make test; Docker must be running",
    "The CI bot indents with tabs, width 8",
    "Feature flags are read from LaunchDarkly",
]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def where(spec: StoreSpec) -> list[str]:
    """The command line's option naming the test's store."""
    return ["--dir", spec.where] if spec.backend == "markdown" else ["--store", spec.where]


@pytest.fixture(autouse=True)
def _elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no project directory of the working tree's


@pytest.fixture
def coding(make_store: StoreSpec) -> StoreSpec:
    store = make_store()
    for text in CODING:
        store.add(text)
    return make_store


def test_each_hit_names_the_words_it_matched_as_written(coding: StoreSpec, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "search", *where(coding), "Which ports does the staging server use?")
    lines = out.splitlines()
    assert code == 0 and "The staging server runs on port 8443" in lines[0]
    # the person's words, in the query's order: not the stems ("port", "stage") the index matched on
    assert lines[1].strip() == "matched: ports, staging, server"
    _, out, _ = run(capsys, "search", *where(coding), "--json", "Which ports does the staging server use?")
    hit = json.loads(out)[0]
    assert hit["matched"] == ["ports", "staging", "server"] and hit["via"] == "bm25" and "similarity" not in hit
    # a tag and a date are what the memory holds too
    coding().add("Deploy freeze for the holidays", tags=["release"], date="2023-12-20")
    _, out, _ = run(capsys, "search", *where(coding), "--json", "What release freeze is there in December?")
    hit = next(h for h in json.loads(out) if h["text"].startswith("Deploy freeze"))
    assert hit["matched"] == ["release", "freeze", "December"]


def test_an_empty_store_says_so(make_store: StoreSpec, capsys: pytest.CaptureFixture[str]) -> None:
    make_store()
    code, out, _ = run(capsys, "search", *where(make_store), "Which port does staging use?")
    assert code == 0 and re.fullmatch(r"no relevant memories: .+ holds no memories yet\n", out)


def test_an_unknown_name_is_named(coding: StoreSpec, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "search", *where(coding), "What did Caroline research?")
    assert out == ('no relevant memories: the query names "Caroline", which no memory mentions; '
                   "--min-score 0 searches anyway\n")


def test_an_unknown_topic_names_its_words(coding: StoreSpec, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, err = run(capsys, "search", *where(coding), "--json", "How do I undo the last commit in git?")
    assert json.loads(out) == []  # --json stays a list; the reason goes to standard error
    assert err == ('no relevant memories: the query is about what no memory mentions ("undo", "last", "commit", '
                   '"git"); --min-score 0 searches anyway\n')
    # and --min-score 0 does search anyway: nothing shares a word with it
    _, out, _ = run(capsys, "search", *where(coding), "--min-score", "0", "How do I undo the last commit in git?")
    assert out == "no relevant memories: no memory shares a word with the query\n"


def test_a_query_sharing_no_word_or_none_at_all(coding: StoreSpec, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "search", *where(coding), "Can you help me?")  # a common word the store lacks
    assert out == "no relevant memories: no memory shares a word with the query\n"
    _, out, _ = run(capsys, "search", *where(coding), "and then what?")
    assert out == "no relevant memories: the query has no word to search by (only stopwords or punctuation)\n"


_UNDER = re.compile(r'no relevant memories: the closest memory, (\w+) \("(.*)"\), passes a score cut of '
                    r"([\d.]+) at most, and the cut is ([\d.]+): --min-score ([\d.]+) shows it\n")


@pytest.mark.parametrize("cut", [None, "0.9"])
def test_under_the_cut_the_suggested_cut_brings_the_closest_back(coding: StoreSpec, capsys: pytest.CaptureFixture[str],
                                                                 cut: str | None) -> None:
    query = "Which tabs should I open to make test dashboards readable?" if cut else "What is a good time to make tea?"
    given = ["--min-score", cut] if cut else []
    _, out, _ = run(capsys, "search", *where(coding), *given, query)
    m = _UNDER.fullmatch(out)
    assert m, out
    mid, text, best, shown_cut, option = m.groups()
    assert float(shown_cut) == float(cut or 0.2) and float(option) <= float(best) < float(shown_cut)
    # what it says is the search's own answer: at the suggested cut that memory comes, just above it none does
    _, out, _ = run(capsys, "search", *where(coding), "--json", "-k", "1", "--min-score", option, query)
    assert [(h["id"], h["text"]) for h in json.loads(out)] == [(mid, text)]
    _, out, _ = run(capsys, "search", *where(coding), "--json", "--min-score", f"{float(option) + 0.01:.2f}", query)
    assert json.loads(out) == []


def test_the_archive_is_explained_too(coding: StoreSpec, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "search", *where(coding), "--archive", "staging server")
    assert re.fullmatch(r"no relevant memories: .+ holds no memories yet\n", out)


# --- preview ---------------------------------------------------------------------------------------


def test_preview_names_the_words_of_each_injected_memory(coding: StoreSpec, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "preview", *where(coding), "Which ports does the staging server use?")
    lines = out.splitlines()
    assert lines[1].startswith("injected 1 memories")
    assert re.fullmatch(r"  \w{20}  matched: ports, staging, server", lines[2])
    _, out, _ = run(capsys, "preview", *where(coding), "--json", "Which ports does the staging server use?")
    data = json.loads(out)
    assert data["why"]["memories"] == [{"id": data["injection"]["memory_ids"][0], "via": "bm25",
                                        "matched": ["ports", "staging", "server"],
                                        "line": "matched: ports, staging, server"}]


def test_preview_words_of_earlier_messages(coding: StoreSpec, capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    msgs = tmp_path / "chat.json"
    msgs.write_text(json.dumps([{"role": "user", "content": "The staging server is down again."},
                                {"role": "assistant", "content": "Which port did you try?"},
                                {"role": "user", "content": "The default port, what is it?"}]))
    _, out, _ = run(capsys, "preview", *where(coding), "--messages", str(msgs))
    assert "matched: port; from earlier messages: staging, server" in out.splitlines()[2]


def test_preview_says_why_nothing_was_injected(coding: StoreSpec, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    def nothing(*args: str) -> str:
        _, out, _ = run(capsys, "preview", *where(coding), *args)
        return out.splitlines()[1]

    assert nothing("thanks!") == ('nothing injected: the prompt is a social closer ("thanks", "ok", 👍): '
                                  "the gate skips retrieval for it")
    assert nothing("What did Caroline research?") == (
        'nothing injected: the query names "Caroline", which no memory mentions; '
        "min_score = 0 (MEMWIRE_MIN_SCORE=0) searches anyway")
    assert re.fullmatch(r'nothing injected: the closest memory, \w+ \(".*"\), passes a score cut of [\d.]+ at most, '
                        r"and the cut is 0.20: min_score = ([\d.]+) \(MEMWIRE_MIN_SCORE=\1\) shows it",
                        nothing("What is a good time to make tea?"))
    monkeypatch.setenv("MEMWIRE_MAX_TOKENS", "40")  # the header alone is about that
    assert nothing("Which ports does the staging server use?") == (
        "nothing injected: memories were found, but none fits the block's token budget (max_tokens = 40)")
    monkeypatch.setenv("MEMWIRE_STARTUP_MAX_TOKENS", "40")
    assert nothing("--mode", "startup", "hello there") == (
        "nothing injected: memories were found, but none fits the block's token budget (startup_max_tokens = 40)")
    _, out, _ = run(capsys, "preview", *where(coding), "--json", "thanks!")
    assert json.loads(out)["why"] == {"reason": "gate", "skipped": "gate", "text": (
        'the prompt is a social closer ("thanks", "ok", 👍): the gate skips retrieval for it')}


def test_preview_of_an_empty_store_and_of_no_user_message(make_store: StoreSpec, capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path) -> None:
    make_store()
    _, out, _ = run(capsys, "preview", *where(make_store), "--json", "Which port does staging use?")
    why = json.loads(out)["why"]
    assert why["reason"] == "empty" and why["skipped"] == "nothing_relevant" and "holds no memories" in why["text"]
    _, out, _ = run(capsys, "preview", *where(make_store), "--mode", "startup", "Which port does staging use?")
    assert re.fullmatch(r"nothing injected: no memory for the session's profile: .+ holds none", out.splitlines()[1])
    msgs = tmp_path / "chat.json"
    msgs.write_text(json.dumps([{"role": "system", "content": "Be brief."}]))
    _, out, _ = run(capsys, "preview", *where(make_store), "--messages", str(msgs))
    assert out.splitlines()[1] == "nothing injected: the request has no user message to retrieve for"


def test_startup_says_its_block_is_the_profile(coding: StoreSpec, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "preview", *where(coding), "--mode", "startup", "hello there")
    lines = out.splitlines()
    assert lines[1].startswith("injected 6 memories")
    assert lines[2] == "  (the session's profile: pinned first, then by category; shown whatever the prompt)"


# --- hybrid ----------------------------------------------------------------------------------------


@pytest.fixture
def topic_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tiny model2vec model whose words of one topic lie together (``tests/memory/test_embed``)."""
    pytest.importorskip("tokenizers")
    from memwire.memory import _embed_side
    from tests.memory.test_embed import make_topic_model

    d = make_topic_model(tmp_path / "topics")
    monkeypatch.setattr(_embed_side, "_embedders", {})
    monkeypatch.setenv("MEMWIRE_HOME", str(tmp_path / "home"))
    return d


def test_a_semantic_hit_says_so_with_its_similarity(topic_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from memwire.memory._embed import prepare

    prepare(topic_model)  # distilled once, as `memwire embeddings` does
    monkeypatch.setenv("MEMWIRE_RETRIEVAL", "hybrid")
    monkeypatch.setenv("MEMWIRE_EMBEDDING_MODEL", str(topic_model))
    d = str(tmp_path / "mem")
    for text in ["use pnpm as the package manager to install dependencies", "the local postgres database port"]:
        run(capsys, "add", "--dir", d, text)
    _, out, _ = run(capsys, "search", "--dir", d, "--json", "yarn library")  # no word in common
    [hit] = json.loads(out)
    assert hit["via"] == "semantic" and hit["matched"] == [] and 0 < hit["similarity"] <= 1
    _, out, _ = run(capsys, "search", "--dir", d, "yarn library")
    assert re.fullmatch(r"  close in meaning \(semantic, similarity 0\.\d\d\)", out.splitlines()[1].rstrip()[7:])
    # a memory both sides find is BM25's, with its words
    _, out, _ = run(capsys, "search", "--dir", d, "--json", "yarn library pnpm")
    first = json.loads(out)[0]
    assert (first["via"], first["matched"]) == ("bm25", ["pnpm"])
    _, out, _ = run(capsys, "preview", "--dir", d, "--json", "yarn library")
    [why] = json.loads(out)["why"]["memories"]
    assert why["via"] == "semantic" and why["similarity"] == hit["similarity"]


def test_explaining_is_not_on_the_search_path(coding: StoreSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    """A search and a prepared request never compute an explanation: only the command line asks."""
    from memwire.memory import _why
    from memwire.middleware._core import Middleware

    def asked(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("explained on the search path")

    for name in ("explain_hits", "why_nothing", "matched_words", "_closest"):
        monkeypatch.setattr(_why, name, asked)
    store = coding()
    assert store.search("Which ports does the staging server use?")
    assert store.search("What did Caroline say?") == []
    mw = Middleware(store=store, history="drop")
    p = mw.prepare([{"role": "user", "content": "Which ports does the staging server use?"}])
    assert p.injection is not None and p.injection.injected
