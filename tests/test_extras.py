"""litellm is an extra (`memwire[litellm]`): memwire works without it, and its adapter says how to
install it. Each check runs in a fresh interpreter where `import litellm` fails."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

NO_LITELLM = "import sys\nsys.modules['litellm'] = None  # as if not installed\n"


def run(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", NO_LITELLM + code], capture_output=True, text=True, cwd=cwd)


def test_the_litellm_adapter_names_the_extra(tmp_path: Path) -> None:
    done = run("from memwire.adapters.litellm import wrap", tmp_path)
    assert done.returncode == 1
    assert "MissingDependencyError: memwire.adapters.litellm needs litellm" in done.stderr
    assert "pip install 'memwire[litellm]'" in done.stderr
    done = run("from memwire._errors import MemwireError\ntry:\n    import memwire.adapters.litellm\n"
               "except ModuleNotFoundError as exc:\n    assert isinstance(exc, MemwireError) and exc.name == 'litellm'\n"
               "    print('ok')", tmp_path)
    assert done.stdout.strip() == "ok", done.stderr


def test_memory_and_the_cli_work_without_litellm(tmp_path: Path) -> None:
    code = (
        "from memwire import MemoryStore, Middleware\n"
        "from memwire.cli import main\n"
        "assert main(['add', '--dir', 'mem', 'The staging database is on port 5433']) == 0\n"
        "mw = Middleware(store=MemoryStore('mem'), history='drop')\n"
        "mw.warm_up(('gpt-4o',))  # the retrieval budget must not decide the test on a loaded machine\n"
        "p = mw.prepare([{'role': 'user', 'content': 'Which port is the staging database on?'}], model='gpt-4o')\n"
        "assert p.injection.injected and p.injection.tokens > 0, p.injection\n"
        "print('ok')"
    )
    done = run(code, tmp_path)
    assert done.stdout.strip().endswith("ok"), done.stderr
