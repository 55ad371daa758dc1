"""The docs say what the code does (issue 34 item 4): every command line they show names a real
command and real options; every config snippet (memwire.toml, the LiteLLM proxy's config.yaml, the
Codex CLI's config.toml, aider's model settings) parses and uses only keys its program has; the
proxy's options in docs/proxy.md are generated from the parser.

    python tests/test_docs.py     # rewrite the generated blocks after changing the parser

A snippet of a kind this file does not know fails the test: teach ``snippet_kind`` what it is.
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PROXY_MD = ROOT / "docs" / "proxy.md"

# ---------------------------------------------------------------- the generated options table

BEGIN = "<!-- generated from the parser by `python tests/test_docs.py`: edit the option's help, not this table -->"
END = "<!-- end of the generated table -->"


@functools.cache
def _parser() -> argparse.ArgumentParser:
    from memwire.cli import build_parser

    return build_parser()


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _shown(action: argparse.Action) -> str:
    """An option as the table shows it: its spellings and what it takes."""
    if action.nargs == 0:  # a flag (store_true, --x / --no-x)
        return ", ".join(f"`{o}`" for o in action.option_strings)
    takes = "|".join(map(str, action.choices)) if action.choices else (action.metavar or action.dest.upper())
    return ", ".join(f"`{o} {takes}`" for o in action.option_strings)


def proxy_options() -> str:
    """The options of ``memwire proxy``, one row each, from the parser."""
    rows = ["| option | what it does |", "|---|---|"]
    for action in subcommands(_parser())["proxy"]._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS or "-h" in action.option_strings:
            continue
        assert action.help, f"memwire proxy {action.option_strings[0]} has no help: the docs table needs one"
        what = action.help % vars(action) if "%(" in action.help else action.help
        rows.append(f"| {_shown(action).replace('|', chr(92) + '|')} | {what.replace('|', chr(92) + '|')} |")
    return "\n".join(rows)


def regenerated(text: str) -> str:
    """``text`` (docs/proxy.md) with the block between the markers made anew."""
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{proxy_options()}\n{END}{tail}"


def test_the_proxy_options_in_the_docs_are_the_parsers() -> None:
    text = PROXY_MD.read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1, "docs/proxy.md lost its generated options table"
    assert text == regenerated(text), "docs/proxy.md's options table is not the parser's: run python tests/test_docs.py"


def test_every_proxy_option_is_in_the_table() -> None:
    """The table is generated, not filtered: an option added to the parser appears in it."""
    table = proxy_options()
    for action in subcommands(_parser())["proxy"]._actions:
        for option in action.option_strings:
            assert option in ("-h", "--help") or f"`{option}" in table, option


# ---------------------------------------------------------------- code in the docs


def fenced(path: Path) -> Iterator[tuple[int, str, str]]:
    """(line, language, text) of each fenced block of ``path`` (indented ones too, dedented)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)```(\S*)", lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start, body = len(m.group(1)), m.group(2).lower(), i + 1, []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
            i += 1
        i += 1
        yield start, lang, "\n".join(body) + "\n"


def command_lines(path: Path) -> Iterator[tuple[int, str, bool]]:
    """(line, text, whole) of each place ``memwire`` is run: the lines of shell and plain blocks,
    and inline code spans. ``whole``: the text starts with ``memwire`` (so its next word must be a
    command), rather than holding it (``claude mcp add memwire -- memwire mcp ...``)."""
    for start, lang, text in fenced(path):
        if lang in ("", "bash", "sh", "shell", "console", "text"):
            for n, line in enumerate(text.splitlines()):
                line = re.sub(r"^\$\s+", "", line.strip())
                line = re.sub(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)+", "", line)  # VAR=value memwire ...
                if "memwire " in line:  # in a plain block a table's "memwire  warm  480 ..." is no command line
                    shell = lang not in ("", "text") or "--" in line or "[" in line
                    yield start + n + 1, line, line.startswith("memwire ") and shell
    prose = re.sub(r"^\s*```.*?^\s*```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    for span in re.findall(r"`([^`\n]*\bmemwire [^`\n]*)`", prose):
        yield 0, span, span.startswith("memwire ")


def _options(parser: argparse.ArgumentParser) -> set[str]:
    found = {o for a in parser._actions for o in a.option_strings}
    for sub in subcommands(parser).values():  # a synopsis names a command's subcommands' options too
        found |= _options(sub)
    return found


def _problems(line: str, whole: bool) -> list[str]:
    top = _parser()
    commands = subcommands(top)
    top_options = {o for a in top._actions for o in a.option_strings}
    line = re.split(r"\s#\s|&&|;|\s&$", line)[0]  # a comment, the next shell command
    problems = []
    for m in re.finditer(r"(?:^|(?<=[\s=(]))memwire\s+(\S+)(.*?)(?=\bmemwire\s|$)", line):
        word, rest = m.group(1), m.group(2)
        if word in top_options:  # memwire --config FILE list, memwire --help
            rest_words = rest.split()
            word, rest = (rest_words[1], " ".join(rest_words[2:])) if word == "--config" and len(rest_words) > 1 \
                else ("", rest)
        if word not in commands:
            if whole and word:
                problems.append(f"no command {word!r}")
            continue
        known = _options(commands[word]) | top_options
        for flag in re.findall(r"(?<![\w.~/-])(--?[a-zA-Z][\w-]*)", rest):
            if flag not in known:
                problems.append(f"memwire {word} has no option {flag}")
    return problems


def test_every_command_line_in_the_docs_names_real_commands_and_options() -> None:
    problems = [f"{path.relative_to(ROOT)}:{line}: {text!r}: {p}"
                for path in DOCS for line, text, whole in command_lines(path) for p in _problems(text, whole)]
    assert problems == []


def test_the_command_line_check_catches_a_wrong_option() -> None:
    assert _problems("memwire proxy --prot 8788", True) == ["memwire proxy has no option --prot"]
    assert _problems("memwire lsit", True) == ["no command 'lsit'"]
    assert _problems("claude mcp add memwire -- memwire mcp --dri x", False) == ["memwire mcp has no option --dri"]
    assert _problems("memwire inbox [approve|reject ID... | --all] [--dir DIR]", True) == []
    assert _problems("memwire --config my.toml list --pinned", True) == []
    assert _problems("pip install 'litellm[proxy]' memwire", False) == []


# ---------------------------------------------------------------- config snippets

# Codex CLI 0.171.0's provider and MCP server settings (codex-rs/core: ModelProviderInfo,
# McpServerConfig); docs/clients.md names the version the clients were run with
CODEX_PROVIDER_KEYS = {
    "name", "base_url", "model_catalog_url", "env_key", "env_key_instructions", "experimental_bearer_token",
    "wire_api", "query_params", "http_headers", "env_http_headers", "request_max_retries", "stream_max_retries",
    "stream_idle_timeout_ms", "websocket_connect_timeout_ms", "requires_openai_auth", "supports_websockets"}
CODEX_MCP_KEYS = {
    "command", "args", "env", "env_vars", "cwd", "url", "bearer_token_env_var", "http_headers", "env_http_headers",
    "startup_timeout_sec", "startup_timeout_ms", "tool_timeout_sec", "enabled", "enabled_tools", "disabled_tools"}
# aider 0.86's ModelSettings (aider/models.py): what an entry of .aider.model.settings.yml may set
AIDER_MODEL_SETTINGS = {
    "name", "edit_format", "weak_model_name", "use_repo_map", "send_undo_reply", "lazy", "overeager", "reminder",
    "examples_as_sys_msg", "extra_params", "cache_control", "caches_by_default", "use_system_prompt",
    "use_temperature", "streaming", "editor_model_name", "editor_edit_format", "reasoning_tag", "remove_reasoning",
    "system_prompt_prefix", "accepts_settings"}


def snippets() -> list[tuple[str, str, Any, str]]:
    """(where, kind, parsed, text) of every TOML, YAML and JSON block of the docs."""
    out = []
    for path in DOCS:
        for line, lang, text in fenced(path):
            where = f"{path.relative_to(ROOT)}:{line}"
            if lang == "toml":
                data: Any = tomllib.loads(text)
            elif lang in ("yaml", "yml"):
                data = yaml.safe_load(text)
            elif lang == "json":
                try:
                    data = json.loads(text)
                except json.JSONDecodeError:  # JSON Lines: one object a line
                    data = [json.loads(ln) for ln in text.splitlines() if ln.strip()]
            else:
                continue
            out.append((where, snippet_kind(lang, data), data, text))
    return out


def snippet_kind(lang: str, data: Any) -> str:
    if lang == "json":
        return "json"
    if lang == "toml":
        if "model_providers" in data or "model_provider" in data:
            return "codex provider"
        if "mcp_servers" in data:
            return "codex mcp"
        return "memwire.toml"
    if isinstance(data, dict) and {"model_list", "litellm_settings", "general_settings"} & data.keys():
        return "litellm config"
    if isinstance(data, list) and all(isinstance(e, dict) and "name" in e for e in data):
        return "aider model settings"
    return f"unknown {lang}"


def test_every_config_snippet_parses_and_names_real_keys(tmp_path: Path) -> None:
    from memwire._config import load_config

    found = snippets()
    kinds = {kind for _, kind, _, _ in found}
    assert not [w for w, k, _, _ in found if k.startswith("unknown")], "teach snippet_kind what these are"
    assert {"memwire.toml", "codex provider", "codex mcp", "litellm config", "aider model settings"} <= kinds
    for where, kind, data, text in found:
        if kind == "memwire.toml":  # through memwire's own loader: an unknown key or a bad value fails
            path = tmp_path / "memwire.toml"
            path.write_text(text, encoding="utf-8")
            load_config(path, env={})
        elif kind == "codex provider":
            for name, provider in data.get("model_providers", {}).items():
                assert set(provider) <= CODEX_PROVIDER_KEYS, (where, set(provider) - CODEX_PROVIDER_KEYS)
                # memwire proxies HTTP: without this Codex may try a websocket first (docs/clients.md)
                assert provider.get("supports_websockets") is False, (where, name)
                assert provider.get("wire_api") in ("responses", "chat"), where
            assert data.get("model_provider") in data.get("model_providers", {}), where
        elif kind == "codex mcp":
            for server in data["mcp_servers"].values():
                assert set(server) <= CODEX_MCP_KEYS, (where, set(server) - CODEX_MCP_KEYS)
                if server.get("command") == "memwire":  # the arguments are memwire's own
                    assert _problems(" ".join(["memwire", *server["args"]]), True) == [], where
        elif kind == "litellm config":
            check_litellm_config(where, data)
        elif kind == "aider model settings":
            check_aider_settings(where, data)


def check_aider_settings(where: str, data: list[dict[str, Any]]) -> None:
    """An .aider.model.settings.yml in the docs: aider's keys, and the header under
    ``aider/extra_params``: an entry named after a model replaces aider's own settings for that model
    (it falls back to whole-file edits; issue 34 item 10)."""
    for entry in data:
        assert set(entry) <= AIDER_MODEL_SETTINGS, (where, set(entry) - AIDER_MODEL_SETTINGS)
        assert isinstance(entry.get("extra_params", {}), dict), where
        if "extra_params" in entry:
            assert entry["name"] == "aider/extra_params", (where, f"extra_params under {entry['name']!r}")


def test_every_doc_naming_aiders_settings_file_shows_the_entry() -> None:
    """Told in prose ("under the model's name") the entry is the harmful one: each doc that names
    .aider.model.settings.yml shows it as a snippet, which the check above reads."""
    for path in DOCS:
        if ".aider.model.settings.yml" in path.read_text(encoding="utf-8"):
            entries = [e for where, kind, data, _ in snippets() if kind == "aider model settings"
                       and where.startswith(f"{path.relative_to(ROOT)}:") for e in data]
            assert any(e["name"] == "aider/extra_params" for e in entries), path.relative_to(ROOT)


# LiteLLM 1.110's proxy config (litellm.proxy._types.ConfigYAML; importing it takes seconds)
LITELLM_CONFIG_KEYS = {"environment_variables", "model_list", "litellm_settings", "general_settings",
                       "worker_registry", "router_settings"}
# the config the real LiteLLM proxy runs with (tests/adapters/test_litellm_proxy_real.py, .ci/litellm_proxy)
LITELLM_EXAMPLE = ROOT / "examples" / "litellm_proxy_config.yaml"


def check_litellm_config(where: str, data: dict[str, Any]) -> None:
    """A LiteLLM proxy config in the docs: LiteLLM's keys, its settings as in the example config
    the real proxy runs with, and a callback naming an attribute of a module in examples/."""
    example = yaml.safe_load(LITELLM_EXAMPLE.read_text(encoding="utf-8"))
    assert set(data) <= LITELLM_CONFIG_KEYS, (where, set(data) - LITELLM_CONFIG_KEYS)
    for table in ("litellm_settings", "general_settings"):
        for key, value in (data.get(table) or {}).items():
            assert example.get(table, {}).get(key) == value, (where, f"{table}.{key} is not the example's")
    shown = {m["model_name"]: m["litellm_params"]["model"] for m in example["model_list"]}
    for entry in data.get("model_list") or []:
        assert shown.get(entry["model_name"]) == entry["litellm_params"]["model"], (where, entry["model_name"])
    callbacks = (data.get("litellm_settings") or {}).get("callbacks")
    for ref in [callbacks] if isinstance(callbacks, str) else callbacks or []:
        module, attr = ref.rsplit(".", 1)
        source = ROOT / "examples" / f"{module}.py"
        assert source.is_file(), (where, f"{ref}: no examples/{module}.py")
        assigned = {t.id for node in ast.walk(ast.parse(source.read_text(encoding="utf-8")))
                    if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}
        assert attr in assigned, (where, f"{ref}: examples/{module}.py assigns no {attr}")


def test_the_snippet_checks_catch_a_wrong_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memwire import ConfigError
    from memwire._config import load_config

    path = tmp_path / "memwire.toml"
    path.write_text('[memwire]\nmdoe = "startup"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="mdoe"):
        load_config(path, env={})
    example = yaml.safe_load(LITELLM_EXAMPLE.read_text(encoding="utf-8"))
    check_litellm_config("x", example)
    with pytest.raises(AssertionError, match="litellm_setings"):
        check_litellm_config("x", {"litellm_setings": {}})
    with pytest.raises(AssertionError, match="is not the example's"):
        check_litellm_config("x", {"general_settings": {"master_key": "sk-1234"}})
    bad = tmp_path / "config.yaml"
    bad.write_text(yaml.safe_dump({**example, "litellm_settings": {"callbacks": "memwire_callback.no_such"}}))
    monkeypatch.setattr(sys.modules[__name__], "LITELLM_EXAMPLE", bad)
    with pytest.raises(AssertionError, match="assigns no no_such"):
        check_litellm_config("x", {"litellm_settings": {"callbacks": "memwire_callback.no_such"}})
    with pytest.raises(AssertionError, match="extra_params under 'openai/gpt-4o'"):
        check_aider_settings("x", [{"name": "openai/gpt-4o", "extra_params": {"extra_headers": {}}}])
    check_aider_settings("x", [{"name": "aider/extra_params", "extra_params": {"extra_headers": {}}}])
    assert snippet_kind("yaml", {"something": "else"}) == "unknown yaml"
    assert snippet_kind("toml", {"model_provider": "m"}) == "codex provider"


if __name__ == "__main__":  # rewrite the generated blocks
    old = PROXY_MD.read_text(encoding="utf-8")
    new = regenerated(old)
    if new != old:
        PROXY_MD.write_text(new, encoding="utf-8")
    print(f"docs/proxy.md: {'options table rewritten' if new != old else 'nothing to change'}", file=sys.stderr)
