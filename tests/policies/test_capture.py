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
    "Do you remember that I use vim?",          # a question
    "Can you always run the tests?",
    "Always the same error with this test.",     # not an order
    "Never again.",
    "always.",
    "> always use tabs\nok fix it",              # a quote: someone else's words
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
