"""Trust for project memory: a cloned repository's ``.memwire/`` and ``memwire.toml`` are not used
until the person says so.

memwire finds a project memory directory (``./.memwire``) and a project config (``./memwire.toml``)
in the working directory. The command line and the library (``Middleware()``,
``Middleware.from_config()``) decide alike, in one function (:func:`resolve_config`): they use them
only when

- the person trusted that directory once (``memwire trust [PATH]``). The trust is recorded outside
  the repository, in ``trusted.json`` in the memwire home (``$MEMWIRE_HOME``, default
  ``~/.memwire``), keyed by the directory's resolved path and the SHA-256 of its ``memwire.toml``
  (or the absence of one): when the config changes, the trust ends; or
- memwire itself created ``./.memwire`` on this machine (recorded in the same file with the
  directory's device and inode, so a directory deleted and replaced by another is not trusted).
  This is what keeps the quick start working: ``memwire add`` in a new project creates the
  directory and records it, and ``memwire proxy`` then uses it.

What the person names needs no trust: ``--dir``, ``MEMWIRE_DIR``, a ``dir`` in their own config
file (``--config``, ``MEMWIRE_CONFIG``, ``Middleware.from_config(FILE)``), and in Python
``MemoryStore(dir)``, ``Middleware(store=...)``, ``Middleware(dir=...)`` or a ``Config`` naming its
``dir``. Whatever the trust, a project config cannot choose where memory is read or written, give
memory the system role nor put it in the system prompt
(:func:`memwire._config.restrict_project_config`). An untrusted directory is not an error: the
command says so in one line (the library logs it as a warning) and goes on with the global memory
only. See docs/trust.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ._config import load_config, make_config
from ._locks import write_lock

if TYPE_CHECKING:  # start-up time: pydantic's Config model loads on the first config built
    from ._config_model import Config

__all__ = [
    "PROJECT_CONFIG",
    "PROJECT_DIR",
    "TRUST_FILE",
    "Resolution",
    "TrustFile",
    "config_digest",
    "create_project_dir",
    "default_home",
    "mark_created",
    "resolve_config",
]

TRUST_FILE = "trusted.json"
PROJECT_CONFIG = "memwire.toml"  # the project config load_config() finds in the working directory
PROJECT_DIR = Path(".memwire")  # Config.dir's default: the project memory directory
_VERSION = 1
State = Literal["trusted", "changed", "untrusted"]


def default_home(env: Mapping[str, str] | None = None) -> Path:
    """The memwire home without a config: ``$MEMWIRE_HOME``, else ``~/.memwire``."""
    env = os.environ if env is None else env
    home = env.get("MEMWIRE_HOME")
    return Path(home).expanduser() if home else Path.home() / ".memwire"


def _key(path: str | os.PathLike[str]) -> str:
    return str(Path(path).expanduser().resolve())


def config_digest(project: str | os.PathLike[str]) -> str | None:
    """SHA-256 of the project's memwire.toml, None when it has none. An unreadable file raises OSError."""
    try:
        data = (Path(project) / PROJECT_CONFIG).read_bytes()
    except FileNotFoundError:
        return None
    return hashlib.sha256(data).hexdigest()


def _stat_id(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


class TrustFile:
    """``trusted.json`` in the memwire home: the trusted project directories and the memory
    directories memwire created. An unreadable or malformed file trusts nothing (``problem`` says
    why); the next write sets it aside as ``trusted.json.bad`` and starts a new one."""

    def __init__(self, home: str | os.PathLike[str]) -> None:
        self.home = Path(home).expanduser()
        self.path = self.home / TRUST_FILE
        self.problem: str | None = None
        self._data: dict[str, Any] | None = None

    # reading

    def read(self) -> dict[str, Any]:
        if self._data is None:
            self._data = self._load()
        return self._data

    def _load(self) -> dict[str, Any]:
        empty: dict[str, Any] = {"version": _VERSION, "trusted": {}, "created": {}}
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return empty
        except OSError as exc:
            self.problem = exc.strerror or str(exc)
            return empty
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("version") != _VERSION:
                raise ValueError(f"not a version {_VERSION} trust file")
            if not isinstance(data.get("trusted"), dict) or not isinstance(data.get("created"), dict):
                raise ValueError("'trusted' and 'created' must be tables")
        except ValueError as exc:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            self.problem = str(exc)
            return empty
        return data

    def state(self, project: str | os.PathLike[str]) -> State:
        """``trusted``: trusted with the memwire.toml it has now; ``changed``: trusted with another
        memwire.toml (or none); ``untrusted``: never trusted, or the record is malformed."""
        rec = self.read()["trusted"].get(_key(project))
        if not isinstance(rec, dict) or "config_sha256" not in rec:
            return "untrusted"
        try:
            digest = config_digest(project)
        except OSError:
            return "changed"  # an unreadable config is not the one that was trusted
        return "trusted" if rec["config_sha256"] == digest else "changed"

    def created(self, memdir: str | os.PathLike[str]) -> bool:
        """Whether memwire created this memory directory, and it is still that directory."""
        rec = self.read()["created"].get(_key(memdir))
        if not isinstance(rec, dict):
            return False
        try:
            return (rec.get("dev"), rec.get("ino")) == _stat_id(Path(memdir))
        except OSError:
            return False

    def entries(self) -> list[dict[str, Any]]:
        """Every record with its current status, for ``memwire trust --list``."""
        data = self.read()
        out: list[dict[str, Any]] = []
        for path, rec in sorted(data["trusted"].items()):
            status: str = self.state(path) if Path(path).is_dir() else "gone"
            out.append({"path": path, "kind": "project", "status": status,
                        "config_sha256": rec.get("config_sha256") if isinstance(rec, dict) else None})
        for path, _rec in sorted(data["created"].items()):
            status = "created" if self.created(path) else ("replaced" if os.path.lexists(path) else "gone")
            out.append({"path": path, "kind": "memory directory", "status": status})
        return out

    # writing

    @contextlib.contextmanager
    def _update(self) -> Iterator[dict[str, Any]]:
        """Read, change and write the file under a lock (other memwire processes may write too)."""
        self.home.mkdir(parents=True, exist_ok=True)
        with write_lock(self.home / (TRUST_FILE + ".lock")):
            self._data, self.problem = None, None
            data = self.read()
            yield data
            if self.problem is not None:  # keep what could not be read, for the person to look at
                with contextlib.suppress(OSError):
                    os.replace(self.path, self.path.with_name(TRUST_FILE + ".bad"))
                self.problem = None
            self._write(data)

    def _write(self, data: dict[str, Any]) -> None:
        try:  # keep the file's permissions; a new one is private (it lists your projects)
            mode = stat.S_IMODE(os.lstat(self.path).st_mode)
        except OSError:
            mode = 0o600
        fd, tmp = tempfile.mkstemp(prefix=f".{TRUST_FILE}.", suffix=".tmp", dir=self.home)
        try:
            os.fchmod(fd, mode)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=2, sort_keys=True)
                fh.write("\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)  # replaces a symlink itself, never writes through it
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def trust(self, project: str | os.PathLike[str]) -> str | None:
        """Trust ``project`` with its current memwire.toml; returns that file's SHA-256 (None: no file)."""
        digest = config_digest(project)
        with self._update() as data:
            data["trusted"][_key(project)] = {"config_sha256": digest, "at": time.time()}
        return digest

    def revoke(self, path: str | os.PathLike[str]) -> list[str]:
        """Forget the trust in a project directory (and that memwire created its ``.memwire``), or
        in a memory directory memwire created; returns the records removed."""
        key = _key(path)
        removed: list[str] = []
        with self._update() as data:
            if data["trusted"].pop(key, None) is not None:
                removed.append(key)
            for memdir in (key, str(Path(key) / PROJECT_DIR)):
                if data["created"].pop(memdir, None) is not None:
                    removed.append(memdir)
        return removed

    def mark_created(self, memdir: str | os.PathLike[str]) -> None:
        """Record that memwire created ``memdir`` (call it right after creating it)."""
        p = Path(memdir)
        if p.is_symlink() or not p.is_dir():
            raise NotADirectoryError(f"{p} is not a directory memwire created")
        dev, ino = _stat_id(p)
        with self._update() as data:
            data["created"][_key(p)] = {"dev": dev, "ino": ino, "at": time.time()}


def mark_created(memdir: str | os.PathLike[str], home: str | os.PathLike[str] | None = None) -> None:
    """Record that memwire created the memory directory ``memdir`` on this machine, so the command
    line uses it without ``memwire trust``. ``home``: the memwire home (default ``$MEMWIRE_HOME`` or
    ``~/.memwire``). Only for a project directory found in the working directory; a directory
    named explicitly needs no record."""
    TrustFile(default_home() if home is None else home).mark_created(memdir)


def create_project_dir(memdir: Path, home: str | os.PathLike[str]) -> str | None:
    """Create the project memory directory (it did not exist) and record that memwire created it.
    Returns a warning when the record could not be written; a directory that cannot be created (or
    that appeared meanwhile) is left to the command, which reports it or uses it as it is."""
    try:
        memdir.mkdir()
    except OSError:
        return None
    try:
        TrustFile(home).mark_created(memdir)
    except OSError as exc:
        return (f"warning: could not record that memwire created {memdir} ({exc.strerror or exc}); "
                "run `memwire trust` if a later command ignores it")
    return None


@dataclass
class Resolution:
    """The settings after the trust check."""

    config: Config
    notices: list[str] = field(default_factory=list)  # one line each: standard error, or the library's log
    missing_dir: Path | None = None  # the project memory directory, not there yet (memwire may create it)


def resolve_config(
    config_path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    config: Config | None = None,
    memory_dir: bool = True,
    **overrides: Any,
) -> Resolution:
    """The settings memwire runs with, after the trust check: the one place that decides, called by
    the command line and by the library (``Middleware()``, ``Middleware.from_config()``).

    The person's own settings always apply: a config file they named (``config_path`` or
    ``$MEMWIRE_CONFIG``), the ``MEMWIRE_*`` environment and ``overrides`` (flags, keyword
    arguments); or ``config``, a Config the caller built, with ``overrides`` on top (no file nor
    environment is read then). What memwire finds by itself in the working directory applies only
    when the directory is trusted: ``./memwire.toml`` (read when no config is named or given, and
    restricted even then: :func:`memwire._config.restrict_project_config`), and ``./.memwire``
    (the default ``dir``, when no setting names one; also used when memwire created it). What is
    ignored is said in ``notices``; the global memory stands in for an ignored project directory.
    ``memory_dir=False``: the caller brings its own store, so the memory directory is not looked at.

    The returned config's ``dir`` counts as set: a config resolved once is not resolved again."""
    env = os.environ if env is None else env
    if config is None:
        cfg = load_config(config_path, env, **overrides)
    else:  # the caller's object: what it leaves unset stays unset (its dir is still the default's)
        cfg = make_config({**config.model_dump(exclude_unset=True),
                           **{k: v for k, v in overrides.items() if v is not None}})
    named = config is not None or bool(config_path or env.get("MEMWIRE_CONFIG"))  # replaces ./memwire.toml
    trust = TrustFile(cfg.global_dir)
    cwd = Path.cwd()
    notices: list[str] = []
    ignored: list[str] = []
    states: list[State] = []

    def state() -> State:
        if not states:
            states.append(trust.state(cwd))
        return states[0]

    if not named and Path(PROJECT_CONFIG).is_file():
        if state() == "trusted":
            cfg = load_config(config_path, env, project_config=True, notices=notices, **overrides)
        else:
            ignored.append(f"./{PROJECT_CONFIG}")
    missing = None
    if memory_dir and "dir" not in cfg.model_fields_set:  # the default: the project directory found here
        memdir = cwd / cfg.dir
        if not os.path.lexists(memdir):
            missing = memdir
        elif not (_same(memdir, cfg.global_dir) or state() == "trusted" or trust.created(memdir)):
            ignored.insert(0, f"./{cfg.dir}")
            cfg.dir = cfg.global_dir  # the global memory only
        cfg.dir = cfg.dir  # decided: a Config that names its dir is not checked again
    if ignored:
        changed = states == ["changed"]
        why = (f"{PROJECT_CONFIG} changed since you trusted this directory" if changed
               else "this directory is not trusted")
        them = "them" if len(ignored) > 1 else "it"
        notices.insert(0, f"ignoring {' and '.join(ignored)}: {why}; "
                          f"run `memwire trust`{' again' if changed else ''} to use {them}")
    if trust.problem is not None:
        notices.append(f"warning: {trust.path} is unreadable ({trust.problem}); no directory is trusted "
                       "until `memwire trust` writes it again")
    return Resolution(cfg, notices, missing)


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.expanduser().resolve()
    except OSError:
        return False
