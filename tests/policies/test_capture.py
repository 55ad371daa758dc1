"""Explicit capture rules and the secret filter: what a person typed → what is stored."""

from __future__ import annotations

import pytest

from memwire.policies._capture import MAX_SCAN_CHARS, statements
from memwire.policies._secrets import find_secret

CAPTURED = [
    ("Remember that the staging database listens on port 5433.", "fact", "The staging database listens on port 5433."),
    ("remember: deploys go through ArgoCD", "fact", "Deploys go through ArgoCD."),
    ("Don't forget: the VPN must be on for staging", "fact", "The VPN must be on for staging."),
    ("Keep in mind that the API is rate limited to 100 rps.", "fact", "The API is rate limited to 100 rps."),
    ("For future reference, prod runs in eu-west-1.", "fact", "Prod runs in eu-west-1."),
    ("Remember I use fish shell", "fact", "The user uses fish shell."),
    ("remember that I don't like long answers", "fact", "The user doesn't like long answers."),
    ("Please remember to always run make lint before committing.", "instruction",
     "Always run make lint before committing."),
    ("Remember that I prefer tabs.", "preference", "User prefers tabs."),
    ("From now on, answer in British English.", "instruction", "Answer in British English."),
    ("Ok, so from now on use `my_helper` in my tests.", "instruction", "Use `my_helper` in the user's tests."),
    ("In future, ping me before merging", "instruction", "Ping the user before merging."),
    ("Always use pnpm instead of npm.", "instruction", "Always use pnpm instead of npm."),
    ("Never push to main directly!", "instruction", "Never push to main directly!"),
    ("Please don't ever force-push shared branches", "instruction", "Don't ever force-push shared branches."),
    ("I prefer tabs over spaces.", "preference", "User prefers tabs over spaces."),
    ("I really prefer short answers", "preference", "User prefers short answers."),
    ("I'd rather you not use emojis in my commit messages.", "preference",
     "User would rather you not use emojis in the user's commit messages."),
    ("my preference is dark mode", "preference", "User prefers dark mode."),
    ("Call me Sam.", "preference", "User wants to be called Sam."),
    ("My timezone is Europe/Berlin.", "fact", "User's timezone is Europe/Berlin."),
    ("My name is Ana and I work on payments.", "fact", "User's name is Ana."),
    ("my package manager is uv", "fact", "User's package manager is uv."),
    ("Forget that the staging database listens on port 5433.", "forget", "The staging database listens on port 5433."),
    ("Never mind the port thing.", "forget", "The port thing."),
    ("never mind", "forget", ""),
    ("Please forget about the VPN", "forget", "The VPN."),
]


@pytest.mark.parametrize(("said", "kind", "text"), CAPTURED)
def test_an_explicit_statement_is_captured_as_its_kind(said: str, kind: str, text: str) -> None:
    [st] = statements(said)
    assert (st.kind, st.text) == (kind, text)
    assert st.said == said.strip()


NOT_CAPTURED = [
    "Remember that we use Postgres?",           # a question (the pattern takes it: the '?' keeps it out)
    "Do you remember that I use vim?",          # questions no pattern takes
    "Can you always run the tests?",
    "Always the same error with this test.",     # not an order
    "Never again.",
    "always.",
    "> Thanks for the review. Always use tabs.\nok fix it",  # a quote: someone else's words (an order in it)
    "```\nalways do x\n# never use y\n```",      # code
    "We should always write tests",              # a remark, not an order to the assistant
    "I like pizza",
    "Fix the upload bug in api/upload.py",
    "My code is broken",                         # not a profile key
    "The function should never return None when the cache is warm",
    "my name is",                                # no value
]


@pytest.mark.parametrize("said", NOT_CAPTURED)
def test_ordinary_text_questions_quotes_and_code_are_not_captured(said: str) -> None:
    assert statements(said) == []


# issue 34 item 11: each guard, on a text the patterns take: (what is said, the same without what
# the guard looks at, captured as). The guard alone keeps the first out: a test of it cannot pass
# because a pattern already refused the text (benchmarks/capture_guards.py breaks each one).
LONG_LOG = "Here is the log I remember seeing:\n" + "x " * (MAX_SCAN_CHARS // 2)
GUARDED = [
    ("Remember that we use Postgres?", "Remember that we use Postgres.", ("fact", "We use Postgres.")),
    ("Always run the tests?", "Always run the tests.", ("instruction", "Always run the tests.")),
    ("My timezone is Europe/Berlin?", "My timezone is Europe/Berlin.", ("fact", "User's timezone is Europe/Berlin.")),
    ("> Thanks for the review. Always use tabs.\nok fix it", "Thanks for the review. Always use tabs.\nok fix it",
     ("instruction", "Always use tabs.")),
    ("```\nalways do x\n```", "always do x", ("instruction", "Always do x.")),
    (LONG_LOG + "\nRemember that the log level is debug.",                  # past MAX_SCAN_CHARS, though a
     "Here is the log I remember seeing:\nRemember that the log level is debug.",  # word before it says 'read me'
     ("fact", "The log level is debug.")),
    ("Remember: tabs.", "Remember: use tabs.", ("fact", "Use tabs.")),                    # MIN_WORDS
    ("From now on, tabs.", "From now on, use tabs.", ("instruction", "Use tabs.")),
    ("Always fails.", "Always fail loudly.", ("instruction", "Always fail loudly.")),     # an order has 3 words
    ("My name is ...", "My name is Ana.", ("fact", "User's name is Ana.")),               # a value of 1-8 words
    ("My editor is whatever the team lead picks for the whole team this quarter.", "My editor is Helix.",
     ("fact", "User's editor is Helix.")),
    ("I remember the port. It's 6543.", "I remember the port. Actually, it's 6543.",     # 'it's X' alone is a
     ("correct", "6543")),                                                                # remark, not a correction
    ("Sorry, I meant to reply.", "Sorry, I meant pnpm.", ("correct", "pnpm")),           # 'I meant to ...'
    ("Correction: --", "Correction: ship.sh", ("correct", "ship.sh")),                   # a value has a word
    ("I meant what I wrote in the ticket yesterday.", "I meant the ticket.", ("correct", "the ticket")),  # <= 4 words
]


@pytest.mark.parametrize(("said", "control", "taken"), GUARDED)
def test_a_guard_alone_keeps_out_what_a_pattern_takes(said: str, control: str, taken: tuple[str, str]) -> None:
    assert [(s.kind, s.text) for s in statements(control)] == [taken]  # the pattern takes this shape ...
    assert statements(said) == []                                      # ... and the guard keeps this one out


def test_remember_before_a_forget_word_is_a_fact_not_a_forget() -> None:
    """'Remember: disregard X' asks to keep an instruction, it does not take a memory back."""
    assert [(s.kind, s.text) for s in statements("Remember: disregard the warnings from the linter.")] == [
        ("fact", "Disregard the warnings from the linter.")]
    assert [(s.kind, s.text) for s in statements("Don't forget: never mind the flaky test in CI.")] == [
        ("fact", "Never mind the flaky test in CI.")]


def test_several_statements_in_one_message_in_order_and_once() -> None:
    said = ("Fix the bug. Also, remember that CI runs on Node 20. Thanks! I prefer small commits.\n"
            "Remember that CI runs on Node 20.")
    assert [(s.kind, s.text) for s in statements(said)] == [
        ("fact", "CI runs on Node 20."), ("preference", "User prefers small commits.")]


def test_a_pasted_log_past_the_scan_limit_is_not_read() -> None:
    said = "x " * (MAX_SCAN_CHARS // 2) + "\nRemember that the log level is debug."
    assert statements(said) == []
    assert statements("Remember that the log level is debug.\n" + "x " * MAX_SCAN_CHARS)


def test_a_very_long_sentence_is_not_a_statement() -> None:
    assert statements("Remember that " + "the service " * 60 + "is slow.") == []


@pytest.mark.parametrize(("text", "kind"), [
    ("the deploy key is sk-proj-abcdefghijklmnopqrstuvwxyz123", "OpenAI API key"),
    ("use sk-ant-api03-abcdefghijklmnopqrstu", "Anthropic API key"),
    ("AWS key AKIAIOSFODNN7EXAMPLE", "AWS access key"),
    ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "GitHub token"),
    ("slack xoxb-1234567890-abcdefghij", "Slack token"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----", "private key"),
    ("connect to postgres://admin:s3cret@db:5432/app", "credentials in a URL"),
    ("my password is hunter2", "password"),
    ("the API key: 'abcd-1234-efgh'", "API key"),
    ("the password is correcthorsebatterystaple", "password"),
    ("bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
     "JSON web token"),
    ("it was AbCdEfGh1234567890AbCdEfGh123456 all along", "random-looking key"),
])
def test_secrets_are_recognized(text: str, kind: str) -> None:
    assert find_secret(text) == kind


@pytest.mark.parametrize("text", [
    "The token is refreshed every hour",
    "The API key is stored in Vault",
    "the release commit is 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39",  # a hex digest is not a key
    "The staging database listens on port 5433.",
    "see https://example.com/docs/getting-started/installation-and-configuration-guide",
    "User's email is ana@example.com.",
])
def test_ordinary_facts_are_not_secrets(text: str) -> None:
    assert find_secret(text) is None


# issue 33 item 2: retractions and corrections of what the conversation just captured
RETRACTIONS = [
    "forget that", "Forget that.", "Actually, forget that.", "Forget it.", "Scratch that.", "Oh wait, scratch that!",
    "Strike that.", "Never mind.", "nevermind", "No, that's wrong.", "That’s not right.", "that is incorrect",
    "Sorry, ignore that.", "Please disregard that.", "Take that back.", "I take it back.", "Don't save that.",
    "Please don't remember that.", "Undo that.", "Forget what I just said.", "Actually, delete that last one.",
]


@pytest.mark.parametrize("said", RETRACTIONS)
def test_a_retraction_takes_back_the_last_capture(said: str) -> None:
    [st] = statements(said)
    assert (st.kind, st.text) == ("forget", "")


CORRECTIONS = [
    # (said, text, old, value)
    ("Correction: the deploy script is ship.sh, not deploy.sh.", "The deploy script is ship.sh.", "deploy.sh", False),
    ("correction - the staging database listens on port 6543", "The staging database listens on port 6543.", "",
     False),
    ("Correction: 6543.", "6543", "", True),
    ("I meant 6543.", "6543", "", True),
    ("Sorry, I meant release-2027", "release-2027", "", True),
    ("Oops, I meant to say pnpm.", "pnpm", "", True),
    ("Sorry, I meant my editor is Helix.", "The user's editor is Helix.", "", False),
    ("Correction: we deploy with ship.sh.", "We deploy with ship.sh.", "", False),
    ("I meant the staging one.", "the staging one", "", True),
    ("Actually it's 6543.", "6543", "", True),
    ("Actually, it is `ship.sh`.", "`ship.sh`", "", True),
    ("No, it's Europe/Paris.", "Europe/Paris", "", True),
    ("Make that Node 20.", "Node 20", "", True),
    ("It's not deploy.sh but ship.sh.", "ship.sh", "deploy.sh", True),
    ("not 5433 but 6543", "6543", "5433", True),
    ("ship.sh, not deploy.sh.", "ship.sh", "deploy.sh", True),
    ("Tabs, not spaces!", "Tabs", "spaces", True),
    ("Scratch that, it's release-2027.", "release-2027", "", True),
    ("No, that's wrong: it should be 6543", "6543", "", True),
]


@pytest.mark.parametrize(("said", "text", "old", "value"), CORRECTIONS)
def test_a_correction_says_the_new_value_and_what_it_replaces(said: str, text: str, old: str, value: bool) -> None:
    [st] = statements(said)
    assert (st.kind, st.text, st.old, st.value) == ("correct", text, old, value)


NOT_RETRACTIONS_OR_CORRECTIONS = [
    "I forget things all the time.",
    "Correction fluid is on the shelf.",
    "The correction was applied to the invoice.",
    "Ignore that warning in the build log.",
    "It's 6543.",                        # a plain remark (no word of a statement: never read; GUARDED has one read)
    "It's definitely not 5433",
    "That's a mistake I make often",
    "I meant it.",
    "I meant to ask about the tests.",
    "Actually, the tests pass now.",     # a remark, not a correction
    "Scratch the surface of the cache layer.",
    "We need to take the backup offline.",
    "No, thanks.",
    "Not today, maybe tomorrow.",
]


@pytest.mark.parametrize("said", NOT_RETRACTIONS_OR_CORRECTIONS)
def test_look_alikes_of_retractions_and_corrections_are_not(said: str) -> None:
    assert [s.kind for s in statements(said)] == []


@pytest.mark.parametrize(("said", "kind", "text"), [
    ("Don't forget that the build needs node 20.", "fact", "The build needs node 20."),   # a new memory
    ("Forget that the staging database listens on port 5433.", "forget",
     "The staging database listens on port 5433."),                                        # named: not the last one
    ("Actually, remember that the VPN is required.", "fact", "The VPN is required."),
    ("No, I prefer spaces.", "preference", "User prefers spaces."),
])
def test_a_lead_in_like_actually_keeps_the_statement_it_leads(said: str, kind: str, text: str) -> None:
    [st] = statements(said)
    assert (st.kind, st.text) == (kind, text)


GROUPS = (frozenset(["npm", "pnpm", "yarn"]), frozenset(["tabs", "spaces"]))


@pytest.mark.parametrize(("stored", "value", "old", "new"), [
    ("The staging database listens on port 5433.", "6543", "", "The staging database listens on port 6543."),
    ("The release branch is called release-2026.", "release-2027", "", "The release branch is called release-2027."),
    ("The deploy script is deploy.sh.", "ship.sh", "", "The deploy script is ship.sh."),
    ("The deploy script is deploy.sh.", "ship.sh", "deploy.sh", "The deploy script is ship.sh."),
    ("User prefers npm.", "pnpm", "", "User prefers pnpm."),
    ("User prefers tabs over commas.", "Spaces", "tabs", "User prefers Spaces over commas."),
    ("The ledger runs PostgreSQL 15 on port 5433.", "6543", "", "The ledger runs PostgreSQL 15 on port 6543."),
    ("CI runs on Node 18.", "Node 20", "", "CI runs on Node 20."),
    ("User's timezone is Europe/Paris.", "America/New_York", "", "User's timezone is America/New_York."),
    ("The deploy script is deploy.sh.", "ship.sh", "run.sh", None),      # the old value is not there
    ("The app uses tabs and 2 columns.", "fine", "", None),              # a plain word: no place for it
    ("Ports 5433 and 5434 are open.", "6543", "", None),                 # two places: nothing is guessed
    ("Ana leads the payments team.", "Bea", "", None),
    ("The deploy script is ship.sh.", "ship.sh", "", None),              # nothing changes
])
def test_a_value_goes_in_the_one_place_of_its_kind(stored: str, value: str, old: str, new: str | None) -> None:
    from memwire.policies._capture import corrected

    assert corrected(stored, value, old, GROUPS) == new
