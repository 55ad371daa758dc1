"""Paths under a memory directory: every one memwire opens there is resolved by ``under``.

A memory directory (the one a person named: ``--dir``, ``MEMWIRE_DIR``, the project's
``.memwire``, the global scope) is trusted as given, whatever it is reached through. Below it,
nothing is: a cloned repository or a careless ``ln -s`` can put a symlink at any component
(``namespaces``, ``archive``, ``inbox``, ``.ledger``, a memory file, ``.meta.json``, a lock, a
log). ``under(root, path)`` checks every component of ``path`` below ``root`` with ``lstat``: none
may be a symlink, each but the last must be a plain directory; a component that does not exist yet
ends the check (memwire creates it, with ``makedirs`` or an ``O_CREAT | O_NOFOLLOW`` open, which
never follow a link either). The helpers here (open, read, make directories, list, stat, rename,
remove, temp files) call it first, so reads, writes, renames and deletes all refuse the same way:
``MemoryFileError`` naming the component. The final open also carries ``O_NOFOLLOW``, so a link
planted between the check and the open is refused too.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from ._errors import MemoryFileError

__all__ = [
    "SYMLINK",
    "lstat",
    "makedirs",
    "mkstemp",
    "not_a_directory",
    "open_fd",
    "read_bytes",
    "replace",
    "scandir",
    "under",
    "unlink",
]

SYMLINK = "a symlink inside the memory directory; memwire never reads or writes through a symlink there"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def under(root: Path, path: Path) -> Path:
    """``path`` (``root`` or a path below it, lexically) once no component of it below ``root`` is
    a symlink and each but the last is a directory; else ``MemoryFileError`` naming the first bad
    one. ``root`` itself is the person's choice and is not checked."""
    _walk(os.fspath(root), os.fspath(path))
    return path


def _walk(root: str, path: str) -> os.stat_result | None:
    """``under``'s check; returns the ``lstat`` of ``path`` (None: it does not exist, or it is
    ``root``). Strings, not ``PurePath`` operations: this runs on every request."""
    rel = _relative(root, path)
    if not rel:
        return None
    at, parts = root.rstrip(os.sep) or os.sep, rel.split(os.sep)
    last = len(parts) - 1
    for i, part in enumerate(parts):
        at = at + part if at.endswith(os.sep) else at + os.sep + part
        try:
            st = os.lstat(at)
        except FileNotFoundError:
            return None  # not there yet: neither is anything below it
        except NotADirectoryError as exc:  # every component below root is checked first: root is in the way
            raise _root_failed(root, exc) from None
        if stat.S_ISLNK(st.st_mode):
            raise MemoryFileError(at, None, SYMLINK)
        if i < last and not stat.S_ISDIR(st.st_mode):
            raise MemoryFileError(at, None, "not a directory")
    return st


def _relative(root: str, path: str) -> str:
    """``path`` relative to ``root`` ("" for ``root`` itself), lexically; ``MemoryFileError`` when
    it is not below it."""
    if path == root:
        return ""
    head = root if root.endswith(os.sep) else root + os.sep
    if not path.startswith(head):  # spelled differently ("./mem", "mem/", absolute and relative)
        root, path = os.path.abspath(root), os.path.abspath(path)
        if path == root:
            return ""
        head = root if root.endswith(os.sep) else root + os.sep
        if not path.startswith(head):
            raise MemoryFileError(path, None, f"not inside the memory directory {root}")
    rel = os.path.normpath(path[len(head):]) if "." in path[len(head):] else path[len(head):]
    if rel == ".." or rel.startswith(".." + os.sep) or rel in ("", "."):
        if rel in ("", "."):
            return ""
        raise MemoryFileError(path, None, f"not inside the memory directory {root}")
    return rel.strip(os.sep)


def not_a_directory(path: str | os.PathLike[str]) -> MemoryFileError | None:
    """Why ``path`` cannot be a memory directory, naming it: it is a file, or a file is in the way
    of creating it. None when it is a directory or can be created. The one wording of this problem:
    the command line (``memory._open.check_dir``) and the store (root below) raise it alike."""
    p = Path(path).expanduser()
    probe = p
    while not probe.exists() and probe != probe.parent:  # exists() is False under a file, too
        probe = probe.parent
    if not probe.exists() or probe.is_dir():
        return None
    if probe == p:
        return MemoryFileError(str(p), None, "the memory directory is a file, not a directory")
    return MemoryFileError(str(p), None, f"the memory directory cannot be created: {probe} is a file")


def _root_failed(root: str | os.PathLike[str], exc: OSError) -> BaseException:
    """``exc`` (raised on the memory directory itself) as ``MemoryFileError`` when a file is in its
    way, else ``exc``: a person who named a file as the memory directory gets the path, not EEXIST."""
    return not_a_directory(root) or exc


def open_fd(root: Path, path: Path, flags: int, mode: int = 0o600, *, plain: bool = True) -> int:
    """A descriptor of ``path`` under ``root`` (``under``; the last component opened with
    ``O_NOFOLLOW``). With ``plain`` only a regular file (a FIFO or a device is refused; reads never
    block on one)."""
    under(root, path)
    try:
        fd = os.open(path, flags | _NOFOLLOW | (_NONBLOCK if plain else 0), mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno == errno.EMLINK and os.path.islink(path)):  # EMLINK: FreeBSD
            raise MemoryFileError(str(path), None, SYMLINK) from None
        raise
    if plain:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise MemoryFileError(str(path), None, "not a plain file")
            if _NONBLOCK:
                os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
    return fd


def read_bytes(root: Path, path: Path) -> bytes:
    """The bytes of the plain file ``path`` under ``root``, never through a symlink."""
    fd = open_fd(root, path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def makedirs(root: Path, path: Path, mode: int = 0o777) -> Path:
    """Make ``path`` and its missing parents below ``root`` (``root`` and above as ``mkdir -p``
    would): an existing component that is a symlink or not a directory is refused."""
    root = Path(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise _root_failed(root, exc) from None
    rel = Path(path).relative_to(root)
    p = root
    for part in rel.parts:
        if part == "..":
            raise MemoryFileError(str(path), None, f"not inside the memory directory {root}")
        p = p / part
        try:
            os.mkdir(p, mode)
            continue
        except FileExistsError:
            pass
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            raise MemoryFileError(str(p), None, SYMLINK)
        if not stat.S_ISDIR(st.st_mode):
            raise MemoryFileError(str(p), None, "not a directory")
    return Path(path)


def scandir(root: Path, path: Path) -> os._ScandirIterator[str]:
    """``os.scandir`` of the directory ``path`` under ``root`` (entries are the caller's to check:
    ``DirEntry.is_file(follow_symlinks=False)``)."""
    return os.scandir(under(root, path))


def lstat(root: Path, path: Path) -> os.stat_result:
    """``lstat`` of ``path`` under ``root`` (a symlink, at the last component too, is refused);
    ``root`` itself is ``stat``'ed: it may be a link, the person named it."""
    r, p = os.fspath(root), os.fspath(path)
    if not _relative(r, p):
        try:
            return os.stat(p)
        except NotADirectoryError as exc:
            raise _root_failed(p, exc) from None
    st = _walk(r, p)
    if st is None:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", p)
    return st


def replace(root: Path, src: str | Path, dst: Path) -> None:
    """Rename ``src`` over ``dst``, both under ``root``: a symlink at either, or in a parent, is
    refused (a person's link is never silently replaced by a file)."""
    under(root, Path(src))
    under(root, dst)
    os.replace(src, dst)


def unlink(root: Path, path: str | Path) -> None:
    """Remove the file ``path`` under ``root`` (a symlink in a parent is refused)."""
    under(root, Path(path).parent)
    os.unlink(path)


def mkstemp(root: Path, directory: Path, prefix: str, suffix: str = ".tmp") -> tuple[int, str]:
    """A new temp file in ``directory`` under ``root`` (``tempfile.mkstemp``: ``O_EXCL``, 0600)."""
    return tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=under(root, directory))
