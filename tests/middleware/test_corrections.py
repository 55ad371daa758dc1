"""Corrections and retractions in a conversation (issue 33 item 2), and dates written out on capture
(item 4): "actually, forget that", "scratch that", "correction: X", "I meant X" act on what THIS
conversation captured last, never on another session's memories or a person's own."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memwire import MemoryStore, Middleware
from memwire.memory._inbox import inbox_of, read_log
from memwire.middleware._capture import Capture
from memwire.policies._dates import zone

PORT = "Remember that the staging database listens on port 5433."
BRANCH = "Remember that the release branch is called release-2026."
SCRIPT = "Remember that the deploy script is deploy.sh."


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    s = MemoryStore(tmp_path / "mem")
    s.add("Deploys go out on Tuesdays only", tags=["process"])  # a person's own: never taken back
    return s


def middleware(store: MemoryStore, capture: str = "auto", **kw: Any) -> Middleware:
    mw = Middleware(store=store, mode="contextPerTurn", capture=capture, **kw)
    mw.capture = Capture(capture, timezone=kw.get("timezone"))
    return mw


def talk(mw: Middleware, session: str, *said: str) -> None:
    """One conversation: each user message in turn, the history growing as a client sends it."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful assistant."}]
    for text in said:
        messages.append({"role": "user", "content": text})
        mw.prepare(messages, session_id=session)
        mw.flush()
        messages.append({"role": "assistant", "content": "Noted."})


def captured(store: MemoryStore) -> list[str]:
    return sorted(m.text for m in store.memories() if "captured" in m.tags)


def archived(store: MemoryStore) -> dict[str, str]:
    reasons = ("forgotten", "superseded", "rejected")
    return {m.text: next(t for t in m.tags if t in reasons) for m in store.archive.memories()}


CASES = [
    # (what the person says, one message after another; what stays captured; what went to the archive, and why)
    ([BRANCH, "Actually, forget that."], [], {"The release branch is called release-2026.": "forgotten"}),
    ([BRANCH, "Scratch that."], [], {"The release branch is called release-2026.": "forgotten"}),
    ([BRANCH, "No, that's wrong."], [], {"The release branch is called release-2026.": "forgotten"}),
    ([BRANCH, "Oh wait, don't save that."], [], {"The release branch is called release-2026.": "forgotten"}),
    ([SCRIPT, "Correction: the deploy script is ship.sh, not deploy.sh."], ["The deploy script is ship.sh."],
     {"The deploy script is deploy.sh.": "superseded"}),
    ([SCRIPT, "ship.sh, not deploy.sh."], ["The deploy script is ship.sh."],
     {"The deploy script is deploy.sh.": "superseded"}),
    ([PORT, "I meant 6543."], ["The staging database listens on port 6543."],
     {"The staging database listens on port 5433.": "superseded"}),
    ([PORT, "Actually it's 6543."], ["The staging database listens on port 6543."],
     {"The staging database listens on port 5433.": "superseded"}),
    ([PORT, "It's not 5433 but 6543."], ["The staging database listens on port 6543."],
     {"The staging database listens on port 5433.": "superseded"}),
    ([PORT, "Scratch that, it's 6543."], ["The staging database listens on port 6543."],
     {"The staging database listens on port 5433.": "superseded"}),
    ([BRANCH, "Sorry, I meant release-2027."], ["The release branch is called release-2027."],
     {"The release branch is called release-2026.": "superseded"}),
    (["I prefer npm for installing packages.", "Oops, I meant pnpm."], ["User prefers pnpm for installing packages."],
     {"User prefers npm for installing packages.": "superseded"}),
    (["Remember that CI runs on Node 18. Actually, make that Node 20."], ["CI runs on Node 20."],
     {"CI runs on Node 18.": "superseded"}),
    (["Remember that the VPN is optional. Scratch that."], [], {"The VPN is optional.": "forgotten"}),
    (["Remember that the VPN is optional.", "Remember that the wiki is on Notion.", "Forget that."],
     ["The VPN is optional."], {"The wiki is on Notion.": "forgotten"}),            # "that" is the last one
    ([PORT, "Sorry, I meant the staging database listens on port 6543."],
     ["The staging database listens on port 6543."], {"The staging database listens on port 5433.": "superseded"}),
    ([PORT, "Scratch that, it's fine."], [], {"The staging database listens on port 5433.": "forgotten"}),
    (["Correction: the office wifi is guest-5g."], ["The office wifi is guest-5g."], {}),   # nothing to correct: said
    # nothing this conversation captured just before: nothing happens
    ([PORT, "What is the weather like?", "Actually, forget that."], ["The staging database listens on port 5433."], {}),
    ([PORT, "How do I restart it?", "I meant 6543."], ["The staging database listens on port 5433."], {}),
    (["I meant 6543."], [], {}),
    (["Actually, forget that."], [], {}),
    # look-alikes: not retractions, not corrections
    ([PORT, "I forget things sometimes."], ["The staging database listens on port 5433."], {}),
    ([PORT, "Correction fluid is in the drawer."], ["The staging database listens on port 5433."], {}),
    ([PORT, "Ignore that warning in the log."], ["The staging database listens on port 5433."], {}),
    ([PORT, "It's 6543."], ["The staging database listens on port 5433."], {}),
    ([PORT, "Don't forget that the build needs node 20."],
     ["The build needs node 20.", "The staging database listens on port 5433."], {}),
    ([PORT, "Actually, the tests pass now."], ["The staging database listens on port 5433."], {}),
    ([PORT, "I meant 6543 and 6544."], ["The staging database listens on port 5433."], {}),   # no one place
]


@pytest.mark.parametrize(("said", "kept", "gone"), CASES)
def test_a_correction_or_retraction_acts_on_what_this_conversation_captured_last(
        store: MemoryStore, said: list[str], kept: list[str], gone: dict[str, str]) -> None:
    talk(middleware(store), "s1", *said)
    assert captured(store) == sorted(kept)
    assert archived(store) == gone
    assert "Deploys go out on Tuesdays only" in [m.text for m in store.memories()]


def test_another_sessions_memory_is_never_taken_back(store: MemoryStore) -> None:
    mw = middleware(store)
    talk(mw, "alice", PORT)
    talk(mw, "bob", "Hello!", "Actually, forget that.")       # bob captured nothing
    talk(mw, "bob", "Hello!", "I meant 6543.")
    talk(mw, "carol", PORT, "Scratch that.")                  # carol said it again: reinforced, not hers
    assert captured(store) == ["The staging database listens on port 5433."]
    assert "forgotten" not in [e["event"] for e in read_log(store)]


def test_a_persons_own_memory_is_never_taken_back(store: MemoryStore) -> None:
    talk(middleware(store), "s1", "Remember that deploys go out on Tuesdays only.", "Scratch that.")
    assert [m.text for m in store.memories()] == ["Deploys go out on Tuesdays only"]


def test_what_was_taken_back_can_be_restored_and_the_log_says_by_what(store: MemoryStore) -> None:
    talk(middleware(store), "s1", PORT, "I meant 6543.")
    old = store.archive.memories()[0]
    new = next(m for m in store.memories() if "6543" in m.text)
    superseded = next(e for e in read_log(store) if e["event"] == "superseded")
    assert (superseded["id"], superseded["by"], superseded["session"]) == (old.id, new.id, "s1")
    links = store.lifecycle.links
    assert old.id in str(links(new.id).get("supersedes")) and new.id in str(links(old.id).get("superseded_by"))
    back = store.restore(old.id)
    assert back.text == "The staging database listens on port 5433." and back.id in store


def test_another_process_sees_what_this_conversation_captured(store: MemoryStore) -> None:
    """The capture log, not a process's memory, says what the conversation captured: a restart (or
    another proxy worker) still takes it back."""
    talk(middleware(store), "s1", BRANCH)
    talk(middleware(MemoryStore(store.path)), "s1", BRANCH, "Actually, forget that.")
    assert captured(MemoryStore(store.path)) == []


def test_review_mode_rejects_from_the_inbox_and_proposes_the_correction(store: MemoryStore) -> None:
    talk(middleware(store, "review"), "s1", PORT, "Actually it's 6543.")
    inbox = inbox_of(store)
    assert [m.text for m in inbox.memories()] == ["The staging database listens on port 6543."]
    assert captured(store) == []
    talk(middleware(store, "review"), "s2", BRANCH, "Scratch that.")
    assert [m.text for m in inbox.memories()] == ["The staging database listens on port 6543."]


def test_a_responses_call_continuing_a_stored_conversation_takes_back_the_sessions_last_capture(
        store: MemoryStore) -> None:
    mw = middleware(store)
    body = {"model": "gpt-4o", "input": [{"role": "user", "content": [{"type": "input_text", "text": BRANCH}]}]}
    mw.prepare_request(body, api="openai.responses", session_id="r1")
    mw.flush()
    later = {"model": "gpt-4o", "previous_response_id": "resp_1",
             "input": [{"role": "user", "content": [{"type": "input_text", "text": "Scratch that."}]}]}
    mw.prepare_request(later, api="openai.responses", session_id="r1")
    mw.flush()
    assert captured(store) == []


# ------------------------------------------------------------------------------ dates on capture

def test_a_captured_relative_date_is_written_out_in_the_configured_zone(store: MemoryStore) -> None:
    mw = middleware(store, timezone="Pacific/Kiritimati")
    talk(mw, "s1", "Remember that the code freeze starts tomorrow.")
    today = datetime.now(timezone.utc).astimezone(zone("Pacific/Kiritimati")).date()
    [mem] = [m for m in store.memories() if "captured" in m.tags]
    said = date.fromisoformat(mem.date or "")
    assert said in (today - timedelta(days=1), today)  # the day may turn during the test
    assert mem.text == f"The code freeze starts tomorrow ({(said + timedelta(days=1)).isoformat()})."


AT = datetime(2026, 11, 28, 23, 30, tzinfo=timezone.utc).timestamp()  # already the 29th in Paris


@pytest.mark.parametrize(("configured", "stated", "stored", "day"), [
    (None, None, "The code freeze starts tomorrow (2026-11-29).", "2026-11-28"),                 # UTC
    ("Europe/Paris", None, "The code freeze starts tomorrow (2026-11-30).", "2026-11-29"),
    ("America/New_York", None, "The code freeze starts tomorrow (2026-11-29).", "2026-11-28"),
    (None, "Europe/Paris", "The code freeze starts tomorrow (2026-11-30).", "2026-11-29"),       # stated
    ("America/New_York", "Europe/Paris", "The code freeze starts tomorrow (2026-11-30).", "2026-11-29"),
    ("Europe/Paris", "Mars/Olympus", "The code freeze starts tomorrow (2026-11-30).", "2026-11-29"),  # not a zone
])
def test_the_day_said_is_the_users_zone_stated_then_configured_then_utc(
        store: MemoryStore, configured: str | None, stated: str | None, stored: str, day: str) -> None:
    if stated:
        store.add(f"User's timezone is {stated}.", tags=["fact", "captured"])
    capture = Capture("auto", timezone=configured)
    capture._apply(store, {"key": "k1", "kind": "fact", "text": "The code freeze starts tomorrow.",
                           "session": "s1", "turn": "0:x", "at": AT}, False)
    [mem] = [m for m in store.memories() if m.text.startswith("The code freeze")]
    assert (mem.text, mem.date) == (stored, day)


def test_a_statement_said_again_the_next_day_is_another_date(store: MemoryStore) -> None:
    capture = Capture("auto", cooldown_s=0)
    for i, at in enumerate((AT, AT + 86_400)):
        capture._apply(store, {"key": f"k{i}", "kind": "fact", "text": "The code freeze starts tomorrow.",
                               "session": "s1", "turn": f"{i}:x", "at": at}, False)
    # not the same memory reinforced: another date (the store may mark the older one superseded)
    assert "The code freeze starts tomorrow (2026-11-30)." in captured(store)
    assert "The code freeze starts tomorrow (2026-11-29)." in captured(store) + list(archived(store))


def test_a_correction_in_other_words_still_supersedes_and_links(store: MemoryStore) -> None:
    """The store alone would keep both (other words, no shared value): the person said which one it
    corrects, so it is replaced all the same, linked both ways."""
    talk(middleware(store), "s1", SCRIPT, "Correction: we deploy with ship.sh.")
    assert captured(store) == ["We deploy with ship.sh."]
    [old] = store.archive.memories()
    new = next(m for m in store.memories() if "ship.sh" in m.text)
    assert old.text == "The deploy script is deploy.sh." and "superseded" in old.tags
    assert old.id in str(store.lifecycle.links(new.id).get("supersedes"))


def test_a_zone_stated_later_counts_from_then_on(store: MemoryStore) -> None:
    capture = Capture("auto")

    def said(key: str, text: str) -> None:
        capture._apply(store, {"key": key, "kind": "fact", "text": text, "session": "s1", "turn": f"{key}:x",
                               "at": AT}, False)

    said("1", "The audit starts tomorrow.")
    store.add("User's timezone is Europe/Paris.", tags=["fact", "captured"])  # as "My timezone is ..." is captured
    said("3", "The retro is tomorrow.")
    assert {m.text for m in store.memories()} >= {"The audit starts tomorrow (2026-11-29).",
                                                 "The retro is tomorrow (2026-11-30)."}


def test_retraction_and_correction_on_both_backends(make_store: Any) -> None:
    store = make_store()
    mw = middleware(store)
    talk(mw, "s1", BRANCH, "Actually, forget that.")
    talk(mw, "s2", PORT, "I meant 6543.")
    talk(mw, "s3", SCRIPT)
    talk(middleware(make_store()), "s3", SCRIPT, "ship.sh, not deploy.sh.")  # another process, same conversation
    assert sorted(m.text for m in make_store().memories()) == [
        "The deploy script is ship.sh.", "The staging database listens on port 6543."]
    why = ("forgotten", "superseded")
    assert sorted((m.text, [t for t in m.tags if t in why]) for m in store.archive.memories()) == [
        ("The deploy script is deploy.sh.", ["superseded"]),
        ("The release branch is called release-2026.", ["forgotten"]),
        ("The staging database listens on port 5433.", ["superseded"])]
