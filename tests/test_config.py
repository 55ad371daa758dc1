from __future__ import annotations

from pathlib import Path

import pytest

from memwire import ConfigError, Middleware, MemoryStore
from memwire.config import load_config


def test_modes_and_snake_case() -> None:
    assert load_config(env={}, mode="context_per_turn").mode == "contextPerTurn"
    assert load_config(env={}, mode="system_prompt_per_turn").mode == "systemPromptPerTurn"
    assert load_config(env={}, mode="startup").mode == "startup"


def test_unknown_mode_lists_valid_ones() -> None:
    with pytest.raises(ConfigError, match="unknown mode 'perTurn'.*startup, systemPromptPerTurn, contextPerTurn"):
        load_config(env={}, mode="perTurn")
    with pytest.raises(ConfigError, match="unknown mode"):
        Middleware(store=MemoryStore("unused"), mode="bogus")


def test_env_and_toml(tmp_path: Path) -> None:
    toml = tmp_path / "memwire.toml"
    toml.write_text('[memwire]\nmode = "startup"\ntop_k = 3\nmax_tokens = 400\n')
    cfg = load_config(toml, env={"MEMWIRE_TOP_K": "4", "MEMWIRE_DIR": str(tmp_path / "m")})
    assert (cfg.mode, cfg.top_k, cfg.max_tokens, cfg.dir) == ("startup", 4, 400, tmp_path / "m")
    assert load_config(toml, env={}, top_k=9).top_k == 9


@pytest.mark.parametrize(
    "env,needle",
    [
        ({"MEMWIRE_TOP_K": "many"}, "top_k"),
        ({"MEMWIRE_PLACEMENT": "after"}, "placement"),
        ({"MEMWIRE_COLOUR": "blue"}, "MEMWIRE_COLOUR"),
        ({"MEMWIRE_MAX_TOKENS": "-5"}, "max_tokens"),
    ],
)
def test_bad_values_name_the_key(env: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        load_config(env=env)


def test_bad_toml_key_named(tmp_path: Path) -> None:
    toml = tmp_path / "memwire.toml"
    toml.write_text("top_kk = 3\n")
    with pytest.raises(ConfigError, match="unknown key 'top_kk'"):
        load_config(toml, env={})
    toml.write_text("top_k = [\n")
    with pytest.raises(ConfigError, match="memwire.toml"):
        load_config(toml, env={})
