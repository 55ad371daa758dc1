from __future__ import annotations

from memwire.memory._text import STOPWORDS, analyze


def test_case_folding_punctuation_and_stopwords() -> None:
    assert analyze("The USER prefers TABS, over spaces!") == ["user", "prefer", "tab", "space"]
    assert analyze("") == [] and analyze("?!... --") == []
    assert analyze("what is it, and how was that?") == []  # only function words


def test_stemming_matches_inflections() -> None:
    assert analyze("painting paintings painted") == ["paint"] * 3
    assert analyze("adoption agencies") == analyze("adopt agency")


def test_irregular_past_forms_map_to_the_base_verb() -> None:
    assert analyze("bought went ran") == analyze("buy go run")
    assert analyze("we won the match") == analyze("win match")


def test_contractions_and_possessives() -> None:
    assert analyze("I don't, won't, can't") == []  # negated auxiliaries are function words
    assert analyze("Caroline's necklace") == analyze("Caroline necklace")


def test_hyphenated_compound_also_yields_the_joined_word() -> None:
    assert analyze("de-stress") == ["de", "stress", "destress"]
    assert "destress" in analyze("How do you destress?")


def test_accents_numbers_and_single_letters() -> None:
    assert analyze("Café in São Paulo") == analyze("cafe in sao paulo")
    assert analyze("Postgres 15 on port 5433") == ["postgr", "15", "port", "5433"]
    assert analyze("plan B and 3 x") == ["plan", "3"]  # one-letter words go, digits stay


def test_stopwords_are_casefolded_words() -> None:
    assert all(w == w.casefold() and w.isalpha() for w in STOPWORDS)
    assert "python" not in STOPWORDS and "may" not in STOPWORDS  # "may" is also a month
