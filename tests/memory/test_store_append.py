"""MemoryStore.add at scale: an add under the file's last topic appends without reading the file,
writes exactly the bytes the full path would, and loses nothing acknowledged to ``kill -9``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memwire import MemoryStore
from memwire.memory import _store_write as store_mod  # the write path: what these tests patch
from memwire.memory._markdown import format_line
from memwire.memory._model import Memory

ROOT = Path(__file__).resolve().parents[2]

_PIECES = st.sampled_from([
    "# Memory\n", "## Notes\n", "## Work\n", "## notes\n", "##  Notes  \n", "- a fact\n", "- another fact\n",
    "\n", "  continued\n", "plain text\n", "### Deeper\n", "#tag line\n", "- no newline at the end",
])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(_PIECES, max_size=8), topic=st.sampled_from(["Notes", "Work", "New topic"]))
@example(pieces=["# Memory\n", "## Notes\n", "- a fact\n", "\n"], topic="Notes")  # a blank line at the end
@example(pieces=["# Memory\n", "## Notes\n", "- no newline at the end"], topic="Notes")
def test_an_add_writes_what_inserting_under_its_topic_writes(tmp_path_factory: pytest.TempPathFactory,
                                                             pieces: list[str], topic: str) -> None:
    """Whether the add appends blind (cache current, topic last) or reads the file, the file ends
    up as ``_insert_under_topic`` makes it."""
    d = tmp_path_factory.mktemp("s")
    before = "".join(pieces).encode()
    (d / "MEMORY.md").write_bytes(before)
    store = MemoryStore(d, track=False)
    list(store)  # the cache is current
    mem = store.add("the new fact", topic=topic)
    line = format_line(Memory(mem.id, mem.text, mem.tags, mem.pinned, topic, mem.date))
    assert (d / "MEMORY.md").read_bytes() == store_mod._insert_under_topic(before, topic, [line])
    assert mem.id in [m.id for m in MemoryStore(d, track=False)]


def test_an_add_under_the_last_topic_does_not_read_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore(tmp_path, track=False)
    store.add("first")
    reads: list[int] = []
    real = store_mod._read_all
    monkeypatch.setattr(store_mod, "_read_all", lambda fd: reads.append(fd) or real(fd))
    store.add("second")
    store.add_many(["third", "fourth"])
    assert reads == []
    assert [m.text for m in MemoryStore(tmp_path, track=False)] == ["first", "second", "third", "fourth"]
    assert [m.text for m in store] == ["first", "second", "third", "fourth"]
    store.add("elsewhere", topic="Other")  # not the last topic: the file is read
    assert len(reads) == 1


def test_a_hand_edit_since_the_last_read_makes_the_add_read_the_file(tmp_path: Path) -> None:
    """The cache's (mtime, size, inode) no longer matches: the blind append is not trusted."""
    store = MemoryStore(tmp_path, track=False)
    store.add("first")
    path = tmp_path / "MEMORY.md"
    path.write_bytes(path.read_bytes() + b"\n## Later\n- by hand\n")
    store.add("second")  # Notes is no longer last: goes under Notes, not under Later
    text = path.read_text()
    assert text.index("- second") < text.index("## Later")
    assert {m.text: m.topic for m in MemoryStore(tmp_path, track=False)} == {
        "first": "Notes", "second": "Notes", "by hand": "Later"}


def test_a_hand_edit_racing_the_add_makes_it_read_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hand edit after the add's re-read and before its write (a writer that takes no lock):
    the file's (mtime, size, inode) is checked on the open descriptor, so the add reads the file."""
    store = MemoryStore(tmp_path, track=False)
    store.add("first")
    path = tmp_path / "MEMORY.md"
    real = store_mod._Dir.open_for_write

    def edit_then_open(self: store_mod._Dir, name: str, create: bool) -> int:
        with open(path, "ab") as fh:
            fh.write(b"\n## Later\n- by hand\n")
        return real(self, name, create)

    monkeypatch.setattr(store_mod._Dir, "open_for_write", edit_then_open)
    store.add("second")
    assert {m.text: m.topic for m in MemoryStore(tmp_path, track=False)} == {
        "first": "Notes", "second": "Notes", "by hand": "Later"}


_CHILD = """
import sys
from memwire import MemoryStore
store = MemoryStore(sys.argv[1], track=False)
i = 0
while True:
    store.add(f"acknowledged fact number {i}")
    sys.stdout.write(f"{i}\\n")
    sys.stdout.flush()
    i += 1
"""


@pytest.mark.parametrize("seed_lines", [0, 2000])
def test_kill_9_during_adds_loses_nothing_acknowledged(tmp_path: Path, seed_lines: int) -> None:
    if seed_lines:
        (tmp_path / "MEMORY.md").write_text("# Memory\n\n## Notes\n" + "".join(f"- seed {i}\n" for i in range(seed_lines)))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path)], stdout=subprocess.PIPE, env=env, text=True)
    assert child.stdout is not None
    acked: list[int] = []
    deadline = time.monotonic() + 60
    while len(acked) < 40 and time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            break
        acked.append(int(line))
    os.kill(child.pid, signal.SIGKILL)
    child.wait(10)
    assert len(acked) >= 40, "the child did not add"
    store = MemoryStore(tmp_path, track=False)
    texts = {m.text for m in store}
    assert not store.problems
    assert [i for i in acked if f"acknowledged fact number {i}" not in texts] == []
    assert len(texts) == seed_lines + len([t for t in texts if t.startswith("acknowledged")])
