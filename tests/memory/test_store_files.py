"""MemoryStore.edit_file / rename_file: whole-file edits (the Anthropic memory tool's), atomic,
under the write lock, never through a symlink."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memwire import InvalidMemoryError, MemoryFileError, MemoryStore


def test_edit_file_creates_changes_and_removes_a_file_the_store_then_reads(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")  # the directory does not exist yet: made on first write
    store.edit_file("notes.md", lambda old: "- The build uses make\n" if old is None else None)
    assert [m.text for m in store] == ["The build uses make"]
    store.edit_file("notes.md", lambda old: (old or "") + "- Tests need Docker\n")
    assert [m.text for m in store] == ["The build uses make", "Tests need Docker"]
    store.edit_file("notes.md", lambda old: None)
    assert not (tmp_path / "mem" / "notes.md").exists() and list(store) == []


def test_an_exception_from_the_edit_changes_nothing(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    (tmp_path / "a.md").write_text("- kept\n")

    def boom(old: str | None) -> str:
        raise ValueError("no")

    with pytest.raises(ValueError):
        store.edit_file("a.md", boom)
    with pytest.raises(ValueError):
        store.edit_file("missing.md", boom)
    assert (tmp_path / "a.md").read_text() == "- kept\n" and not (tmp_path / "missing.md").exists()
    assert sorted(os.listdir(tmp_path)) == [".lock", "a.md"]  # no temp file left behind


def test_edit_file_keeps_permissions_and_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    path = tmp_path / "a.md"
    path.write_bytes(b"- caf\xe9 by hand\n")
    path.chmod(0o600)
    store.edit_file("a.md", lambda old: (old or "") + "- more\n")
    assert path.read_bytes() == b"- caf\xe9 by hand\n- more\n" and (path.stat().st_mode & 0o777) == 0o600


def test_edit_and_rename_never_go_through_a_symlink(tmp_path: Path) -> None:
    mem, target = tmp_path / "mem", tmp_path / "target.md"
    mem.mkdir()
    target.write_text("- mine\n")
    (mem / "link.md").symlink_to(target)
    (mem / "dangling.md").symlink_to(tmp_path / "nowhere.md")
    store = MemoryStore(mem)
    for name in ("link.md", "dangling.md"):
        with pytest.raises(MemoryFileError, match="symlink"):
            store.edit_file(name, lambda old: "- replaced\n")
        with pytest.raises(MemoryFileError, match="symlink"):
            store.edit_file(name, lambda old: None)
        with pytest.raises(MemoryFileError, match="symlink"):
            store.rename_file(name, "other.md")
    assert target.read_text() == "- mine\n" and (mem / "link.md").is_symlink()
    assert not (tmp_path / "nowhere.md").exists() and (mem / "dangling.md").is_symlink()


def test_rename_file_never_overwrites(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    (tmp_path / "a.md").write_text("- a\n")
    (tmp_path / "b.md").write_text("- b\n")
    with pytest.raises(FileExistsError):
        store.rename_file("a.md", "b.md")
    with pytest.raises(FileNotFoundError):
        store.rename_file("gone.md", "c.md")
    store.rename_file("a.md", "c.md")
    assert (tmp_path / "c.md").read_text() == "- a\n" and not (tmp_path / "a.md").exists()
    assert sorted(m.text for m in store) == ["a", "b"]


@pytest.mark.parametrize("name", ["../x.md", "sub/x.md", ".hidden.md", "notes.txt", "MEMORY", "a\0.md", ""])
def test_only_top_level_markdown_files_can_be_edited(tmp_path: Path, name: str) -> None:
    store = MemoryStore(tmp_path / "mem")
    with pytest.raises(InvalidMemoryError):
        store.edit_file(name, lambda old: "- x\n")
    with pytest.raises(InvalidMemoryError):
        store.rename_file("a.md", name)
    assert not (tmp_path / "mem").exists() and not (tmp_path / "x.md").exists()
