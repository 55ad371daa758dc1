"""Configuration: one pydantic model, loadable from ``memwire.toml`` and ``MEMWIRE_*`` variables.

Precedence, lowest first: defaults, ``memwire.toml`` (``[memwire]`` table or top level), environment
variables, keyword overrides. Every bad key or value raises :class:`ConfigError` naming it.

A ``memwire.toml`` memwire finds by itself in the working directory is the *project's* config (it
may come with a cloned repository): it cannot set the keys in :data:`PROJECT_REFUSED` nor give
memory the system role; those keys are ignored, each with a notice. A file the person names
(``path``, ``--config``, ``$MEMWIRE_CONFIG``) is the person's own and may set every key.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ._errors import ConfigError
from .policies.modes import MODES as _REGISTRY

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["Config", "MODES", "PROJECT_REFUSED", "normalize_mode", "load_config", "make_config", "restrict_project_config"]

log = logging.getLogger("memwire")

MODES = tuple(_REGISTRY)  # the built-in modes (help texts); a mode registered later is valid too


def normalize_mode(value: str) -> str:
    """A registered mode's name (``policies/modes``), given as written or in snake_case; anything
    else names the valid ones."""
    key = str(value).strip().replace("-", "").replace("_", "").lower()
    for name in _REGISTRY:
        if name.lower() == key:
            return name
    raise ConfigError(f"unknown mode {value!r}; valid modes: {', '.join(_REGISTRY)}")


class Config(BaseModel):
    """Every setting memwire reads. Environment: ``MEMWIRE_<FIELD>`` (upper case)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)

    mode: str = Field("contextPerTurn", description="startup | systemPromptPerTurn | contextPerTurn")
    history: Literal["drop", "replay"] = Field(
        "replay", description="contextPerTurn: drop earlier turns' blocks, or replay them in place"
    )
    replay_max_tokens: int = Field(
        4000, ge=0, le=1_000_000, description="history=replay: replayed memory tokens per session before a compaction"
    )
    max_tokens: int = Field(600, ge=16, le=100_000, description="token budget of one memory block")
    startup_max_tokens: int = Field(1200, ge=16, le=100_000, description="token budget of the startup block")
    top_k: int = Field(6, ge=1, le=100, description="memories retrieved per turn at most")
    min_score: float | None = Field(
        None, ge=0, le=1, description="minimum retrieval score, 0..1 (a share of the query's weight); None = the index default"
    )
    memory_role: Literal["user", "system", "developer"] = Field(
        "user", description="OpenAI chat role of the hidden memory message"
    )
    placement: Literal["message", "merge"] = Field(
        "message", description="'message': own message; 'merge': leading content part of the user message"
    )
    side_requests: Literal["skip", "inject"] = Field(
        "skip", description="'skip': no memory for an agent's own requests (titles, summaries: no tools)"
    )
    capture: Literal["auto", "review", "off"] = Field(
        "auto", description="explicit statements ('remember that ...'): 'auto' stores them, 'review' puts them in the inbox"
    )
    timeout_ms: float = Field(1000.0, gt=0, description="retrieval time budget; past it the call goes unchanged")
    memo_size: int = Field(1024, ge=1, description="turns remembered for turn-stable bytes (LRU)")
    dir: Path = Field(Path(".memwire"), description="project memory directory (MEMWIRE_DIR)")
    home: Path | None = Field(None, description="global memory directory (MEMWIRE_HOME; default ~/.memwire)")
    use_global: bool = Field(True, description="also search the global directory")
    proxy_key: str | None = Field(
        None, repr=False, description="proxy: clients must send it in x-memwire-key (MEMWIRE_PROXY_KEY)"
    )
    anthropic_cache_breakpoint: bool = Field(
        True, description="proxy: add a cache_control breakpoint before the memory message"
    )
    proxy_header_timeout: float = Field(
        10.0, gt=0, le=3600, description="proxy: seconds a connection may take to send a request's headers"
    )
    proxy_body_timeout: float = Field(
        120.0, gt=0, le=3600, description="proxy: seconds a client may take to send a request body (408 after)"
    )
    proxy_max_connections: int = Field(
        1000, ge=1, le=1_000_000, description="proxy: open connections at most; past it requests get 503"
    )
    proxy_new_namespaces_per_minute: int = Field(
        60, ge=0, le=1_000_000, description="proxy: new namespaces one client may start per minute (429 after)"
    )
    proxy_max_namespaces: int = Field(
        10_000, ge=0, le=10_000_000, description="proxy: namespaces in the memory directory at most (429 after)"
    )

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, v: Any) -> str:
        return normalize_mode(v)

    @property
    def global_dir(self) -> Path:
        return self.home if self.home is not None else Path.home() / ".memwire"


def _raise_config_error(exc: ValidationError, source: str) -> None:
    problems = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(config)"
        if err["type"] == "extra_forbidden":
            problems.append(f"unknown key {key!r}; valid keys: {', '.join(Config.model_fields)}")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            problems.append(f"{key}: {msg} (got {err.get('input')!r})")
    raise ConfigError(f"{source}: " + "; ".join(problems)) from None


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in env.items():
        if not name.startswith("MEMWIRE_") or name in ("MEMWIRE_CONFIG",):
            continue
        key = name[len("MEMWIRE_") :].lower()
        if key not in Config.model_fields:
            raise ConfigError(f"environment variable {name}: unknown key {key!r}; valid keys: {', '.join(Config.model_fields)}")
        out[key] = None if value == "" and key in ("home", "min_score") else value
    return out


def _from_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from None
    table = data.get("memwire", data)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [memwire] must be a table")
    return dict(table)


#: Keys a project's memwire.toml may not set, and why: where memory is read from and written to, and
#: the proxy's key (a repository must not pick the key of a proxy you open to the network). A new
#: field that names a place, a URL, a command or a secret belongs here too.
PROJECT_REFUSED: dict[str, str] = {
    "dir": "a project config cannot choose where memory is read or written; use --dir or MEMWIRE_DIR",
    "home": "a project config cannot choose where memory is read or written; use MEMWIRE_HOME",
    "use_global": "a project config cannot choose where memory is read or written; use MEMWIRE_USE_GLOBAL",
    "proxy_key": "a project config cannot set the proxy key; use --proxy-key or MEMWIRE_PROXY_KEY",
}


def restrict_project_config(values: Mapping[str, Any], source: str) -> tuple[dict[str, Any], list[str]]:
    """Drop what a project config may not set (:data:`PROJECT_REFUSED`, and ``memory_role`` other
    than ``"user"``); returns the rest and one notice per dropped key."""
    kept: dict[str, Any] = {}
    notices: list[str] = []
    for key, value in values.items():
        if key in PROJECT_REFUSED:
            notices.append(f"ignoring {key} in {source}: {PROJECT_REFUSED[key]}")
        elif key == "memory_role" and value != "user":
            notices.append(f"ignoring memory_role = {value!r} in {source}: a project config cannot give memory "
                           "the system role; use MEMWIRE_MEMORY_ROLE or your own --config file")
        else:
            kept[key] = value
    return kept, notices


def load_config(
    path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    project_config: bool = True,
    notices: list[str] | None = None,
    **overrides: Any,
) -> Config:
    """Build a Config from ``memwire.toml`` (``path``, ``$MEMWIRE_CONFIG`` or ./memwire.toml), the
    ``MEMWIRE_*`` environment and keyword overrides (None values are ignored).

    ./memwire.toml is the project's config: it is read only when ``project_config`` is true, and
    what it may not set (:func:`restrict_project_config`) is ignored with a notice, appended to
    ``notices`` when given, else logged as a warning."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    named = path or env.get("MEMWIRE_CONFIG")  # a file the person named must exist
    toml_path = Path(named) if named else Path("memwire.toml")
    if named and not toml_path.is_file():
        source = "" if path else "MEMWIRE_CONFIG: "
        raise ConfigError(f"{source}{toml_path}: config file not found")
    if toml_path.is_file() and (named or project_config):
        source_values = _from_toml(toml_path)
        if not named:  # found in the working directory: the project's, not the person's
            source_values, refused = restrict_project_config(source_values, f"./{toml_path}")
            if notices is not None:
                notices.extend(refused)
            else:
                for notice in refused:
                    log.warning("memwire: %s", notice)
        make_config(source_values, str(toml_path))
        values.update(source_values)
    env_values = _from_env(env)
    values.update(env_values)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return make_config(values)


def make_config(values: Mapping[str, Any], source: str = "config") -> Config:
    """Validate settings; a bad key or value raises ConfigError naming it."""
    try:
        return Config(**values)
    except ValidationError as exc:
        _raise_config_error(exc, source)
    raise AssertionError("unreachable")
