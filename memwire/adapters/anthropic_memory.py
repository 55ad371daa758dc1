"""Anthropic's memory tool (``memory_20250818``) over a memwire store: what Claude writes is what
memwire injects.

For applications that run their own Claude tool loop with the Anthropic SDK::

    from anthropic import Anthropic
    from memwire import MemoryStore
    from memwire.adapters.anthropic_memory import MemoryTool

    runner = Anthropic().beta.messages.tool_runner(
        model="claude-sonnet-4-6", max_tokens=1024, messages=[...],
        tools=[MemoryTool(MemoryStore(".memwire"))])
    final = runner.until_done()

``/memories`` is the store's directory. memwire keeps memory as flat markdown files, so the tool's
files are ``/memories/NAME.md`` (no subdirectories; ``inbox/``, ``archive/`` and hidden files are
not visible). One bullet line is one memory; a file Claude writes without bullets and without
front matter gets a short front matter, which makes each of its paragraphs a memory.

Safety: a path is one file name under ``/memories`` (``..``, other absolute paths, NUL bytes,
backslashes, long names are refused); nothing is read, written or removed through a symlink;
text holding a secret or a control character is refused (the stores' own screen); a deleted
file's memories go to the archive first. Every refusal is a ``ToolError``, which the SDK's tool
runner hands back to Claude as an error result.

Memory stays true through the tool too (``MemoryStore.edit_file`` settles each edit): a line
rewritten in place archives its old words as ``superseded`` by the new (linked both ways, in
``memwire history``), a line taken out is archived as ``forgotten``, and a new line that states a
new value of a memory in another file (``MEMORY.md``, say) replaces that one there; one that says
the same as another file's memory in other words keeps its words here and the other is merged into
it; a doubtful pair is kept for the user to settle. The file is always what Claude wrote.

What Claude writes counts as ``explicit`` in the lifecycle, like ``memwire add``: each write is a
deliberate command to the store, not something memwire extracted on its own (``captured``,
``distilled``, ``imported`` are that), and the upkeep sweep moves only those (``_upkeep``): with
any other cue it would archive lines of Claude's files as they decay, so a file would differ from
what Claude wrote without anyone telling Claude. (Memories of these files were recorded as a
person's before, when first seen; that stays so.)

The result texts are those of the SDK's own ``BetaLocalFilesystemMemoryTool``, which Claude knows,
plus one sentence when memwire archived or kept something because of the edit (``_said``).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

try:
    from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError
    from anthropic.types.beta import (
        BetaCacheControlEphemeralParam,
        BetaMemoryTool20250818CreateCommand,
        BetaMemoryTool20250818DeleteCommand,
        BetaMemoryTool20250818InsertCommand,
        BetaMemoryTool20250818RenameCommand,
        BetaMemoryTool20250818StrReplaceCommand,
        BetaMemoryTool20250818ViewCommand,
    )
except ImportError as exc:  # an SDK from before the memory tool helpers
    raise ImportError("memwire.adapters.anthropic_memory needs an anthropic SDK with the memory tool helpers "
                      "(anthropic.lib.tools.BetaAbstractMemoryTool): pip install -U anthropic") from exc
from anyio import to_thread
from typing_extensions import override

from .. import _paths
from .._errors import InvalidMemoryError, MemoryFileError
from ..memory._markdown import parse_text
from ..memory._model import FileEdit, Memory
from ..memory._store import MemoryStore, _read_all
from ..policies._screen import screened

__all__ = ["AsyncMemoryTool", "MemoryTool"]

ROOT = "/memories"
# Any key makes a bullet-less file one memory per paragraph. Not `description`: that becomes every
# paragraph's topic, which retrieval indexes, and these words would match unrelated questions.
FRONT_MATTER = "---\nwritten_by: Claude, with the memory tool\n---\n"
MAX_NAME_BYTES = 128  # the store's temp files add a prefix and a suffix: well under any filesystem's 255
MAX_FILE_BYTES = 256 * 1024  # a memory file is read on every request that changes it
MAX_LINES = 999_999
_WIDTH = len(str(MAX_LINES))
_FLAT = "memwire keeps memory as flat markdown files: use /memories/NAME.md"
_NAME = re.compile(r"[^\x00-\x1f\x7f/\\]*\S[^\x00-\x1f\x7f/\\]*\.md")
CUE = "explicit"  # how what Claude writes got in: a deliberate write, never swept (see the module)
_SHOWN_CHARS = 120  # of each memory the result names
_SHOWN_MEMORIES = 5  # the result names this many of each kind, then counts the rest


def _shown(path: str) -> str:
    """A refused path as an error may repeat it: escaped, bounded."""
    return repr(path[:200])[1:-1]


def _name(path: Any) -> str | None:
    """The file a tool path names, or None for ``/memories`` itself; anything else is refused."""
    if not isinstance(path, str):
        raise ToolError("The path must be a string, e.g. /memories/notes.md")
    shown = _shown(path)
    if "\x00" in path:
        raise ToolError(f"Path {shown} holds a NUL byte; {_FLAT}")
    if "\\" in path:
        raise ToolError(f"Path {shown} holds a backslash; {_FLAT}")
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise ToolError(f"Path must start with /memories, got: {shown}")
    rest = path[len(ROOT) + 1:]
    if not rest:
        return None
    parts = rest.split("/")
    if any(p in (".", "..") for p in parts):
        raise ToolError(f"Path {shown} would escape /memories directory")
    if len(parts) > 1:
        raise ToolError(f"{_FLAT} (no subdirectories), got: {shown}")
    if rest.startswith("."):
        raise ToolError(f"Hidden files are not memory; {_FLAT}, got: {shown}")
    if len(rest.encode("utf-8", errors="surrogatepass")) > MAX_NAME_BYTES:
        raise ToolError(f"The file name is too long (at most {MAX_NAME_BYTES} bytes); {_FLAT}")
    if not _NAME.fullmatch(rest):
        raise ToolError(f"{_FLAT}, got: {shown}")
    return rest


def _field(command: Any, name: str, kind: type) -> Any:
    """A command field of the right type (the SDK builds commands without validating them)."""
    value = getattr(command, name, None)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ToolError(f"The `{name}` parameter is missing or not a {kind.__name__}")
    return value


def _checked(text: str) -> str:
    why = screened(text)  # the stores' own screen: files are written whole, not through store.add
    if why is not None and why[0] == "secret":  # named, never echoed: the refusal goes back into the conversation
        raise ToolError(f"Not written: the text holds what looks like a {why[1]}. memwire never stores secrets "
                        "(memory is shown to the model on later calls); leave it out.")
    if why is not None:
        raise ToolError(f"Not written: the text holds a control character, {why[1]}. Memory is plain text: "
                        "tab and newline are the only control characters it may hold.")
    return text


def _as_memory(text: str) -> str:
    """``text`` as memwire reads it as memory: a text of paragraphs, with no bullet and no front
    matter, would hold no memory at all; a front matter makes each paragraph one."""
    if text.strip() and not text.startswith("---") and not parse_text(text).entries:
        return FRONT_MATTER + text
    return text


def _sized(text: str) -> str:
    if len(text.encode("utf-8", errors="surrogateescape")) > MAX_FILE_BYTES:
        raise ToolError(f"Not written: a memory file is at most {MAX_FILE_BYTES // 1024} KiB; "
                        "split it into several files")
    return text


def _readable(text: str) -> str:
    """Text for Claude: bytes that were not UTF-8 in a hand-written file shown as U+FFFD."""
    return text.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")


def _numbered(lines: list[str], start: int) -> str:
    return "\n".join(f"{str(i + start).rjust(_WIDTH)}\t{line}" for i, line in enumerate(lines))


def _size(n: int) -> str:
    """A size as the SDK's tool shows it: 0B, 512B, 1.5K, 2M."""
    i = min((n.bit_length() - 1) // 10, 3) if n else 0
    v = n / 1024**i
    return f"{int(v) if v == int(v) else f'{v:.1f}'}{'BKMG'[i]}"


def _memories(n: int) -> str:
    return f"{n} memory" if n == 1 else f"{n} memories"


def _said(report: FileEdit, name: str, directory: Path) -> str:
    """One sentence for Claude on what memwire did besides writing the file (empty when nothing):
    what it archived (restorable), what it kept in doubt. The memories are the user's own, shown to
    the user's own model; a file is named as a /memories path, never the host's."""

    def shown(mem: Memory) -> str:
        text = mem.text if len(mem.text) <= _SHOWN_CHARS else mem.text[:_SHOWN_CHARS - 1] + "…"
        where = Path(mem.source) if mem.source else None
        if where is None or (where.name == name and where.parent == directory):
            return f'"{text}"'
        if where.parent == directory:
            return f'"{text}" (in {ROOT}/{where.name})'
        return f'"{text}" (in the user\'s global memory)'

    def listed(mems: list[Memory]) -> str:
        more = len(mems) - _SHOWN_MEMORIES
        return ", ".join(map(shown, mems[:_SHOWN_MEMORIES])) + (f" and {more} more" if more > 0 else "")

    clauses = [f"{what} {_memories(len(mems))} {why}: {listed(mems)}" for what, why, mems in (
        ("archived", "this replaced", [o for o, _ in report.replaced]),
        ("archived", "this removed", list(report.removed)),
        ("archived", "this says again (merged into it)", [o for o, _ in report.merged]),
        ("kept", "this may contradict, for the user to settle", [o for o, _ in report.conflicts]),
    ) if mems]
    return f" memwire {'; '.join(clauses)}." if clauses else ""


def _symlink(path: str) -> ToolError:
    return ToolError(f"The path {path} is a symlink; memwire never reads or writes through a symlink")


def _lines(text: str) -> list[str]:
    """Lines split on LF only, without the empty tail a trailing newline leaves (as the SDK does)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


class MemoryTool(BetaAbstractMemoryTool):
    """The ``memory_20250818`` tool over ``store``'s directory, for ``client.beta.messages.tool_runner``."""

    def __init__(self, store: MemoryStore, *, cache_control: BetaCacheControlEphemeralParam | None = None) -> None:
        super().__init__(cache_control=cache_control)
        self.store = store

    @contextlib.contextmanager
    def _refusals(self, path: str) -> Iterator[None]:
        """The store's refusals as errors Claude can act on (no host paths in them)."""
        try:
            yield
        except MemoryFileError as exc:
            if "symlink" in exc.problem:
                raise _symlink(path) from None
            raise ToolError(f"The path {path} cannot be used: {exc.problem}") from None
        except IsADirectoryError:
            raise ToolError(f"The path {path} is not a file.") from None
        except OSError as exc:  # permissions, a full disk: said without the host's path
            raise ToolError(f"The path {path} cannot be written: {exc.strerror}") from None
        except InvalidMemoryError as exc:
            raise ToolError(str(exc)) from None

    def _edit(self, path: str, name: str, edit: Callable[[str | None], str | None]) -> str:
        """Apply ``edit`` to the file; returns ``_said``'s sentence on what it did to memories."""
        with self._refusals(path):
            return _said(self.store.edit_file(name, edit, cue=CUE), name, self.store.path)

    @override
    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        path = _field(command, "path", str)
        name = _name(path)
        if name is None:
            return self._listing()
        text = self._read(path, name)
        lines = text.split("\n")
        if len(lines) > MAX_LINES:
            raise ToolError(f"File {path} exceeds maximum line limit of 999,999 lines.")
        start, shown = 1, lines
        view_range = getattr(command, "view_range", None)
        if view_range:
            if not (isinstance(view_range, list) and len(view_range) == 2 and all(type(v) is int for v in view_range)):
                raise ToolError(
                    "The `view_range` parameter must be two line numbers, e.g. [1, 10] ([5, -1]: to the end)"
                )
            start = max(1, view_range[0])
            shown = lines[start - 1:len(lines) if view_range[1] == -1 else view_range[1]]
        return f"Here's the content of {path} with line numbers:\n" + _numbered(shown, start)

    def _listing(self) -> str:
        """The directory's memory files, in the SDK's format; what the store does not read as
        memory (subdirectories, hidden files, other names, symlinks) is left out."""
        found: list[tuple[str, int]] = []
        try:
            size = _paths.lstat(self.store.root, self.store.path).st_size
            with _paths.scandir(self.store.root, self.store.path) as it:
                for e in it:
                    with contextlib.suppress(ToolError, OSError):
                        if _name(f"{ROOT}/{e.name}") and e.is_file(follow_symlinks=False):
                            found.append((e.name, e.stat(follow_symlinks=False).st_size))
        except FileNotFoundError:
            size = 0  # the directory appears on the first write
        except MemoryFileError as exc:
            raise ToolError(f"The path {ROOT} cannot be used: {exc.problem}") from None
        lines = [f"{_size(size)}\t{ROOT}"] + [f"{_size(n)}\t{ROOT}/{name}" for name, n in sorted(found)]
        return (f"Here're the files and directories up to 2 levels deep in {ROOT}, excluding hidden items:\n"
                + "\n".join(lines))

    def _read(self, path: str, name: str) -> str:
        """A file's text, never through a symlink (at any component: ``_paths``), never a FIFO or a device."""
        try:
            fd = _paths.open_fd(self.store.root, self.store.path / name, os.O_RDONLY)
        except FileNotFoundError:
            raise ToolError(f"The path {path} does not exist. Please provide a valid path.") from None
        except MemoryFileError as exc:
            if exc.problem == _paths.SYMLINK:
                raise _symlink(path) from None
            raise ToolError(f"The path {path} is not a file.") from None
        except OSError as exc:
            raise ToolError(f"The path {path} cannot be read: {exc.strerror}") from None
        try:
            return _read_all(fd).decode("utf-8", errors="replace")
        finally:
            os.close(fd)

    @override
    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        path = _field(command, "path", str)
        name = _name(path)
        if name is None:
            raise ToolError(f"The path {path} is a directory; {_FLAT}")
        text = _sized(_as_memory(_checked(_field(command, "file_text", str))))

        def edit(old: str | None) -> str:
            if old is not None:
                raise ToolError(f"File {path} already exists")
            return text

        said = self._edit(path, name, edit)
        return f"File created successfully at: {path}" + said

    @override
    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        path = _field(command, "path", str)
        old_str, new_str = _field(command, "old_str", str), _checked(_field(command, "new_str", str))
        if not old_str:  # it would "occur" between every two characters
            raise ToolError("No replacement was performed: `old_str` is empty; give the exact text to replace")
        name = self._file(path)
        done: list[tuple[str, int]] = []  # the text written and the changed line's index in it

        def edit(old: str | None) -> str:
            text = self._existing(path, old)
            count = text.count(old_str)
            if count == 0:
                raise ToolError(f"No replacement was performed, old_str `{old_str}` did not appear verbatim in {path}.")
            if count > 1:
                at, lines = text.find(old_str), []
                while at != -1:
                    lines.append(text[:at].count("\n") + 1)
                    at = text.find(old_str, at + 1)
                raise ToolError(f"No replacement was performed. Multiple occurrences of old_str `{old_str}` in lines: "
                                f"{', '.join(map(str, lines))}. Please ensure it is unique")
            new = text.replace(old_str, new_str)
            final = _sized(_as_memory(new))
            done.append((final, text[:text.find(old_str)].count("\n") + final.count("\n") - new.count("\n")))
            return final

        said = self._edit(path, name, edit)
        final, line = done[0]
        lines, first = _readable(final).split("\n"), max(0, line - 2)
        return ("The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
                + _numbered(lines[first:line + 3], first + 1) + ("\n" + said.lstrip() if said else ""))

    @override
    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        path = _field(command, "path", str)
        line, insert_text = _field(command, "insert_line", int), _checked(_field(command, "insert_text", str))
        name = self._file(path)

        def edit(old: str | None) -> str:
            lines = _lines(self._existing(path, old))
            if line < 0 or line > len(lines):
                raise ToolError(f"Invalid `insert_line` parameter: {line}. "
                                f"It should be within the range [0, {len(lines)}].")
            lines.insert(line, insert_text.rstrip("\n"))
            return _sized(_as_memory("\n".join(lines) + "\n"))

        said = self._edit(path, name, edit)
        return f"The file {path} has been edited." + said

    @override
    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        path = _field(command, "path", str)
        name = _name(path)
        if name is None:
            raise ToolError("Cannot delete the /memories directory itself")

        def edit(old: str | None) -> None:
            if old is None:
                raise ToolError(f"The path {path} does not exist")
            if not parse_text(old).entries:  # the store archives what it reads as memory; this, it does not
                self._archive(old)

        self._edit(path, name, edit)  # its memories archived as forgotten: what a delete means, nothing to add
        return f"Successfully deleted {path}"

    def _archive(self, text: str) -> None:
        """Keep the paragraphs of a deleted hand-written file without front matter (no memory to
        the store, a memory each to Claude) in the archive, tagged ``forgotten``, before it goes."""
        kept = [e.memory for e in parse_text(_as_memory(text)).entries]
        if kept:
            try:
                self.store.archive_copy(kept, "forgotten")
            except InvalidMemoryError as exc:
                raise ToolError(
                    f"Not deleted: its memories could not be archived ({exc}); edit the file instead"
                ) from None

    @override
    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        old_path, new_path = _field(command, "old_path", str), _field(command, "new_path", str)
        old, new = _name(old_path), _name(new_path)
        if old is None:
            raise ToolError("Cannot rename the /memories directory itself")
        if new is None:
            raise ToolError(f"The destination {new_path} already exists")
        with self._refusals(old_path):
            try:
                self.store.rename_file(old, new)
            except FileNotFoundError:
                raise ToolError(f"The path {old_path} does not exist") from None
            except FileExistsError:
                raise ToolError(f"The destination {new_path} already exists") from None
        return f"Successfully renamed {old_path} to {new_path}"

    def _file(self, path: str) -> str:
        name = _name(path)
        if name is None:
            raise ToolError(f"The path {path} is not a file.")
        return name

    @staticmethod
    def _existing(path: str, text: str | None) -> str:
        if text is None:
            raise ToolError(f"The path {path} does not exist. Please provide a valid path.")
        return text


class AsyncMemoryTool(BetaAsyncAbstractMemoryTool):
    """``MemoryTool`` for ``AsyncAnthropic``: the same work, in a worker thread (file I/O and the
    store's lock never block the event loop)."""

    def __init__(self, store: MemoryStore, *, cache_control: BetaCacheControlEphemeralParam | None = None) -> None:
        super().__init__(cache_control=cache_control)
        self.tool = MemoryTool(store)

    @override
    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await to_thread.run_sync(self.tool.view, command)

    @override
    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await to_thread.run_sync(self.tool.create, command)

    @override
    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await to_thread.run_sync(self.tool.str_replace, command)

    @override
    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await to_thread.run_sync(self.tool.insert, command)

    @override
    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await to_thread.run_sync(self.tool.delete, command)

    @override
    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await to_thread.run_sync(self.tool.rename, command)
