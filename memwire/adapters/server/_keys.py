"""Client keys bound to namespaces: the proxy's keys file and ``memwire keys``.

A keys file (``memwire proxy --keys-file FILE``, config ``proxy_keys_file``) maps client keys to
namespaces. A client sends its key in ``x-memwire-key``; the key, not a header the client picks,
decides its namespace: ``x-memwire-namespace`` may name that namespace or a sub-namespace of it
(``alice.work``), and nothing else (403). The proxy key, when set too, stays the operator's key
and may name any namespace. Namespaces compare NFKC case-folded everywhere here (``TENA`` is
``tenA``): no two keys' namespaces may differ only in case, and a header naming the key's own
namespace in another case means that namespace, spelt as the key's; on a case-insensitive
filesystem two such names would be one directory.

The file holds, per key, the SHA-256 of the key (hex), its namespace, a label and a date: never
the key. The keys are 256 random bits (``secrets.token_urlsafe(32)``), so a plain hash cannot be
searched back to its key, and the proxy finds a key by the hash of what it is sent (a dict lookup
of a digest: nothing to learn from its timing). A pepper would add a second secret to hand to every
replica and guard, for no gain with keys of this strength. The file is written whole to a private
temporary file and renamed over the old one (0600, never through a symlink), under a lock; the
proxy re-reads it when its inode, size or time change, checked at most once a second, so adding
or revoking a key needs no restart.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..._errors import ConfigError, MemwireError, NamespaceError
from ..._locks import write_lock
from ...memory._store import validate_namespace
from .._common import WRONG_KEY, fold_namespace
from ._refusal import Refusal

if TYPE_CHECKING:  # start-up time: pydantic's Config model loads on the first config built
    from ..._config_model import Config

__all__ = [
    "KEY_HEADER",
    "KEY_PREFIX",
    "Access",
    "Caller",
    "KeyEntry",
    "KeyRing",
    "add_key",
    "fingerprint",
    "hash_key",
    "read_keys",
    "register",
    "revoke_keys",
]

log = logging.getLogger("memwire.proxy")

KEY_HEADER = "x-memwire-key"
KEY_PREFIX = "mwk_"
VERSION = 1
RELOAD_SECONDS = 1.0  # the proxy looks at the file's inode, size and time at most this often
_HEX64 = re.compile(r"[0-9a-f]{64}")


def hash_key(key: str) -> str:
    """What the file holds of a key: its SHA-256, hex."""
    return hashlib.sha256(key.encode("latin-1", "replace")).hexdigest()


def fingerprint(digest: str) -> str:
    """A key's short name in lists and logs: the head of its hash (the hash is public in the file)."""
    return digest[:12]


@dataclass(frozen=True)
class KeyEntry:
    """One line of the keys file."""

    sha256: str
    namespace: str
    label: str
    created: str

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.sha256)


# ------------------------------------------------------------------------------ the file


def _parse(raw: bytes, path: Path) -> list[KeyEntry]:
    """The entries of a keys file; a problem raises ConfigError naming the file and the entry."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"keys file {path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise ConfigError(f'keys file {path}: expected {{"version": 1, "keys": [...]}}')
    if data.get("version") != VERSION:
        raise ConfigError(f"keys file {path}: version {data.get('version')!r} is not {VERSION}")
    out: list[KeyEntry] = []
    spelt: dict[str, str] = {}  # folded namespace -> its spelling in the file
    for i, item in enumerate(data["keys"]):
        where = f"keys file {path}: keys[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(f"{where}: expected an object")
        digest, ns = item.get("sha256"), item.get("namespace")
        if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
            raise ConfigError(f"{where}: sha256 must be 64 lower-case hex digits (the file never holds a key)")
        try:
            ns = validate_namespace(ns)  # type: ignore[arg-type]
        except NamespaceError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if fold_namespace(ns) == "default":
            raise ConfigError(f"{where}: a key cannot be bound to the default namespace (the proxy key's)")
        other = spelt.setdefault(fold_namespace(ns), ns)
        if other != ns:
            raise ConfigError(f"{where}: namespace {ns!r} differs from {other!r} of another key only in case; "
                              "namespaces are compared case-insensitively: give both keys one spelling")
        out.append(KeyEntry(digest, ns, str(item.get("label") or ""), str(item.get("created") or "")))
    return out


def _check_private(st: os.stat_result, path: Path) -> None:
    """Whoever can write the file can give themselves a key: refuse one others may write."""
    if os.name != "nt" and stat.S_IMODE(st.st_mode) & (stat.S_IWGRP | stat.S_IWOTH):
        raise ConfigError(f"keys file {path}: writable by other users; chmod 600 it")


def read_keys(path: str | os.PathLike[str]) -> list[KeyEntry]:
    """The entries of the keys file at ``path``; a missing file has none."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            _check_private(os.fstat(fh.fileno()), p)
            return _parse(fh.read(), p)
    except FileNotFoundError:
        return []
    except IsADirectoryError:
        raise ConfigError(f"keys file {p}: is a directory") from None


def _write(path: Path, entries: list[KeyEntry]) -> None:
    """The whole file anew: a private temporary file beside it, renamed over it."""
    data = {"version": VERSION, "keys": [asdict(e) for e in entries]}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # created 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)  # replaces the name itself: never writes through a link
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _update(path: str | os.PathLike[str]) -> Iterator[list[KeyEntry]]:
    """Read, change (the caller changes the list in place) and write the file under its lock."""
    p = Path(path).expanduser()
    if p.is_symlink():
        raise ConfigError(f"keys file {p}: is a symbolic link; memwire writes the file itself, never through a link")
    if not p.parent.is_dir():
        raise ConfigError(f"keys file {p}: its directory {p.parent} does not exist")
    with write_lock(p.with_name(p.name + ".lock")):
        entries = read_keys(p)
        before = list(entries)
        yield entries
        if entries != before:
            _write(p, entries)


def add_key(path: str | os.PathLike[str], namespace: str, label: str = "") -> tuple[str, KeyEntry]:
    """A new key bound to ``namespace``: the key (shown once, never stored) and its entry."""
    try:
        validate_namespace(namespace)
    except NamespaceError as exc:
        raise ConfigError(str(exc)) from None
    folded = fold_namespace(namespace)
    if folded == "default":
        raise ConfigError("the default namespace is the proxy key's (the operator's); bind a key to a named namespace")
    label = label.strip()
    with _update(path) as entries:
        for e in entries:
            if label and e.label == label:
                raise ConfigError(f"label {label!r} is taken (key {e.fingerprint}); choose another or revoke that key")
            theirs = fold_namespace(e.namespace)
            if theirs == folded and e.namespace != namespace:  # one directory on a case-insensitive filesystem
                raise ConfigError(f"namespace {namespace!r} differs from {e.namespace!r} of key {e.fingerprint} only "
                                  "in case: namespaces are compared case-insensitively (NFKC case-folded); use "
                                  f"{e.namespace!r} for another key of that namespace, or another name")
            # a namespace inside another key's would let that key read it (a header may narrow to it)
            if theirs != folded and (folded.startswith(theirs + ".") or theirs.startswith(folded + ".")):
                raise ConfigError(f"namespace {namespace!r} overlaps {e.namespace!r} of key {e.fingerprint}: "
                                  "a key reaches its namespace's sub-namespaces, so one tenant's may not lie inside "
                                  "another's")
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        entry = KeyEntry(hash_key(key), namespace, label,
                         datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z"))
        entries.append(entry)
    return key, entry


def revoke_keys(path: str | os.PathLike[str], which: str) -> KeyEntry:
    """Remove the one key named by its fingerprint (or a prefix of 6 or more of it) or its label."""
    which = which.strip()
    with _update(path) as entries:
        by_fp = [e for e in entries if len(which) >= 6 and e.fingerprint.startswith(which.lower())]
        found = by_fp or [e for e in entries if e.label and e.label == which]
        if not found:
            raise ConfigError(f"no key with fingerprint or label {which!r} (see `memwire keys list`)")
        if len(found) > 1:
            raise ConfigError(f"{which!r} names {len(found)} keys ({', '.join(e.fingerprint for e in found)}); "
                              "give a whole fingerprint")
        entries.remove(found[0])
    return found[0]


# ------------------------------------------------------------------------------ the proxy's view


class KeyRing:
    """The keys file as the proxy sees it: found by the hash of a presented key, re-read when the
    file changes (its inode, size and times, looked at most every :data:`RELOAD_SECONDS`). A file
    that disappears holds no keys; one that cannot be parsed makes :meth:`lookup` raise
    ``ConfigError`` until it is fixed (never the keys of before: a revocation must not be lost)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        self._lock = threading.Lock()
        self._sig: tuple[int, ...] | None = None
        self._checked = float("-inf")
        self._by_hash: dict[str, KeyEntry] = {}
        self._namespaces: frozenset[str] = frozenset()
        self._problem: ConfigError | None = None
        self._load(strict=True)

    def _load(self, strict: bool = False) -> None:
        """Re-read the file if it changed; ``strict``: a missing file is an error (at start)."""
        sig: tuple[int, ...]  # () for a missing file
        try:
            with open(self.path, "rb") as fh:
                st = os.fstat(fh.fileno())
                sig = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)  # ctime: a chmod too
                if sig == self._sig:
                    return
                _check_private(st, self.path)
                entries = _parse(fh.read(), self.path)
        except FileNotFoundError:
            if strict:
                raise ConfigError(f"keys file {self.path} not found; create it with "
                                  f"`memwire keys add NAMESPACE --keys-file {self.path}`") from None
            if self._sig != ():
                log.warning("memwire proxy: keys file %s is gone: no client key is valid now", self.path)
            sig, entries = (), []
        except ConfigError as exc:
            if strict:
                raise
            if self._problem is None:
                log.warning("memwire proxy: %s; client keys are refused until it is fixed", exc)
            self._problem, self._sig = exc, None
            return
        except OSError as exc:
            problem = ConfigError(f"keys file {self.path}: cannot be read ({exc.strerror or exc})")
            if strict:
                raise problem from None
            if self._problem is None:
                log.warning("memwire proxy: %s; client keys are refused until it is fixed", problem)
            self._problem, self._sig = problem, None
            return
        self._by_hash = {e.sha256: e for e in entries}
        self._namespaces = frozenset(fold_namespace(e.namespace) for e in entries)
        self._sig, self._problem = sig, None

    def _fresh(self) -> None:
        now = time.monotonic()
        if now - self._checked < RELOAD_SECONDS:
            return
        with self._lock:
            if now - self._checked >= RELOAD_SECONDS:
                self._load()
                self._checked = time.monotonic()

    def lookup(self, key: str) -> KeyEntry | None:
        """The entry of a presented key, if the file holds it."""
        self._fresh()
        if self._problem is not None:
            raise self._problem
        return self._by_hash.get(hash_key(key))

    def owner_of(self, namespace: str, besides: str) -> str | None:
        """A namespace bound to a key other than ``besides``'s that holds ``namespace`` (itself or as
        a sub-namespace), if any (compared case-folded; the folded name)."""
        parts = fold_namespace(namespace).split(".")
        besides = fold_namespace(besides)
        for i in range(1, len(parts) + 1):  # each dotted head of the name: a set lookup, whatever the file's size
            head = ".".join(parts[:i])
            if head != besides and head in self._namespaces:
                return head
        return None


@dataclass(frozen=True)
class Caller:
    """Who sent a request. ``namespace``: the one its key is bound to (None: it may name any: the
    proxy key, or a proxy without keys). ``quota``: whose budget of new namespaces it spends (None:
    its address's). ``admin``: it holds the proxy key."""

    namespace: str | None = None
    quota: str | None = None
    admin: bool = False

    def budget(self, host: str | None) -> str:
        """Whose budget of new namespaces a request spends: its client key's (every client holding
        that key) or the proxy key's, else the client address's (``host``). Never a header the
        client picks freely (a made-up provider key per request would get a fresh budget each)."""
        if self.quota is not None:
            return self.quota
        return f"addr:{host or '?'}"


class Access:
    """The proxy's keys: the proxy key (the operator's) and the keys file (its clients'). Every
    route asks :meth:`caller` who is calling, then :meth:`namespace` which namespace it may use."""

    def __init__(self, proxy_key: str | None = None, keys: KeyRing | None = None) -> None:
        self.proxy_key = proxy_key.encode() if proxy_key else None
        self.keys = keys

    @property
    def guarded(self) -> bool:
        """Some key is needed."""
        return self.proxy_key is not None or self.keys is not None

    def caller(self, key: str | None) -> Caller:
        """Who holds ``key`` (the ``x-memwire-key`` header, the page's cookie); 401 when a key is
        needed and this is none of them, 503 when the keys file cannot be read."""
        if not self.guarded:
            return Caller()
        given = (key or "").encode("latin-1", "replace")
        if self.proxy_key is not None and hmac.compare_digest(given, self.proxy_key):
            return Caller(quota="proxy-key", admin=True)
        if self.keys is not None and key:
            try:
                entry = self.keys.lookup(key)
            except ConfigError:
                raise Refusal(503, "the proxy's keys file cannot be read; its operator is told in the log",
                              "keys_unavailable") from None
            if entry is not None:
                return Caller(namespace=entry.namespace, quota="key:" + entry.fingerprint)
        raise Refusal(401, WRONG_KEY, "invalid_memwire_key")

    def namespace(self, caller: Caller, asked: str | None) -> str | None:
        """The namespace a request uses: for a bound key, its own or a sub-namespace of it named in
        ``asked`` (else 403), compared case-folded and spelt as the key's (``TENA.x`` for a key of
        ``tenA``: ``tenA.x``); for any other caller ``asked`` as it is (the route validates it)."""
        bound = caller.namespace
        if bound is None:
            return asked or None
        if not asked:
            return bound
        home, folded = fold_namespace(bound), fold_namespace(asked)
        if folded == home:
            return bound
        if folded.startswith(home + ".") and len(folded) > len(home) + 1:
            try:
                validate_namespace(asked)  # ASCII: folding kept its length
            except NamespaceError as exc:
                raise Refusal(400, f"x-memwire-namespace: {exc}", "invalid_namespace") from None
            asked = bound + asked[len(bound):]
            owner = self.keys.owner_of(asked, besides=bound) if self.keys is not None else None
            if owner is None:
                return asked
        raise Refusal(403, f"x-memwire-namespace {asked[:130]!r}: this key is bound to namespace {bound!r}; "
                           f"it may use {bound!r} or a sub-namespace '{bound}.NAME', nothing else",
                      "namespace_forbidden")

    def request(self, headers: Mapping[str, str]) -> tuple[Caller, str | None]:
        """The caller of a request and its namespace, from its headers."""
        caller = self.caller(headers.get(KEY_HEADER))
        return caller, self.namespace(caller, headers.get("x-memwire-namespace"))


# ------------------------------------------------------------------------------ memwire keys


def register(sub: Any) -> None:
    p = sub.add_parser("keys", help="client keys of the proxy, each bound to a namespace: add, list, revoke",
                       description="Keys for `memwire proxy --keys-file FILE`: a client that sends one in "
                                   "x-memwire-key uses the key's namespace (or a sub-namespace NAMESPACE.NAME), "
                                   "never another. The file holds hashes only. See docs/proxy.md, 'Client keys'.")
    p.set_defaults(fn=cmd_keys, action=None)
    actions = p.add_subparsers(dest="action", metavar="add|list|revoke")

    def common(q: argparse.ArgumentParser) -> argparse.ArgumentParser:
        q.add_argument("--keys-file", metavar="FILE", help="the keys file (default: config proxy_keys_file)")
        q.add_argument("--json", action="store_true", help="machine-readable output")
        return q

    q = common(actions.add_parser("add", help="make a key for NAMESPACE and print it, once"))
    q.add_argument("namespace", metavar="NAMESPACE")
    q.add_argument("--label", default="", help="a name for the key (who or what holds it), unique in the file")
    common(actions.add_parser("list", help="the keys: fingerprint, namespace, label, created (never a key)"))
    q = common(actions.add_parser("revoke", help="remove a key, by its fingerprint or label"))
    q.add_argument("which", metavar="FINGERPRINT|LABEL")


def cmd_keys(args: argparse.Namespace, cfg: Config) -> int:
    if args.action is None:
        raise MemwireError("memwire keys: say add, list or revoke (memwire keys --help)")
    path = args.keys_file or cfg.proxy_keys_file
    if not path:
        raise ConfigError("no keys file: pass --keys-file FILE or set proxy_keys_file (MEMWIRE_PROXY_KEYS_FILE)")
    path = Path(path).expanduser()

    def show(e: KeyEntry) -> dict[str, str]:
        return {"fingerprint": e.fingerprint, "namespace": e.namespace, "label": e.label, "created": e.created}

    if args.action == "add":
        key, entry = add_key(path, args.namespace, args.label)
        if args.json:
            print(json.dumps({"key": key, **show(entry)}, indent=2))
        else:
            print(key)
            print(f"memwire: key {entry.fingerprint} for namespace {entry.namespace!r} added to {path}; "
                  "it is shown this once: give it to its client now (header x-memwire-key)", file=sys.stderr)
    elif args.action == "list":
        entries = read_keys(path)
        if args.json:
            print(json.dumps([show(e) for e in entries], indent=2))
        elif not entries:
            print(f"no keys in {path}")
        else:
            rows = [("FINGERPRINT", "NAMESPACE", "LABEL", "CREATED")] + [
                (e.fingerprint, e.namespace, e.label or "-", e.created) for e in entries]
            widths = [max(len(r[i]) for r in rows) for i in range(3)]
            for r in rows:
                # strict=False: the first three columns padded, the last (CREATED) as it is
                print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[3])
    else:
        entry = revoke_keys(path, args.which)
        if args.json:
            print(json.dumps(show(entry), indent=2))
        else:
            print(f"revoked key {entry.fingerprint} (namespace {entry.namespace!r}"
                  f"{', label ' + repr(entry.label) if entry.label else ''}); "
                  "a running proxy refuses it within a second")
    return 0
