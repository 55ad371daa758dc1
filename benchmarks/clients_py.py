"""Python coding clients through `memwire proxy`: aider and a langchain ChatOpenAI conversation.

    python benchmarks/clients_py.py [--aider-venv /tmp/aider-venv] [--langchain-venv /tmp/litellm-proxy-venv]
                                    [--aider-model openai/gpt-4o ...] [--only aider-msg] [--samples DIR] [--json]

Each client runs in a venv of its own (a client whose venv is missing is skipped), as a subprocess:

    client ──► recorder (what the client sent) ──► memwire proxy --dir D ──► fake provider (what reaches it)

everything on 127.0.0.1; the clients get HTTP(S)_PROXY pointing at a refused port, dummy keys,
telemetry off. The memory directory D is seeded with one memory per question. Per client, two
sessions opened with the same prompt P, interleaved:

    A: P, [memwire add N (about P)], B: P, A: Q_A, B: Q_B

and the figures:

(a) turn 1 (A: P) reaches the provider with the seeded memory P needs;
(b) every memory block of a session's earlier request is byte-identical in each later request;
(c) per consecutive pair of requests of a session, the shared-prefix ratio of the message list
    (JSON of each message, cache_control removed; common prefix / length of the earlier one),
    at the provider and as the client sent it;
(d) the two sessions keep their own blocks: B's turn 1 is retrieved for B (it has N, added after
    A's turn 1), and no block of A's turn 2 shows up in B.

aider is driven three ways: one process per turn (`--message`, the second turn with
`--restore-chat-history`); one process for both turns (the questions on standard input); and one
process for three turns whose answers edit files, with a small `--max-chat-history-tokens`, so
aider moves edited turns into its history and summarizes it with the weak model (side requests).
`--aider-model openai/gpt-4o` (the default) has aider's rules in a trailing system message; a model
aider does not know (say `openai/local-coder`) gets its default settings: built-in example
messages first, the rules appended to the latest user message. langchain runs four ways: plain,
with an `x-memwire-session` header per conversation, with `prompt_cache_key` per conversation,
and on the Responses API. Nothing here changes memwire; the figures describe the code as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from memwire import MemoryStore
from memwire._sim.fake_provider import FakeProvider, last_user_text, serve_in_thread

OPEN = "<memory>"
SEEDED = {
    "tabs": "This project indents Python code with tabs, never with spaces",
    "tests": "Run the unit tests with `make test`; it wraps pytest -x",
    "deploy": "Deploys go out on Tuesdays only, through the deploy workflow",
}
DISTRACTORS = [
    "The staging database is Postgres 15 on port 5433",
    "The API server is FastAPI behind nginx",
]
ADDED = "New Python code in app.py uses tabs for indentation, one tab per level"
P = "Which indentation style should new code in app.py use?"
Q_A = "How do I run the unit tests?"
Q_B = "When do deploys go out?"
APP = "def add(a, b):\n\treturn a + b\n"


# ---------------------------------------------------------------------- plumbing


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Rec:
    path: str
    body: Any


class Recorder:
    """A pass-through ASGI app in front of the memwire proxy: records what the client sent."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.records: list[Rec] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            msg = await receive()
            chunks.append(msg.get("body", b""))
            if not msg.get("more_body"):
                break
        raw = b"".join(chunks)
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        self.records.append(Rec(scope["path"], body))
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]
                   if k.lower() not in (b"host", b"content-length")]
        url = self.target + scope["path"] + ("?" + scope["query_string"].decode() if scope["query_string"] else "")
        async with httpx.AsyncClient(timeout=300, trust_env=False) as client:
            req = client.build_request(scope["method"], url, headers=headers, content=raw)
            resp = await client.send(req, stream=True)
            try:
                out = [(k.encode(), v.encode()) for k, v in resp.headers.items()
                       if k.lower() not in ("content-length", "transfer-encoding", "connection", "content-encoding")]
                await send({"type": "http.response.start", "status": resp.status_code, "headers": out})
                async for chunk in resp.aiter_bytes():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            finally:
                await resp.aclose()


EDITS = {"on": False}  # the summarize run: answers that make aider edit a file


def _reply(body: dict[str, Any], api: str) -> str:
    """A deterministic answer of about 150 tokens (a history that grows like a real one). With
    EDITS on, the answer also creates a file in aider's edit format, as a model answering a coding
    request does; aider moves an edited turn into its history and summarizes a history too big."""
    filler = " ".join(f"Point {i}: a deterministic sentence of the fake model's answer." for i in range(1, 13))
    text = f"ok: {last_user_text(body, api)[:40]}\n\n{filler}"
    system = json.dumps(message_list(body)[:1])
    if not EDITS["on"] or "summar" in system.lower():
        return text
    n = sum(1 for m in message_list(body) if m.get("role") == "user")
    name = f"note_{n}.py"
    if body.get("model") == "gpt-4o":  # aider's diff format
        return f"{text}\n\n{name}\n```python\n<<<<<<< SEARCH\n=======\nNOTE = {n}\n>>>>>>> REPLACE\n```\n"
    return f"{text}\n\n{name}\n```python\nNOTE = {n}\n```\n"  # the whole-file format


def _clean_env(home: Path, refused: int) -> dict[str, str]:
    nowhere = f"http://127.0.0.1:{refused}"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MEMWIRE_", "OPENAI_", "ANTHROPIC_", "LITELLM_", "AIDER_", "VIRTUAL_ENV"))
           and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
    env.update(
        HOME=str(home), MEMWIRE_HOME=str(home / ".memwire-home"),
        HTTPS_PROXY=nowhere, HTTP_PROXY=nowhere, https_proxy=nowhere, http_proxy=nowhere,
        NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
        LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_TELEMETRY="False", AIDER_ANALYTICS="false",
        PYTHONUNBUFFERED="1",
    )
    return env


def _chat_posts(records: list[Any]) -> list[Any]:
    return [r for r in records if getattr(r, "path", "").endswith(("/chat/completions", "/responses"))
            and isinstance(r.body, dict)]


# ---------------------------------------------------------------------- measures


def _strip_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_cache_control(v) for v in value]
    return value


def message_list(body: dict[str, Any]) -> list[Any]:
    items = body.get("messages")
    if items is None:  # Responses
        items = body.get("input")
        items = [{"role": "user", "content": items}] if isinstance(items, str) else list(items or [])
        if body.get("instructions"):
            items = [{"role": "system", "content": body["instructions"]}, *items]
    return list(items)


def serialized(body: dict[str, Any]) -> str:
    return "\n".join(json.dumps(_strip_cache_control(m), ensure_ascii=False, separators=(",", ":"))
                     for m in message_list(body))


def prefix_ratio(earlier: dict[str, Any], later: dict[str, Any]) -> float:
    a, b = serialized(earlier), serialized(later)
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n / len(a) if a else 1.0


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [str(p.get("text", "")) for p in content if isinstance(p, dict)]
    return []


def memory_blocks(body: dict[str, Any]) -> list[str]:
    """The memory blocks of a request: every text part that starts with the block's tag (a block
    merged into another message's text, as litellm does, is found where it starts a part)."""
    out = []
    for m in message_list(body):
        if isinstance(m, dict):
            out += [t[t.index(OPEN):] if OPEN in t else t for t in _texts(m.get("content")) if OPEN in t]
    return out


# ---------------------------------------------------------------------- the run


@dataclass
class Request:
    session: str
    turn: int
    client: dict[str, Any]
    upstream: dict[str, Any]


@dataclass
class ClientRun:
    name: str
    requests: list[Request] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def session(self, name: str) -> list[Request]:
        return [r for r in self.requests if r.session == name]


class Harness:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.memdir = root / "mem"
        self.home = root / "home"
        self.home.mkdir(parents=True)
        self.refused = socket.socket()
        self.refused.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        self.env = _clean_env(self.home, self.refused.getsockname()[1])
        self.fake = FakeProvider(_reply)
        self.fake_server = serve_in_thread(self.fake)
        self.proxy_port = _free_port()
        self.recorder = Recorder(f"http://127.0.0.1:{self.proxy_port}")
        self.recorder_server = serve_in_thread(self.recorder)  # type: ignore[arg-type]
        self.base = self.recorder_server.base_url
        self.proxy: subprocess.Popen[bytes] | None = None

    def start(self, work: Path) -> None:
        """A fresh memory directory (seeded) and a fresh `memwire proxy` on it: no session, memo or
        ledger of another client's run."""
        self.root = work
        self.memdir = work / "mem"
        store = MemoryStore(self.memdir)
        store.add_many([*SEEDED.values(), *DISTRACTORS])
        self.proxy_log = open(work / "memwire-proxy.log", "wb")
        self.proxy = subprocess.Popen(
            [sys.executable, "-m", "memwire.cli", "proxy", "--port", str(self.proxy_port), "--dir", str(self.memdir),
             "--openai-upstream", self.fake_server.base_url, "--anthropic-upstream", self.fake_server.base_url],
            env=self.env, stdout=self.proxy_log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{self.proxy_port}/v1/models", timeout=2, trust_env=False).status_code < 500:
                    break
            except httpx.TransportError:
                pass
            if self.proxy.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("memwire proxy did not start: " + (work / "memwire-proxy.log").read_text()[-2000:])
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.terminate()
            try:
                self.proxy.wait(10)
            except subprocess.TimeoutExpired:
                self.proxy.kill()
                self.proxy.wait(5)
            self.proxy = None
            self.proxy_log.close()

    def add(self, text: str) -> None:
        subprocess.run([sys.executable, "-m", "memwire.cli", "add", "--dir", str(self.memdir), text],
                       env=self.env, check=True, capture_output=True)

    def step(self, run: ClientRun, session: str, turn: int, fn: Any) -> None:
        """Run one client step; pair what the client sent with what reached the provider."""
        c0, u0 = len(self.recorder.records), len(self.fake.requests)
        fn()
        time.sleep(0.2)
        sent = _chat_posts(self.recorder.records[c0:])
        got = _chat_posts(self.fake.requests[u0:])
        if len(sent) != len(got):
            run.notes.append(f"{session} turn {turn}: {len(sent)} client requests but {len(got)} at the provider")
        for i, (c, u) in enumerate(zip(sent, got)):
            run.requests.append(Request(session, turn if i == 0 else turn + i / 10, c.body, u.body))

    def close(self) -> None:
        self.stop()
        self.recorder_server.stop()
        self.fake_server.stop()
        self.refused.close()


def _run(cmd: list[str], cwd: Path, env: dict[str, str], stdin: str | None = None) -> str:
    out = subprocess.run(cmd, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"{cmd[0]} exited {out.returncode}: {out.stderr[-2000:]} {out.stdout[-2000:]}")
    return out.stdout


AIDER_FLAGS = ["--yes-always", "--no-git", "--no-analytics", "--no-check-update", "--no-show-model-warnings",
               "--no-pretty", "--no-fancy-input", "--no-auto-lint", "--no-auto-test"]


def run_aider_message(h: Harness, venv: Path, model: str, header: bool = False) -> ClientRun:
    """One aider process per turn: `--message`, the second turn `--restore-chat-history`.
    ``header``: each project names its memwire session in `.aider.model.settings.yml`."""
    run = ClientRun(f"aider --message{' (session header)' if header else ''} ({model})")
    env = {**h.env, "OPENAI_API_BASE": h.base + "/v1", "OPENAI_API_KEY": "sk-dummy"}
    dirs = {s: h.root / f"aider-msg{'-h' if header else ''}-{s}" for s in "AB"}
    for s, d in dirs.items():
        d.mkdir()
        (d / "app.py").write_text(APP)
        if header:
            # as docs/clients.md sets it up: `aider/extra_params` adds the header to every model's own
            # settings (an entry named after the model would replace aider's settings for it)
            (d / ".aider.model.settings.yml").write_text(
                f"- name: aider/extra_params\n  extra_params:\n    extra_headers:\n      x-memwire-session: aider-{s}\n")

    def turn(session: str, message: str, restore: bool) -> Any:
        cmd = [str(venv / "bin" / "aider"), "--model", model, *AIDER_FLAGS, "--message", message, "app.py"]
        if restore:
            cmd.insert(1, "--restore-chat-history")
        return lambda: _run(cmd, dirs[session], env)

    h.step(run, "A", 1, turn("A", P, False))
    h.add(ADDED)
    h.step(run, "B", 1, turn("B", P, False))
    h.step(run, "A", 2, turn("A", Q_A, True))
    h.step(run, "B", 2, turn("B", Q_B, True))
    return run


def run_aider_stdin(h: Harness, venv: Path, model: str) -> ClientRun:
    """One aider process for both turns, the questions on standard input (as typed)."""
    run = ClientRun(f"aider, one process ({model})")
    env = {**h.env, "OPENAI_API_BASE": h.base + "/v1", "OPENAI_API_KEY": "sk-dummy"}
    for session, q2 in (("A", Q_A), ("B", Q_B)):
        d = h.root / f"aider-stdin-{session}"
        d.mkdir()
        (d / "app.py").write_text(APP)
        cmd = [str(venv / "bin" / "aider"), "--model", model, *AIDER_FLAGS, "app.py"]
        h.step(run, session, 1, lambda cmd=cmd, d=d, q2=q2: _run(cmd, d, env, stdin=f"{P}\n{q2}\n/exit\n"))
        if session == "A":
            h.add(ADDED)
    # one process made both turns: split by the number of user questions in the request
    for r in run.requests:
        r.turn = 1 if Q_A not in json.dumps(r.client) and Q_B not in json.dumps(r.client) else 2
    return run


Q_3 = "Which port is the staging database on?"


def run_aider_summarize(h: Harness, venv: Path, model: str) -> ClientRun:
    """One aider process, three turns, with a tiny chat-history budget: aider summarizes its own
    history with the weak model and sends the summary in place of the earlier turns."""
    run = ClientRun(f"aider, history summarized ({model})")
    env = {**h.env, "OPENAI_API_BASE": h.base + "/v1", "OPENAI_API_KEY": "sk-dummy"}
    d = h.root / "aider-summarize"
    d.mkdir()
    (d / "app.py").write_text(APP)
    cmd = [str(venv / "bin" / "aider"), "--model", model, *AIDER_FLAGS, "--max-chat-history-tokens", "200", "app.py"]
    EDITS["on"] = True
    try:
        h.step(run, "A", 1, lambda: _run(cmd, d, env, stdin=f"{P}\n{Q_A}\n{Q_3}\n/exit\n"))
    finally:
        EDITS["on"] = False
    for r in run.requests:
        last = json.dumps(message_list(r.client)[-2:])
        r.turn = 3 if Q_3 in last else 2 if Q_A in last else 1
    return run


def summarize_figures(run: ClientRun) -> dict[str, Any]:
    rows = []
    main = []
    for r in run.requests:
        system = next((m.get("content") for m in message_list(r.client) if m.get("role") == "system"), "")
        side = "summarize" in str(system)[:200].lower()
        rows.append({"turn": r.turn, "model": r.client.get("model"), "side_request": side,
                     "messages": len(message_list(r.client)), "blocks": len(memory_blocks(r.upstream))})
        if not side:
            main.append(r)
    breaks = []
    for i, earlier in enumerate(main):
        for later in main[i + 1:]:
            for blk in memory_blocks(earlier.upstream):
                if blk not in memory_blocks(later.upstream):
                    breaks.append(f"block of turn {earlier.turn} missing from turn {later.turn}")
    pairs = [{"pair": f"{x.turn}->{y.turn}", "client": round(prefix_ratio(x.client, y.client), 4),
              "upstream": round(prefix_ratio(x.upstream, y.upstream), 4)} for x, y in zip(main, main[1:])]
    return {"client": run.name, "summary_run": True, "requests": rows, "block_breaks": breaks, "prefix_ratios": pairs,
            "notes": run.notes}


def print_summarize(f: dict[str, Any]) -> None:
    print(f"\n== {f['client']}: {len(f['requests'])} requests")
    for n in f["notes"]:
        print("   note:", n)
    for r in f["requests"]:
        kind = "side request (aider summarizing its history)" if r["side_request"] else "main"
        print(f"     turn {r['turn']} {r['model']:<14} {r['messages']:>2} messages, {r['blocks']} memory block(s)  {kind}")
    print(f"   earlier blocks byte-identical later: {'yes' if not f['block_breaks'] else 'NO'}")
    for line in f["block_breaks"]:
        print("      ", line)
    for p in f["prefix_ratios"]:
        print(f"     {p['pair']:>6}: client {p['client']:.4f}   provider {p['upstream']:.4f}")


LANGCHAIN_TURN = r'''
import json, sys
from langchain_core.messages import messages_from_dict, messages_to_dict, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
state_path, base, question, session, variant = sys.argv[1:6]
try:
    history = messages_from_dict(json.load(open(state_path)))
except FileNotFoundError:
    history = [SystemMessage("You are a helpful assistant for a small Python project.")]
history.append(HumanMessage(question))
kw = {}
if variant == "header":  # the caller names the session: memwire's own header
    kw["default_headers"] = {"x-memwire-session": "lc-" + session}
elif variant == "prompt_cache_key":  # the client's own signal, in the body
    kw["model_kwargs"] = {"prompt_cache_key": "lc-" + session}
elif variant == "responses":
    kw["use_responses_api"] = True
llm = ChatOpenAI(model="gpt-4o", base_url=base, api_key="sk-dummy", max_retries=0, **kw)
history.append(llm.invoke(history))
json.dump(messages_to_dict(history), open(state_path, "w"))
print(history[-1].content)
'''


def run_langchain(h: Harness, venv: Path, variant: str = "plain") -> ClientRun:
    """A two-turn ChatOpenAI conversation, one process per turn (the history kept in a file).
    ``variant``: plain; "header" (x-memwire-session per conversation); "prompt_cache_key" (in the
    body, per conversation); "responses" (the Responses API instead of chat completions)."""
    run = ClientRun("langchain ChatOpenAI" + ("" if variant == "plain" else f" ({variant})"))
    script = h.root / "langchain_turn.py"
    script.write_text(LANGCHAIN_TURN)
    env = dict(h.env)

    def turn(session: str, message: str) -> Any:
        state = h.root / f"langchain-{session}.json"
        return lambda: _run([str(venv / "bin" / "python"), str(script), str(state), h.base + "/v1", message,
                             session, variant], h.root, env)

    h.step(run, "A", 1, turn("A", P))
    h.add(ADDED)
    h.step(run, "B", 1, turn("B", P))
    h.step(run, "A", 2, turn("A", Q_A))
    h.step(run, "B", 2, turn("B", Q_B))
    return run


# ---------------------------------------------------------------------- figures


def figures(run: ClientRun) -> dict[str, Any]:
    out: dict[str, Any] = {"client": run.name, "requests": len(run.requests), "notes": list(run.notes)}
    a, b = run.session("A"), run.session("B")
    if not a or not b:
        out["error"] = "no requests recorded"
        return out
    first = memory_blocks(a[0].upstream)
    out["a_turn1_has_needed_memory"] = any(SEEDED["tabs"] in blk for blk in first)
    out["a_turn1_blocks"] = first
    breaks = []
    for name, reqs in (("A", a), ("B", b)):
        for i, earlier in enumerate(reqs):
            for later in reqs[i + 1:]:
                later_blocks = memory_blocks(later.upstream)
                for blk in memory_blocks(earlier.upstream):
                    if blk not in later_blocks:
                        breaks.append(f"{name}: block of turn {earlier.turn} missing from turn {later.turn}")
    out["earlier_blocks_byte_identical"] = not breaks
    out["block_breaks"] = breaks
    pairs = []
    for name, reqs in (("A", a), ("B", b)):
        for x, y in zip(reqs, reqs[1:]):
            pairs.append({"session": name, "pair": f"{x.turn}->{y.turn}",
                          "client": round(prefix_ratio(x.client, y.client), 4),
                          "upstream": round(prefix_ratio(x.upstream, y.upstream), 4)})
    out["prefix_ratios"] = pairs
    b_first = memory_blocks(b[0].upstream)
    a_later = {blk for r in a[1:] for blk in memory_blocks(r.upstream)} - set(first)
    leaked = [blk for r in b for blk in memory_blocks(r.upstream) if blk in a_later]
    out["b_turn1_own_retrieval"] = any(ADDED in blk for blk in b_first)
    out["b_turn1_equals_a_turn1"] = b_first == first
    out["a_blocks_leaked_into_b"] = len(leaked)
    out["sessions_keep_own_blocks"] = out["b_turn1_own_retrieval"] and not leaked
    return out


def print_figures(f: dict[str, Any]) -> None:
    print(f"\n== {f['client']}: {f['requests']} requests")
    for n in f["notes"]:
        print("   note:", n)
    if "error" in f:
        print("   ", f["error"])
        return
    print(f"(a) turn 1 has the memory it needs ........ {'yes' if f['a_turn1_has_needed_memory'] else 'NO'}"
          f"   ({len(f['a_turn1_blocks'])} block(s))")
    print(f"(b) earlier blocks byte-identical later .... {'yes' if f['earlier_blocks_byte_identical'] else 'NO'}")
    for line in f["block_breaks"]:
        print("      ", line)
    print("(c) shared-prefix ratio, client -> provider (consecutive requests of a session):")
    for p in f["prefix_ratios"]:
        print(f"       {p['session']} {p['pair']:>10}: client {p['client']:.4f}   provider {p['upstream']:.4f}")
    print(f"(d) sessions keep their own blocks ......... {'yes' if f['sessions_keep_own_blocks'] else 'NO'}"
          f"   (B turn 1 retrieved for B: {'yes' if f['b_turn1_own_retrieval'] else 'no'};"
          f" B turn 1 block == A turn 1 block: {f['b_turn1_equals_a_turn1']};"
          f" A's later blocks seen in B: {f['a_blocks_leaked_into_b']})")


def save_samples(run: ClientRun, where: Path) -> None:
    where.mkdir(parents=True, exist_ok=True)
    slug = "".join(c if c.isalnum() else "-" for c in run.name).strip("-")
    for i, r in enumerate(run.requests):
        for side in ("client", "upstream"):
            path = where / f"{slug}-{r.session}-turn{r.turn}-{i}-{side}.json"
            path.write_text(json.dumps(getattr(r, side), indent=1, ensure_ascii=False))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--aider-venv", type=Path, default=Path("/tmp/aider-venv"))
    ap.add_argument("--aider-model", action="append",
                    help="aider --model (repeatable; default openai/gpt-4o)")
    ap.add_argument("--langchain-venv", type=Path, default=Path("/tmp/litellm-proxy-venv"))
    ap.add_argument("--samples", type=Path, help="save every recorded request body here (client and provider side)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, chat histories)")
    ap.add_argument("--only", help="run only the plans whose label contains this (aider-msg, aider-stdin, "
                    "aider-summarize, langchain)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    models = args.aider_model or ["openai/gpt-4o"]

    root = Path(tempfile.mkdtemp(prefix="memwire-clients-"))
    plans: list[tuple[str, Any]] = []
    if (args.aider_venv / "bin" / "aider").exists():
        for model in models:
            plans.append((f"aider-msg {model}", lambda h, m=model: run_aider_message(h, args.aider_venv, m)))
            plans.append((f"aider-msg-header {model}",
                          lambda h, m=model: run_aider_message(h, args.aider_venv, m, header=True)))
            plans.append((f"aider-stdin {model}", lambda h, m=model: run_aider_stdin(h, args.aider_venv, m)))
            plans.append((f"aider-summarize {model}", lambda h, m=model: run_aider_summarize(h, args.aider_venv, m)))
    else:
        print(f"skipped aider: no {args.aider_venv}/bin/aider (pip install aider-chat into that venv)")
    lc_python = args.langchain_venv / "bin" / "python"
    if lc_python.exists() and subprocess.run([str(lc_python), "-c", "import langchain_openai"],
                                             capture_output=True).returncode == 0:
        for variant in ("plain", "header", "prompt_cache_key", "responses"):
            plans.append((f"langchain {variant}", lambda h, v=variant: run_langchain(h, args.langchain_venv, v)))
    else:
        print(f"skipped langchain: no langchain_openai in {args.langchain_venv}")

    if args.only:
        plans = [(label, plan) for label, plan in plans if args.only in label]
    results = []
    h = Harness(root)
    try:
        for label, plan in plans:
            work = root / label.replace(" ", "_").replace("/", "_")
            work.mkdir()
            h.start(work)
            try:
                run = plan(h)
            except Exception as exc:  # noqa: BLE001 - report and go on with the next client
                print(f"{label}: failed: {exc}")
                continue
            finally:
                h.stop()
            if args.samples:
                save_samples(run, args.samples / label.split()[0].split("-")[0])
            results.append(summarize_figures(run) if "summarize" in label else figures(run))
    finally:
        h.close()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print("work directory:", root)
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        for f in results:
            (print_summarize if f.get("summary_run") else print_figures)(f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
