from __future__ import annotations

import pytest

from memwire.memory._index import BM25Index
from memwire.policies._query import CONTEXT_CHARS, CONTEXT_MESSAGES, Query, query_from_messages


def test_query_is_frozen_and_context_a_tuple() -> None:
    q = Query("hello", ["a", "b"])  # type: ignore[arg-type]
    assert q.context == ("a", "b") and hash(q) == hash(Query("hello", ("a", "b")))
    with pytest.raises(TypeError):
        Query(None)  # type: ignore[arg-type]


def test_plain_message_keeps_the_last_messages_as_context() -> None:
    earlier = [f"message {i}" for i in range(10)]
    q = query_from_messages("How do I deploy the billing service to staging?", earlier)
    assert q.text == "How do I deploy the billing service to staging?"
    assert q.context == tuple(earlier[-CONTEXT_MESSAGES:])


def test_no_earlier_messages() -> None:
    assert query_from_messages("yes", []) == Query("yes", ())


def test_long_messages_are_cut_to_their_tail_and_blank_ones_dropped() -> None:
    long = "x" * 5000 + " tail words"
    q = query_from_messages("What is the status of the migration?", ["   ", long])
    assert q.context == (long[-CONTEXT_CHARS:],)


def test_short_answer_to_an_assistant_question_joins_the_question() -> None:
    earlier = ["Let me look.", "I found two databases. Should I migrate the staging one or production?"]
    q = query_from_messages("the staging one", earlier)
    assert q.text == "Should I migrate the staging one or production?\nthe staging one"
    assert q.context == tuple(earlier)


def test_short_reply_without_a_question_is_left_alone() -> None:
    q = query_from_messages("sounds good", ["I migrated the staging database."])
    assert q.text == "sounds good"


def test_long_reply_is_not_merged_with_the_question() -> None:
    msg = "no, I want you to explain how the nightly billing export handles refunds first"
    q = query_from_messages(msg, ["Shall I run it?"])
    assert q.text == msg


def test_context_helps_a_follow_up_but_the_message_wins() -> None:
    idx = BM25Index()
    idx.add_many([
        ("tests", "Run the billing tests with pytest -m billing", None),
        ("deploy", "Billing deploys need a change ticket", None),
        ("tabs", "The user prefers tabs", None),
    ])
    follow_up = query_from_messages("and what about the tests?", ["How do we deploy billing?"])
    hits = idx.search(follow_up, k=3)
    assert hits[0][0] == "tests"
    assert idx.search(Query("tabs", ("billing deploys",)), k=1)[0][0] == "tabs"


def test_a_huge_prompt_is_capped_to_its_head_and_tail() -> None:
    from memwire.policies._query import MAX_QUERY_CHARS

    pasted = "Which port is staging on?\n" + "log line 42 ok\n" * 200_000 + "and how do I deploy?"
    q = query_from_messages(pasted, [])
    assert len(q.text) <= MAX_QUERY_CHARS + 1
    assert q.text.startswith("Which port is staging on?") and q.text.endswith("and how do I deploy?")


def test_a_huge_query_is_cut_to_4000_characters_head_and_tail() -> None:
    from memwire.policies._query import cap_query

    pasted = "Why does this fail?\n" + "log line\n" * 100_000 + "and how do I fix it?"
    q = cap_query(pasted)
    assert len(q) <= 4001 and q.startswith("Why does this fail?") and q.endswith("how do I fix it?")  # the documented cap


def test_a_long_message_is_never_a_closer_and_is_not_scanned() -> None:
    from memwire.policies._gate import is_closer

    assert is_closer("thanks!") and not is_closer("👍 " * 10_000)  # long: judged by length, not by a scan


def test_a_long_cjk_reply_is_not_merged_with_the_question() -> None:
    # without spaces, \w+ made a whole Chinese message one word, so always a "short reply"
    msg = "帮我写一个部署脚本，用我们平时的方式部署到staging服务器上"
    assert query_from_messages(msg, ["需要我帮你做什么？"]).text == msg


def test_a_short_cjk_reply_joins_a_fullwidth_question() -> None:
    q = query_from_messages("是的，用staging那个", ["我看了一下。要部署到staging还是production？"])
    assert q.text == "要部署到staging还是production？\n是的，用staging那个"
    assert query_from_messages("用中文吗？", ["好的。你想用什么语言？"]).text == "用中文吗？"  # its own question
