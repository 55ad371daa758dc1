"""Configuration: one pydantic model, loadable from ``memwire.toml`` and ``MEMWIRE_*`` variables.

The model itself is in ``_config_model`` and imported on first use: pydantic takes ~0.1 s to import
and build it, and ``import memwire`` or ``memwire --help`` need neither.

Precedence, lowest first: defaults, ``memwire.toml`` (``[memwire]`` table or top level), environment
variables, keyword overrides. Every bad key or value raises :class:`ConfigError` naming it.

A ``memwire.toml`` memwire finds by itself in the working directory is the *project's* config (it
may come with a cloned repository): it is read only once the directory is trusted (the decision is
``memwire._trust.resolve_config``'s, for the command line and the library alike), and even then it
cannot set the keys in :data:`PROJECT_REFUSED`, give memory the system role nor choose a mode outside
:data:`PROJECT_MODES`; those keys are ignored, each with a notice. A file the person names (``path``,
``--config``, ``$MEMWIRE_CONFIG``) is the person's own and may set every key.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._errors import ConfigError
from ._mode_names import MODES, normalize_mode

if TYPE_CHECKING:  # start-up time: the pydantic model loads on the first config built (see above)
    from ._config_model import Config

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["MODES", "PROJECT_MODES", "PROJECT_REFUSED", "Config", "load_config", "make_config", "normalize_mode",
           "restrict_project_config"]

log = logging.getLogger("memwire")

def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    from ._config_model import Config  # start-up time: pydantic

    out: dict[str, Any] = {}
    for name, value in env.items():
        if not name.startswith("MEMWIRE_") or name in ("MEMWIRE_CONFIG",) or name.startswith("MEMWIRE_TEST_"):
            continue  # MEMWIRE_TEST_*: the test suite's (a database, a browser it may use), not settings
        key = name[len("MEMWIRE_") :].lower()
        if key not in Config.model_fields:
            raise ConfigError(f"environment variable {name}: unknown key {key!r}; "
                              f"valid keys: {', '.join(Config.model_fields)}")
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
    "store": "a project config cannot choose where memory is read or written; use --store or MEMWIRE_STORE",
    "proxy_key": "a project config cannot set the proxy key; use --proxy-key or MEMWIRE_PROXY_KEY",
    "proxy_keys_file": "a project config cannot choose the proxy's client keys; "
                       "use --keys-file or MEMWIRE_PROXY_KEYS_FILE",
    "embedding_model": "a project config cannot choose a model directory to load; use MEMWIRE_EMBEDDING_MODEL",
    # the conversation would go to a model and a server the repository chose
    "distill_model": "a project config cannot send conversations to a model; use MEMWIRE_DISTILL_MODEL",
    "distill_api_base": "a project config cannot send conversations to a server; use MEMWIRE_DISTILL_API_BASE",
    "distill_via_upstream": "a project config cannot spend the caller's credentials; use MEMWIRE_DISTILL_VIA_UPSTREAM",
}


#: The modes a project's memwire.toml may choose: those that leave the system prompt byte-identical
#: (DESIGN, rule 2) and put memory in a message of the ``user`` role. ``systemPromptPerTurn`` writes
#: memory into the system prompt, where it carries the authority of the person's own prompt: like a
#: ``memory_role`` other than ``user``, it needs the person's own settings. A mode registered later is
#: not a project's to choose until it is added here.
PROJECT_MODES: tuple[str, ...] = ("contextPerTurn", "startup")


def _project_mode(value: Any) -> str | None:
    """The mode ``value`` names when a project config may not choose it, else None (a value that
    names no mode is left to the validation, which names the valid ones)."""
    try:
        mode = normalize_mode(value)
    except ConfigError:
        return None
    return None if mode in PROJECT_MODES else mode


def restrict_project_config(values: Mapping[str, Any], source: str) -> tuple[dict[str, Any], list[str]]:
    """Drop what a project config may not set (:data:`PROJECT_REFUSED`, ``memory_role`` other than
    ``"user"``, a ``mode`` outside :data:`PROJECT_MODES`); returns the rest and one notice per
    dropped key, naming the key, the file and where to set it instead."""
    kept: dict[str, Any] = {}
    notices: list[str] = []
    for key, value in values.items():
        if key in PROJECT_REFUSED:
            notices.append(f"ignoring {key} in {source}: {PROJECT_REFUSED[key]}")
        elif key == "memory_role" and value != "user":
            notices.append(f"ignoring memory_role = {value!r} in {source}: a project config cannot give memory "
                           "the system role; use MEMWIRE_MEMORY_ROLE or your own --config file")
        elif key == "mode" and _project_mode(value) is not None:
            notices.append(f"ignoring mode = {value!r} in {source}: a project config cannot put memory in the "
                           f"system prompt (it may choose {' or '.join(PROJECT_MODES)}); use --mode, MEMWIRE_MODE, "
                           "your own --config file or Middleware(mode=...)")
        else:
            kept[key] = value
    return kept, notices


def load_config(
    path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    project_config: bool = False,
    notices: list[str] | None = None,
    **overrides: Any,
) -> Config:
    """Build a Config from ``memwire.toml`` (``path``, ``$MEMWIRE_CONFIG`` or ./memwire.toml), the
    ``MEMWIRE_*`` environment and keyword overrides (None values are ignored).

    ./memwire.toml is the project's config: it is read only when ``project_config`` is true, which
    says the caller checked that the directory is trusted (``memwire._trust.resolve_config`` does,
    and is what the command line and ``Middleware`` call); what it may not set
    (:func:`restrict_project_config`) is ignored with a notice, appended to ``notices`` when given,
    else logged as a warning."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    named = path or env.get("MEMWIRE_CONFIG")  # a file the person named must exist
    toml_path = Path(named) if named else Path("memwire.toml")
    if named and not toml_path.is_file():
        source = "" if path else "MEMWIRE_CONFIG: "
        what = (f"a directory, not a config file (name the file, such as {toml_path / 'memwire.toml'})"
                if toml_path.is_dir() else "config file not found")
        raise ConfigError(f"{source}{toml_path}: {what}")
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
    from ._config_model import make_config as make  # start-up time: pydantic

    return make(values, source)


def __getattr__(name: str) -> Any:
    if name == "Config":  # `from memwire._config import Config` keeps working, loading pydantic then
        from ._config_model import Config  # start-up time: pydantic

        return Config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
