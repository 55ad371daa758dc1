from __future__ import annotations

import pytest

from memwire.policies._gate import gate, is_closer


@pytest.mark.parametrize(
    "text",
    ["ok", "Okay.", "k", "yes", "Yep!", "no", "nope", "sure", "Thanks!", "thank you", "thx", "ty", "Got it.",
     "cool", "nice", "great", "Perfect!!", "right", "correct", "agreed", "done", "👍", "🙏", "✅", "🙏🏽 ✅",
     "...", "!!", "  ok  ", "OK thanks!", "Thank you!"],
)
def test_closers(text: str) -> None:
    assert is_closer(text)
    d = gate(text)
    assert d.skip and d.reason == "gate"


@pytest.mark.parametrize(
    "text",
    ["ok, now how do I run the tests?", "thanks, what about the database port?", "yes the staging one",
     "deploy it", "Why?", "tabs or spaces", "no, use postgres"],
)
def test_not_closers(text: str) -> None:
    assert not gate(text).skip


def test_short_answer_to_a_question_is_retrieved_with_the_question() -> None:
    d = gate("yes", "I fixed the bug. Shall I also add tests?")
    assert not d.skip
    assert d.query == "Shall I also add tests? yes"
    assert gate("Yes please!", "Want me to run the linter?").query.startswith("Want me to run the linter?")


def test_thanks_after_a_question_is_still_a_closer() -> None:
    assert gate("thanks", "Anything else?").skip
    assert gate("👍", "Shall I deploy?").skip
    assert gate("yes", "Done. All tests pass.").skip
