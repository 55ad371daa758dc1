"""Human text: the harness's wrappers and repeated rules are not the question."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memwire.policies._human_text import HARNESS_TAGS, MIN_REPEATED_CHARS, drop_repeated, human_text, strip_wrappers

REMINDER = "<system-reminder>\nAvailable agents: reviewer, planner, tester. Skills: pdf, xlsx.\n</system-reminder>"
RULES = ("Always reply with SEARCH/REPLACE blocks. Every block must use the full file path and the exact "
         "existing lines.\n\nNever edit files the user has not added to the chat; ask for them instead.")


def test_reminder_parts_before_the_prompt_drop_out() -> None:
    # Claude Code shape: reminders as text parts of their own, then what the person typed
    parts = [REMINDER, "<system-reminder>Today's date is 2026-11-22.</system-reminder>", "Which port is staging on?"]
    assert human_text(parts) == "Which port is staging on?"


def test_reminder_inside_the_same_text_drops_out() -> None:
    assert human_text([f"Fix the login bug\n\n{REMINDER}"]) == "Fix the login bug"
    assert human_text([f"{REMINDER}Fix the login bug"]) == "Fix the login bug"


def test_every_listed_tag_is_removed_with_attributes_and_any_case() -> None:
    for tag in HARNESS_TAGS:
        text = f"<{tag.upper()} source=\"x\">\nharness text\n</{tag.upper()}>\nthe question"
        assert strip_wrappers(text) == "the question", tag


def test_codex_agents_md_message_is_all_harness() -> None:
    text = "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\nUse pnpm, not npm.\n</INSTRUCTIONS>"
    assert strip_wrappers(text) == ""
    env = "<environment_context>\n  <cwd>/repo</cwd>\n  <shell>bash</shell>\n</environment_context>"
    assert human_text([env]) == ""


def test_text_a_person_writes_in_angle_brackets_stays() -> None:
    text = "Why does <div> render twice? The <system> tag is ours, not a wrapper."
    assert human_text([text]) == text
    assert strip_wrappers("<system-reminder>unclosed reminder, a user's paste") == "<system-reminder>unclosed reminder, a user's paste"


def test_paragraphs_repeated_from_the_system_prompt_or_earlier_turns_drop_out() -> None:
    # aider shape: its rules are in the system prompt and appended to every user message
    latest = f"Add a retry to fetch_user()\n\n{RULES}"
    assert human_text([latest], system=f"You are an expert developer.\n\n{RULES}") == "Add a retry to fetch_user()"
    assert human_text([latest], earlier_user=[f"Rename the module\n\n{RULES}"]) == "Add a retry to fetch_user()"


def test_a_question_asked_again_is_kept_whole() -> None:
    question = "How do I run the integration tests against the staging database again?"
    assert len(question) >= MIN_REPEATED_CHARS
    assert human_text([question], earlier_user=[question]) == question


def test_short_paragraphs_are_never_taken_for_harness_text() -> None:
    assert drop_repeated("Run it.\n\nAnd the staging one?", ["Run it."]) == "Run it.\n\nAnd the staging one?"


@settings(deadline=None)  # an example on a loaded machine is no failure
@given(st.text(alphabet=st.characters(blacklist_characters="<>"), min_size=1, max_size=80).filter(lambda t: t.strip()))
def test_plain_text_is_its_own_human_text(text: str) -> None:
    assert human_text([text]) == text.strip() or human_text([text]) == text
    assert human_text([REMINDER, text]) == text.strip()
