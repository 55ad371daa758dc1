"""The index's relevance decision (issue 32): a query about something the store does not know gets
nothing (``memory/_index_relevance.py``); the score cut judges the rest."""

from __future__ import annotations

import pytest

from memwire.memory._index import BM25Index
from memwire.memory._index_relevance import abstains, names, parts
from memwire.memory._store import MemoryStore
from memwire.memory._text import analyze
from memwire.policies._query import Query

CODING = [
    "User prefers pnpm over npm",
    "Production deploys go out on Tuesdays after the 10am standup",
    "Feature flags are read from LaunchDarkly; the SDK key lives in Vault",
    "Tests run with pytest -n auto; the integration tests need Docker running",
    "Postgres 16 runs in docker-compose on port 5433",
    "The main branch is protected: pull requests need two approvals",
    "Staging lives at staging.acme.dev and resets every night",
    "The user's name is Priya and she works on the billing team",
    "Commit messages follow Conventional Commits",
    "Database migrations are managed with Alembic; never edit a migration that was applied",
]

# a chat between two people, more than SMALL_STORE memories (idf-weighted rule 2)
CHAT = [
    "Jon: I finally signed the lease for my dance studio downtown!",
    "Gina: That's amazing, Jon! When do you open?",
    "Jon: Next month, if the floors are done in time.",
    "Gina: I've been researching fabrics for my clothing store all week.",
    "Jon: Research pays off. Which fabrics did you pick?",
    "Gina: Organic cotton and linen, mostly.",
    "Jon: My students want a hip hop class on Fridays.",
    "Gina: I went to a networking event for small business owners yesterday.",
    "Jon: Did you meet any investors there?",
    "Gina: Two of them, and one wants to see my designs.",
] + [f"Gina: filler line {i} about the weather and coffee number {i}" for i in range(50)]


def index(texts: list[str]) -> BM25Index:
    idx = BM25Index()
    idx.add_many((t, t, None) for t in texts)
    return idx


def found(idx: BM25Index, query: str | Query, k: int = 6) -> list[str]:
    return [d for d, _ in idx.search(query, k=k)]


@pytest.fixture(scope="module")
def coding() -> BM25Index:
    return index(CODING)


@pytest.fixture(scope="module")
def chat() -> BM25Index:
    return index(CHAT)


# ---------------------------------------------------------------- names and identifiers


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What did Caroline research?", (("carolin",),)),
        ("Who painted the Mona Lisa?", (("mona", "lisa"),)),  # consecutive names are one
        ("Would she like Dr. Seuss books?", (("dr", "seuss"),)),  # an abbreviation's dot is no sentence end
        ("Where does the LaunchDarkly SDK key live?", (("launchdark",),)),  # mixed case; an acronym is no name
        ("Which Next.js version do we run?", (("next", "js"),)),  # dotted identifier
        ("Is py3 installed?", (("py3",),)),  # letters then a digit
        ("What does the -p flag do?", (("-p",),)),  # a short option
        ("Is it ok to deploy on a Friday in May?", ()),  # capitalized by rule
        ("Meet me at 10am on the 8th", ()),  # number-first tokens are quantities
        ("How To Center A Div", ()),  # Title Case: capitals say nothing
        ("WHERE IS THE API", ()),
        ("What did I say?", ()),  # a capitalized stopword
        ("用户喜欢什么？", ()),
    ],
)
def test_names_in_a_question(text: str, expected: tuple[tuple[str, ...], ...]) -> None:
    assert names(text) == ((expected,) if expected else ())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a sentence's first word says nothing; without a question, every sentence counts
        ("Caroline went home. She met Gina there", ((), (("gina",),))),
        # the sentences that ask are what the text is about
        ("Remember that the build needs Java 21. When do deploys go out?", ((),)),
        ("I met Gina, Jon and Maria Lopez", ((("gina",), ("jon",), ("maria", "lopez")),)),  # a comma parts names
        ("What did I say? Nothing.", ()),  # names nothing
        ("I met Gina. What did Caroline say? And Jon?", ((("carolin",),), (("jon",),))),
        ("", ()),
    ],
)
def test_names_sentence_by_sentence(text: str, expected: tuple[tuple[tuple[str, ...], ...], ...]) -> None:
    assert names(text) == expected


def test_a_name_the_store_never_saw_abstains(chat: BM25Index) -> None:
    # "research" is a rare word here; a memory holding it would cover much of the question
    q = "What did Caroline research?"
    assert chat.abstains(q) == "unknown name"
    assert found(chat, q) == []
    assert found(chat, q.replace("Caroline", "Gina"))  # the store knows Gina: the cut judges
    assert chat.search(q, k=6, min_score=0)  # no cut asked for: ranked as before


def test_an_identifier_the_store_never_saw_weighs_as_several_unknown_words(coding: BM25Index) -> None:
    assert coding.abstains("What does ConfigCat cost per seat?") == "unknown name"
    assert found(coding, "What does ConfigCat cost per seat?") == []
    # the rest of the question well known: about the store's feature flags after all
    assert found(coding, "How do I configure Unleash for feature flags?")[0] == CODING[2]
    assert coding.abstains("Are feature flags in ConfigCat or in Vault?") is None  # one of two names known


def test_a_question_about_someone_the_store_knows_goes_to_the_cut(chat: BM25Index) -> None:
    # its other words are mostly unknown (a typo, a rare word), but it asks about Gina
    q = "Did Gina ever try paragliding or skydivng?"
    assert chat.abstains(q) is None
    assert chat.abstains(q.replace("Gina", "someone")) == "unknown topic"


def test_a_known_name_beside_an_unknown_one_is_judged_by_the_unknown_share(chat: BM25Index) -> None:
    # Jon is known, Caroline is not: not exempt, and most of the question is unknown
    assert chat.abstains("When did Jon meet Caroline at the opera?") == "unknown name"
    # most of it known: Jon and his lease downtown (frequent words, "networking event", say less)
    assert chat.abstains("Did Jon meet Caroline when he signed the lease downtown?") is None
    assert chat.abstains("Did Jon meet Caroline at the networking event?") == "unknown name"
    assert chat.abstains("Did Jon meet Gina at the networking event?") is None


def test_an_unknown_name_among_well_known_words_does_not_abstain() -> None:
    idx = index(["Alice indents with two spaces in YAML files only", "Alice deploys from her laptop on Fridays"])
    assert found(idx, "Should I indent this Python file with tabs or spaces?")[0].startswith("Alice indents")
    assert found(index(["The CI bot indents with tabs, width 8"]), "Should I indent this Python file with tabs?")
    assert idx.abstains("Should I learn Python or Rust first?") == "unknown name"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Where are the notes kept, which laptop OS, how do deploys go out?",
         ("Where are the notes kept", "which laptop OS", "how do deploys go out?")),
        ("What did Caroline, Melanie's friend, research?", ("What did Caroline, Melanie's friend, research?",)),
        ("Thanks. Would she like Dr. Seuss books? And Roald Dahl?",
         ("Would she like Dr. Seuss books?", "And Roald Dahl?")),
        ("Write a haiku. Make it sad", ("Write a haiku.", "Make it sad")),  # no question: every sentence
        ("", ()),
    ],
)
def test_parts_of_what_a_text_asks(text: str, expected: tuple[str, ...]) -> None:
    assert parts(text) == expected


def test_a_question_in_several_parts_is_about_the_store_when_one_part_is(coding: BM25Index) -> None:
    q = "Where are the notes kept, which laptop OS, how do production deploys go out?"
    assert coding.abstains(q) is None and found(coding, q)[0] == CODING[1]
    assert found(coding, "Where are the notes kept, which laptop OS does Ann use?") == []


def test_weekday_names_are_words_not_names(coding: BM25Index) -> None:
    assert CODING[1] in found(coding, "Is it ok to deploy to production on a Friday?")


def test_a_name_in_a_sentence_that_does_not_ask_does_not_decide(coding: BM25Index) -> None:
    assert found(coding, "Remember that the build needs Java 21. When do production deploys go out?")[0] == CODING[1]
    assert found(coding, "When do production deploys go out? And what does Unleash cost?")[0] == CODING[1]
    assert found(coding, "We talked about deploys. What does Unleash cost?") == []


# ---------------------------------------------------------------- unknown topic


@pytest.mark.parametrize(
    "prompt",
    ["How do I undo the last commit in git?", "how to center a div in css", "Write a haiku about autumn leaves",
     "What is the capital of Australia?", "Give me a recipe for banana bread"],
)
def test_an_everyday_prompt_gets_nothing_from_a_coding_store(coding: BM25Index, prompt: str) -> None:
    assert found(coding, prompt) == []


def test_a_prompt_sharing_one_rare_word_among_unknown_ones_abstains(chat: BM25Index) -> None:
    # "dance" is in one memory of 60, but the rest of the prompt is about nothing the store holds
    q = "Explain the history of ballroom dance competitions in Vienna"
    assert chat.search(q, k=6, min_score=0)
    assert chat.abstains(q) in ("unknown name", "unknown topic") and found(chat, q) == []
    assert chat.abstains("How did the ballroom dance competition go?") == "unknown topic"
    assert chat.abstains("When does the dance studio open?") is None


def test_a_reworded_question_that_shares_its_words_still_finds_its_memory(coding: BM25Index) -> None:
    assert found(coding, "When do production deploys happen?")[0] == CODING[1]
    assert found(coding, "Which package manager, npm or pnpm?")[0] == CODING[0]
    assert found(coding, "How many approvals does a pull request need?")[0] == CODING[5]
    assert found(coding, "Which team is Priya on?")[0] == CODING[7]


def test_in_a_small_store_words_are_counted_and_most_must_be_unknown() -> None:
    idx = index(["User prefers tabs", "The project uses pnpm", "Build with `make build`, never call setup.py"])
    assert found(idx, "Should I use tabs in this file?") == ["User prefers tabs"]
    assert found(idx, "which package manager, pnpm?") == ["The project uses pnpm"]  # 1 of 3 words known
    assert found(idx, "how do I build the project?")[0].startswith("Build")  # a common word the store holds
    assert idx.abstains("Should I indent this yaml config file with tabs?") == "unknown topic"  # 1 of 5
    # common words the store lacks count a quarter: 1.5 of 2.5 unknown, not more than two thirds
    assert idx.abstains("Do I want tabs in this file tonight?") is None


def test_common_words_and_cjk_bigrams_do_not_count_as_unknown() -> None:
    idx = index(["Sam works at Acme", "用户喜欢用中文回答问题"])
    assert idx.abstains("Where does Sam work these days?") is None  # "day" is common, "sam" known
    assert found(idx, "你喜欢用什么语言回答？") == ["用户喜欢用中文回答问题"]  # most bigrams span two words


def test_numbers_name_no_topic_and_common_words_go_to_the_cut(chat: BM25Index, coding: BM25Index) -> None:
    assert chat.search("What's 17 times 23?", k=6, min_score=0)  # "number 17" is in a memory
    assert chat.abstains("What's 17 times 23?") == "unknown topic" and found(chat, "What's 17 times 23?") == []
    assert found(coding, "Is Postgres on port 5433?")[0] == CODING[4]  # a number beside a word is fine
    assert chat.abstains("Did Gina get 17 of them?") is None  # a name the store knows
    assert found(coding, "What's my name?") == [CODING[7]]  # common words alone: the cut judges
    # a follow-up of common words is found by its context
    assert found(coding, Query("and which one?", ("the staging server resets at night?",)))[0] == CODING[6]


def test_only_the_text_is_judged_never_the_context(coding: BM25Index) -> None:
    q = Query("What is the capital of Australia?", ("When do production deploys go out?",))
    assert coding.abstains(q) == "unknown name"
    assert found(coding, q) == []


def test_abstains_reads_the_store_it_is_given() -> None:
    idx = index(["Rex loves carrots"])
    lex, n = idx._data.lex, len(idx)
    assert abstains(lex, n, [({"rex": 1.0}, [[("rex",)]])]) is None
    assert abstains(lex, n, [({"max": 1.0}, [[("max",)]])]) == "unknown name"
    assert abstains(lex, n, [({"max": 1.0}, [[("max",)]]), ({"rex": 1.0}, [])]) is None  # one part is known
    assert abstains(lex, n, [({"carrot": 1.0, "cake": 1.0, "oven": 1.0}, [])]) is None  # two thirds: not more
    assert abstains(lex, n, [({"carrot": 1.0, "cake": 1.0, "oven": 1.0, "flour": 1.0}, [])]) == "unknown topic"
    # an unknown name weighs NAME_WEIGHT words: 3 of 4 unknown, not 2 of 3
    assert abstains(lex, n, [({"carrot": 1.0, "cake": 1.0, "max": 1.0}, [[("max",)]])]) == "unknown name"


def test_the_store_search_abstains_at_its_defaults(tmp_path: object) -> None:
    store = MemoryStore(tmp_path)  # type: ignore[arg-type]
    store.add_many(CODING)
    assert store.search("Recommend a podcast about history", k=6) == []
    assert store.search("What did Caroline research?", k=6) == []
    assert [h.memory.text for h in store.search("When do production deploys go out?", k=1)] == [CODING[1]]
    assert store.search("What did Caroline research?", k=6, min_score=0.0) == []  # no shared word at all
    assert store.search("Recommend a podcast about production", k=6, min_score=0.0)


# ---------------------------------------------------------------- stems and options


def test_productivity_is_not_production(coding: BM25Index) -> None:
    assert analyze("productivity") != analyze("production")
    assert analyze("productivities") == analyze("productivity")  # its plural still is
    assert found(coding, "Recommend a book about productivity") == []
    assert coding.search("Recommend a book about productivity", k=6, min_score=0) == []  # no shared word at all
    assert found(coding, "Any book on production deploys?")[0] == CODING[1]


@pytest.mark.parametrize(
    ("words", "same"),
    [
        ("deploys deploying deployed deployment", "deploy"),  # inflections, and a short derivation
        ("adoption adopted adopting", "adopt"),
        ("running runs", "run"),
        ("studies studying", "study"),
        ("organizations", "organization"),  # a long derivation is a word of its own
        ("internationally", "international"),
    ],
)
def test_inflections_still_meet(words: str, same: str) -> None:
    assert set(analyze(words)) == set(analyze(same))


def test_long_derivations_and_short_words_keep_apart() -> None:
    assert analyze("organization") != analyze("organ")
    assert analyze("international") != analyze("intern")
    assert analyze("aws") == ["aws"] and analyze("ios") == ["ios"]  # the s of a short word is no plural


def test_the_p_flag_is_not_any_flag(coding: BM25Index) -> None:
    assert analyze("What does the -p flag do?") == ["-p", "flag"]
    assert analyze("e-mail at 09-10 - not an option") == ["mail", "email", "09", "10", "0910", "option"]
    assert found(coding, "What does the -p flag do in mkdir?") == []
    assert coding.abstains("What does the -p flag do in mkdir?") == "unknown name"
    assert found(coding, "What does -n do for pytest?")[0] == CODING[3]  # an option the store holds


@pytest.mark.parametrize(("query", "needs"), [
    # the question is generic, the sentence before it says what about
    ("The refund tests in tests/test_refunds.py are failing. Can you find out why and fix them?", "make test FILE="),
    ("The staging deploy logs say it could not connect to the database. Where should it be pointing?", "port 5433"),
    # a preposition is no topic the store lacks
    ("How do I get this onto staging to try it?", "make deploy ENV=staging"),
])
def test_a_question_leaning_on_what_was_said_before_it_finds_its_memory(query: str, needs: str) -> None:
    from memwire._sim.demo_data import MEMORIES  # the demo's coding store: 55 memories, past the small-store rules

    idx = index([text for text, _, _ in MEMORIES])
    assert idx.abstains(query) is None
    assert any(needs in t for t in found(idx, query))
