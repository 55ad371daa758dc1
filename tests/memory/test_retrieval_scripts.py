"""Retrieval beyond spaced English: CJK text (character bigrams), emoji, and small stores."""

from __future__ import annotations

import pytest

from memwire.memory._index import BM25Index
from memwire.memory._text import analyze

# ----------------------------------------------------------------- analysis


def test_cjk_runs_become_overlapping_bigrams_and_a_lone_character_stays() -> None:
    assert analyze("用户喜欢中文") == ["用户", "户喜", "喜欢", "欢中", "中文"]
    assert analyze("猫") == ["猫"] and analyze("猫，狗") == ["猫", "狗"]
    assert analyze("我用Python写代码") == ["我用", "python", "写代", "代码"]  # mixed scripts split
    assert analyze("𠮷野家") == ["𠮷野", "野家"]  # a Han character beyond the BMP is one character


def test_japanese_and_korean_keep_their_characters() -> None:
    assert analyze("かぎ") != analyze("かき")  # voiced kana is another word ("key", not "oyster")
    assert analyze("が") == ["が"] and analyze("パン") == ["パン"]
    assert analyze("ｶﾀｶﾅ") == analyze("カタカナ")  # half-width katakana folds to full width
    assert analyze("한국어로") == ["한국", "국어", "어로"]  # Hangul syllables, not their jamo


def test_emoji_are_terms_in_text_order() -> None:
    assert analyze("🍕 pizza 🍺!") == ["🍕", "pizza", "🍺"]
    assert analyze("⭐ ⏰ ❤️") == ["⭐", "⏰", "❤"]
    assert analyze("👍🏽") == analyze("👍") == ["👍"]  # a skin tone is not a term
    assert analyze("🇯🇵") == ["🇯🇵"]  # a flag is one term, not two letters
    assert analyze("🧘‍♀️") == ["🧘"] and analyze("👩‍💻") == ["👩", "💻"]


def test_one_letter_words_of_other_alphabets_still_go() -> None:
    assert analyze("я и ты") == ["ты"]  # Russian "I", "and": as "I" and "a" in English
    assert analyze("α") == []


# ----------------------------------------------------------------- retrieval

MIXED = [
    "用户喜欢用中文回答问题",
    "部署在每周二进行",
    "数据库是PostgreSQL 16",
    "项目使用React和Vite构建前端",
    "用户住在上海",
    "ユーザーは日本語での回答を好む",
    "ユーザーはPythonを使う",
    "사용자는 한국어 답변을 선호한다",
    "사용자는 서울에 산다",
    "사용자는 매일 아침 커피를 마신다",
    "🍕 is my favourite food",
    "User prefers tabs over spaces",
    "Deploys go out on Tuesdays",
]


@pytest.fixture()
def mixed() -> BM25Index:
    idx = BM25Index()
    idx.add_many((str(i), t, None) for i, t in enumerate(MIXED))
    return idx


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("中文", "用户喜欢用中文回答问题"),
        ("用中文", "用户喜欢用中文回答问题"),
        ("你喜欢用什么语言回答？", "用户喜欢用中文回答问题"),
        ("数据库用的是哪个版本？", "数据库是PostgreSQL 16"),
        # one shared word among several: the cut counts a bigram as half a word
        ("什么时候部署？", "部署在每周二进行"),
        ("前端用什么框架？", "项目使用React和Vite构建前端"),
        ("上海有什么好吃的？", "用户住在上海"),
        ("커피 대신 마실 것 추천해줘", "사용자는 매일 아침 커피를 마신다"),
        ("日本語で答えて", "ユーザーは日本語での回答を好む"),
        ("한국어로 답해 주세요", "사용자는 한국어 답변을 선호한다"),
        ("서울 날씨 어때?", "사용자는 서울에 산다"),
        ("🍕?", "🍕 is my favourite food"),
        ("🍕🍕🍕", "🍕 is my favourite food"),
    ],
)
def test_cjk_and_emoji_queries_find_their_memory(mixed: BM25Index, query: str, expected: str) -> None:
    hits = mixed.search(query, k=3)
    assert hits and MIXED[int(hits[0][0])] == expected


@pytest.mark.parametrize("query", ["今天天气怎么样？", "東京の天気は？", "오늘 뭐 먹지?", "🎉", "👍"])
def test_unrelated_cjk_and_emoji_queries_find_nothing(mixed: BM25Index, query: str) -> None:
    assert mixed.search(query, k=5) == []


FILLERS = ["User likes short answers", "The user's name is Sam", "User is vegetarian", "The API uses FastAPI"]


def test_a_store_of_one_memory_finds_an_obvious_match() -> None:
    idx = BM25Index()
    idx.add("tabs", "User prefers tabs")
    assert [d for d, _ in idx.search("Should I use tabs in this file?")] == ["tabs"]
    assert idx.search("What's the capital of Mongolia?") == []


@pytest.mark.parametrize(
    ("query", "related"),
    [
        # only "rust" is specific: "want", "learn", "start" are common words the store lacks
        ("I want to learn more Rust, where should I start?",
         ["User prefers Rust over Go", "User finished the Rust book", "Rust analyzer is installed"]),
        # "rex" in several memories of a small store
        ("What should I feed my dog Rex?",
         ["Rex loves carrots", "Rex eats twice a day", "Rex is a golden retriever", "Rex sleeps in the garden"]),
        ("What should I cook for my dog Rex tonight?",
         ["Rex loves carrots", "Rex eats twice a day", "Rex is a golden retriever"]),
        ("Should I use tabs in this file?",
         ["User prefers tabs", "Makefiles need tabs", "User prefers tabs over spaces in Python code"]),
    ],
)
def test_adding_a_related_memory_to_a_small_store_loses_no_match(query: str, related: list[str]) -> None:
    """A helper's report: in a five-memory store a query found its memory; one more memory on the
    same subject and it found nothing."""
    idx = BM25Index()
    idx.add_many((t, t, None) for t in FILLERS)
    for n, text in enumerate(related, 1):
        idx.add(text, text)
        assert {d for d, _ in idx.search(query, k=10)} == set(related[:n])


@pytest.mark.parametrize(
    "prompt",
    ["What's the weather in Paris?", "How do I make a good first impression?", "How do vaccines work?",
     "Write me a poem about the sea", "Can you recommend a good restaurant for dinner tonight?"],
)
def test_small_stores_still_find_nothing_for_an_unrelated_prompt(prompt: str) -> None:
    # each of the last four shares one common word with a prompt: make, work, write, tonight
    memories = FILLERS + ["Rex loves carrots", "User prefers Rust over Go", "User makes coffee",
                          "Sam works at Acme", "Sam writes the weekly report", "User has guests tonight"]
    idx = BM25Index()
    for text in memories:
        idx.add(text, text)
        assert idx.search(prompt, k=5) == []
