"""The real LiteLLM proxy, started as documented, with memwire's callback, against the fake provider.

    LITELLM_MASTER_KEY=sk-... MEMWIRE_DIR=D litellm --config examples/litellm_proxy_config.yaml

Checks that it starts, that a master-key request gets the memories of D itself (the default
namespace, not litellm's user id ``default_user_id``), and that a memory written with
``memwire add --dir D`` is injected on the next request without a restart: also when D or
MEMORY.md did not exist when the proxy started and the new file is older than a timestamp tick.

Needs ``litellm[proxy]`` in the running interpreter's environment (``.ci/litellm_proxy`` makes one);
skipped with a reason elsewhere. Every provider call goes to the fake provider on 127.0.0.1; any
other host goes to a refused proxy port.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memwire._sim.fake_provider import FakeProvider, ServerThread, serve_in_thread

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "litellm_proxy_config.yaml"
BIN = Path(sys.executable).parent
MASTER_KEY = "sk-memwire-test-" + "0" * 32
OPEN = "<memory>"


def _missing() -> str | None:
    absent = [m for m in ("litellm", "fastapi", "backoff", "apscheduler", "orjson", "litellm_proxy_extras")
              if importlib.util.find_spec(m) is None]
    if absent:
        return f"litellm[proxy] is not installed here (no {', '.join(absent)}); .ci/litellm_proxy runs this test"
    if not (BIN / "litellm").exists() or not (BIN / "memwire").exists():
        return f"no litellm / memwire command in {BIN}"
    return None


pytestmark = [
    pytest.mark.real_clients,
    pytest.mark.skipif(_missing() is not None, reason=_missing() or ""),
    pytest.mark.timeout(240),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def fake() -> Iterator[tuple[FakeProvider, ServerThread]]:
    provider = FakeProvider()
    with serve_in_thread(provider) as server:
        yield provider, server


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A bound port that does not listen: connections to it are refused (the outbound proxy)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


class Proxy:
    def __init__(self, memdir: Path, upstream: str, refused: int, workdir: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "litellm-proxy.log"
        nowhere = f"http://127.0.0.1:{refused}"
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("MEMWIRE_", "LITELLM_", "OPENAI_", "ANTHROPIC_", "DATABASE_"))
               and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
        env.update(
            MEMWIRE_DIR=str(memdir), MEMWIRE_HOME=str(workdir / "home"), LITELLM_MASTER_KEY=MASTER_KEY,
            OPENAI_API_KEY="sk-dummy", OPENAI_API_BASE=upstream + "/v1",
            ANTHROPIC_API_KEY="sk-ant-dummy", ANTHROPIC_API_BASE=upstream,
            LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_TELEMETRY="False", LITELLM_LOG="ERROR",
            HTTPS_PROXY=nowhere, HTTP_PROXY=nowhere, https_proxy=nowhere, http_proxy=nowhere,
            NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
        )
        self.env = env
        self._out = open(self.log, "wb")
        # as the docs say: the config names the callback module that sits next to it
        self.process = subprocess.Popen(
            [str(BIN / "litellm"), "--config", str(CONFIG), "--host", "127.0.0.1", "--port", str(self.port)],
            env=env, cwd=workdir, stdout=self._out, stderr=subprocess.STDOUT,
        )
        self.http = httpx.Client(base_url=self.url, trust_env=False, timeout=60)

    def wait_ready(self, timeout: float = 150) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"litellm proxy exited with {self.process.returncode}:\n{self.tail()}")
            try:
                if self.http.get("/health/liveliness", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.25)
        pytest.fail(f"litellm proxy not up after {timeout:.0f} s:\n{self.tail()}")

    def tail(self) -> str:
        self._out.flush()
        return self.log.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        self.http.close()
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
        self._out.close()

    def chat(self, question: str, **headers: str) -> httpx.Response:
        body = {"model": "gpt", "messages": [{"role": "system", "content": "You are a careful coding agent."},
                                             {"role": "user", "content": question}]}
        r = self.http.post("/v1/chat/completions", json=body,
                           headers={"authorization": f"Bearer {MASTER_KEY}", **headers})
        assert r.status_code == 200, f"{r.status_code} {r.text}\n{self.tail()}"
        return r


@pytest.fixture
def start(tmp_path: Path, fake: tuple[FakeProvider, ServerThread], refused_port: int) -> Iterator[Any]:
    started: list[Proxy] = []

    def run(memdir: Path) -> Proxy:
        proxy = Proxy(memdir, fake[1].base_url, refused_port, tmp_path)
        started.append(proxy)
        proxy.wait_ready()
        return proxy

    yield run
    for proxy in started:
        proxy.stop()


def memwire_add(proxy: Proxy, memdir: Path, text: str) -> None:
    out = subprocess.run([str(BIN / "memwire"), "add", "--dir", str(memdir), text], env=proxy.env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def backdate(*paths: Path, age: float) -> None:
    """Make files look written ``age`` seconds ago: older than any timestamp tick (2 s), as when
    the next request comes a while after ``memwire add``; no sleeping."""
    when = time.time() - age
    for p in paths:
        os.utime(p, (when, when))


def memory_blocks(body: dict[str, Any]) -> list[str]:
    texts = []
    for m in body["messages"]:
        content = m["content"]
        parts = [content] if isinstance(content, str) else [b.get("text", "") for b in content]
        texts += [t for t in parts if t.startswith(OPEN)]
    return texts


def test_master_key_gets_the_directory_and_new_memories_without_restart(
    tmp_path: Path, fake: tuple[FakeProvider, ServerThread], start: Any,
) -> None:
    provider = fake[0]
    memdir = tmp_path / "mem"
    memdir.mkdir()
    # a hand-written topic file; MEMORY.md does not exist yet
    (memdir / "infra.md").write_text("## Infra\n- The staging database is Postgres 15 on port 5433\n")
    backdate(memdir / "infra.md", memdir, age=100)
    proxy = start(memdir)

    proxy.chat("Which port is the staging database on?")
    sent = provider.last.body
    assert sent["model"] == "gpt-4o-mini"
    blocks = memory_blocks(sent)
    assert len(blocks) == 1 and "port 5433" in blocks[0], json.dumps(sent)
    assert sent["messages"][-1] == {"role": "user", "content": "Which port is the staging database on?"}

    # memwire add creates MEMORY.md; the next request, a while later, gets it
    memwire_add(proxy, memdir, "Deploys go out on Tuesdays only, via the deploy workflow")
    backdate(memdir / "MEMORY.md", memdir, age=5)
    proxy.chat("When do deploys go out?")
    blocks = memory_blocks(provider.last.body)
    assert len(blocks) == 1 and "Tuesdays only" in blocks[0], json.dumps(provider.last.body)

    # and again into the now existing MEMORY.md (replaced by a rename), without waiting
    memwire_add(proxy, memdir, "The API server is FastAPI behind nginx")
    proxy.chat("Which web framework does the API server use?")
    blocks = memory_blocks(provider.last.body)
    assert len(blocks) == 1 and "FastAPI" in blocks[0], json.dumps(provider.last.body)

    # the Anthropic route of the same proxy, same namespace
    r = proxy.http.post("/v1/messages", headers={"x-api-key": MASTER_KEY, "anthropic-version": "2023-06-01"},
                        json={"model": "claude", "max_tokens": 64, "system": "You are a careful coding agent.",
                              "messages": [{"role": "user", "content": "Which port is staging on?"}]})
    assert r.status_code == 200, f"{r.status_code} {r.text}\n{proxy.tail()}"
    sent = provider.last.body
    assert provider.last.path == "/v1/messages" and sent["system"] == "You are a careful coding agent."
    assert any("port 5433" in b for b in memory_blocks(sent)), json.dumps(sent)


def test_directory_created_after_the_proxy_started(
    tmp_path: Path, fake: tuple[FakeProvider, ServerThread], start: Any,
) -> None:
    provider = fake[0]
    memdir = tmp_path / "not-yet"
    proxy = start(memdir)
    proxy.chat("Which port is the staging database on?")
    assert memory_blocks(provider.last.body) == []  # nothing to inject yet, and no failure

    memwire_add(proxy, memdir, "The staging database is Postgres 15 on port 5433")
    backdate(memdir / "MEMORY.md", memdir, age=5)
    proxy.chat("Which port is staging on, again?")
    blocks = memory_blocks(provider.last.body)
    assert len(blocks) == 1 and "port 5433" in blocks[0], json.dumps(provider.last.body)
