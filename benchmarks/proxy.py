"""Added latency of ``memwire proxy`` over calling the same upstream directly.

Three processes on 127.0.0.1: a fake OpenAI upstream (canned replies, uvicorn), the proxy started
with the real ``memwire proxy`` command, and this script as the client. Every request is a new turn
(a unique user message), so memwire retrieves and injects on every call: its worst case, not the
memoized one. Figures: p50/p99 of the whole call (non-streaming) and of the time to the first
body chunk (streaming), with 1 and 32 concurrent clients; "added" is proxied minus direct.

If a ``litellm`` executable is found (``--litellm PATH``, or on PATH / next to this Python),
LiteLLM's proxy is measured the same way against the same upstream.

    .venv/bin/python benchmarks/proxy.py                      # a minute or two
    .venv/bin/python benchmarks/proxy.py --litellm /path/to/venv/bin/litellm

``--workers 1 2`` measures instead: requests/s of ``memwire proxy --workers N`` for each N (32
clients on keep-alive connections, every request a new turn, a light raw-socket client), the CPU
seconds its processes spent per request, and the added latency p50/p99 at 1 client on a 12 KB
body; beside it a bare pass-through on the same parts (``bare_proxy.py``: uvicorn, uvloop,
httptools, aiohttp; no routing, middleware or memory), the floor of this stack, and the Portkey
gateway (``npm install @portkey-ai/gateway`` into a temp dir, a node server) where npm can install
it (``--portkey off`` skips it).

    .venv/bin/python benchmarks/proxy.py --workers 1 2 --requests 300

``--capture`` compares capture on and off. There the fake upstream takes ``--upstream-ms`` (50 ms
unless given) to answer, as a provider does (hundreds of ms), so the capture worker has the time
it has in production; the things said to remember are about parcels, which no later question asks
about, so both targets inject the same memories and the difference is capture's own work (what a
captured memory costs once it is injected is what any memory costs). ``--seed`` starts both from
the same grown store (``--keep-store`` of an earlier run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

MODEL = "gpt-4o-mini"
SYSTEM = "You are a careful senior engineer. Answer briefly. " * 20  # ~1 KB system prompt
HISTORY = [
    {"role": "user", "content": "We are migrating the billing service. Where do we start?"},
    {"role": "assistant", "content": "Start with the schema: list the tables billing owns and who reads them."},
    {"role": "user", "content": "invoices, payments and refunds. Reporting reads invoices nightly."},
    {"role": "assistant", "content": "Then move payments first; invoices last, after reporting has a new feed."},
]
TURNS = 20  # turns per conversation; then the client starts a new one
UPSTREAM_DELAY_S = 0.0  # the fake provider's time to answer (--upstream-ms)
RUN = secrets.token_hex(2)  # in what is said to remember: a run from a --seed store captures anew
TOPICS = ["database", "deploys", "testing", "editor", "language", "cloud", "logging", "reviews", "releases", "oncall"]

PROJECTS = ["billing move", "search rewrite", "mobile app", "data warehouse", "auth service", "admin console",
            "pricing page", "email pipeline", "edge cache", "support bot"]


def memories() -> list[str]:
    """200 memories: two decisions per (project, topic)."""
    return [f"{project.capitalize()}: for {topic} we decided on option {k} (review {i})"
            for i, (project, topic, k) in enumerate((p, t, k) for p in PROJECTS for t in TOPICS for k in (1, 2))]


# -------------------------------------------------------------------- the fake upstream (child process)

_COMPLETION = json.dumps({
    "id": "chatcmpl-bench", "object": "chat.completion", "created": 1_700_000_000, "model": MODEL,
    "system_fingerprint": "fp_bench",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Use PostgreSQL 16.", "refusal": None},
                 "logprobs": None, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 900, "completion_tokens": 6, "total_tokens": 906},
}).encode()


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    data = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": MODEL,
            "system_fingerprint": "fp_bench",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
    return b"data: " + json.dumps(data).encode() + b"\n\n"


_STREAM = ([_chunk({"role": "assistant", "content": ""})]
           + [_chunk({"content": w}) for w in ("Use ", "PostgreSQL ", "16 ", "for ", "this.")]
           + [_chunk({}, "stop"), b"data: [DONE]\n\n"])


async def request_body(receive: Any) -> bytes:
    """An ASGI request's whole body."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def upstream_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Canned OpenAI answers: a JSON completion, or an SSE stream of 8 events."""
    if scope["type"] != "http":
        return
    body = await request_body(receive)
    # a JSON parse only for a body that may ask for a stream: the upstream shares the cores it is timed on
    stream = scope["method"] == "POST" and b'"stream"' in body and bool(json.loads(body).get("stream"))
    if scope["method"] == "POST" and UPSTREAM_DELAY_S:
        await asyncio.sleep(UPSTREAM_DELAY_S)  # the provider thinking
    if not stream:
        payload = _COMPLETION if scope["method"] == "POST" else b'{"status":"ok"}'
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    for event in _STREAM:
        await send({"type": "http.response.body", "body": event, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def serve_upstream(port: int, delay_ms: float) -> None:
    import uvicorn

    global UPSTREAM_DELAY_S
    UPSTREAM_DELAY_S = delay_ms / 1000
    uvicorn.run(upstream_app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="off")


# -------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float, headers: dict[str, str] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: server exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=1, headers=headers).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url}: not ready after {timeout:.0f} s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


# -------------------------------------------------------------------- measuring


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Target:
    """Where requests go, and the conversations they belong to (identical for every target)."""

    def __init__(self, name: str, base: str, key: str) -> None:
        self.name, self.base, self.key = name, base, key
        self.sessions = 0

    def conversation(self) -> Conversation:
        self.sessions += 1
        return Conversation(self.sessions)


class Conversation:
    """A chat of TURNS turns: each request is the next turn, carrying the whole history so far.
    Each session opens with its own first message, so memwire derives a new session key for it.
    Every fourth turn says something to remember: about the topic asked (so a later question
    finds it), or with ``unasked`` about a parcel nobody asks about."""

    unasked = False

    def __init__(self, number: int) -> None:
        self.number = number
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]

    def next_body(self, stream: bool) -> dict[str, Any] | None:
        turn = (len(self.messages) - 1) // 2
        if turn >= TURNS:
            return None
        opener = "We are migrating the billing service (ticket {}). Where do we start?"
        topic = TOPICS[(self.number + turn) % len(TOPICS)]
        text = opener.format(self.number) if turn == 0 else f"What did we decide about {topic} for the billing move?"
        if turn % 4 == 3 and self.unasked:
            text += f" Remember that parcel {RUN}-{self.number}-{turn} waits in locker {turn + 7}."
        elif turn % 4 == 3:
            text += f" Remember that the {topic} review for ticket {self.number} is due on day {turn}."
        self.messages.append({"role": "user", "content": text})
        body: dict[str, Any] = {"model": MODEL, "messages": list(self.messages)}
        self.messages.append({"role": "assistant", "content": "Use PostgreSQL 16 and move payments first."})
        if stream:
            body["stream"] = True
        return body


async def one_call(client: httpx.AsyncClient, target: Target, chat: list[Conversation], stream: bool) -> float:
    """The next turn of ``chat[0]`` (a new conversation when it is over). Non-streaming: the whole
    call. Streaming: time to the first body chunk (then drain it)."""
    data = chat[0].next_body(stream)
    if data is None:
        chat[0] = target.conversation()
        data = chat[0].next_body(stream)
    body = json.dumps(data).encode()
    headers = {"authorization": f"Bearer {target.key}", "content-type": "application/json"}
    start = time.perf_counter()
    async with client.stream("POST", target.base + "/v1/chat/completions", content=body, headers=headers) as r:
        first: float | None = None
        chunks = []
        async for chunk in r.aiter_raw():
            if first is None:
                first = time.perf_counter() - start
            if r.status_code != 200:
                chunks.append(chunk)
        if r.status_code != 200:
            raise RuntimeError(f"{target.name}: HTTP {r.status_code}: {b''.join(chunks)[:300]!r}")
    total = time.perf_counter() - start
    return (first if stream and first is not None else total) * 1000


async def run_load(target: Target, stream: bool, concurrency: int, per_client: int) -> list[float]:
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency + 4)
    async with httpx.AsyncClient(limits=limits, timeout=60, trust_env=False) as client:
        warm = [target.conversation()]
        for _ in range(5):  # open a connection, warm caches
            await one_call(client, target, warm, stream)
        results: list[float] = []

        async def worker() -> None:
            chat = [target.conversation()]
            for _ in range(per_client):
                results.append(await one_call(client, target, chat, stream))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results


Scenario = tuple[str, bool, int]
SCENARIOS: list[Scenario] = [("non-stream", False, 1), ("stream TTFB", True, 1),
                             ("non-stream", False, 32), ("stream TTFB", True, 32)]
Figures = dict[Scenario, tuple[float, float]]


def measure(targets: list[Target], n1: int, n32: int, rounds: int) -> dict[str, Figures]:
    """Targets take turns in short rounds, so background load on the machine hits them alike."""
    out: dict[str, Figures] = {t.name: {} for t in targets}
    for scenario in SCENARIOS:
        _, stream, concurrency = scenario
        per_round = max(1, (n1 if concurrency == 1 else n32) // rounds)
        values: dict[str, list[float]] = {t.name: [] for t in targets}
        for r in range(rounds):
            for t in (targets if r % 2 == 0 else targets[::-1]):  # alternate who goes first
                values[t.name] += asyncio.run(run_load(t, stream, concurrency, per_round))
        for name, v in values.items():
            out[name][scenario] = (pct(v, 0.50), pct(v, 0.99))
    return out


# -------------------------------------------------------------------- the servers


def start_memwire(workdir: Path, upstream: str, port: int, history: str, capture: str = "auto",
                  seed: Path | None = None, workers: int = 1) -> subprocess.Popen[bytes]:
    """The real ``memwire proxy`` command, one-line-per-request log on (as in production)."""
    from memwire import MemoryStore

    memory = workdir / f"memory-{history}-{capture}" if workers == 1 else workdir / f"memory-{history}-w{workers}"
    if seed is not None:  # a store as an earlier run left it (--seed): the same memories for every target
        shutil.copytree(seed, memory, ignore=shutil.ignore_patterns(".ledger", ".lock", ".captured.jsonl*"))
    else:
        MemoryStore(memory).add_many(memories())
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMWIRE_")},
           "MEMWIRE_HOME": str(workdir / "home"), "MEMWIRE_HISTORY": history, "MEMWIRE_CAPTURE": capture}
    name = f"memwire-{history}-{capture}" if workers == 1 else f"memwire-{history}-w{workers}"
    with open(workdir / f"{name}.log", "wb") as log:  # the child keeps its own copy of the fd
        return subprocess.Popen(
            [sys.executable, "-m", "memwire.cli", "proxy", "--port", str(port), "--openai-upstream", upstream,
             "--dir", str(memory), "--mode", "contextPerTurn", "--workers", str(workers)],
            cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT)


def find_litellm(option: str | None) -> str | None:
    if option == "off":
        return None
    if option:
        return option
    sibling = Path(sys.executable).with_name("litellm")
    return str(sibling) if sibling.exists() else shutil.which("litellm")


def start_litellm(exe: str, workdir: Path, upstream: str, port: int, key: str) -> subprocess.Popen[bytes]:
    config = workdir / "litellm.yaml"
    config.write_text(
        "model_list:\n"
        f"  - model_name: {MODEL}\n"
        "    litellm_params:\n"
        f"      model: openai/{MODEL}\n"
        f"      api_base: {upstream}/v1\n"
        "      api_key: sk-upstream-fake\n"
        "litellm_settings:\n  telemetry: false\n  num_retries: 0\n"
        "router_settings:\n  num_retries: 0\n")
    env = {**os.environ, "LITELLM_MASTER_KEY": key, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}
    with open(workdir / "litellm.log", "wb") as log:
        return subprocess.Popen([exe, "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
                                cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT)


# -------------------------------------------------------------------- report


def report(results: dict[str, Figures]) -> None:
    direct = results.pop("direct")
    names = list(results)
    head = f"{'clients':>7}  {'scenario':<12} {'pct':<4} {'direct':>9}" + "".join(
        f"  {name:>17} {'added':>9}" for name in names)
    print(head)
    print("-" * len(head))
    for scenario in SCENARIOS:
        label, _, concurrency = scenario
        for i, q in enumerate(("p50", "p99")):
            d = direct[scenario][i]
            row = f"{concurrency:>7}  {label:<12} {q:<4} {d:>7.2f}ms"
            for name in names:
                v = results[name][scenario][i]
                row += f"  {v:>15.2f}ms {v - d:>+7.2f}ms"
            print(row)


# -------------------------------------------------------------------- --workers: throughput, CPU, 12 KB latency

BIG_HISTORY = [  # ~12 KB of conversation: a coding agent's history with a file it read
    {"role": "user", "content": "Here is the module we are changing:\n" + "def handler(event):\n    return event\n" * 150},
    {"role": "assistant", "content": "I read it. The handler returns the event unchanged; " * 40},
]


CHAT = "/v1/chat/completions"
PASSED_THROUGH = "/v1/embeddings"  # a route without memory: the same bodies go upstream untouched


def request_bytes(host: str, key: str, body: dict[str, Any], path: str = CHAT) -> bytes:
    data = json.dumps(body).encode()
    return (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n").encode() + data


def new_turn_bodies(n: int, big: bool, tag: str) -> list[dict[str, Any]]:
    """``n`` requests, each the next turn of a conversation (20 turns, then a new one, its own
    session as a client's would be): memwire retrieves on every one, and appends to the session's ledger."""
    out: list[dict[str, Any]] = []
    number = 0
    while len(out) < n:
        number += 1
        opening = [dict(m) for m in (BIG_HISTORY if big else HISTORY[:2])]
        opening[0]["content"] += f" (conversation {tag}-{number})"  # each conversation its own session
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, *opening]
        for turn in range(TURNS):
            topic = TOPICS[(number + turn) % len(TOPICS)]
            messages.append({"role": "user", "content": f"What did we decide about {topic}? ({tag} {number}/{turn})"})
            body_messages = list(messages)
            if big:  # the body stays ~12 KB: the oldest turns drop out as new ones come
                body_messages = body_messages[:4] + body_messages[4:][-3:]
            out.append({"model": MODEL, "messages": body_messages})
            messages.append({"role": "assistant", "content": "Use PostgreSQL 16 and move payments first."})
    return out[:n]


def tool_loop_bodies(n: int, tag: str, steps: int = 4) -> list[dict[str, Any]]:
    """``n`` requests of ~12 KB as a coding agent sends them: each user turn, then ``steps`` more
    requests of the same turn (the model's tool call and its result appended), which memwire
    serves from the turn's memo (the block already chosen) without searching again."""
    out: list[dict[str, Any]] = []
    number = 0
    while len(out) < n:
        number += 1
        opening = [dict(m) for m in BIG_HISTORY]
        opening[0]["content"] += f" (conversation {tag}-{number})"
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, *opening]
        for turn in range(TURNS):
            topic = TOPICS[(number + turn) % len(TOPICS)]
            messages.append({"role": "user", "content": f"Fix the {topic} test, then run it. ({tag} {number}/{turn})"})
            for step in range(steps + 1):
                out.append({"model": MODEL, "messages": list(messages)})
                call = f"call_{number}_{turn}_{step}"
                messages.append({"role": "assistant", "content": None, "tool_calls": [{
                    "id": call, "type": "function", "function": {"name": "run", "arguments": '{"cmd": "pytest -q"}'}}]})
                messages.append({"role": "tool", "tool_call_id": call, "content": "3 passed in 0.41s"})
            messages.append({"role": "assistant", "content": "Fixed: the test passes."})
            while len(json.dumps(messages)) > 10_000 and len(messages) > 3 + 2 * steps + 4:  # bodies stay ~12 KB:
                del messages[3:3 + 2 * steps + 4]  # the oldest turn goes, as an agent's compaction would
    return out[:n]


async def _read_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = None
    chunked = False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
        elif name.strip().lower() == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if length is not None:
        await reader.readexactly(length)
    elif chunked:
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    return status


async def _client(port: int, requests: list[bytes], deadline: float | None, latencies: list[float] | None) -> int:
    """One keep-alive connection sending ``requests`` in turn (until ``deadline``): how many it sent."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    done = 0
    try:
        for raw in requests:
            if deadline is not None and time.perf_counter() > deadline:
                break
            start = time.perf_counter()
            writer.write(raw)
            status = await _read_response(reader)
            if status != 200:
                raise RuntimeError(f"HTTP {status}")
            if latencies is not None:
                latencies.append((time.perf_counter() - start) * 1000)
            done += 1
    finally:
        writer.close()
    return done


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of ``pid`` and every process under it, from /proc (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        p = int(stat.parent.name)
        parents[p] = int(fields[1])
        times[p] = (int(fields[11]) + int(fields[12])) / tick
    tree, grew = {pid}, True
    while grew:
        more = {p for p, pp in parents.items() if pp in tree} - tree
        tree |= more
        grew = bool(more)
    return sum(times.get(p, 0.0) for p in tree)


def _run_client(main: Any) -> Any:
    """Run the client's coroutine on uvloop where it installs: the client shares the cores with the
    servers it measures, so the less CPU it takes per request, the less it skews them."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)  # asyncio.Runner(loop_factory=...) is Python 3.11+; memwire runs on 3.10


def throughput(port: int, key: str, bodies: list[dict[str, Any]], clients: int, seconds: float,
               path: str = CHAT) -> tuple[int, float, float]:
    """Requests done by ``clients`` keep-alive connections in ``seconds``, the seconds they took and
    the CPU seconds this client spent on them (the load alone: the request bytes are built before)."""
    size = len(bodies) // clients  # each client its own conversations, in order
    per_client = [[request_bytes(f"127.0.0.1:{port}", key, b, path) for b in bodies[i * size:(i + 1) * size]]
                  for i in range(clients)]

    async def run() -> tuple[int, float, float]:
        start, cpu = time.perf_counter(), time.process_time()
        done = sum(await asyncio.gather(*(_client(port, reqs, start + seconds, None) for reqs in per_client)))
        return done, time.perf_counter() - start, time.process_time() - cpu

    return _run_client(run())  # type: ignore[no-any-return]


def latencies(port: int, key: str, bodies: list[dict[str, Any]], path: str = CHAT) -> list[float]:
    out: list[float] = []
    raws = [request_bytes(f"127.0.0.1:{port}", key, b, path) for b in bodies]
    _run_client(_client(port, raws, None, out))
    return out


def start_portkey(workdir: Path, port: int) -> tuple[subprocess.Popen[bytes] | None, str]:
    """The Portkey gateway (a node server from npm) in ``workdir``, or None and why not."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if not (npm and node):
        return None, "Portkey gateway: not measured (no node / npm on PATH)"
    where = workdir / "portkey"
    where.mkdir()
    try:
        subprocess.run([npm, "install", "--no-audit", "--no-fund", "--silent", "@portkey-ai/gateway"], cwd=where,
                       check=True, capture_output=True, timeout=300)
    except (subprocess.SubprocessError, OSError) as exc:
        return None, f"Portkey gateway: not measured (npm install @portkey-ai/gateway failed: {exc})"
    server = where / "node_modules" / "@portkey-ai" / "gateway" / "build" / "start-server.js"
    env = {**os.environ, "TRUSTED_CUSTOM_HOSTS": "127.0.0.1,localhost"}  # it refuses local upstreams otherwise
    with open(workdir / "portkey.log", "wb") as log:
        proc = subprocess.Popen([node, str(server), f"--port={port}", "--headless"], cwd=where, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
    return proc, ""


class PortkeyBodies:
    """Portkey routes by headers: the fake upstream as an OpenAI custom host."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream

    def request_bytes(self, host: str, key: str, body: dict[str, Any], path: str = CHAT) -> bytes:
        data = json.dumps(body).encode()
        return (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
                f"x-portkey-provider: openai\r\nx-portkey-custom-host: {self.upstream}/v1\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n").encode() + data


def run_workers(args: argparse.Namespace) -> int:
    global request_bytes
    clients, seconds, rounds = 32, args.seconds, args.rounds
    with tempfile.TemporaryDirectory(prefix="memwire-bench-") as tmp:
        workdir = Path(tmp)
        upstream_url = f"http://127.0.0.1:{free_port()}"
        procs: list[subprocess.Popen[bytes]] = []
        targets: dict[str, tuple[subprocess.Popen[bytes] | None, int]] = {}
        notes: list[str] = []
        try:
            procs.append(subprocess.Popen([sys.executable, __file__, "--serve-upstream", upstream_url.rsplit(":", 1)[1],
                                           "--upstream-ms", str(args.upstream_ms)]))
            wait_ready(upstream_url + "/health", procs[-1], 30)
            targets["direct"] = (None, int(upstream_url.rsplit(":", 1)[1]))
            for n in args.workers:
                port = free_port()
                procs.append(start_memwire(workdir, upstream_url, port, "replay", workers=n))
                wait_ready(f"http://127.0.0.1:{port}/health", procs[-1], 90)
                targets[f"memwire w={n}"] = (procs[-1], port)
            port = free_port()  # the floor: a bare pass-through on the same parts (benchmarks/bare_proxy.py)
            procs.append(subprocess.Popen([sys.executable, str(Path(__file__).with_name("bare_proxy.py")), str(port),
                                           upstream_url]))
            wait_ready(f"http://127.0.0.1:{port}/health", procs[-1], 30)
            targets["bare floor"] = (procs[-1], port)
            if args.portkey != "off":
                port = free_port()
                proc, why = start_portkey(workdir, port)
                if proc is None:
                    notes.append(why)
                else:
                    procs.append(proc)
                    try:
                        wait_ready(f"http://127.0.0.1:{port}/", proc, 60)
                        targets["portkey"] = (proc, port)
                    except RuntimeError as exc:
                        notes.append(f"Portkey gateway: not measured (did not start: {exc})")
            time.sleep(2)  # let every worker finish warming up
            portkey = PortkeyBodies(upstream_url)
            plain = request_bytes
            rps: dict[str, list[float]] = {name: [] for name in targets}
            cpu: dict[str, list[float]] = {name: [] for name in targets}
            lat: dict[str, list[float]] = {name: [] for name in targets}
            loop: dict[str, list[float]] = {name: [] for name in targets}
            floor: dict[str, list[float]] = {name: [] for name in targets}  # CPU of the same bodies passed through
            cores: dict[str, list[float]] = {name: [] for name in targets}  # the target's CPU seconds per second
            harness: dict[str, list[float]] = {name: [] for name in targets}  # client's and upstream's CPU per request
            for r in range(rounds):
                order = list(targets) if r % 2 == 0 else list(targets)[::-1]
                for name in order:
                    proc, port = targets[name]
                    request_bytes = portkey.request_bytes if name == "portkey" else plain  # type: ignore[assignment]
                    throughput(port, "sk-upstream-fake", new_turn_bodies(clients * 5, False, f"warm{r}{name}"), clients, 1.0)
                    bodies = new_turn_bodies(clients * int(seconds * 400), False, f"r{r}{name}")
                    c0, u0 = cpu_seconds(proc.pid) if proc else 0.0, cpu_seconds(procs[0].pid)
                    done, took, mine = throughput(port, "sk-upstream-fake", bodies, clients, seconds)
                    rps[name].append(done / took)
                    harness[name].append((mine + cpu_seconds(procs[0].pid) - u0) / done * 1000)
                    if proc:
                        cpu[name].append((cpu_seconds(proc.pid) - c0) / done * 1000)
                        cores[name].append(cpu[name][-1] * done / took / 1000)
                    if name.startswith("memwire"):  # the HTTP work alone: a route without memory, same bodies
                        bodies = new_turn_bodies(clients * int(seconds * 200), False, f"p{r}{name}")
                        c0 = cpu_seconds(proc.pid)
                        done, _, _ = throughput(port, "sk-upstream-fake", bodies, clients, seconds / 2, PASSED_THROUGH)
                        floor[name].append((cpu_seconds(proc.pid) - c0) / done * 1000)
                    lat[name] += latencies(port, "sk-upstream-fake", new_turn_bodies(max(1, args.requests // rounds),
                                                                                     True, f"l{r}{name}"))
                    loop[name] += latencies(port, "sk-upstream-fake", tool_loop_bodies(max(1, args.requests // rounds),
                                                                                       f"t{r}{name}"))
            request_bytes = plain
        finally:
            for proc in reversed(procs):
                stop(proc)
    print(f"fake upstream answering in {args.upstream_ms:g} ms; {os.cpu_count()} CPUs shared by the client, the "
          f"upstream and the server; {clients} clients for {seconds:g} s per target and round, {rounds} interleaved "
          f"rounds; latency: 1 client, {args.requests} requests of ~12 KB each a new turn ('new turn'), and as many "
          f"as an agent's tool loop sends them, 4 requests of a turn after its first ('loop'); 'own ms/req': CPU per "
          f"request less that of the same bodies sent to a route without memory (/v1/embeddings): memwire's own work; "
          f"'cores': the target's CPU seconds per second of load; 'harness': the client's and the upstream's CPU per "
          f"request (they share the cores)\n")
    d50, d99 = pct(lat["direct"], 0.5), pct(lat["direct"], 0.99)
    t50, t99 = pct(loop["direct"], 0.5), pct(loop["direct"], 0.99)
    head = (f"{'target':<14} {'req/s':>8} {'x w=1':>6} {'CPU ms/req':>11} {'own ms/req':>11} {'cores':>6} {'harness':>8} "
            f"{'p50 ms':>8} {'p99 ms':>8} "
            f"{'added p50':>10} {'added p99':>10} {'loop +p50':>10} {'loop +p99':>10}")
    print(head)
    print("-" * len(head))
    base = statistics.median(rps[f"memwire w={args.workers[0]}"]) if args.workers else 0.0
    for name in targets:
        v = statistics.median(rps[name])
        c = f"{statistics.median(cpu[name]):>11.2f}" if cpu[name] else f"{'':>11}"
        own = (f"{statistics.median(cpu[name]) - statistics.median(floor[name]):>11.2f}" if floor[name]
               else f"{'':>11}")
        p50, p99 = pct(lat[name], 0.5), pct(lat[name], 0.99)
        l50, l99 = pct(loop[name], 0.5), pct(loop[name], 0.99)
        ratio = f"{v / base:>6.2f}" if name.startswith("memwire") else f"{'':>6}"
        busy = f"{statistics.median(cores[name]):>6.2f}" if cores[name] else f"{'':>6}"
        print(f"{name:<14} {v:>8.0f} {ratio} {c} {own} {busy} {statistics.median(harness[name]):>8.2f} {p50:>8.2f} {p99:>8.2f} {p50 - d50:>+10.2f} {p99 - d99:>+10.2f} "
              f"{l50 - t50:>+10.2f} {l99 - t99:>+10.2f}")
    for note in notes:
        print(note)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400, help="requests per scenario with 1 client")
    parser.add_argument("--per-client", type=int, default=20, help="requests per client with 32 clients")
    parser.add_argument("--rounds", type=int, default=4, help="turns the targets take per scenario")
    parser.add_argument("--litellm", help="path of a litellm executable ('off' to skip)")
    parser.add_argument("--seed", help="start every memwire target from a copy of this memory directory")
    parser.add_argument("--keep-store", help="copy the capture=auto target's memory directory here at the end "
                                             "(run again with --seed it: capture's cost with the store's growth equal)")
    parser.add_argument("--capture", action="store_true",
                        help="compare capture on (auto) and off, with replay (instead of replay and drop)")
    parser.add_argument("--upstream-ms", type=float,
                        help="the fake upstream's time to answer (default 0; 50 with --capture)")
    parser.add_argument("--workers", type=int, nargs="+",
                        help="measure throughput, CPU per request and 12 KB latency at these worker counts")
    parser.add_argument("--portkey", help="with --workers: 'off' skips the Portkey gateway")
    parser.add_argument("--seconds", type=float, default=8.0, help="with --workers: seconds of load per target and round")
    parser.add_argument("--serve-upstream", type=int, help=argparse.SUPPRESS)  # child process mode
    args = parser.parse_args()
    if args.upstream_ms is None:
        args.upstream_ms = 50.0 if args.capture else 0.0
    if args.serve_upstream:
        serve_upstream(args.serve_upstream, args.upstream_ms)
        return 0
    Conversation.unasked = args.capture
    if args.workers:
        return run_workers(args)

    from memwire import MemoryStore

    variants = [("replay", "auto"), ("replay", "off")] if args.capture else [("replay", "auto"), ("drop", "auto")]
    with tempfile.TemporaryDirectory(prefix="memwire-bench-") as tmp:
        workdir = Path(tmp)
        upstream_url = f"http://127.0.0.1:{free_port()}"
        targets = [Target("direct", upstream_url, "sk-upstream-fake")]
        procs: list[subprocess.Popen[bytes]] = []
        notes: list[str] = []
        try:
            procs.append(subprocess.Popen([sys.executable, __file__, "--serve-upstream", upstream_url.rsplit(":", 1)[1],
                                           "--upstream-ms", str(args.upstream_ms)]))
            wait_ready(upstream_url + "/health", procs[-1], 30)
            for history, capture in variants:
                url = f"http://127.0.0.1:{free_port()}"
                procs.append(start_memwire(workdir, upstream_url, int(url.rsplit(":", 1)[1]), history, capture,
                                           Path(args.seed) if args.seed else None))
                wait_ready(url + "/health", procs[-1], 60)
                targets.append(Target(f"memwire {history}" + ("" if capture == "auto" else f" capture={capture}"),
                                      url, "sk-upstream-fake"))
            exe = find_litellm(args.litellm)
            if exe is None:
                notes.append("LiteLLM proxy: not measured (no litellm executable found; pass --litellm PATH)")
            else:
                key = "sk-bench-" + secrets.token_hex(16)
                url = f"http://127.0.0.1:{free_port()}"
                procs.append(start_litellm(exe, workdir, upstream_url, int(url.rsplit(":", 1)[1]), key))
                try:
                    wait_ready(url + "/health/liveliness", procs[-1], 120)
                    targets.append(Target("litellm", url, key))
                except RuntimeError as exc:
                    tail = (workdir / "litellm.log").read_text(errors="replace")[-600:]
                    notes.append(f"LiteLLM proxy ({exe}) did not start: {exc}\n{tail}")
            print(f"fake upstream {upstream_url} answering in {args.upstream_ms:g} ms; {os.cpu_count()} CPUs; each server its own process; "
                  f"{args.requests} requests per 1-client scenario, 32 x {args.per_client} per 32-client one, "
                  f"in {args.rounds} interleaved rounds\n")
            results = measure(targets, args.requests, args.per_client, args.rounds)
        finally:
            for proc in reversed(procs):
                stop(proc)
        report(results)
        for history, capture in variants:
            lines = (workdir / f"memwire-{history}-{capture}.log").read_text().splitlines()
            calls = [line for line in lines if "POST /v1/chat/completions" in line]
            injected = sum(1 for line in calls if "injected=0" not in line)
            store_dir = workdir / f"memory-{history}-{capture}"
            captured = len(MemoryStore(store_dir)) - (len(MemoryStore(args.seed)) if args.seed else len(memories()))
            if args.keep_store and capture == "auto":
                shutil.rmtree(args.keep_store, ignore_errors=True)
                shutil.copytree(store_dir, args.keep_store, ignore=shutil.ignore_patterns(".ledger", ".lock"))
            print(f"\nmemwire {history} capture={capture}: memory injected into {injected} of {len(calls)} requests "
                  f"(each request a new turn of a 20-turn conversation); {captured} memories captured", end="")
        print()
        for note in notes:
            print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
