from __future__ import annotations

from pathlib import Path

import pytest

from memwire import ConfigError, Middleware, MemoryStore
from memwire._config import load_config


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


def test_a_named_config_file_must_exist_whether_given_as_argument_or_variable(tmp_path: Path) -> None:
    from memwire._config import load_config

    with pytest.raises(ConfigError, match="MEMWIRE_CONFIG: .*missing.toml: config file not found"):
        load_config(env={"MEMWIRE_CONFIG": str(tmp_path / "missing.toml")})
    with pytest.raises(ConfigError, match="missing.toml: config file not found"):
        load_config(tmp_path / "missing.toml", env={})


@pytest.mark.parametrize("value", ["5", "-0.1", "1.5"])
def test_min_score_is_a_share_from_0_to_1(value: str) -> None:
    from memwire._config import load_config

    with pytest.raises(ConfigError, match="min_score"):
        load_config(env={"MEMWIRE_MIN_SCORE": value})
    assert load_config(env={"MEMWIRE_MIN_SCORE": "0.35"}).min_score == 0.35


def test_the_store_setting_is_a_postgresql_url_or_unset(tmp_path: Path) -> None:
    env = {"MEMWIRE_STORE": "postgresql://memwire@db.internal:5432/memory", "MEMWIRE_TEST_POSTGRES": "not a setting"}
    assert load_config(env=env, project_config=False).store == "postgresql://memwire@db.internal:5432/memory"
    assert load_config(env={"MEMWIRE_STORE": ""}, project_config=False).store is None
    with pytest.raises(ConfigError, match="store must be a PostgreSQL URL"):
        load_config(env={"MEMWIRE_STORE": "mysql://db/memory"}, project_config=False)
    assert "postgresql" not in repr(load_config(env=env, project_config=False))  # it may hold a password
