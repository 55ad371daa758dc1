"""Real coding agents, end to end: Claude Code and Codex CLI driven through ``memwire proxy``.

Shared by ``tests/e2e/test_real_clients.py`` (which asserts the checks) and
``benchmarks/clients.py`` (which prints the figures). Nothing here reaches a real provider:

    client ──► tap (records the client's own bodies) ──► memwire proxy ──► FakeProvider
               127.0.0.1:T                               127.0.0.1:P        127.0.0.1:U
               (in process)                              (`memwire proxy`   (in process, records
                                                          subprocess)        what left the proxy)

The tap adds an ``x-e2e-seq`` header to every request it forwards; memwire forwards it like any
other end-to-end header, so each request the fake upstream records is paired with the exact
bytes the client sent. That pairing is what the prefix check compares: memwire's output against
the client's own input, request by request, in the same run (the clients put session ids,
timestamps and paths into their prompts, so a second run could not be compared byte for byte).

The clients get a temporary HOME and config directory, dummy keys, telemetry and auto-update off,
and ``HTTPS_PROXY`` / ``HTTP_PROXY`` pointing at a port on 127.0.0.1 that refuses connections
(``NO_PROXY`` keeps 127.0.0.1 reachable): anything that tries another host fails.

The scenario, per client (``run_scenario``):

- A1: session A, turn 1, ``PROMPT_1`` (needs the staging host memory); the fake answers with a
  tool call (Claude Code's ``Bash``, Codex's ``exec_command``: ``echo hi``), then with text;
- the store changes: ``NEW_MEMORY``, relevant to ``PROMPT_1``, is added with ``memwire add``;
- B1: session B, a fresh session opened with the same ``PROMPT_1``;
- A2: session A resumed (``claude --resume`` / ``codex exec resume``), turn 2, ``PROMPT_2``,
  again with a tool loop.

``evaluate`` computes the five checks of issue 10 from what was recorded.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit, urlunsplit
from typing import Any

import httpx

from memwire.policies.modes._render import CLOSE, OPEN, escape
from memwire._sim.fake_provider import (
    FakeProvider,
    RecordedRequest,
    Reply,
    ServerThread,
    ToolLoop,
    json_schema_of,
    last_user_text,
    serve_in_thread,
    tool_names,
)

__all__ = [
    "CLIENTS",
    "ClaudeCode",
    "Codex",
    "Exchange",
    "Figures",
    "ScenarioResult",
    "client_facts",
    "evaluate",
    "format_figures",
    "install_clients",
    "missing_reason",
    "npm_dir",
    "run_scenario",
    "save_samples",
]

# Not MEMWIRE_*: memwire reads every MEMWIRE_* variable as a setting (an unknown one is an error),
# and the test suite's conftest clears them all.
NPM_DIR_ENV = "E2E_MEMWIRE_NPM_DIR"
DEFAULT_NPM_DIR = Path("~/.cache/memwire-e2e/npm")
PACKAGES = ("@anthropic-ai/claude-code", "@openai/codex")

STAGING = "The staging database host is db-staging.internal:5433"
MEMORIES = (
    STAGING,
    "Deploys go out on Tuesdays only, through the deploy workflow",
    "The cache layer is Redis 7; keys expire after one hour",
    "User prefers tabs over spaces in Python files",
    # on the topic of Claude Code's prompt-suggestion request ("fix the bug and run tests" → "run the
    # tests"): a side request that memwire took for a turn would get this one
    "Run the test suite with make test; it needs Docker running",
)
# Added between session A's first turn and session B: relevant to PROMPT_1, so a fresh session's
# turn-1 block differs from session A's. (Added, not edited: memwire deliberately re-renders a
# forgotten or edited memory out of replayed blocks, which would change session A's old block.)
NEW_MEMORY = "The staging database host is rebooted every Sunday night"
PROMPT_1 = "What is the staging database host? Run echo hi in the shell first."
PROMPT_2 = "On which day do deploys go out? Run echo hi again first."

# Project instructions in the working directory, as real projects have them: the clients wrap them
# (Codex: an "# AGENTS.md instructions" user message; Claude Code: a <system-reminder>).
PROJECT_NOTES = "# Project notes\n\nThis is a small web service. Explain a shell command before running it.\n"

CLIENT_TIMEOUT = 120.0  # seconds per client invocation (they take about one second against the fake)
SEQ_HEADER = "x-e2e-seq"


# ---------------------------------------------------------------------------------- npm clients


def npm_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """Where the npm clients are installed: ``override``, ``$E2E_MEMWIRE_NPM_DIR`` or
    ``~/.cache/memwire-e2e/npm``."""
    value = override or os.environ.get(NPM_DIR_ENV) or DEFAULT_NPM_DIR
    return Path(value).expanduser()


def install_clients(directory: Path) -> None:
    """``npm install`` both clients into ``directory`` (created if needed). Raises on failure."""
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not on PATH")
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run([npm, "install", "--prefix", str(directory), "--no-audit", "--no-fund", "--loglevel=error",
                    *PACKAGES], check=True, timeout=900)
    # Claude Code's postinstall copies the native binary over its bin stub; npm versions that do
    # not run install scripts by default leave the stub: run it here.
    claude = directory / "node_modules" / "@anthropic-ai" / "claude-code"
    if (claude / "install.cjs").exists() and not _runs([str(_bin(directory, "claude")), "--version"]):
        subprocess.run([shutil.which("node") or "node", "install.cjs"], cwd=claude, check=True, timeout=300)


def _bin(directory: Path, name: str) -> Path:
    return directory / "node_modules" / ".bin" / name


def _runs(argv: Sequence[str]) -> str | None:
    """The first line of ``argv``'s output if it exits 0 within 60 s, else None."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False,
                           env=_base_env(Path(tempfile.gettempdir())))
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0:
        return None
    return (p.stdout.strip().splitlines() or [""])[0]


def missing_reason(client: type[Client], directory: Path) -> str | None:
    """Why ``client`` cannot run from ``directory``, or None when it can."""
    if shutil.which("node") is None:
        return "node is not on PATH"
    exe = _bin(directory, client.binary)
    if not exe.exists():
        return (f"{client.package} is not installed in {directory} (run .ci/real_clients, "
                f"or set E2E_MEMWIRE_INSTALL=1, or point {NPM_DIR_ENV} at an npm prefix that has it)")
    if _runs([str(exe), "--version"]) is None:
        return f"{exe} --version failed"
    return None


# ---------------------------------------------------------------------------------- the tap


@dataclass
class Exchange:
    """One request as the client sent it (to the tap) and, when it got there, as it left the proxy."""

    seq: int
    phase: str
    method: str
    path: str
    query: str
    headers: dict[str, str]
    raw: bytes
    status: int = 0
    response_excerpt: str = ""  # the start of the answer, for non-2xx answers (evidence)
    upstream: RecordedRequest | None = None
    started: float = 0.0

    @property
    def body(self) -> Any:
        try:
            return json.loads(self.raw) if self.raw else None
        except ValueError:
            return None

    @property
    def upstream_body(self) -> Any:
        return self.upstream.body if self.upstream is not None else None


_HOP = {b"host", b"content-length", b"connection", b"keep-alive", b"transfer-encoding", b"te", b"trailer",
        b"upgrade", b"proxy-connection", b"proxy-authorization"}


class Tap:
    """A recording passthrough (ASGI): records each request, forwards it with ``x-e2e-seq`` added,
    relays the answer chunk by chunk (server-sent events are not buffered)."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.phase = ""
        self.exchanges: list[Exchange] = []
        self.websockets: list[str] = []  # paths a client tried to open a websocket on
        self._seq = itertools.count(1)
        self._lock = threading.Lock()
        self._client: httpx.AsyncClient | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            self.websockets.append(scope.get("path", ""))
            await receive()
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        with self._lock:
            ex = Exchange(next(self._seq), self.phase, scope["method"], scope["path"],
                          scope.get("query_string", b"").decode("latin-1"),
                          {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]},
                          b"".join(chunks), started=time.monotonic())
            self.exchanges.append(ex)
        if self._client is None:  # created on the server thread's own event loop
            self._client = httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(CLIENT_TIMEOUT, connect=10))
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP]
        headers.append((SEQ_HEADER.encode(), str(ex.seq).encode()))
        url = self.target + scope["path"] + (f"?{ex.query}" if ex.query else "")
        request = self._client.build_request(scope["method"], url, headers=headers, content=ex.raw)
        try:
            upstream = await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            ex.status, ex.response_excerpt = 502, f"tap: memwire proxy unreachable ({type(exc).__name__})"
            await send({"type": "http.response.start", "status": 502, "headers": []})
            await send({"type": "http.response.body", "body": ex.response_excerpt.encode()})
            return
        ex.status = upstream.status_code
        try:
            out = [(k, v) for k, v in upstream.headers.raw if k.lower() not in _HOP - {b"content-length"}]
            await send({"type": "http.response.start", "status": upstream.status_code, "headers": out})
            async for chunk in upstream.aiter_raw():
                if ex.status >= 400 and len(ex.response_excerpt) < 2000:
                    ex.response_excerpt += chunk.decode("utf-8", "replace")[:2000]
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except (httpx.HTTPError, OSError):
            pass
        finally:
            await upstream.aclose()


# ---------------------------------------------------------------------------------- the stack


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _refusing_port() -> int:
    """A loopback port nothing listens on (the clients' HTTPS_PROXY: every other host fails)."""
    return _free_port()


def _memwire_argv() -> list[str]:
    script = Path(sys.executable).parent / "memwire"
    if script.exists():
        return [str(script)]
    found = shutil.which("memwire")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from memwire.cli import main; sys.exit(main())"]


def _memwire_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWIRE_")}
    env.update(MEMWIRE_HOME=str(home / "memwire-global"), LITELLM_LOCAL_MODEL_COST_MAP="True",
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    return env


def memwire_cli(args: Sequence[str], where: Sequence[str], home: Path) -> Any:
    """``memwire ARGS --dir DIR --json`` (or ``--store URL``), as a user would run it; its JSON output."""
    p = subprocess.run([*_memwire_argv(), *args, *where, "--json"], check=True,
                       capture_output=True, text=True, timeout=60, env=_memwire_env(home), cwd=home)
    return json.loads(p.stdout)


def _fresh_schema(url: str) -> str:
    """``url`` with a new, empty schema of its database on its search path (dropped by the stack)."""
    import secrets

    import psycopg

    from ..stores import with_search_path

    schema = f"memwire_e2e_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return with_search_path(url, schema)


def _drop_schema(url: str) -> None:
    import psycopg

    schema = dict(parse_qsl(urlsplit(url).query))["options"].removeprefix("-csearch_path=")
    base = urlunsplit(urlsplit(url)._replace(query=""))
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


class Stack:
    """FakeProvider (upstream) + ``memwire proxy`` (subprocess) + tap, all on 127.0.0.1."""

    def __init__(self, root: Path, reply: Any, proxy_args: Sequence[str] = ()) -> None:
        self.root = root
        self.memory = root / "memory"
        # E2E_MEMWIRE_STORE (a PostgreSQL URL): the proxy and the memory commands use a fresh schema
        # of that database instead of a directory (the replicas' store, with the real clients)
        self.store_url = _fresh_schema(os.environ["E2E_MEMWIRE_STORE"]) if os.environ.get("E2E_MEMWIRE_STORE") else None
        self.where = ["--store", self.store_url] if self.store_url else ["--dir", str(self.memory)]
        self.fake = FakeProvider(reply)
        self.upstream: ServerThread | None = None
        self.tap: Tap | None = None
        self.tap_server: ServerThread | None = None
        self.proxy: subprocess.Popen[bytes] | None = None
        self.proxy_log = root / "memwire-proxy.log"
        self.proxy_args = list(proxy_args)
        self.refusing_port = _refusing_port()

    def __enter__(self) -> Stack:
        try:
            self.upstream = serve_in_thread(self.fake)
            self._start_proxy()
            self.tap = Tap(f"http://127.0.0.1:{self.port}")
            self.tap_server = serve_in_thread(self.tap)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        """What the clients are pointed at (the tap)."""
        assert self.tap_server is not None
        return self.tap_server.base_url

    def _start_proxy(self) -> None:
        assert self.upstream is not None
        for _ in range(3):  # a free port may be taken between picking and binding it
            self.port = _free_port()
            argv = [*_memwire_argv(), "proxy", "--port", str(self.port), *self.where,
                    "--openai-upstream", self.upstream.base_url, "--anthropic-upstream", self.upstream.base_url,
                    "--log-level", "info", *self.proxy_args]
            log = self.proxy_log.open("ab")
            self.proxy = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          env=_memwire_env(self.root), cwd=self.root)
            log.close()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and self.proxy.poll() is None:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
                time.sleep(0.05)
            self._stop_proxy()
        raise RuntimeError(f"memwire proxy did not start; log:\n{self.proxy_log.read_text(errors='replace')[-3000:]}")

    def _stop_proxy(self) -> None:
        if self.proxy is not None and self.proxy.poll() is None:
            self.proxy.terminate()
            try:
                self.proxy.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proxy.kill()
                self.proxy.wait(timeout=10)

    def close(self) -> None:
        if self.tap_server is not None:
            self.tap_server.stop()
        self._stop_proxy()
        if self.upstream is not None:
            self.upstream.stop()
        if self.store_url is not None:  # what was sent is recorded by now: the schema goes
            _drop_schema(self.store_url)

    def exchanges(self) -> list[Exchange]:
        """Every request the clients sent, each paired with what the fake upstream received."""
        assert self.tap is not None
        by_seq: dict[int, RecordedRequest] = {}
        for rec in self.fake.requests:
            seq = rec.headers.get(SEQ_HEADER, "")
            if seq.isdigit():
                by_seq[int(seq)] = rec
        out = list(self.tap.exchanges)
        for ex in out:
            ex.upstream = by_seq.get(ex.seq)
        return out


# ---------------------------------------------------------------------------------- the clients


def _base_env(home: Path, refusing_port: int | None = None) -> dict[str, str]:
    """A minimal environment: nothing of this machine's (keys, configs, proxies) leaks in."""
    node = shutil.which("node")
    path = os.pathsep.join(p for p in [str(Path(node).parent) if node else "", "/usr/local/bin", "/usr/bin", "/bin"] if p)
    env = {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "dumb",
           "SHELL": "/bin/bash", "USER": os.environ.get("USER", "e2e"), "TMPDIR": str(home / "tmp"),
           "NO_COLOR": "1", "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    if refusing_port is not None:
        proxy = f"http://127.0.0.1:{refusing_port}"
        env.update(HTTPS_PROXY=proxy, HTTP_PROXY=proxy, ALL_PROXY=proxy, https_proxy=proxy, http_proxy=proxy,
                   all_proxy=proxy)
    return env


@dataclass
class ClientRun:
    """One invocation of a client."""

    phase: str
    argv: list[str]
    returncode: int | None
    seconds: float
    stdout: str
    stderr: str
    session_id: str | None


class Client:
    """How to drive one coding agent. Subclasses: :class:`ClaudeCode`, :class:`Codex`."""

    name = ""
    package = ""
    binary = ""
    api = ""          # the request format of its main requests
    main_path = ""    # the memory route they go to
    main_tool = ""    # a tool every main request offers
    variant_of: str | None = None  # another client's name, when this is the same binary run differently

    def __init__(self, directory: Path, home: Path, work: Path, stack: Stack, extra_args: Sequence[str] = (),
                 session_header: str | None = None) -> None:
        self.exe = _bin(directory, self.binary)
        self.extra_args = list(extra_args)  # appended to every invocation (diagnostic runs)
        self.session_header = session_header  # an x-memwire-session the client sends (negative control)
        self.home, self.work, self.stack = home, work, stack
        self.env = _base_env(home, stack.refusing_port)
        self.configure()

    def configure(self) -> None:
        raise NotImplementedError

    def tool_call(self, body: dict[str, Any], api: str) -> Reply | None:
        raise NotImplementedError

    def side_prompt(self, body: Any) -> bool:
        """Whether the request's latest user message is the client's own (a side request that
        carries the agent's tools, such as Claude Code's prompt suggestion)."""
        return False

    def answer(self, body: dict[str, Any], api: str) -> Reply:
        """The fake model's final text of a turn."""
        return Reply(text="Done: the command printed hi.")

    def start(self, prompt: str) -> list[str]:
        raise NotImplementedError

    def resume(self, session_id: str, prompt: str) -> list[str]:
        raise NotImplementedError

    def session_of(self, stdout: str) -> str | None:
        raise NotImplementedError

    def is_main(self, ex: Exchange) -> bool:
        """A request of the agent loop (not a title, summary, quota or token-count request)."""
        body = ex.body
        return (ex.method == "POST" and ex.path == self.main_path and isinstance(body, dict)
                and self.main_tool in tool_names(body, self.api) and json_schema_of(body, self.api) is None
                and not self.side_prompt(body))

    def run(self, phase: str, argv: list[str]) -> ClientRun:
        assert self.stack.tap is not None
        self.stack.tap.phase = phase
        t = time.monotonic()
        try:
            p = subprocess.run(argv, cwd=self.work, env=self.env, capture_output=True, text=True,
                               timeout=CLIENT_TIMEOUT, stdin=subprocess.DEVNULL, check=False)
            code, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as exc:
            code = None
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return ClientRun(phase, argv, code, time.monotonic() - t, out, err, self.session_of(out))

    def version(self) -> str:
        return _runs([str(self.exe), "--version"]) or "?"


class ClaudeCode(Client):
    name = "claude-code"
    package = "@anthropic-ai/claude-code"
    binary = "claude"
    api = "anthropic.messages"
    main_path = "/v1/messages"
    main_tool = "Bash"

    def configure(self) -> None:
        self.env.update(
            ANTHROPIC_BASE_URL=self.stack.url,
            ANTHROPIC_API_KEY="sk-ant-e2e-dummy",
            CLAUDE_CONFIG_DIR=str(self.home / ".claude"),
            DISABLE_AUTOUPDATER="1",
            DISABLE_TELEMETRY="1",
            DISABLE_ERROR_REPORTING="1",
            DISABLE_BUG_COMMAND="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        )
        if self.session_header:
            self.env["ANTHROPIC_CUSTOM_HEADERS"] = f"x-memwire-session: {self.session_header}"

    SUGGESTION = "[SUGGESTION MODE"  # how Claude Code's prompt-suggestion request asks (2.1.x)

    def tool_call(self, body: dict[str, Any], api: str) -> Reply | None:
        if api == self.api and "Bash" in tool_names(body, api) and not self.side_prompt(body):
            return Reply.tool("Bash", {"command": "echo hi", "description": "Print hi"})
        return None

    def side_prompt(self, body: Any) -> bool:
        return isinstance(body, dict) and last_user_text(body, self.api).startswith(self.SUGGESTION)

    def answer(self, body: dict[str, Any], api: str) -> Reply:
        if self.side_prompt(body):
            return Reply(text="run the tests")  # what a model suggests the user types next
        return super().answer(body, api)

    OUTPUT: tuple[str, ...] = ("--output-format", "json")

    def _argv(self, prompt: str, *extra: str) -> list[str]:
        return [str(self.exe), "-p", prompt, *self.OUTPUT, "--allowedTools", "Bash(echo hi)", *extra,
                *self.extra_args]

    def start(self, prompt: str) -> list[str]:
        return self._argv(prompt)

    def resume(self, session_id: str, prompt: str) -> list[str]:
        return self._argv(prompt, "--resume", session_id)

    def session_of(self, stdout: str) -> str | None:
        for line in reversed(stdout.strip().splitlines()):
            with contextlib.suppress(ValueError):
                data = json.loads(line)
                if isinstance(data, dict) and isinstance(data.get("session_id"), str):
                    return str(data["session_id"])
        return None


class ClaudeCodeSuggestions(ClaudeCode):
    """Claude Code with prompt suggestions on (as in its interactive mode): after each turn it sends
    a side request with the agent's tools and a ``[SUGGESTION MODE: ...]`` user message."""

    name = "claude-code-suggestions"
    variant_of = "claude-code"  # the negative controls run on claude-code only
    OUTPUT = ("--output-format", "stream-json", "--verbose", "--prompt-suggestions", "true")


class Codex(Client):
    name = "codex"
    package = "@openai/codex"
    binary = "codex"
    api = "openai.responses"
    main_path = "/v1/responses"
    main_tool = "exec_command"  # set from the first request's tools if this version names it otherwise

    MODEL = "gpt-5.5"  # a model in this Codex's bundled catalog (no "model metadata not found" warning)

    def configure(self) -> None:
        codex_home = self.home / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(f"""\
model = "{self.MODEL}"
model_provider = "memwire_e2e"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[model_providers.memwire_e2e]
name = "memwire e2e"
base_url = "{self.stack.url}/v1"
env_key = "MEMWIRE_E2E_OPENAI_KEY"
wire_api = "responses"
supports_websockets = false
request_max_retries = 0
stream_max_retries = 0
""" + (f'http_headers = {{ "x-memwire-session" = "{self.session_header}" }}\n' if self.session_header else ""))
        self.env.update(CODEX_HOME=str(codex_home), MEMWIRE_E2E_OPENAI_KEY="sk-e2e-dummy")

    def tool_call(self, body: dict[str, Any], api: str) -> Reply | None:
        names = tool_names(body, api)
        if api != self.api:
            return None
        if "exec_command" in names:
            return Reply.tool("exec_command", {"cmd": "echo hi"})
        if "shell_command" in names:
            return Reply.tool("shell_command", {"command": "echo hi"})
        if "shell" in names:
            return Reply.tool("shell", {"command": ["bash", "-lc", "echo hi"]})
        return None

    def is_main(self, ex: Exchange) -> bool:
        body = ex.body
        return (ex.method == "POST" and ex.path == self.main_path and isinstance(body, dict)
                and any(n in tool_names(body, self.api) for n in ("exec_command", "shell_command", "shell"))
                and json_schema_of(body, self.api) is None)

    _FLAGS = ("--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox")

    def start(self, prompt: str) -> list[str]:
        return [str(self.exe), "exec", *self._FLAGS, *self.extra_args, prompt]

    def resume(self, session_id: str, prompt: str) -> list[str]:
        return [str(self.exe), "exec", "resume", *self._FLAGS, *self.extra_args, session_id, prompt]

    def session_of(self, stdout: str) -> str | None:
        for line in stdout.splitlines():
            with contextlib.suppress(ValueError):
                data = json.loads(line)
                if isinstance(data, dict) and data.get("type") == "thread.started":
                    return str(data.get("thread_id"))
        return None


CLIENTS: dict[str, type[Client]] = {c.name: c for c in (ClaudeCode, ClaudeCodeSuggestions, Codex)}


# ---------------------------------------------------------------------------------- the scenario


@dataclass
class ScenarioResult:
    client: str
    version: str
    api: str
    exchanges: list[Exchange]
    runs: list[ClientRun]
    main: set[int]  # seq of the main requests
    websockets: list[str]
    proxy_log: str
    seconds: float

    def main_of(self, *phases: str) -> list[Exchange]:
        return [ex for ex in self.exchanges if ex.seq in self.main and ex.phase in phases]


def run_scenario(client_name: str, directory: Path, root: Path | None = None,
                 proxy_args: Sequence[str] = (), client_args: Sequence[str] = (),
                 shared_session: str | None = None) -> ScenarioResult:
    """Run the scenario (module docstring) for one client; everything lives under ``root`` (a new
    temporary directory when None). ``proxy_args`` go to ``memwire proxy``, ``client_args`` to
    every client invocation (diagnostic runs); ``shared_session`` makes the client send that
    ``x-memwire-session`` in every request, so sessions A and B are one for memwire (the negative
    control of the isolation check)."""
    cls = CLIENTS[client_name]
    t0 = time.monotonic()
    own_root = root is None
    root = Path(tempfile.mkdtemp(prefix=f"memwire-e2e-{client_name}-")) if root is None else root
    try:
        home, work = root / "home", root / "work"
        home.mkdir(parents=True, exist_ok=True)
        work.mkdir(parents=True, exist_ok=True)
        for name in ("AGENTS.md", "CLAUDE.md"):
            (work / name).write_text(PROJECT_NOTES)
        holder: dict[str, Client] = {}

        def reply(body: dict[str, Any], api: str) -> Any:
            client = holder["client"]
            return ToolLoop(client.tool_call, text=client.answer)(body, api)

        with Stack(root, reply, proxy_args) as stack:
            for text in MEMORIES:
                memwire_cli(["add", text], stack.where, root)
            client = holder["client"] = cls(directory, home, work, stack, client_args, shared_session)
            runs = [client.run("A1", client.start(PROMPT_1))]
            memwire_cli(["add", NEW_MEMORY], stack.where, root)
            runs.append(client.run("B1", client.start(PROMPT_1)))
            session_a = runs[0].session_id
            if session_a:
                runs.append(client.run("A2", client.resume(session_a, PROMPT_2)))
            exchanges = stack.exchanges()
            websockets = list(stack.tap.websockets) if stack.tap else []
        main = {ex.seq for ex in exchanges if client.is_main(ex)}
        return ScenarioResult(client_name, client.version(), cls.api, exchanges, runs, main, websockets,
                              stack.proxy_log.read_text(errors="replace"), time.monotonic() - t0)
    finally:
        if own_root:
            shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------------------------- the checks


_BLOCK = re.compile(re.escape(OPEN) + r".*?" + re.escape(CLOSE), re.DOTALL)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def memory_blocks(body: Any) -> list[str]:
    """Every memory block in a request body (system, instructions, messages, input), in order."""
    if not isinstance(body, Mapping):
        return []
    parts = [body.get(k) for k in ("system", "instructions", "messages", "input")]
    return [m.group(0) for s in _strings(parts) for m in _BLOCK.finditer(s)]


def _strip_cache_control(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_cache_control(v) for v in value]
    return value


def message_list(body: Any, api: str) -> list[Any]:
    if not isinstance(body, Mapping):
        return []
    items = body.get("input" if api == "openai.responses" else "messages")
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    return list(items) if isinstance(items, list) else []


def serialized_messages(body: Any, api: str) -> str:
    """The message list, each message JSON-serialized without ``cache_control`` keys, joined with
    a record separator."""
    return "".join(json.dumps(_strip_cache_control(m), ensure_ascii=False, separators=(",", ":")) + "\x1e"
                   for m in message_list(body, api))


def prefix_ratio(earlier: str, later: str) -> float:
    """Length of the common prefix of two serialized message lists / length of the earlier one."""
    if not earlier:
        return 1.0
    n, i, step = min(len(earlier), len(later)), 0, 1024
    while i + step <= n and earlier[i : i + step] == later[i : i + step]:
        i += step
    while i < n and earlier[i] == later[i]:
        i += 1
    return i / len(earlier)


def count_breakpoints(body: Any) -> int:
    """``cache_control`` markers anywhere in the body (top level, tools, system, messages, nested
    tool results): what Anthropic counts against its limit of 4."""
    if isinstance(body, Mapping):
        return int(bool(body.get("cache_control"))) + sum(count_breakpoints(v) for v in body.values())
    if isinstance(body, list):
        return sum(count_breakpoints(v) for v in body)
    return 0


@dataclass
class PairRatio:
    earlier: int  # seq
    later: int
    upstream: float
    client: float

    @property
    def relative(self) -> float:
        return self.upstream / self.client if self.client else (1.0 if self.upstream == 0 else float("inf"))


@dataclass
class Figures:
    client: str
    version: str
    requests: int
    main_requests: dict[str, int]
    turn1_memory: bool
    blocks_identical: bool
    prefix_pairs: list[PairRatio]
    prefix_ok: bool
    sessions_isolated: bool
    max_breakpoints: int | None  # None: the client sends no Anthropic requests
    side_requests: int
    side_with_new_block: int  # side requests that got a memory block of their own
    rejected: list[str]
    problems: dict[str, list[str]] = field(default_factory=dict)

    @property
    def min_relative(self) -> float | None:
        return min((p.relative for p in self.prefix_pairs), default=None)

    @property
    def median_relative(self) -> float | None:
        vals = [p.relative for p in self.prefix_pairs]
        return statistics.median(vals) if vals else None

    @property
    def breakpoints_ok(self) -> bool:
        return self.max_breakpoints is None or self.max_breakpoints <= 4


PREFIX_TOLERANCE = 0.98


def block_lines(block: str) -> list[str]:
    """The memory lines of a rendered block (without its tags and header)."""
    return [line for line in block.splitlines() if line.startswith("- ")]


def _short(text: str, n: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def evaluate(result: ScenarioResult) -> Figures:
    """The five checks of issue 10 on one scenario run, with evidence for each failure."""
    api = result.api
    problems: dict[str, list[str]] = {k: [] for k in ("turn1", "blocks", "prefix", "sessions", "breakpoints", "side")}
    runs = {r.phase: r for r in result.runs}
    rejected = [f"#{ex.seq} {ex.phase} {ex.method} {ex.path} -> {ex.status}: {_short(ex.response_excerpt, 300)}"
                for ex in result.exchanges if ex.status >= 400]
    for phase in ("A1", "B1", "A2"):
        run = runs.get(phase)
        if run is None:
            problems["blocks"].append(f"{phase}: not run (session A had no id: {_short(runs['A1'].stdout)!r})")
        elif run.returncode != 0:
            problems["blocks"].append(f"{phase}: the client exited {run.returncode}: "
                                      f"stdout {_short(run.stdout, 300)!r} stderr {_short(run.stderr, 300)!r}")
    a1, b1, a2 = result.main_of("A1"), result.main_of("B1"), result.main_of("A2")
    session_a = a1 + a2

    # 1. turn 1 gets the memory it needs
    needle = escape(STAGING)
    if not a1:
        problems["turn1"].append("session A made no main request")
        turn1 = False
    elif a1[0].upstream is None:
        problems["turn1"].append(f"the first main request (#{a1[0].seq}) never reached the upstream: "
                                 f"status {a1[0].status} {_short(a1[0].response_excerpt, 300)}")
        turn1 = False
    else:
        blocks = memory_blocks(a1[0].upstream_body)
        turn1 = any(needle in b for b in blocks)
        if not turn1:
            problems["turn1"].append(f"#{a1[0].seq}: {len(blocks)} memory block(s), none with {STAGING!r}"
                                     + (f"; they hold {[block_lines(b) for b in blocks]}" if blocks else ""))

    # 2. every earlier block is still byte-identical in every later request of the session
    def check_session(label: str, exchanges: list[Exchange]) -> bool:
        ok = True
        seen: list[tuple[int, str]] = []  # (seq, block) in order of appearance
        for ex in exchanges:
            if ex.upstream is None:
                problems["blocks"].append(f"session {label}: #{ex.seq} ({ex.phase}) never reached the upstream "
                                          f"(status {ex.status})")
                ok = False
                continue
            here = memory_blocks(ex.upstream_body)
            for seq, block in seen:
                if block not in here:
                    problems["blocks"].append(f"session {label}: the block first sent in #{seq} is not in #{ex.seq} "
                                              f"({ex.phase}); #{ex.seq} has {len(here)} block(s)")
                    ok = False
            seen += [(ex.seq, b) for b in dict.fromkeys(here) if b not in {s for _, s in seen}]
        return ok

    blocks_ok = bool(session_a) and check_session("A", session_a)
    blocks_ok = check_session("B", b1) and blocks_ok
    if not session_a:
        problems["blocks"].append("session A made no main request")
    blocks_ok = blocks_ok and not any(p for p in problems["blocks"])

    # 3. shared-prefix ratio of consecutive main requests vs the client's own
    pairs: list[PairRatio] = []
    for seqs in (session_a, b1):
        for earlier, later in itertools.pairwise(seqs):
            if earlier.upstream is None or later.upstream is None:
                problems["prefix"].append(f"#{earlier.seq}->#{later.seq}: a request never reached the upstream")
                continue
            pair = PairRatio(earlier.seq, later.seq,
                             prefix_ratio(serialized_messages(earlier.upstream_body, api),
                                          serialized_messages(later.upstream_body, api)),
                             prefix_ratio(serialized_messages(earlier.body, api), serialized_messages(later.body, api)))
            pairs.append(pair)
            if pair.upstream < PREFIX_TOLERANCE * pair.client:
                problems["prefix"].append(f"#{earlier.seq}->#{later.seq} ({earlier.phase}->{later.phase}): "
                                          f"{pair.upstream:.4f} through memwire vs {pair.client:.4f} as sent")
    if len(session_a) < 2:
        problems["prefix"].append(f"session A has {len(session_a)} main request(s): no pair to compare")
    prefix_ok = not problems["prefix"]

    # 4. two sessions opened with the same prompt keep their own blocks
    blocks_a1 = memory_blocks(a1[0].upstream_body) if a1 and a1[0].upstream else []
    blocks_b1 = memory_blocks(b1[0].upstream_body) if b1 and b1[0].upstream else []
    if not (a1 and b1):
        problems["sessions"].append(f"main requests: A1 {len(a1)}, B1 {len(b1)}")
    else:
        if not any(escape(NEW_MEMORY) in b for b in blocks_b1):
            problems["sessions"].append(
                f"B1 #{b1[0].seq} (a new session, same first prompt, after {NEW_MEMORY!r} was added) has no "
                f"block with it; its blocks hold {[block_lines(b) for b in blocks_b1]}")
        if blocks_b1 and blocks_b1 == blocks_a1:
            problems["sessions"].append(f"B1 #{b1[0].seq} carries session A's turn-1 blocks byte for byte")
        only_b = set(blocks_b1) - set(blocks_a1)
        for ex in a2:
            leaked = only_b & set(memory_blocks(ex.upstream_body))
            if leaked:
                problems["sessions"].append(f"A2 #{ex.seq} carries a block of session B")
    sessions_ok = not problems["sessions"]

    # 5. breakpoints in every Anthropic request that left the proxy
    anthropic = [ex for ex in result.exchanges if ex.upstream is not None and ex.path.startswith("/v1/messages")]
    max_bp = max((count_breakpoints(ex.upstream_body) for ex in anthropic), default=None)
    for ex in anthropic:
        n = count_breakpoints(ex.upstream_body)
        if n > 4:
            problems["breakpoints"].append(f"#{ex.seq} {ex.path}: {n} cache_control breakpoints "
                                           f"(client sent {count_breakpoints(ex.body)})")

    # 6. (beyond issue 10's five) a side request gets no block of its own: the blocks it carries are
    # the session's replayed ones, already in an earlier main request of its session
    side = [ex for ex in result.exchanges if ex.seq not in result.main]
    side_new = 0
    for ex in side:
        if ex.upstream is None:
            continue
        session = b1 if ex.phase == "B1" else session_a
        before = {b for m in session if m.seq < ex.seq and m.upstream for b in memory_blocks(m.upstream_body)}
        new = [b for b in dict.fromkeys(memory_blocks(ex.upstream_body)) if b not in before]
        if new:
            side_new += 1
            problems["side"].append(f"side request #{ex.seq} ({ex.phase} {ex.method} {ex.path}, latest user text "
                                    f"{_short(last_user_text(ex.body, api), 60)!r}) got a block of its own: "
                                    f"{[block_lines(b) for b in new]}")
    return Figures(
        client=result.client, version=result.version, requests=len(result.exchanges),
        main_requests={"A1": len(a1), "B1": len(b1), "A2": len(a2)},
        turn1_memory=turn1, blocks_identical=blocks_ok, prefix_pairs=pairs, prefix_ok=prefix_ok,
        sessions_isolated=sessions_ok, max_breakpoints=max_bp,
        side_requests=len(side), side_with_new_block=side_new,
        rejected=rejected, problems={k: v for k, v in problems.items() if v},
    )


def _yn(ok: bool) -> str:
    return "yes" if ok else "NO"


def format_figures(figs: Sequence[Figures]) -> str:
    """The figures as a table, then the evidence for every failed check."""
    head = ["client", "version", "turn-1 memory", "blocks byte-identical", "prefix vs client min",
            "prefix vs client median", "sessions isolated", "max breakpoints", "main reqs A1/B1/A2", "side reqs (with a block of their own)"]
    rows = []
    for f in figs:
        mn, md = f.min_relative, f.median_relative
        rows.append([
            f.client, f.version, _yn(f.turn1_memory), _yn(f.blocks_identical),
            "n/a" if mn is None else f"{mn:.4f}" + ("" if f.prefix_ok else " (FAIL)"),
            "n/a" if md is None else f"{md:.4f}",
            _yn(f.sessions_isolated),
            "n/a" if f.max_breakpoints is None else f"{f.max_breakpoints}" + ("" if f.breakpoints_ok else " (FAIL)"),
            "/".join(str(f.main_requests[k]) for k in ("A1", "B1", "A2")),
            f"{f.side_requests} ({f.side_with_new_block})",
        ])
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    lines = [" | ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in [head, *rows]]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    for f in figs:
        if f.problems or f.rejected:
            lines.append(f"\n{f.client}:")
            for check, items in f.problems.items():
                for item in items:
                    lines.append(f"  [{check}] {item}")
            for item in f.rejected:
                lines.append(f"  [rejected] {item}")
        for p in f.prefix_pairs:
            lines.append(f"  {f.client} prefix #{p.earlier}->#{p.later}: through memwire {p.upstream:.4f}, "
                         f"as sent {p.client:.4f}, relative {p.relative:.4f}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- facts, samples

_SESSIONISH = re.compile(r"session|conversation|thread|window|request-id|turn|user|originator|x-app|agent", re.IGNORECASE)


def _shape(content: Any, limit: int = 90) -> list[str]:
    if isinstance(content, str):
        return [f"str({_short(content, limit)!r})"]
    out = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, Mapping):
            out.append(type(part).__name__)
            continue
        text = part.get("text") if isinstance(part.get("text"), str) else ""
        extra = " +cache_control" if part.get("cache_control") else ""
        out.append(f"{part.get('type')}{extra}({_short(text, limit)!r})" if text else f"{part.get('type')}{extra}")
    return out


def client_facts(result: ScenarioResult) -> dict[str, Any]:
    """What the client's requests look like, for the people who write memwire's client rules."""
    main = [ex for ex in result.exchanges if ex.seq in result.main]
    facts: dict[str, Any] = {"client": result.client, "version": result.version}
    if main:
        first = main[0]
        facts["session_headers"] = {k: v for k, v in first.headers.items() if _SESSIONISH.search(k)}
        body = first.body if isinstance(first.body, dict) else {}
        facts["body_keys"] = sorted(body)
        facts["body_fields"] = {k: body[k] for k in ("metadata", "prompt_cache_key", "client_metadata", "user",
                                                      "conversation", "store", "previous_response_id") if k in body}
        facts["message_shapes"] = {}
        for ex in main:
            msgs = message_list(ex.body, result.api)
            facts["message_shapes"][f"#{ex.seq} {ex.phase}"] = [
                f"{m.get('role', m.get('type'))}: {_shape(m.get('content', m.get('output', '')))}"
                if isinstance(m, Mapping) else type(m).__name__ for m in msgs]
        facts["memwire_session_keys"] = {f"#{ex.seq} {ex.phase}": _memwire_session(ex) for ex in main}
        header_values: dict[str, set[str]] = {}
        for ex in main:
            for k, v in ex.headers.items():
                if _SESSIONISH.search(k):
                    header_values.setdefault(k, set()).add(f"{ex.phase}:{v[:80]}")
        facts["session_header_values_by_phase"] = {k: sorted(v) for k, v in header_values.items()}
    facts["side_requests"] = [
        {"seq": ex.seq, "phase": ex.phase, "method": ex.method, "path": ex.path, "query": ex.query,
         "status": ex.status, "tools": len((ex.body or {}).get("tools") or []) if isinstance(ex.body, dict) else None,
         "json_schema": json_schema_of(ex.body, result.api) is not None if isinstance(ex.body, dict) else None,
         "model": ex.body.get("model") if isinstance(ex.body, dict) else None}
        for ex in result.exchanges if ex.seq not in result.main]
    facts["websockets_tried"] = result.websockets
    facts["runs"] = [{"phase": r.phase, "returncode": r.returncode, "seconds": round(r.seconds, 2),
                      "session_id": r.session_id} for r in result.runs]
    return facts


def _memwire_session(ex: Exchange) -> str:
    """The session key memwire's current code derives for a request (its client-signal part)."""
    try:
        from memwire.middleware._session import resolve_session

        return resolve_session(None, ex.headers, ex.body if isinstance(ex.body, dict) else {},
                               "<system prompt>", "<first user message>")
    except Exception as exc:  # noqa: BLE001 - the core is changing; facts are best effort
        return f"? ({type(exc).__name__}: {exc})"


def save_samples(result: ScenarioResult, directory: Path) -> None:
    """Every request as the client sent it and as it left the proxy, plus headers and run output."""
    out = directory / result.client
    out.mkdir(parents=True, exist_ok=True)
    for ex in result.exchanges:
        stem = f"{ex.seq:03d}-{ex.phase}-{ex.method}{ex.path.replace('/', '_')}"
        (out / f"{stem}.client.json").write_bytes(_pretty(ex.raw))
        meta = {"headers": ex.headers, "query": ex.query, "status": ex.status, "main": ex.seq in result.main,
                "response_excerpt": ex.response_excerpt}
        if ex.upstream is not None:
            (out / f"{stem}.upstream.json").write_text(
                json.dumps(ex.upstream.body, indent=1, ensure_ascii=False) if not isinstance(ex.upstream.body, str)
                else ex.upstream.body)
            meta["upstream_headers"] = ex.upstream.headers
        (out / f"{stem}.meta.json").write_text(json.dumps(meta, indent=1))
    (out / "runs.json").write_text(json.dumps([r.__dict__ for r in result.runs], indent=1))
    (out / "facts.json").write_text(json.dumps(client_facts(result), indent=1, default=str))
    (out / "memwire-proxy.log").write_text(result.proxy_log)


def _pretty(raw: bytes) -> bytes:
    try:
        return json.dumps(json.loads(raw), indent=1, ensure_ascii=False).encode()
    except ValueError:
        return raw
