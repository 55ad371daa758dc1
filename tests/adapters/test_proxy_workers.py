"""Several proxy processes over one memory directory give a session the bytes one process would.

Real processes: ``memwire proxy`` as subprocesses against a fake upstream on 127.0.0.1. To choose
which worker serves each request, two single-worker proxies on two ports share one ``--dir`` (the
code path of ``--workers``: the workers share nothing but the directory); one test runs the real
``--workers 2``. The reference is the same app in this process over a copy of the store.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from memwire import MemoryStore
from memwire._sim.fake_provider import FakeProvider, Reply, ToolCall, last_user_text, serve_in_thread
from memwire.adapters.server._server import build_app

from ..middleware.conftest import MEMORIES

ROOT = Path(__file__).resolve().parents[2]
SYSTEM = {"role": "system", "content": "You are a coding agent."}
QUESTIONS = ["How do I run the test suite?", "Which database does staging use?", "How do I create a migration?",
             "And how do deploys work?"]


def reply(body: dict[str, Any], api: str) -> Reply:
    """A tool call for every question (the agent looks first), then an answer once it has looked."""
    if body["messages"][-1]["role"] == "tool":
        return Reply(text="Done.")
    return Reply(tool_calls=(ToolCall("read_file", {"path": "README.md"}, id="call_1"),))


@pytest.fixture
def upstream() -> Iterator[tuple[FakeProvider, str]]:
    fake = FakeProvider(reply=reply)
    with serve_in_thread(fake) as server:
        yield fake, server.base_url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("MEMWIRE_")}
    # a generous retrieval budget: on a loaded machine the default 1 s could decide the bytes, not the workers
    return {**keep, "PYTHONPATH": str(ROOT), "MEMWIRE_HOME": str(tmp_path / "home"), "MEMWIRE_USE_GLOBAL": "false",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True", "MEMWIRE_TIMEOUT_MS": "60000", **extra}


class Proxy:
    """``memwire proxy`` in a subprocess."""

    def __init__(self, tmp_path: Path, memory: Path | str, upstream: str, *args: str, **environ: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp_path / f"proxy-{self.port}.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "memwire.cli", "proxy", "--port", str(self.port),
                 *(("--store", memory) if isinstance(memory, str) else ("--dir", str(memory))),
                 "--openai-upstream", upstream, "--anthropic-upstream", upstream, "--log-level", "warning", *args],
                cwd=tmp_path, env=env(tmp_path, **environ), stdout=log, stderr=subprocess.STDOUT)

    def wait(self, headers: dict[str, str] | None = None) -> "Proxy":
        deadline = time.monotonic() + 60
        # one client for every try (a new one loads the CA certificates: ~30 ms of CPU, taken from the
        # starting proxy); a refused connection costs next to nothing, so it is tried every 20 ms
        with httpx.Client(timeout=2) as http:
            while time.monotonic() < deadline:
                assert self.proc.poll() is None, self.log.read_text()
                try:
                    http.get(self.url + "/memwire/v1/memories", headers=headers)
                    return self
                except httpx.HTTPError:
                    time.sleep(0.02)
        raise AssertionError(f"not ready: {self.log.read_text()}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def make_store(path: Path) -> None:
    MemoryStore(path).add_many([text for text, _ in MEMORIES])


def conversation() -> Iterator[dict[str, Any]]:
    """Each turn: the question, then the tool-loop request carrying the tool's result."""
    messages: list[dict[str, Any]] = [SYSTEM]
    for question in QUESTIONS:
        messages.append({"role": "user", "content": question})
        yield {"model": "gpt-4o", "messages": list(messages)}
        call = {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": "call_1", "content": "README: run make test"}]
        yield {"model": "gpt-4o", "messages": list(messages)}
        messages.append({"role": "assistant", "content": "Done."})


def sent(fake: FakeProvider, n: int) -> list[Any]:
    """The message lists of the upstream's last ``n`` requests."""
    return [json.loads(r.raw)["messages"] for r in fake.requests[-n:]]


async def reference(memory: Path | str, upstream: str, mode_env: dict[str, str], bodies: list[dict[str, Any]],
                    fake: FakeProvider, change: Any) -> list[Any]:
    """What one process sends upstream for ``bodies``: the same app, in this process, on the
    directory ``memory`` (or the PostgreSQL URL); ``change(memory, i)`` before request ``i``."""
    from memwire._config import load_config

    where = {"store": memory} if isinstance(memory, str) else {"dir": memory}
    cfg = load_config(None, env=mode_env, project_config=False, use_global=False, shared_memos=True,
                      timeout_ms=60000, **where)
    spec = {"config": cfg.model_dump(mode="json"), "openai_upstream": upstream, "anthropic_upstream": upstream,
            "timeout": 60.0, "max_body_bytes": 2**25, "cache_breakpoint": None, "memory": True, "log_level": "warning"}
    app = build_app(spec)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy") as http:
        for i, body in enumerate(bodies):
            change(memory, i)
            r = await http.post("/v1/chat/completions", json=body)
            assert r.status_code == 200, r.text
    await app.state.proxy.client.aclose()
    app.state.proxy.middleware.flush(30)  # its background work is done before the test's store goes
    return sent(fake, len(bodies))


def add_mid_turn(memory: Path, i: int) -> None:
    """Between a turn's question and its tool-loop request, a memory that would answer the turn
    better is added: the turn's block must not change (rule 4), whichever worker serves."""
    if i % 2 == 1:
        MemoryStore(memory).add(f"Staging database and test suite and migrations and deploys: note {i}")


def page_counts(proxy: "Proxy", n: int) -> list[str]:
    """The request counts of the sessions the page of ``proxy`` lists, once they add up to ``n``
    (each record is kept in the store in the background; a deadline guards a hang, not a timing)."""
    import re

    deadline, counts = time.monotonic() + 30, []
    while time.monotonic() < deadline:
        page = httpx.get(proxy.url + "/memwire/ui/sessions", timeout=30).text
        counts = re.findall(r'<td class="n" data-label="requests">(\d+)</td>', page)
        if sum(map(int, counts)) >= n:
            break
        time.sleep(0.1)
    return counts


def first_difference(served: list[Any], expected: list[Any]) -> str:
    """Where two runs' upstream requests first differ, shown whole (pytest cuts long diffs)."""
    for i, (a, b) in enumerate(zip(served, expected)):
        for j, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return f"request {i}, message {j}:\nserved:   {json.dumps(x)}\nexpected: {json.dumps(y)}"
        if len(a) != len(b):
            return f"request {i}: {len(a)} messages served, {len(b)} expected"
    return f"{len(served)} requests served, {len(expected)} expected"


MODES = {
    "replay": {},
    "replay+profile": {"MEMWIRE_PROFILE": "true", "MEMWIRE_STARTUP_MAX_TOKENS": "120"},
    "drop": {"MEMWIRE_HISTORY": "drop"},
    "startup": {"MEMWIRE_MODE": "startup", "MEMWIRE_STARTUP_MAX_TOKENS": "120"},
}


@pytest.mark.parametrize("mode", list(MODES))
async def test_requests_landing_on_different_workers_get_the_bytes_of_one(
        tmp_path: Path, upstream: tuple[FakeProvider, str], mode: str) -> None:
    fake, url = upstream
    shared, alone = tmp_path / "shared", tmp_path / "alone"
    make_store(shared)
    shutil.copytree(shared, alone)
    bodies = list(conversation())
    # worker a, b, b, a, a, b, b, a: a turn's tool-loop request on the other worker, new turns on
    # a worker that did not serve the previous one
    a, b = (Proxy(tmp_path, shared, url, "--workers", "1", **MODES[mode]) for _ in range(2))
    try:
        a.wait(), b.wait()
        for i, body in enumerate(bodies):
            add_mid_turn(shared, i)
            worker = (a, b)[((i + 1) // 2) % 2]
            r = httpx.post(worker.url + "/v1/chat/completions", json=body, timeout=30)
            assert r.status_code == 200, r.text
        served = sent(fake, len(bodies))
        if mode == "replay":  # either worker's page shows the session whole: the records of both
            assert page_counts(a, len(bodies)) == [str(len(bodies))]
    finally:
        a.stop(), b.stop()
    expected = await reference(alone, url, MODES[mode], bodies, fake, add_mid_turn)
    assert served == expected, first_difference(served, expected)
    for i in range(1, len(served)):
        if mode.startswith("replay"):  # an append-only log: the provider's prefix cache keeps matching
            assert served[i][: len(served[i - 1])] == served[i - 1]
    if mode in ("startup", "replay+profile"):  # the session's block, byte-identical on every request
        assert len({json.dumps(m[1]) for m in served}) == 1 and "<memory" in json.dumps(served[0][1])
    injected = [m for m in served if "<memory" in json.dumps(m)]
    assert injected  # memory was there to be kept identical


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="counts worker processes through /proc")
async def test_the_workers_flag_serves_every_guarantee_from_two_processes(
        tmp_path: Path, upstream: tuple[FakeProvider, str]) -> None:
    fake, url = upstream
    make_store(tmp_path / "mem")
    key = {"x-memwire-key": "sekret"}
    proxy = Proxy(tmp_path, tmp_path / "mem", url, "--workers", "2", "--header-timeout", "0.5", "--proxy-key", "sekret")
    try:
        proxy.wait(key)
        deadline = time.monotonic() + 30
        while len(_children(proxy.proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        workers = _children(proxy.proc.pid)
        assert len(workers) >= 2, proxy.log.read_text()  # two workers (and uvicorn's supervisor above them)
        # one conversation over fresh connections: whichever worker accepts, an append-only log
        bodies = list(conversation())
        for body in bodies:
            with httpx.Client(timeout=30) as http:  # a new connection per request
                r = http.post(proxy.url + "/v1/chat/completions", json=body, headers=key)
            assert r.status_code == 200, r.text
        served = sent(fake, len(bodies))
        for i in range(1, len(served)):
            assert served[i][: len(served[i - 1])] == served[i - 1]
        assert sum("<memory" in json.dumps(m) for m in served) >= 2
        # /metrics adds up every worker's figures, whichever worker answers the scrape
        counted = -1.0
        deadline = time.monotonic() + 10  # a record is made just after its reply is out
        while counted < len(bodies) and time.monotonic() < deadline:
            with httpx.Client(timeout=30) as http:
                scrape = http.get(proxy.url + "/metrics", headers=key)
            assert scrape.status_code == 200, scrape.text
            counted = sum(s.value for f in text_string_to_metric_families(scrape.text) for s in f.samples
                          if s.name == "memwire_requests_total")
            time.sleep(0.05)
        assert counted == len(bodies)
        # the key check and the header timeout hold in every worker: a few connections each
        for _ in range(4):
            with httpx.Client(timeout=30) as http:
                assert http.post(proxy.url + "/v1/chat/completions", json=bodies[0]).status_code == 401
        stalled = [socket.create_connection(("127.0.0.1", proxy.port), timeout=10) for _ in range(4)]
        for s in stalled:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")  # headers never finished
        for s in stalled:
            try:
                assert s.recv(1024) == b""  # closed by the server after 0.5 s, not held
            except ConnectionResetError:
                pass
            s.close()
    finally:
        proxy.stop()

    def running(pid: int) -> bool:
        try:
            return "zombie" not in Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return False

    deadline = time.monotonic() + 30  # the workers stop with the command (a hang guard, not a timing)
    while any(running(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(running(pid) for pid in workers)


def _port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def _running(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the worker processes through /proc")
def test_workers_exit_when_the_main_process_is_killed(tmp_path: Path, upstream: tuple[FakeProvider, str]) -> None:
    """kill -9 of ``memwire proxy`` (the OOM killer, a supervisor's timeout): its workers must not
    go on serving the port with nobody to stop them."""
    _, url = upstream
    make_store(tmp_path / "mem")
    proxy = Proxy(tmp_path, tmp_path / "mem", url, "--workers", "2", "--log-level", "info")
    workers: list[int] = []
    try:
        proxy.wait()
        deadline = time.monotonic() + 60  # warm-up: both workers have built their app and serve
        while proxy.log.read_text().count("Application startup complete") < 2 and time.monotonic() < deadline:
            assert proxy.proc.poll() is None, proxy.log.read_text()
            time.sleep(0.02)
        assert proxy.log.read_text().count("Application startup complete") == 2, proxy.log.read_text()
        workers = _children(proxy.proc.pid)
        assert len(workers) >= 2 and all(_running(pid) for pid in workers)
        environ = dict(v.split("=", 1) for v in Path(f"/proc/{workers[-1]}/environ").read_text().split("\0") if "=" in v)
        leftovers = [Path(environ["MEMWIRE_PROXY_WORKER_SPEC"])] + [  # and the metrics directory the command made
            Path(d) for d in [environ["PROMETHEUS_MULTIPROC_DIR"]] if Path(d).name.startswith("memwire-metrics-")]
        assert all(p.exists() for p in leftovers)
        proxy.proc.kill()
        proxy.proc.wait()
        deadline = time.monotonic() + 2
        while _port_open(proxy.port) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _port_open(proxy.port), "the workers went on serving the port after their supervisor died"
        deadline = time.monotonic() + 30  # the processes end too (a hang guard, not a timing)
        while any(_running(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not any(_running(pid) for pid in workers)
        assert not any(p.exists() for p in leftovers)  # the spec (it holds the proxy key) and the figures: removed
        with socket.socket() as s:  # a new proxy can take the port
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", proxy.port))
            s.listen()
    finally:
        if proxy.proc.poll() is None:
            proxy.stop()
        for pid in workers:  # a failed run leaves no orphan serving a port
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("prctl", [True, False], ids=["prctl", "poll"])
def test_a_process_whose_parent_died_before_it_asked_stops_at_once(prctl: bool) -> None:
    """The parent may die while a worker starts, before it asks to be signalled: it checks once."""
    code = ("import os, time; from memwire.adapters.server._server import exit_with_parent; "
            f"exit_with_parent(os.getpid(), prctl={prctl}); time.sleep(30); print('alive')")  # its own pid: never its parent
    run = subprocess.run([sys.executable, "-c", code], env=env(Path("/nonexistent")), capture_output=True, timeout=60,
                         check=False)
    assert run.returncode == -15 and b"alive" not in run.stdout, run


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="follows the processes through /proc")
def test_without_prctl_a_child_notices_its_parent_gone_each_second() -> None:
    """Where PR_SET_PDEATHSIG does not exist, a thread compares the parent pid once a second."""
    child = ("import os, sys, time; from memwire.adapters.server._server import exit_with_parent; "
             "print(os.getpid(), exit_with_parent(os.getppid(), prctl=False), flush=True); time.sleep(60)")
    spawn = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {child!r}]); time.sleep(60)"
    parent = subprocess.Popen([sys.executable, "-c", spawn], env=env(Path("/nonexistent")), stdout=subprocess.PIPE)
    try:
        assert parent.stdout is not None
        pid, how = parent.stdout.readline().split()
        assert how == b"poll" and _running(int(pid))
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 30  # a hang guard: it checks every second
        while _running(int(pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(int(pid))
    finally:
        if parent.poll() is None:
            parent.kill()
