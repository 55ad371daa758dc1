"""Nothing below a memory directory is read or written through a symlink (``memwire._paths``).

A memory directory is used fully (memories, pins, the archive, the inbox, namespaces, capture,
replay ledgers, telemetry, request records, metadata, the index snapshot, locks) through the real
proxy app with real SDK clients. Then, for every file and directory that use created, a copy of
the tree has that path moved outside and replaced by a symlink to it, and the same use runs again:
every call must still succeed (memory fails open), and inotify must see nothing opened, read,
written, created or removed outside, whose files carry a canary that must never reach a model.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import os
import shutil
import struct
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import openai
import pytest

from memwire import MemoryStore, Middleware
from memwire._errors import MemoryFileError, MemwireError
from memwire._paths import makedirs, open_fd, under
from memwire._sim.fake_provider import FakeProvider
from memwire.adapters.server._proxy import create_app
from memwire.memory import _snapshot
from memwire.policies.modes import _ledger

CANARY = "zebracanary"  # in every file outside: a model must never be shown it

# Every path a full use creates (directories end with "/"). A new file memwire writes must be
# added here, and so is walked by the test below.
CREATED = sorted("""
MEMORY.md .lock .index .meta.json .meta.lock .captured.jsonl .telemetry.jsonl .requests.jsonl
.capture-queue.lock .ledger/ .ledger/.pruned .ledger/LEDGER
archive/ archive/MEMORY.md archive/.lock archive/.index
inbox/ inbox/MEMORY.md inbox/.lock inbox/.index
namespaces/ namespaces/team/ namespaces/team/MEMORY.md namespaces/team/.lock namespaces/team/.index
namespaces/team/.meta.json namespaces/team/.meta.lock namespaces/team/.captured.jsonl
namespaces/team/.telemetry.jsonl namespaces/team/.requests.jsonl namespaces/team/.capture-queue.lock
namespaces/team/.ledger/ namespaces/team/.ledger/.pruned namespaces/team/.ledger/LEDGER
""".split())

# Files a use creates and removes again (the capture queue, drained once written): walked as links
# put there before the use.
TRANSIENT = [".capture-queue.jsonl", ".capture-queue.work.jsonl", "namespaces/team/.capture-queue.jsonl"]

FACTS = ["The staging database listens on port 5433", "Deploys go out on Tuesdays via GitHub Actions",
         "User prefers tabs over spaces in Python files", "The billing service is written in Go"]


def _tolerant(step: object, *args: object) -> None:
    try:
        step(*args)  # type: ignore[operator]
    except MemwireError:
        pass  # a refusal (a symlink where memwire would write) is the point, not a failure


async def use_fully(root: Path) -> list[str]:
    """Use ``root`` as people and the proxy do; returns what reached the model, request by request."""
    store = MemoryStore(root)
    team = MemoryStore.for_namespace(root, "team")
    for s in (store, team):
        _tolerant(s.add_many, FACTS)
    try:
        pinned, gone = store.add("Run the tests with make test", tags=["build"]), store.add("An old fact to forget")
        store.pin(pinned.id)
        store.forget(gone.id)
        store.restore(gone.id)
        store.forget(gone.id)
    except (MemwireError, OSError):
        pass
    _tolerant(store.inbox.add, "A captured fact waiting for review")
    fake = FakeProvider()
    bodies: list[str] = []
    for capture in ("auto", "review"):
        mw = Middleware(store=store, mode="contextPerTurn", capture=capture)
        mw.warm_up(("gpt-4o-mini",))
        app = create_app(mw, openai_upstream="http://openai.upstream", client=httpx.AsyncClient(
            transport=httpx.ASGITransport(app=fake)))
        for ns in (None, "team"):
            headers = {"x-memwire-session": f"s-{capture}", **({"x-memwire-namespace": ns} if ns else {})}
            client = openai.AsyncOpenAI(base_url="http://proxy.test/v1", api_key="sk-test", max_retries=0,
                                        default_headers=headers,
                                        http_client=httpx.AsyncClient(transport=httpx.ASGITransport(app=app)))
            history: list[dict[str, str]] = []
            for said in ("Remember that the release branch is called release-2026.",
                         "Which port does the staging database listen on?", "When do deploys go out?"):
                history.append({"role": "user", "content": said})
                reply = await client.chat.completions.create(model="gpt-4o-mini", messages=history)  # never fails
                history.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
                bodies.append(str(fake.requests[-1].body))
        mw.flush()
        _ledger.flush()
    fresh = MemoryStore(root)  # a new process's first load: writes the index snapshot
    _tolerant(fresh.refresh)
    for s in (fresh, store, team):
        bodies.extend(m.text for m in _listed(s))
    return bodies


def _listed(store: MemoryStore) -> list:
    try:
        return [*store, *store.archive, *store.inbox]
    except MemwireError:
        return []


def created(root: Path) -> list[str]:
    """Every path under ``root`` (a ledger file as ``LEDGER``: their names are hashes)."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        out.update(f"{(rel / d).as_posix()}/" for d in dirnames)
        out.update((rel / ("LEDGER" if rel.name == ".ledger" and f.endswith(".jsonl") else f)).as_posix()
                   for f in filenames)
    return sorted(out)


@pytest.fixture(scope="module")
def used(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("used") / "mem"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_snapshot, "MIN_MEMORIES", 1)  # a small store gets its snapshot too
        import asyncio

        asyncio.run(use_fully(root))
    return root


def test_a_full_use_creates_exactly_the_paths_walked(used: Path) -> None:
    assert created(used) == CREATED


# ---------------------------------------------------------------- inotify: what is touched outside

_EVENTS = 0x1 | 0x2 | 0x4 | 0x8 | 0x20 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800
# IN_ACCESS, MODIFY, ATTRIB, CLOSE_WRITE, OPEN, MOVED_FROM, MOVED_TO, CREATE, DELETE, DELETE_SELF, MOVE_SELF


@contextmanager
def watching(top: Path) -> Iterator[list[tuple[str, int]]]:
    """inotify watches on ``top`` and every directory under it; yields the events seen (filled on exit)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK)
    assert fd >= 0
    wds: dict[int, str] = {}
    for d in [top, *(Path(p) for p, _, _ in os.walk(top) if Path(p) != top)] if top.is_dir() else [top.parent]:
        wd = libc.inotify_add_watch(fd, str(d).encode(), _EVENTS)
        assert wd >= 0
        wds[wd] = str(d)
    seen: list[tuple[str, int]] = []
    try:
        yield seen
    finally:
        try:
            data = os.read(fd, 1 << 20)
        except BlockingIOError:
            data = b""
        at = 0
        while at < len(data):
            wd, mask, _, n = struct.unpack_from("iIII", data, at)
            name = data[at + 16 : at + 16 + n].rstrip(b"\0").decode()
            seen.append((os.path.join(wds.get(wd, "?"), name), mask))
            at += 16 + n
        os.close(fd)


def _state(top: Path) -> dict[str, str]:
    if top.is_file():
        return {top.name: hashlib.sha256(top.read_bytes()).hexdigest()}
    return {str(p.relative_to(top)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(top.rglob("*"))}


def _poison(top: Path) -> None:
    """Add a canary memory to every markdown and JSON Lines file outside: read, it would show."""
    for p in [top] if top.is_file() else top.rglob("*"):
        if p.is_file() and p.suffix in (".md", ".jsonl"):
            with p.open("a") as fh:
                fh.write(f"\n- {CANARY} is the deploy password\n" if p.suffix == ".md" else
                         f'{{"text": "{CANARY}"}}\n')


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
@pytest.mark.parametrize("rel", CREATED + TRANSIENT)
async def test_a_symlink_anywhere_is_never_followed(rel: str, used: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_snapshot, "MIN_MEMORIES", 1)
    root = tmp_path / "mem"
    shutil.copytree(used, root, symlinks=True)
    (target,) = [p for p in _expand(root, rel)]
    outside = tmp_path / "outside" / target.name
    outside.parent.mkdir()
    if rel in TRANSIENT:  # a queued statement a read would store
        outside.write_text(f'{{"key": "k1", "text": "Remember that {CANARY} is the release name."}}\n')
    else:
        shutil.move(target, outside)
    target.symlink_to(outside, target_is_directory=outside.is_dir())
    _poison(outside)
    before = _state(outside)
    with watching(outside) as seen:
        bodies = await use_fully(root)
    assert seen == [], f"touched outside through {rel}: {seen}"
    assert _state(outside) == before
    assert not any(CANARY in b for b in bodies)
    assert target.is_symlink()  # left as it was: never replaced by a file, nor removed


def _expand(root: Path, rel: str) -> list[Path]:
    """The path ``rel`` names in ``root`` (LEDGER: the one ledger file of that directory)."""
    if rel.endswith("LEDGER"):
        return [p for p in (root / rel.rsplit("/", 1)[0]).glob("*.jsonl")][:1]
    return [root / rel.rstrip("/")]


# ---------------------------------------------------------------- the function itself


def test_under_refuses_a_symlink_at_any_component_and_names_it(tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "mem", tmp_path / "elsewhere"
    (root / "a" / "b").mkdir(parents=True)
    elsewhere.mkdir()
    (root / "a" / "link").symlink_to(elsewhere)
    assert under(root, root / "a" / "b" / "new" / "deeper.md") == root / "a" / "b" / "new" / "deeper.md"
    for p in (root / "a" / "link", root / "a" / "link" / "x.md", root / "a" / "link" / "y" / "z"):
        with pytest.raises(MemoryFileError, match="symlink") as caught:
            under(root, p)
        assert caught.value.path == str(root / "a" / "link")
    with pytest.raises(MemoryFileError, match="not inside"):
        under(root, root / ".." / "elsewhere" / "x")
    with pytest.raises(MemoryFileError, match="not inside"):
        under(root, elsewhere / "x")
    (root / "file").write_text("")
    with pytest.raises(MemoryFileError, match="not a directory"):
        under(root, root / "file" / "x")


def test_the_named_directory_itself_may_be_a_link(tmp_path: Path) -> None:
    """The person chose it (a dotfiles checkout, a synced folder): only what is below it is checked."""
    (tmp_path / "real").mkdir()
    (tmp_path / "named").symlink_to(tmp_path / "real")
    store = MemoryStore(tmp_path / "named")
    store.add("A fact kept in a linked directory")
    assert [m.text for m in MemoryStore(tmp_path / "named")] == ["A fact kept in a linked directory"]
    assert (tmp_path / "real" / "MEMORY.md").is_file()


def test_makedirs_and_open_never_go_through_a_link(tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "mem", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / "namespaces").symlink_to(elsewhere)
    with pytest.raises(MemoryFileError, match="symlink"):
        makedirs(root, root / "namespaces" / "evil")
    with pytest.raises(MemoryFileError, match="symlink"):
        open_fd(root, root / "namespaces" / "x.jsonl", os.O_WRONLY | os.O_CREAT)
    (root / "fifo.md").unlink(missing_ok=True)
    os.mkfifo(root / "fifo.md")
    with pytest.raises(MemoryFileError, match="not a plain file"):
        open_fd(root, root / "fifo.md", os.O_RDONLY)  # never blocks on a FIFO
    assert list(elsewhere.iterdir()) == []


def test_a_relative_memory_directory_works_with_absolute_temp_files(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``.memwire`` as the CLI and ``Middleware()`` name it; ``mkstemp`` hands back absolute names."""
    monkeypatch.chdir(tmp_path)
    store = MemoryStore.for_namespace(Path(".memwire"), "alice")
    mem = store.add("Alice deploys on Fridays")
    store.forget(mem.id)
    assert [m.text for m in store.archive] == ["Alice deploys on Fridays"]
    assert under(Path(".memwire"), tmp_path / ".memwire" / "x") == tmp_path / ".memwire" / "x"
    assert under(Path("./.memwire/"), Path(".memwire/namespaces")) == Path(".memwire/namespaces")


def test_a_namespace_spelt_like_another_but_for_case_is_refused(tmp_path: Path) -> None:
    """Two spellings would be one directory on a case-insensitive filesystem (macOS, Windows)."""
    from memwire._errors import NamespaceError

    MemoryStore.for_namespace(tmp_path, "alice").add("Alice deploys on Fridays")
    for twin in ("ALICE", "Alice", "aLiCe"):
        with pytest.raises(NamespaceError, match="only in case"):
            MemoryStore.for_namespace(tmp_path, twin)
    assert [m.text for m in MemoryStore.for_namespace(tmp_path, "alice")] == ["Alice deploys on Fridays"]
    MemoryStore.for_namespace(tmp_path, "bob").add("Bob is on call")
