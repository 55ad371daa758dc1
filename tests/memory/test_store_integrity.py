"""MemoryStore integrity: round trips, ids, lock order, hand edits racing writes, symlinks."""

from __future__ import annotations

import logging
import os
import subprocess
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memwire import InvalidMemoryError, Memory, MemoryFileError, MemoryNotFoundError, MemoryStore, MemwireError, Middleware
from memwire.memory import _model as model
from memwire.memory._store import _Dir


@pytest.mark.parametrize(
    ("text", "tags"),
    [
        ("Prefers modern C++ idioms", ["c++"]),
        ("Watches birds", ["ñandú"]),
        ("Answers in Chinese", ["语言"]),
        ("Uses C# at work", ["C#"[:1]]),  # the tag "c"
        ("📌 is the emoji of the pin", []),
        ("Use #rust for the CLI", []),
        ("Ends with a hashtag #rust", ["rust"]),
        ("[draft] the plan is not final", []),
        ("[x] a checkbox that is text", []),
        ("A comment <!-- date: 2020 --> inside", []),
        ("Literal backslash-hash \\#here and \\[there", []),
        ("Two\nlines become one", []),
        ("Mentions #pinned in its text", []),
    ],
)
def test_what_add_accepts_reads_back_as_the_same_memory(tmp_path: Path, text: str, tags: list[str]) -> None:
    mem = MemoryStore(tmp_path).add(text, tags=tags)
    again = MemoryStore(tmp_path).get(mem.id)  # a fresh process reads the file
    assert again == mem and not again.pinned
    MemoryStore(tmp_path).forget(mem.id)  # the printed id is one forget knows
    assert len(MemoryStore(tmp_path)) == 0


@pytest.mark.parametrize("tag", ["machine learning", "a\nb", "-dash", "x" * 65, "1st"])
def test_a_tag_outside_the_documented_set_is_refused_naming_it(tmp_path: Path, tag: str) -> None:
    with pytest.raises(InvalidMemoryError, match="invalid tag"):
        MemoryStore(tmp_path).add("Some fact", tags=[tag])
    assert not (tmp_path / "MEMORY.md").exists()  # nothing half-written


def test_a_topic_that_cannot_be_a_header_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidMemoryError, match="topic"):
        MemoryStore(tmp_path).add("Some fact", topic="C#")  # "## C#" reads back as topic "C"
    mem = MemoryStore(tmp_path).add("Some fact", topic="Build\nand test")  # white space: one line
    assert MemoryStore(tmp_path).get(mem.id).topic == "Build and test"


def test_pinning_is_only_by_the_flag_or_the_marker(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    a = store.add("📌 not pinned, just an emoji")
    b = store.add("Pinned by the flag", pinned=True)
    (tmp_path / "notes.md").write_text("- 📌 pinned by hand\n- also by hand #pinned\n")
    fresh = {m.text: m.pinned for m in MemoryStore(tmp_path)}
    assert fresh == {a.text: False, b.text: True, "pinned by hand": True, "also by hand": True}


_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60)
_tag = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_text, tags=st.lists(_tag, max_size=3), topic=st.none() | _text)
@example(text="a #b", tags=["b"], topic=None)
@example(text="\\📌 x", tags=[], topic=None)
def test_add_either_refuses_or_reads_back_exactly(tmp_path_factory: pytest.TempPathFactory, text: str,
                                                  tags: list[str], topic: str | None) -> None:
    d = tmp_path_factory.mktemp("rt")
    try:
        mem = MemoryStore(d).add(text, tags=tags, topic=topic)
    except InvalidMemoryError:
        return
    assert list(MemoryStore(d)) == [mem]


def test_ids_are_80_bits_and_old_10_character_ids_still_work(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    mem = store.add("User prefers tabs")
    assert len(mem.id) == 20
    old = mem.id[:10]  # what an older version printed
    assert store.get(old) == mem
    assert store.pin(old).pinned
    assert store.forget(old).id == mem.id and len(store) == 0


def test_an_ambiguous_id_prefix_is_refused(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    mems = store.add_many([f"fact number {i}" for i in range(800)])  # some pair shares 4 leading chars
    by_prefix: dict[str, list[str]] = {}
    for m in mems:
        by_prefix.setdefault(m.id[:4], []).append(m.id)
    shared = next(p for p, ids in by_prefix.items() if len(ids) > 1)
    with pytest.raises(MemoryNotFoundError, match="matches 2 memories"):
        store.forget(shared)
    with pytest.raises(MemoryNotFoundError, match="no memory"):
        store.forget(mems[0].id[:3])  # shorter than the minimum: never a prefix match
    assert len(store) == 800


def test_a_colliding_id_hides_no_memory_and_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(model, "ID_CHARS", 1)  # 16 possible ids: 40 memories must collide
    (tmp_path / "MEMORY.md").write_text("".join(f"- fact number {i}\n" for i in range(20)))
    (tmp_path / "more.md").write_text("".join(f"- fact number {i}\n" for i in range(20, 40)))
    with caplog.at_level(logging.WARNING, logger="memwire"):
        store = MemoryStore(tmp_path)  # collisions within a file and across files
        assert len(store) == 40 and len({m.id for m in store}) == 40
    assert "shared by two different texts" in caplog.text


def test_add_and_pin_or_forget_from_threads_do_not_deadlock(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    ids = [store.add(f"fact number {i} about things").id for i in range(10)]
    errors: list[BaseException] = []

    def run(fn) -> None:  # type: ignore[no-untyped-def]
        try:
            for i in range(60):
                fn(i)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(lambda i: store.add(f"new fact {i}"),), daemon=True),
               threading.Thread(target=run, args=(lambda i: store.pin(ids[i % 10], i % 2 == 0),), daemon=True),
               threading.Thread(target=run, args=(lambda i: store.search("fact things"),), daemon=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)  # a hang guard only: done in well under a second when the lock order holds
    assert not any(t.is_alive() for t in threads), "deadlock: a writer and a pinner wait on each other"
    assert not errors and len(store) == 70


def test_a_request_never_waits_on_a_thread_holding_the_store(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    store.add("The staging database is Postgres 16")
    mw = Middleware(store=store, mode="contextPerTurn", history="drop", timeout_ms=200)
    mw.prepare([{"role": "user", "content": "warm up"}])
    held, release = threading.Event(), threading.Event()

    def hold() -> None:  # another thread inside the store (a long re-read, a writer's swap)
        with store._lock:
            held.set()
            release.wait(30)

    threading.Thread(target=hold, daemon=True).start()
    held.wait(5)
    out: list = []
    t = threading.Thread(target=lambda: out.append(mw.prepare([{"role": "user", "content": "Which database does staging use?"}])))
    t.start()
    t.join(20)
    release.set()
    assert out, "prepare() waited for the thread holding the store"
    assert out[0].injection.skipped == "timeout"


def test_hand_appends_while_memwire_writes_are_never_lost(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    store.add("seed fact", topic="Notes")
    (tmp_path / "MEMORY.md").write_bytes((tmp_path / "MEMORY.md").read_bytes() + b"\n## Later\n- a later topic\n")
    pinned = store.add("a fact to pin and unpin", topic="Notes")  # Notes is no longer last: rewrites
    stop = threading.Event()

    def write() -> None:
        i = 0
        while not stop.is_set():
            store.add(f"api fact {i}", topic="Notes" if i % 2 else "Later")  # rewrite, then append
            store.pin(pinned.id, i % 2 == 0)
            i += 1

    w = threading.Thread(target=write, daemon=True)
    w.start()
    script = "for i in $(seq 1 120); do echo \"- hand line $i\" >> MEMORY.md; done"
    subprocess.run(["sh", "-c", script], cwd=tmp_path, check=True, timeout=120)
    stop.set()
    w.join(60)
    text = (tmp_path / "MEMORY.md").read_text()
    lost = [i for i in range(1, 121) if f"- hand line {i}\n" not in text]
    assert not lost, f"{len(lost)} hand-appended lines lost"


def test_an_add_under_the_last_topic_appends_in_place(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    store.add("first")
    inode = (tmp_path / "MEMORY.md").stat().st_ino
    store.add("second")  # O_APPEND: a hand edit appending at the same moment cannot be lost
    assert (tmp_path / "MEMORY.md").stat().st_ino == inode
    assert [m.text for m in MemoryStore(tmp_path)] == ["first", "second"]


def test_a_line_appended_by_hand_during_a_rewrite_is_carried_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore(tmp_path)
    mem = store.add("a fact to pin")
    stage = _Dir.stage

    def stage_then_append(self: _Dir, name: str, content: bytes | str, mode: int = 0o644) -> str:
        with open(tmp_path / "MEMORY.md", "a") as fh:  # ``echo >>`` after memwire read the file
            fh.write("- written by hand meanwhile\n")
        return stage(self, name, content, mode)

    monkeypatch.setattr(_Dir, "stage", stage_then_append)
    store.pin(mem.id)
    assert {m.text: m.pinned for m in MemoryStore(tmp_path)} == {"a fact to pin": True, "written by hand meanwhile": False}


def test_a_symlinked_memory_file_is_not_read(tmp_path: Path) -> None:
    mem, outside = tmp_path / "mem", tmp_path / "outside"
    mem.mkdir()
    outside.mkdir()
    (outside / "secrets.md").write_text("- the deploy key is hunter2\n")
    (mem / "inner.md").write_text("- an inner fact\n")
    (mem / "leak.md").symlink_to(outside / "secrets.md")
    (mem / "alias.md").symlink_to(mem / "inner.md")  # inside too: a link is never followed
    store = MemoryStore(mem)
    assert [m.text for m in store] == ["an inner fact"]
    assert sorted(Path(p.path).name for p in store.problems if "symlink" in p.problem) == ["alias.md", "leak.md"]


def test_memwire_never_writes_through_a_symlinked_memory_file(tmp_path: Path) -> None:
    mem, target = tmp_path / "mem", tmp_path / "dotfiles.md"
    mem.mkdir()
    target.write_text("- mine\n")
    (mem / "MEMORY.md").symlink_to(target)
    with pytest.raises(MemwireError, match="symlink"):
        MemoryStore(mem).add("new fact")
    assert (mem / "MEMORY.md").is_symlink() and target.read_text() == "- mine\n"


def test_a_symlink_memwire_will_not_write_through_is_a_memory_file_error_naming_it(tmp_path: Path) -> None:
    mem = tmp_path / "mem"
    mem.mkdir()
    (tmp_path / "elsewhere.md").write_text("- mine\n")
    (mem / "MEMORY.md").symlink_to(tmp_path / "elsewhere.md")
    with pytest.raises(MemoryFileError) as caught:
        MemoryStore(mem).add("new fact")
    assert caught.value.path == str(mem / "MEMORY.md") and "symlink" in caught.value.problem
    (mem / "MEMORY.md").unlink()
    (mem / ".lock").unlink()  # the refused write had taken the lock
    (tmp_path / "lock-target").write_text("")
    (mem / ".lock").symlink_to(tmp_path / "lock-target")
    with pytest.raises(MemoryFileError) as caught:
        MemoryStore(mem).add("new fact")
    assert caught.value.path == str(mem / ".lock") and "symlink" in caught.value.problem
    assert not (mem / "MEMORY.md").exists()


def test_a_memory_directory_that_is_a_file_is_a_memory_file_error(tmp_path: Path) -> None:
    (tmp_path / "memory").write_text("a file, not a directory")
    with pytest.raises(MemoryFileError, match="not a directory") as caught:
        MemoryStore(tmp_path / "memory").search("anything")
    assert caught.value.path == str(tmp_path / "memory") and caught.value.line is None
    assert (tmp_path / "memory").read_text() == "a file, not a directory"


def test_rewrites_keep_the_files_permissions(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    mem = store.add("private fact")
    (tmp_path / "MEMORY.md").chmod(0o640)
    store.pin(mem.id)
    store.add("another", topic="Elsewhere")
    store.forget(mem.id)
    assert (tmp_path / "MEMORY.md").stat().st_mode & 0o777 == 0o640


def test_a_new_memory_file_is_readable_by_the_user_group_as_usual(tmp_path: Path) -> None:
    MemoryStore(tmp_path).add("fact")
    assert (tmp_path / "MEMORY.md").stat().st_mode & 0o777 == 0o644 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_memory_equality_is_what_round_trips(tmp_path: Path) -> None:
    m = MemoryStore(tmp_path).add("Tabs", tags=["Style"], topic="Prefs")
    assert m == Memory(m.id, "Tabs", ("style",), False, "Prefs", None)


@pytest.mark.parametrize(("memory", "query"), [
    ("用户喜欢用中文回答问题", "中文"),
    ("用户喜欢用中文回答问题", "你喜欢用什么语言回答？"),
    ("ユーザーは日本語での回答を好む", "日本語で答えて"),
    ("사용자는 한국어 답변을 선호한다", "한국어로 답해 주세요"),
    ("🍕 is my favourite food", "🍕?"),
])
def test_text_without_spaces_and_emoji_are_retrievable(tmp_path: Path, memory: str, query: str) -> None:
    store = MemoryStore(tmp_path)
    store.add_many([memory, "Deploys go out on Tuesdays", "The staging database is Postgres 16"])
    assert [h.memory.text for h in store.search(query)] == [memory]


def test_a_store_of_one_memory_finds_an_obvious_match(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    store.add("User prefers tabs")
    assert [h.memory.text for h in store.search("Should I use tabs in this file?")] == ["User prefers tabs"]
    assert store.search("What's the capital of Mongolia?") == []


def test_a_read_during_this_processs_own_write_reads_the_memories_as_they_were(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    store.add("Deploys go out on Tuesdays")
    store.search("warm up")
    assert store.ready()
    with store._dirs[-1].write_lock():  # a write of this process in progress (the capture worker's, say)
        with open(tmp_path / "MEMORY.md", "a") as fh:
            fh.write("- The build needs Java 21\n")
        assert store.ready()  # the request reads the loaded memories, it does not wait for the writer
        assert [h.memory.text for h in store.search("when do deploys go out", refresh=False, wait=False)] == [
            "Deploys go out on Tuesdays"]
    assert not store.ready()  # once the write is done, the change is seen
    assert "The build needs Java 21" in [m.text for m in store.memories()]


def test_a_read_that_must_not_wait_waits_out_a_short_hold_and_not_a_long_one(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A search on the event loop (``wait=False``) finds the store's lock held by a background
    thread's short read: it waits for it (up to ``BUSY_WAIT_S``) rather than failing over to a
    worker thread; a hold longer than that is a ``StoreBusyError``, as before."""
    from memwire import StoreBusyError
    from memwire.memory import _store

    store = MemoryStore(tmp_path)
    store.add("Deploys go out on Tuesdays")
    store.search("warm up")
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store._lock:
            held.set()
            release.wait(30)

    monkeypatch.setattr(_store, "BUSY_WAIT_S", 30.0)  # a hold released while the search waits is waited out
    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(30)
    threading.Timer(0.05, release.set).start()
    assert [h.memory.text for h in store.search("deploys", refresh=False, wait=False)] == ["Deploys go out on Tuesdays"]
    holder.join(30)

    monkeypatch.setattr(_store, "BUSY_WAIT_S", 0.0)  # a hold that outlasts the wait
    held.clear()
    release.clear()
    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(30)
    try:
        with pytest.raises(StoreBusyError):
            store.search("deploys", refresh=False, wait=False)
    finally:
        release.set()
        holder.join(30)
