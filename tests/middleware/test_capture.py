"""Explicit capture through the middleware: once per turn, off the request path, deduplicated,
reinforced, cooled down, taken back on "forget that", secrets refused, review inbox."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memwire import MemoryStore, Middleware
from memwire.memory._inbox import approve, inbox_of, read_log, reject
from memwire.middleware._capture import DUPLICATE_SCORE, DUPLICATE_WORDS, Capture

PORT = "Remember that the staging database listens on port 5433."
QUESTION = "Which port does the staging database use?"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    s = MemoryStore(tmp_path / "mem")
    s.add("Deploys go out on Tuesdays only", tags=["process"])
    return s


@pytest.fixture
def clock() -> Clock:
    return Clock()


def middleware(store: MemoryStore, clock: Clock, capture: str = "auto", **kw: Any) -> Middleware:
    # a busy machine must not decide a test either: these tests are about capture, not the budget
    kw.setdefault("timeout_ms", 60_000)
    mw = Middleware(store=store, mode="contextPerTurn", capture=capture, **kw)
    mw.capture = Capture(capture, clock=clock)
    mw.warm_up()  # a cold token encoding must not be what decides a test (the retrieval budget)
    return mw


def chat(*user: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful assistant."}]
    for i, text in enumerate(user):
        if i:
            out.append({"role": "assistant", "content": "Noted."})
        out.append({"role": "user", "content": text})
    return out


def say(mw: Middleware, text: str, session: str = "s1", *earlier: str) -> Any:
    p = mw.prepare(chat(*earlier, text), session_id=session)
    mw.flush()
    return p


def captured(store: MemoryStore) -> list[str]:
    return [m.text for m in store.memories() if "captured" in m.tags]


BODIES = {
    "openai.chat": lambda text: {"model": "gpt-4o", "messages": [{"role": "user", "content": text}]},
    "anthropic.messages": lambda text: {"model": "claude-sonnet-4-5", "max_tokens": 100, "system": "Be brief.",
                                        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]},
    "openai.responses": lambda text: {"model": "gpt-4o", "instructions": "Be brief.",
                                      "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}]},
}


@pytest.mark.parametrize("api", list(BODIES))
def test_a_remembered_fact_is_stored_and_found_in_a_new_session(store: MemoryStore, clock: Clock, api: str) -> None:
    mw = middleware(store, clock)
    mw.prepare_request(BODIES[api](PORT), api=api, session_id="monday")
    mw.flush()
    [mem] = [m for m in store.memories() if "captured" in m.tags]
    assert mem.text == "The staging database listens on port 5433."
    assert set(mem.tags) == {"fact", "captured"} and mem.topic == "Facts" and mem.date
    assert "The staging database listens on port 5433. #fact #captured" in (store.path / "MEMORY.md").read_text()
    later = mw.prepare_request(BODIES[api](QUESTION), api=api, session_id="tuesday")
    assert mem.id in later.injection.memory_ids
    [event] = [e for e in read_log(store) if e["event"] == "captured"]
    assert (event["id"], event["kind"], event["session"]) == (mem.id, "fact", "monday") and event["turn"]


def test_kinds_go_under_their_topics(store: MemoryStore, clock: Clock) -> None:
    mw = middleware(store, clock)
    say(mw, "I prefer tabs over spaces. From now on, write commit messages in imperative mood. My timezone is Europe/Lisbon.")
    by_text = {m.text: (m.tags, m.topic) for m in store.memories() if "captured" in m.tags}
    assert by_text == {
        "User prefers tabs over spaces.": (("preference", "captured"), "Preferences"),
        "Write commit messages in imperative mood.": (("instruction", "captured"), "Instructions"),
        "User's timezone is Europe/Lisbon.": (("fact", "captured"), "Facts"),
    }


def test_a_turn_is_read_once_not_per_tool_loop_request(store: MemoryStore, clock: Clock,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    mw = middleware(store, clock)
    runs: list[str] = []
    real = mw.capture._entries
    monkeypatch.setattr(mw.capture, "_entries", lambda *a: (runs.append(a[0]), real(*a))[1])
    loop = chat(PORT)
    mw.prepare(loop, session_id="s")
    loop += [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "README.md"}]
    mw.prepare(loop, session_id="s")
    mw.prepare(loop, session_id="s")
    mw.flush()
    assert runs == [PORT]
    assert captured(store) == ["The staging database listens on port 5433."]


def test_the_write_never_runs_on_the_request_path(store: MemoryStore, clock: Clock) -> None:
    mw = middleware(store, clock)
    entered, release = threading.Event(), threading.Event()
    real = mw.capture._apply

    def slow(*a: Any) -> None:
        entered.set()
        release.wait(10)
        real(*a)

    mw.capture._apply = slow  # type: ignore[method-assign]
    p = mw.prepare(chat(PORT), session_id="s")  # returns while the write waits
    assert entered.wait(5) and p.messages[-1]["content"] == PORT
    assert captured(store) == []
    release.set()
    mw.flush()
    assert captured(store) == ["The staging database listens on port 5433."]


def test_the_worker_waits_for_the_request_to_leave(store: MemoryStore, clock: Clock) -> None:
    """The worker takes a turn up ``settle_s`` after it was offered (the request is on its way to
    the provider by then), never sooner."""
    import time

    mw = middleware(store, clock)
    mw.capture.settle_s = 0.5
    offered = time.monotonic()
    mw.prepare(chat(PORT), session_id="s")
    mw.flush()
    assert time.monotonic() - offered >= 0.5
    assert captured(store) == ["The staging database listens on port 5433."]


def test_a_stored_statement_is_reinforced_not_duplicated(store: MemoryStore, clock: Clock) -> None:
    store.add("The staging database listens on port 5433", tags=["infra"])
    mw = middleware(store, clock)
    say(mw, PORT, "a")
    say(mw, "Remember: staging database listens on port 5433!", "b")
    assert len(store) == 2 and captured(store) == []
    assert [(e["event"], e["session"]) for e in read_log(store)] == [("reinforced", "a"), ("reinforced", "b")]


def reaches_the_value_checks(store: MemoryStore, text: str, old: str) -> None:
    """What only the near-duplicate check's values (numbers, names) can decide: BM25 finds ``old``
    for ``text`` (share >= DUPLICATE_SCORE) and it holds DUPLICATE_WORDS of its words."""
    from memwire.memory._text import analyze

    assert old in [h.memory.text for h in store.search(text, 3, min_score=DUPLICATE_SCORE)]
    words = set(analyze(text))
    assert len(words & set(analyze(old))) >= DUPLICATE_WORDS * len(words)


@pytest.mark.parametrize(("old", "new"), [
    ("The release build for the mobile app of the payments team runs on Java 17.",
     "The release build for the mobile app of the payments team runs on Java 21."),
    ("Build agent 3 in the Frankfurt rack runs Debian 12 with the hardened kernel.",      # which one: its number
     "Build agent 4 in the Frankfurt rack runs Debian 12 with the hardened kernel."),
    ("The release checklist for the mobile app is owned by Bob from the platform team.",     # a name
     "The release checklist for the mobile app is owned by Alice from the platform team."),
])
def test_a_changed_number_or_name_is_a_new_statement_not_a_reinforcement(store: MemoryStore, clock: Clock,
                                                                          old: str, new: str) -> None:
    """'Java 21' after 'Java 17': BM25 scores them alike and they share all words but the value, so
    the values alone tell them apart (issue 34 item 11). The new one is written (the store then
    decides: a new value of the same thing supersedes the old one, another thing's stays beside
    it), never taken for the old one said again."""
    mw = middleware(store, clock)
    say(mw, f"Remember that {old}", "a")
    reaches_the_value_checks(store, new, old)
    say(mw, f"Remember that {new}", "b")
    assert new in captured(store)
    assert old in captured(store) or [(m.text, "superseded" in m.tags) for m in store.archive.memories()] == [
        (old, True)]
    assert [e["event"] for e in read_log(store) if e["event"] != "superseded"] == ["captured", "captured"]
    say(mw, f"Remember that {new[0].lower()}{new[1:-1]}!", "c")  # the same statement: reinforced
    assert [e["event"] for e in read_log(store) if e["event"] != "superseded"] == ["captured", "captured", "reinforced"]


def test_a_statement_that_adds_a_condition_is_not_a_reinforcement(store: MemoryStore, clock: Clock) -> None:
    """BM25 finds the shorter memory for it (the words it adds are in many memories: little weight),
    but not a fifth of them are in it: the words' share (DUPLICATE_WORDS) keeps the condition."""
    store.add("Release notes go out with the hotfix deploys.")
    store.add("Hotfix deploys skip the release notes.")
    mw = middleware(store, clock)
    old = "The nightly billing export job writes compressed invoices to the finance bucket in Frankfurt."
    new = old[:-1] + " after hotfix release deploys."  # no name, no number: the words' share decides
    say(mw, f"Remember that {old}", "a")
    assert old in [h.memory.text for h in store.search(new, 3, min_score=DUPLICATE_SCORE)]
    say(mw, f"Remember that {new}", "b")
    assert new in captured(store)
    assert [e["event"] for e in read_log(store)] == ["captured", "captured"]


def test_another_team_is_a_new_statement_not_a_reinforcement(store: MemoryStore, clock: Clock) -> None:
    """Four of the five words are the same, but the one that differs is most of what it says: the
    BM25 share (DUPLICATE_SCORE) keeps 'security' from reinforcing 'platform'."""
    from memwire.memory._text import analyze

    mw = middleware(store, clock)
    old = "The release checklist is owned by the platform team."
    new = "The release checklist is owned by the security team."
    say(mw, f"Remember that {old}", "a")
    words = set(analyze(new))
    assert len(words & set(analyze(old))) >= DUPLICATE_WORDS * len(words)
    say(mw, f"Remember that {new}", "b")
    assert new in captured(store)
    assert "reinforced" not in [e["event"] for e in read_log(store)]


def test_cooldown_stops_recapture_then_lets_it_reinforce(store: MemoryStore, clock: Clock) -> None:
    mw = middleware(store, clock)
    say(mw, PORT, "a")
    say(mw, PORT, "b")  # the same statement again, another session, within the cooldown
    assert [e["event"] for e in read_log(store)] == ["captured"]
    clock.now += 601
    say(mw, PORT, "c")
    assert [e["event"] for e in read_log(store)] == ["captured", "reinforced"]
    assert captured(store) == ["The staging database listens on port 5433."]


def test_forget_that_archives_the_captured_memory(store: MemoryStore, clock: Clock) -> None:
    mw = middleware(store, clock)
    say(mw, PORT)
    say(mw, "Forget that the staging database listens on port 5433.", "s1", PORT)
    assert captured(store) == []
    assert [m.text for m in store.archive.memories()] == ["The staging database listens on port 5433."]
    assert "forgotten" in store.archive.memories()[0].tags
    assert mw.prepare(chat(QUESTION), session_id="s2").injection.memory_ids == ()


def test_forget_never_takes_a_memory_a_person_wrote(store: MemoryStore, clock: Clock) -> None:
    mw = middleware(store, clock)
    say(mw, "Forget that deploys go out on Tuesdays.")
    assert [m.text for m in store.memories()] == ["Deploys go out on Tuesdays only"]


def test_forget_x_takes_back_only_a_capture_that_matches_x(store: MemoryStore, clock: Clock) -> None:
    """'Forget about the staging wiki' shares one word with the port memory: under FORGET_SCORE of
    what it says, so the port memory stays."""
    mw = middleware(store, clock)
    say(mw, PORT)
    say(mw, "Forget about the staging wiki.", "s2")
    assert captured(store) == ["The staging database listens on port 5433."]
    assert [e["event"] for e in read_log(store)] == ["captured"]


def test_a_profile_fact_a_person_wrote_is_not_superseded_by_capture(store: MemoryStore, clock: Clock) -> None:
    """Capture supersedes only the 'User's KEY is ...' it captured: a person's own is left to the
    store's add path (which keeps both here: it may be another name the user goes by)."""
    own = store.add("User's name is Ana.")
    mw = middleware(store, clock)
    say(mw, "My name is Bea.")
    assert "User's name is Bea." in captured(store)
    assert [(e["event"], e["id"]) for e in read_log(store) if e["event"] == "superseded"] == []
    assert own.id in store


def test_never_mind_takes_back_what_this_session_just_captured(store: MemoryStore, clock: Clock) -> None:
    mw = middleware(store, clock)
    say(mw, "Remember that the build needs Java 21.", "other")
    say(mw, PORT, "s1")
    say(mw, "never mind", "s1", PORT)
    assert captured(store) == ["The build needs Java 21."]
    say(mw, "never mind", "other", "Remember that the build needs Java 21.", "Which JDK do we use?")
    assert captured(store) == ["The build needs Java 21."]  # the message before said nothing to remember
    clock.now += 10_000
    say(mw, "never mind", "other", "Remember that the build needs Java 21.")  # "that": the message before
    assert captured(store) == []


@pytest.mark.parametrize("said", [
    "Remember that the deploy token is ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "Remember that my password is hunter2",
    "From now on use the key sk-proj-abcdefghijklmnopqrstuvwxyz123 for the API",
])
def test_a_secret_is_never_stored(store: MemoryStore, clock: Clock, said: str, caplog: pytest.LogCaptureFixture) -> None:
    mw = middleware(store, clock)
    with caplog.at_level(logging.WARNING, logger="memwire"):
        say(mw, said)
    assert captured(store) == [] and read_log(store) == []
    assert any("looks like it holds a secret" in r.getMessage() for r in caplog.records)
    secret = said.split()[-1] if "sk-" not in said else "sk-proj"
    assert not any(secret in r.getMessage() for r in caplog.records)  # the log names the kind, not the value
    assert all(secret not in p.read_text() for p in store.path.rglob("*") if p.is_file())


def test_a_new_profile_value_supersedes_the_old_one(store: MemoryStore, clock: Clock) -> None:
    mw = middleware(store, clock)
    say(mw, "My timezone is Europe/Lisbon.")
    say(mw, "My timezone is America/New_York now", "s2")
    assert captured(store) == ["User's timezone is America/New_York now."]
    assert [(m.text, "superseded" in m.tags) for m in store.archive.memories()] == [
        ("User's timezone is Europe/Lisbon.", True)]


def test_review_mode_holds_captures_in_the_inbox_until_approved(store: MemoryStore, clock: Clock) -> None:
    mw = middleware(store, clock, capture="review")
    say(mw, PORT)
    assert captured(store) == []
    [waiting] = inbox_of(store).memories()
    assert waiting.text == "The staging database listens on port 5433."
    assert mw.prepare(chat(QUESTION), session_id="s2").injection.memory_ids == ()  # never injected while waiting
    approve(store, [waiting.id[:6]])
    assert captured(store) == ["The staging database listens on port 5433."] and len(inbox_of(store)) == 0
    assert waiting.id in mw.prepare(chat(QUESTION), session_id="s3").injection.memory_ids


def test_a_rejected_capture_is_not_proposed_again(store: MemoryStore, clock: Clock) -> None:
    mw = middleware(store, clock, capture="review")
    say(mw, PORT)
    [waiting] = inbox_of(store).memories()
    reject(store, [waiting.id])
    assert len(inbox_of(store)) == 0 and "rejected" in store.archive.get(waiting.id).tags
    clock.now += 10_000
    say(mw, PORT, "s2")
    assert len(inbox_of(store)) == 0


def test_capture_off_reads_nothing(store: MemoryStore, clock: Clock) -> None:
    mw = middleware(store, clock, capture="off")
    say(mw, PORT)
    assert captured(store) == [] and not (store.path / ".captured.jsonl").exists()


def test_memwires_own_block_is_never_captured(store: MemoryStore, clock: Clock) -> None:
    mw = middleware(store, clock)
    say(mw, "<memory>\nRemember that the admin panel is at /admin.\n</memory>\nWhat time is it?")
    assert captured(store) == []


def test_a_store_that_cannot_be_written_keeps_the_statement_queued(store: MemoryStore, clock: Clock,
                                                                  caplog: pytest.LogCaptureFixture,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk under the memory file: the call goes on with its memory, the statement stays
    queued (one log line, no text) and is written once the store takes writes again."""
    from memwire.middleware import _capture

    monkeypatch.setattr(_capture, "RETRY_S", 0.05)
    mw = middleware(store, clock)
    real = MemoryStore.add
    full = threading.Event()
    full.set()

    def add(self: MemoryStore, *a: Any, **k: Any) -> Any:
        if full.is_set():
            raise OSError(28, "No space left on device", str(self.path / "MEMORY.md"))
        return real(self, *a, **k)

    monkeypatch.setattr(MemoryStore, "add", add)
    with caplog.at_level(logging.INFO, logger="memwire"):
        p = say(mw, "Remember that the build needs Java 21. When do deploys go out?")
        assert p.injection.injected
        time.sleep(0.3)  # a few retries, each failing
        assert captured(store) == []
        full.clear()
        # the memory, then its capture event: wait for both (a bound for a broken worker only)
        deadline = time.monotonic() + 60
        while (captured(store) != ["The build needs Java 21."] or not read_log(store)) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert captured(store) == ["The build needs Java 21."]
    said = [r.getMessage() for r in caplog.records]
    assert len([m for m in said if "capture cannot write" in m and "ENOSPC" in m]) == 1  # once, not per retry
    assert not any("capture failed" in m or "Java" in m for m in said)
    assert [e["event"] for e in read_log(store)] == ["captured"]


def test_an_unknown_capture_setting_is_a_config_error(store: MemoryStore) -> None:
    from memwire import ConfigError

    with pytest.raises(ConfigError, match="capture"):
        Middleware(store=store, capture="sometimes")


def test_the_turn_that_says_it_does_not_get_it_back_as_memory(store: MemoryStore, clock: Clock,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    mw = middleware(store, clock)
    # the worst case of the race: a capture that is done the moment it is offered
    monkeypatch.setattr(mw.capture, "offer",
                        lambda turn, complete=None: mw.capture._run(turn.store, turn.session, "t", turn.view.user_text))
    p = mw.prepare(chat(PORT), session_id="s")
    assert captured(store) == ["The staging database listens on port 5433."]
    assert p.injection.memory_ids == ()


def test_a_worker_that_falls_behind_slows_the_sayer_and_drops_nothing(store: MemoryStore, clock: Clock,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    """Back-pressure, not drops: past ``MAX_BACKLOG`` statements waiting, a request that says one
    more waits for the worker (at most ``BACKPRESSURE_S``), then queues it all the same."""
    from memwire.middleware import _capture

    monkeypatch.setattr(_capture, "MAX_BACKLOG", 2)
    # long beside a warmed-up prepare (milliseconds), so a loaded machine cannot blur the two
    monkeypatch.setattr(_capture, "BACKPRESSURE_S", 1.0)
    mw = middleware(store, clock)
    release = threading.Event()
    real = mw.capture._apply
    mw.capture._apply = lambda *a: (release.wait(20), real(*a))[1]  # type: ignore[method-assign]
    took = []
    with caplog.at_level(logging.WARNING, logger="memwire"):
        for n in range(4):
            start = time.monotonic()
            mw.prepare(chat(f"Remember that server {n} runs Debian {n + 10}."), session_id=f"s{n}")
            took.append(time.monotonic() - start)
    assert max(took[:2]) < 1.0 <= min(took[2:])  # the first two are queued at once; then each waits
    release.set()
    mw.flush()
    assert captured(store) == [f"Server {n} runs Debian {n + 10}." for n in range(4)]
    assert not [r for r in caplog.records if "behind" in r.getMessage()]


def test_a_full_disk_after_the_memory_was_written_retries_the_event_not_the_capture(
        store: MemoryStore, clock: Clock, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC appending the capture event, once the memory is in MEMORY.md: no "capture failed",
    the memory is not written again; the event is kept and appended once the disk has room."""
    import errno

    from memwire.middleware import _capture

    monkeypatch.setattr(_capture, "RETRY_S", 0.05)
    full, real = threading.Event(), _capture.log_event
    full.set()

    def log_event(*a: Any, **k: Any) -> None:
        if full.is_set():
            raise OSError(errno.ENOSPC, "No space left on device", str(store.path / ".captured.jsonl"))
        real(*a, **k)

    monkeypatch.setattr(_capture, "log_event", log_event)
    mw = middleware(store, clock)
    with caplog.at_level(logging.INFO, logger="memwire"):
        say(mw, PORT, "a")
        say(mw, "Remember that the build needs Java 21.", "b")
        time.sleep(0.3)  # retries meanwhile, failing
        assert captured(store) == ["The staging database listens on port 5433.", "The build needs Java 21."]
        assert read_log(store) == []
        full.clear()
        deadline = time.monotonic() + 10
        while len(read_log(store)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
    assert [(e["event"], e["session"]) for e in read_log(store)] == [("captured", "a"), ("captured", "b")]
    assert captured(store) == ["The staging database listens on port 5433.", "The build needs Java 21."]
    said = [r.getMessage() for r in caplog.records]
    assert not any("capture failed" in m or "cannot write" in m for m in said)
    assert len([m for m in said if "not appended to the capture log" in m and "ENOSPC" in m]) == 1
    assert any("2 capture event(s) appended to the capture log late" in m for m in said)


def test_urgent_statements_do_not_wait_for_a_quiet_moment(store: MemoryStore, clock: Clock,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Under sustained traffic the worker holds statements for a quiet moment, but not once
    ``URGENT`` of them wait."""
    from memwire.middleware import _capture

    monkeypatch.setattr(_capture, "URGENT", 3)
    monkeypatch.setattr(_capture, "MAX_DEFER_S", 60.0)
    mw = middleware(store, clock)
    # quiet means no request for 2 s here: a busy machine that stalls the toucher thread for the
    # default 20 ms must not make a quiet moment the test did not mean
    mw.capture.settle_s = 2.0
    busy = threading.Event()
    busy.set()

    def traffic() -> None:  # a request every 5 ms: never quiet
        while busy.is_set():
            mw.capture.traffic.touch()
            time.sleep(0.005)

    toucher = threading.Thread(target=traffic)
    toucher.start()
    try:
        for n in range(2):
            mw.prepare(chat(f"Remember that server {n} runs Debian {n + 10}."), session_id=f"s{n}")
        time.sleep(0.5)
        assert captured(store) == []  # held for a quiet moment
        mw.prepare(chat("Remember that server 2 runs Debian 12."), session_id="s2")
        deadline = time.monotonic() + 60  # a bound for a broken worker, not a time the test needs
        while len(captured(store)) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(captured(store)) == 3  # written while the traffic goes on
    finally:
        busy.clear()
        toucher.join()
