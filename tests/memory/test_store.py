"""The memory stores: what both backends do (``make_store``: markdown and PostgreSQL), then the
markdown store's files on disk, hand edits, atomic writes and scopes."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from memwire import MemoryNotFoundError, MemoryStore, NamespaceError
from memwire.memory._markdown import parse
from tests.stores import StoreSpec


def test_directory_is_created_on_first_write_only(tmp_path: Path) -> None:
    d = tmp_path / "mem"
    store = MemoryStore(d)
    assert list(store) == [] and store.search("anything") == []
    assert not d.exists()
    store.add("User prefers tabs over spaces", tags=["preference"])
    assert (d / "MEMORY.md").is_file()


def test_ids_are_stable_and_adding_a_text_again_merges(make_store: StoreSpec) -> None:
    store = make_store()
    m = store.add("User prefers tabs over spaces", tags=["preference"], topic="Preferences")
    again = store.add("user prefers  tabs over spaces")  # same text modulo case/space: same memory
    assert again == m and len(store) == 1
    merged = store.add("User prefers tabs over spaces", tags=["style", "preference"], pinned=True)
    assert merged.id == m.id and merged.tags == ("preference", "style") and merged.pinned
    assert make_store().get(m.id) == merged == store.get(m.id[:6])
    assert (merged.topic, merged.text) == ("Preferences", "User prefers tabs over spaces")


def test_add_writes_markdown_and_ids_are_stable(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    m = store.add("User prefers tabs over spaces", tags=["preference"], topic="Preferences")
    again = store.add("user prefers  tabs over spaces")  # same text modulo case/space: same memory
    assert again.id == m.id and len(store) == 1
    text = (tmp_path / "MEMORY.md").read_text()
    assert "## Preferences\n- User prefers tabs over spaces #preference\n" in text
    assert MemoryStore(tmp_path).get(m.id).tags == ("preference",)


def test_search_pin_forget(make_store: StoreSpec) -> None:
    store = make_store()
    a = store.add("Build with `make build`, never call setup.py directly", tags=["build"])
    b = store.add("The staging database is Postgres 15 on port 5433", tags=["infra"])
    hits = store.search("how do I build the project?", k=5)
    assert hits and hits[0].memory.id == a.id and hits[0].score > 0
    assert store.pin(a.id[:8]).pinned and store.get(a.id).pinned
    assert [m.id for m in make_store().pinned()] == [a.id]
    assert not store.pin(a.id, False).pinned and make_store().pinned() == []
    removed = store.forget(a.id)
    assert removed.id == a.id and a.id not in store and a.id not in make_store()
    assert [m.id for m in store] == [b.id] and store.search("make build setup.py") == []
    assert store.missing([a.id, b.id]) == {a.id}
    with pytest.raises(MemoryNotFoundError):
        store.forget(a.id)
    with pytest.raises(MemoryNotFoundError, match="no memory with id 'ffff'"):
        store.get("ffff")


def test_an_id_prefix_must_be_unique_and_four_characters_long(make_store: StoreSpec) -> None:
    from memwire.memory._model import memory_id

    seen: dict[str, str] = {}
    for i in range(5000):  # two texts whose ids share their first four characters
        text = f"memory number {i}"
        twin = seen.setdefault(memory_id(text)[:4], text)
        if twin != text:
            break
    store = make_store()
    a, b = store.add(twin), store.add(text)
    shared = os.path.commonprefix([a.id, b.id])
    with pytest.raises(MemoryNotFoundError, match="matches 2 memories"):
        store.get(shared)
    with pytest.raises(MemoryNotFoundError, match="matches 2 memories"):
        store.forget(shared)
    assert store.get(a.id[: len(shared) + 1]) == a and make_store().get(b.id[: len(shared) + 1]) == b
    with pytest.raises(MemoryNotFoundError, match="no memory with id"):
        store.get(a.id[:3])  # under four characters: never a prefix
    assert store.forget(b.id[: len(shared) + 1]) == b and len(make_store()) == 1


def test_search_pin_forget_roundtrip(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    a = store.add("Build with `make build`, never call setup.py directly", tags=["build"])
    store.add("The staging database is Postgres 15 on port 5433", tags=["infra"])
    hits = store.search("how do I build the project?", k=5)
    assert hits and hits[0].memory.id == a.id and hits[0].score > 0
    store.pin(a.id)
    assert store.get(a.id).pinned and "#pinned" in (tmp_path / "MEMORY.md").read_text()
    assert [m.id for m in MemoryStore(tmp_path).pinned()] == [a.id]
    removed = store.forget(a.id)
    assert removed.id == a.id and a.id not in store
    assert "make build" not in (tmp_path / "MEMORY.md").read_text()
    with pytest.raises(MemoryNotFoundError):
        store.forget(a.id)


def test_reads_formats_of_other_tools(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text(
        "# Project memory\n\n## Decisions\n- Use ruff, not flake8 #lint\n- [preference] Tabs, width 4\n"
        "* 📌 Never push to main directly\n"
    )
    (tmp_path / "deploy.md").write_text(
        "---\ndescription: Deployment notes\ntags: [deploy, ops]\n---\n\nDeploys go out on Tuesdays only.\n\n"
        "Rollbacks use `kubectl rollout undo`.\n"
    )
    mems = {m.text: m for m in MemoryStore(tmp_path)}
    assert mems["Use ruff, not flake8"].tags == ("lint",)
    assert mems["Use ruff, not flake8"].topic == "Decisions"
    assert mems["Tabs, width 4"].tags == ("preference",)
    assert mems["Never push to main directly"].pinned
    deploy = mems["Deploys go out on Tuesdays only."]
    assert set(deploy.tags) == {"deploy", "ops"} and deploy.topic == "Deployment notes"
    assert "Rollbacks use `kubectl rollout undo`." in mems


def test_hand_edits_visible_on_next_call_and_nothing_reread_otherwise(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    store.add("Old fact about the linter")
    f = tmp_path / "MEMORY.md"
    f.write_text(f.read_text().replace("Old fact about the linter", "New fact: the linter is ruff"))
    assert [m.text for m in store] == ["New fact: the linter is ruff"]
    assert store.search("ruff linter")[0].memory.text.startswith("New fact")
    loads = []
    original = store._dirs[-1]._load
    store._dirs[-1]._load = lambda *a: (loads.append(a), original(*a))  # type: ignore[method-assign]
    store.search("ruff")
    list(store)
    assert loads == []  # unchanged files are not parsed again


def test_a_file_added_is_seen_whatever_listing_was_trusted_before(tmp_path: Path) -> None:
    """``ready()`` trusts a listing of exactly the loaded files while the directory's mtime stays
    (then stats only those files); a listing that found another file is never trusted."""
    store = MemoryStore(tmp_path)
    store.add("The linter is ruff")
    assert len(store) == 1  # loaded
    old = time.time() - 60
    os.utime(tmp_path, (old, old))  # older than a timestamp tick: a listing of it may be trusted
    assert store.ready() and store._dirs[-1]._dir_sig is not None
    (tmp_path / "other.md").write_text("## Build\n- Build with make\n")
    os.utime(tmp_path, (old + 1, old + 1))
    assert not store.ready()
    assert not store.ready()  # the listing that found other.md was not trusted
    assert store.search("build make")[0].memory.text == "Build with make"
    assert store.ready()


def test_broken_file_reports_path_and_line_and_others_still_load(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("## A\n- Good memory about pytest fixtures\n")
    (tmp_path / "broken.md").write_bytes(b"## B\n- fine line about docker\n- bad \xff\xfe bytes here\n- half wri")
    store = MemoryStore(tmp_path)
    texts = {m.text for m in store}
    assert "Good memory about pytest fixtures" in texts
    assert "fine line about docker" in texts and "half wri" in texts
    problems = store.problems
    assert any(p.path.endswith("broken.md") and p.line == 3 and "UTF-8" in str(p) for p in problems)


def test_rewrite_keeps_undecodable_bytes_of_other_lines(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_bytes(b"## A\n- keep \xff this\n- drop me please\n")
    store = MemoryStore(tmp_path)
    victim = next(m for m in store if m.text == "drop me please")
    store.forget(victim.id)
    assert (tmp_path / "MEMORY.md").read_bytes() == b"## A\n- keep \xff this\n"


def test_empty_bullet_reported(tmp_path: Path) -> None:
    parsed = parse(b"## T\n-\n- ok memory\n", "x.md")
    assert [e.memory.text for e in parsed.entries] == ["ok memory"]
    assert parsed.problems[0].line == 2


def _adder(args: tuple[StoreSpec, int]) -> None:
    spec, n = args
    store = spec()
    for i in range(20):
        store.add(f"process {n} memory number {i}")
    for i in range(10):  # the same texts from every process, each with its own tag: one memory each
        store.add(f"shared memory number {i}", tags=[f"p{n}"])
    store.lifecycle.flush()  # the pool kills its workers: atexit would not run


def test_processes_writing_at_once_lose_nothing(make_store: StoreSpec) -> None:
    ctx = multiprocessing.get_context("spawn")  # fork in a process with threads can deadlock
    with ctx.Pool(3) as pool:
        pool.map(_adder, [(make_store, n) for n in range(3)])
    store = make_store()
    mems = store.memories()
    assert len(mems) == len({m.id for m in mems}) == 70
    shared = [m for m in mems if m.text.startswith("shared")]
    assert len(shared) == 10 and all(sorted(m.tags) == ["p0", "p1", "p2"] for m in shared)  # no tag merge lost
    metas = store.lifecycle.get_many(mems)  # every process's metadata, counts added up
    assert all(m.recorded and m.cue == "explicit" for m in metas)
    assert sorted(m.evidence for m in metas) == [1] * 60 + [3] * 10


def test_two_processes_writing_at_once_leave_no_temp_files(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        pool.map(_adder, [(StoreSpec("markdown", str(tmp_path)), n) for n in range(2)])
    assert len(MemoryStore(tmp_path)) == 50
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    meta = json.loads((tmp_path / ".meta.json").read_text())["memories"]  # both processes' metadata
    assert len(meta) == 50 and {m["cue"] for m in meta.values()} == {"explicit"}


def test_global_and_project_scopes_project_wins(tmp_path: Path) -> None:
    home, proj = tmp_path / "home", tmp_path / "proj"
    MemoryStore(home).add("Prefer short commit messages", tags=["global"])
    MemoryStore(home).add("User's editor is vim")
    MemoryStore(proj).add("Prefer short commit messages", tags=["project"], pinned=True)
    store = MemoryStore(proj, global_dir=home)
    mems = {m.text: m for m in store}
    assert mems["Prefer short commit messages"].pinned  # the project's copy
    assert "User's editor is vim" in mems
    new = store.add("Only in project")
    assert (proj / "MEMORY.md").read_text().count(new.text) == 1
    assert "Only in project" not in (home / "MEMORY.md").read_text()


def test_namespaces_of_one_store_are_isolated(make_store: StoreSpec) -> None:
    root = make_store()
    root.add("Default namespace secret about kubernetes")
    alice = root.namespace_store("alice")
    alice.add("Alice likes kubernetes dashboards")
    assert [h.memory.text for h in alice.search("kubernetes")] == ["Alice likes kubernetes dashboards"]
    assert [h.memory.text for h in root.search("kubernetes")] == ["Default namespace secret about kubernetes"]
    bob = alice.namespace_store("bob")
    assert bob.search("kubernetes") == [] and len(bob) == 0
    bob.append_event("captured", {"event": "captured", "id": "x"})
    assert alice.read_events("captured") == [] and bob.read_events("captured") == [{"event": "captured", "id": "x"}]
    assert len(alice.namespace_store("alice")) == 1 and len(root.namespace_store(None)) == 1
    for bad in ["../x", "/etc", "a/b", "x\x00y", "a" * 200, ".."]:
        with pytest.raises(NamespaceError):
            root.namespace_store(bad)


def test_event_logs_keep_records_in_order(make_store: StoreSpec) -> None:
    store = make_store()
    for i in range(3):
        store.append_event("telemetry", {"n": i, "text": "café ✓"})
    assert store.read_events("telemetry") == [{"n": 0, "text": "café ✓"}, {"n": 1, "text": "café ✓"},
                                              {"n": 2, "text": "café ✓"}]
    assert store.read_events("captured") == [] and make_store().read_events("telemetry")[-1]["n"] == 2
    with pytest.raises(ValueError, match="unknown event log"):
        store.append_event("../x", {})


def test_namespaces_are_isolated(tmp_path: Path) -> None:
    root = tmp_path / "root"
    MemoryStore(root).add("Default namespace secret about kubernetes")
    MemoryStore(tmp_path / "home").add("Global scope note about kubernetes clusters")
    alice = MemoryStore.for_namespace(root, "alice", global_dir=tmp_path / "home")
    alice.add("Alice likes kubernetes dashboards")
    assert (root / "namespaces" / "alice" / "MEMORY.md").is_file()
    assert [h.memory.text for h in alice.search("kubernetes")] == ["Alice likes kubernetes dashboards"]
    bob = MemoryStore.for_namespace(root, "bob")
    assert bob.search("kubernetes") == []
    for bad in ["../x", "/etc", "a/b", "x\x00y", "a" * 200, "..", ""]:
        if bad == "":
            continue
        with pytest.raises(NamespaceError):
            MemoryStore.for_namespace(root, bad)


def test_unrelated_prompt_finds_nothing(make_store: StoreSpec) -> None:
    store = make_store()
    store.add_many(
        [
            "Run the test suite with `make test`; it needs Docker running",
            "The API server is FastAPI, started with `uvicorn app.main:app`",
            "User prefers pytest fixtures over setUp methods",
        ]
    )
    assert store.search("What's the weather in Paris tomorrow?") == []


def test_add_many_is_one_write(make_store: StoreSpec) -> None:
    store = make_store()
    mems = store.add_many([f"memory number {i} about topic {i % 7}" for i in range(200)])
    assert len(mems) == 200 == len(store)
    assert len(make_store()) == 200 and make_store().memories() == mems == store.memories()


def test_memories_come_in_file_order_grouped_by_topic(make_store: StoreSpec) -> None:
    store = make_store()
    store.add("first note")
    store.add("a build fact", topic="Build")
    store.add_many(["second note", "another build fact"])
    store.add("third build fact", topic="Build")
    expect = ["first note", "second note", "another build fact", "a build fact", "third build fact"]
    assert [m.text for m in make_store()] == expect  # as read back (the writer's own order may be the adds')
    assert sorted(m.text for m in store.memories()) == sorted(expect)


def test_search_excludes_memories_already_shown(make_store: StoreSpec) -> None:
    store = make_store()
    store.add_many([f"The build uses make target number {i}" for i in range(10)] + ["Unrelated note about lunch"])
    top = store.search("which make target does the build use", k=3)
    rest = store.search("which make target does the build use", k=3, exclude={h.memory.id for h in top})
    assert len(rest) == 3 and not {h.memory.id for h in top} & {h.memory.id for h in rest}
    everything = store.search("which make target does the build use", k=6)
    assert [h.memory.id for h in everything] == [h.memory.id for h in top + rest]


def test_new_and_removed_topic_files_are_seen_when_the_directory_is_old(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    store.add("First memory about the build")
    old = time.time() - 10  # a directory last changed long ago: later reads take the fast path
    os.utime(tmp_path, (old, old))
    assert len(store) == 1 and len(store) == 1
    (tmp_path / "deploy.md").write_text("## Deploy\n- Deploys go out on Tuesdays\n")
    assert {m.text for m in store} == {"First memory about the build", "Deploys go out on Tuesdays"}
    os.utime(tmp_path, (old, old))
    len(store)
    (tmp_path / "deploy.md").unlink()
    assert [m.text for m in store] == ["First memory about the build"]


_MOUNTS = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 27 0:40 / /srv/team\\040notes rw,relatime shared:5 master:2 - nfs4 server:/notes rw,vers=4.2
31 30 0:41 / /srv/team\\040notes/local rw - tmpfs tmpfs rw
32 27 0:42 / /mnt/usb rw - vfat /dev/sdb1 rw
33 27 0:43 / /mnt/usb rw - xfs /dev/sdc1 rw
"""


@pytest.mark.parametrize("path, fine", [
    ("/home/me/project/.memwire", True),  # ext4 at /
    ("/srv/team notes/memory", False),  # NFS (its mount point escaped in the table): its server's clock
    ("/srv/team notes/local/memory", True),  # the deepest mount: tmpfs
    ("/srv/team notesx", True),  # not under /srv/team notes
    ("/mnt/usb/memory", True),  # the later of two mounts at one point: xfs over vfat
    ("/proc/memory", False),
])
def test_a_listing_is_trusted_sooner_on_a_local_filesystem_with_fine_timestamps(path: str, fine: bool) -> None:
    from memwire.memory._store import _DIR_TICK_NS, _FINE_TICK_NS, fine_tick_ns

    assert fine_tick_ns(Path(path), _MOUNTS) == (_FINE_TICK_NS if fine else _DIR_TICK_NS)
    assert fine_tick_ns(Path(path), "") == _DIR_TICK_NS  # no mount table (not Linux): 2 s


def test_a_listing_is_trusted_once_the_directory_is_older_than_its_tick(tmp_path: Path) -> None:
    """Fine timestamps (tmp_path's filesystem here): a listing is trusted 20 ms after the last
    change, not 2 s; a directory stamped in whole seconds (a coarse filesystem) waits 2 s."""
    from memwire.memory._store import fine_tick_ns

    if fine_tick_ns(tmp_path) > 20_000_000:
        pytest.skip("tmp_path is not on a local Linux filesystem with fine timestamps")
    store = MemoryStore(tmp_path)
    store.add("The linter is ruff")
    assert len(store) == 1  # loaded
    d = store._dirs[-1]
    for age_s, trusted in ((0.001, False), (0.1, True), (1.0, True)):
        d._dir_sig = None
        then = time.time_ns() - int(age_s * 1e9)
        then -= then % 1000 - 1  # not whole seconds
        os.utime(tmp_path, ns=(then, then))
        assert store.ready() and (d._dir_sig is not None) == trusted, age_s
    d._dir_sig = None
    whole = (time.time_ns() - 500_000_000) // 1_000_000_000 * 1_000_000_000  # 0.5-1.5 s ago, in whole seconds
    os.utime(tmp_path, ns=(whole, whole))
    assert store.ready() and d._dir_sig is None


@pytest.mark.parametrize("existed", [True, False], ids=["dir-existed", "dir-created-later"])
def test_file_created_long_before_the_next_read_is_loaded_after_ready(tmp_path: Path, existed: bool) -> None:
    # A long-lived reader (the proxy's store) and another process adding the first memory
    # (`memwire add`); the middleware asks ready() before every search. The file and directory are
    # older than a timestamp tick by the time the next request comes (backdated, not slept).
    d = tmp_path / "mem"
    if existed:
        d.mkdir()
    reader = MemoryStore(d)
    assert reader.search("which port is staging on?") == [] and reader.ready()
    MemoryStore(d).add("The staging database is Postgres 15 on port 5433")
    old = time.time() - 10
    for p in (d / "MEMORY.md", d):
        os.utime(p, (old, old))
    assert not reader.ready()  # a new file: not ready, and asking must not hide it from the next read
    hits = reader.search("which port is staging on?")
    assert [h.memory.text for h in hits] == ["The staging database is Postgres 15 on port 5433"]
    assert reader.ready()
    # and a topic file created later in the same directory, again long before the next read
    (d / "deploy.md").write_text("## Deploy\n- Deploys go out on Tuesdays only\n")
    for p in (d / "deploy.md", d):
        os.utime(p, (old + 5, old + 5))
    assert not reader.ready()
    assert [h.memory.text for h in reader.search("when do deploys go out?")] == ["Deploys go out on Tuesdays only"]


@pytest.mark.parametrize("name", ["alice\n", "alice\r", "ali\tce", "\nalice", "a" * 129, "../x", "a/b", ""])
def test_namespace_names_with_control_characters_or_separators_are_refused(name: str) -> None:
    from memwire._errors import NamespaceError
    from memwire.memory._store import validate_namespace

    with pytest.raises(NamespaceError, match="invalid namespace"):
        validate_namespace(name)
    assert validate_namespace("alice@team-1.x") == "alice@team-1.x"


def test_a_memory_longer_than_the_limit_is_refused_with_its_size(make_store: StoreSpec) -> None:
    from memwire._errors import MemwireError
    from memwire.memory._store import MAX_MEMORY_CHARS

    store = make_store()
    with pytest.raises(MemwireError, match="at most 4,000 characters, this one has 1,048,576"):
        store.add("x" * 2**20)
    assert store.add("y" * MAX_MEMORY_CHARS).text == "y" * MAX_MEMORY_CHARS
    assert [len(m.text) for m in make_store()] == [MAX_MEMORY_CHARS]
    with pytest.raises(MemwireError, match="invalid tag"):
        store.add("z", tags=["has space"])
    assert len(make_store()) == 1
