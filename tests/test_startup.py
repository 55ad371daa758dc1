"""Start-up stays light: `import memwire` and `memwire --help` load none of the heavy stacks
(benchmarks/startup.py gives the times). Each check runs in a fresh interpreter, since this test
process has imported everything already."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pydantic", "httpx", "litellm", "starlette", "uvicorn", "anyio", "numpy", "tiktoken", "mcp", "psycopg",
         "psycopg_pool")


def loaded_after(code: str) -> set[str]:
    """The modules loaded once ``code`` has run in a fresh interpreter."""
    probe = f"{code}\nimport sys\nprint('LOADED', *sorted(sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(out.rsplit("LOADED", 1)[1].split())


def heavy(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules} & set(HEAVY)


def test_import_memwire_loads_no_heavy_package() -> None:
    assert heavy(loaded_after("import memwire")) == set()
    assert heavy(loaded_after("from memwire import Middleware, MemoryStore")) == set()


def test_help_loads_neither_the_proxy_stack_nor_pydantic() -> None:
    code = "from memwire.cli import main\ntry:\n    main([{}])\nexcept SystemExit:\n    pass"
    for argv in ("'--help'", "'proxy', '--help'", "'demo', '--help'", "'import', '--help'"):
        loaded = loaded_after(code.format(argv))
        assert heavy(loaded) == set(), argv
        assert "memwire.adapters.server._proxy" not in loaded and "memwire._sim.fake_provider" not in loaded, argv


def test_config_is_loaded_on_first_use() -> None:
    loaded = loaded_after("import memwire\nassert memwire.Config.__name__ == 'Config'")
    assert "pydantic" in loaded
    assert "pydantic" in loaded_after("from memwire import *\nassert Config(mode='startup').mode == 'startup'")


def test_the_proxy_command_shows_the_proxy_defaults() -> None:
    from memwire.adapters.server import _proxy_cli, _proxy as proxy

    assert _proxy_cli.DEFAULT_OPENAI_UPSTREAM == proxy.DEFAULT_OPENAI_UPSTREAM
    assert _proxy_cli.DEFAULT_ANTHROPIC_UPSTREAM == proxy.DEFAULT_ANTHROPIC_UPSTREAM
    assert _proxy_cli.DEFAULT_MAX_BODY_BYTES == proxy.DEFAULT_MAX_BODY_BYTES
