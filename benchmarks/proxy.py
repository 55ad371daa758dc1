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


async def upstream_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Canned OpenAI answers: a JSON completion, or an SSE stream of 8 events."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    stream = scope["method"] == "POST" and bool(json.loads(body or b"{}").get("stream"))
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
                  seed: Path | None = None) -> subprocess.Popen[bytes]:
    """The real ``memwire proxy`` command, one-line-per-request log on (as in production)."""
    from memwire import MemoryStore

    memory = workdir / f"memory-{history}-{capture}"
    if seed is not None:  # a store as an earlier run left it (--seed): the same memories for every target
        shutil.copytree(seed, memory, ignore=shutil.ignore_patterns(".ledger", ".lock", ".captured.jsonl*"))
    else:
        MemoryStore(memory).add_many(memories())
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMWIRE_")},
           "MEMWIRE_HOME": str(workdir / "home"), "MEMWIRE_HISTORY": history, "MEMWIRE_CAPTURE": capture}
    with open(workdir / f"memwire-{history}-{capture}.log", "wb") as log:  # the child keeps its own copy of the fd
        return subprocess.Popen(
            [sys.executable, "-m", "memwire.cli", "proxy", "--port", str(port), "--openai-upstream", upstream,
             "--dir", str(memory), "--mode", "contextPerTurn"],
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
    parser.add_argument("--serve-upstream", type=int, help=argparse.SUPPRESS)  # child process mode
    args = parser.parse_args()
    if args.upstream_ms is None:
        args.upstream_ms = 50.0 if args.capture else 0.0
    if args.serve_upstream:
        serve_upstream(args.serve_upstream, args.upstream_ms)
        return 0
    Conversation.unasked = args.capture

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
