"""``memwire demo``: the same agent conversation through the real proxy, once per mode, against the
fake provider — what each mode costs in prompt cache, and whether the model saw the memory it needed.

Nothing leaves 127.0.0.1 and no API key is needed: the provider is :class:`FakeProvider`, whose
usage figures come from the prompt-cache simulator.
"""

from __future__ import annotations

import bisect
import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from .._config_model import Config
from .._errors import ConfigError
from ..adapters.server._proxy import create_app
from ..memory._model import Memory
from ..memory._store import MemoryStore
from ..middleware._core import Middleware
from ..policies._tokens import get_encoder
from ..policies.modes._render import escape
from .cache import Usage
from .demo_data import LEARNED, MEMORIES, SESSIONS, SYSTEM_PROMPT, TOOLS, Turn, tool_output
from .fake_provider import FakeProvider, serve_in_thread
from .serialize import request_blocks

__all__ = ["CONFIGS", "MODELS", "Config_", "DemoReport", "ModeResult", "run_demo"]

MODELS = {"openai": "gpt-4.1", "anthropic": "claude-sonnet-4-5"}


@dataclass(frozen=True)
class Config_:
    """One row of the demo: a mode and history strategy (and the profile block), or no memory at all."""

    label: str
    mode: str | None  # None: no memory, straight to the provider
    history: Literal["drop", "replay"] = "drop"  # Config.history
    profile: bool = False


CONFIGS = (
    Config_("no memory", None),
    Config_("startup", "startup"),
    Config_("systemPromptPerTurn", "systemPromptPerTurn"),
    Config_("contextPerTurn (drop)", "contextPerTurn", "drop"),
    Config_("contextPerTurn (replay)", "contextPerTurn", "replay"),
    Config_("contextPerTurn + profile", "contextPerTurn", "replay", profile=True),
)


@dataclass
class ModeResult:
    label: str
    requests: int = 0
    injected: int = 0          # memories put in front of the model, once per turn (startup, profile: per session)
    recalled: int = 0          # turns whose needed memory the model was shown
    needed: int = 0            # turns that need a memory
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    ideal_cached_tokens: int = 0  # a perfect cache: every token already sent as a prefix is read
    cost: float = 0.0
    cost_vs_none: float = 1.0
    seconds: float = 0.0
    missed: list[str] = field(default_factory=list)
    series: list[tuple[int, int]] = field(default_factory=list)  # per request: (prompt tokens, cached tokens)

    @property
    def cached_ratio(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def ideal_ratio(self) -> float:
        return self.ideal_cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def as_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["cached_ratio"] = round(self.cached_ratio, 4)
        d["ideal_ratio"] = round(self.ideal_ratio, 4)
        d["of_ideal"] = round(self.cached_ratio / self.ideal_ratio, 4) if self.ideal_ratio else None
        d["cost"] = round(self.cost, 1)
        d["cost_vs_none"] = round(self.cost_vs_none, 3)
        d["seconds"] = round(self.seconds, 2)
        return d


@dataclass
class DemoReport:
    provider: str
    model: str
    turns: int
    sessions: int
    memories: int
    results: list[ModeResult]

    def as_json(self) -> dict[str, Any]:
        return {"provider": self.provider, "model": self.model, "turns": self.turns, "sessions": self.sessions,
                "memories": self.memories, "modes": [r.as_json() for r in self.results]}


# ---------------------------------------------------------------------------- the scripted client

class _Conversation:
    """One session's history in the provider's own format, as a coding agent would keep it."""

    def __init__(self, provider: str, model: str) -> None:
        self.provider, self.model = provider, model
        self.history: list[dict[str, Any]] = []
        self.calls = 0

    def user(self, text: str) -> None:
        if self.provider == "openai":
            self.history.append({"role": "user", "content": text})
        else:
            self.history.append({"role": "user", "content": [{"type": "text", "text": text}]})

    def tool_call(self, command: str, output: str) -> None:
        self.calls += 1
        cid = f"call_{self.calls:03d}"
        if self.provider == "openai":
            call = {"name": "shell", "arguments": json.dumps({"command": command})}
            self.history.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": cid, "type": "function", "function": call}]})
            self.history.append({"role": "tool", "tool_call_id": cid, "content": output})
        else:
            self.history.append({"role": "assistant", "content": [
                {"type": "tool_use", "id": cid, "name": "shell", "input": {"command": command}}]})
            self.history.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": cid, "content": output}]})

    def assistant(self, text: str) -> None:
        if self.provider == "openai":
            self.history.append({"role": "assistant", "content": text})
        else:
            self.history.append({"role": "assistant", "content": [{"type": "text", "text": text}]})

    def request(self) -> tuple[str, dict[str, Any]]:
        if self.provider == "openai":
            return "/v1/chat/completions", {
                "model": self.model, "messages": [{"role": "system", "content": SYSTEM_PROMPT}, *self.history],
                "tools": [{"type": "function", "function": t} for t in TOOLS]}
        # Like Claude Code: a breakpoint after the system prompt and on the last block of the conversation.
        messages = list(self.history)
        last = messages[-1]
        blocks = list(last["content"])
        blocks[-1] = {**blocks[-1], "cache_control": {"type": "ephemeral"}}
        messages[-1] = {**last, "content": blocks}
        return "/v1/messages", {
            "model": self.model, "max_tokens": 1024,
            "system": [{"type": "text", "text": SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
                      for t in TOOLS],
            "messages": messages}


def _headers(provider: str, session: str) -> dict[str, str]:
    h = {"x-memwire-session": session, "content-type": "application/json"}
    if provider == "openai":
        h["authorization"] = "Bearer demo-key"
    else:
        h.update({"x-api-key": "demo-key", "anthropic-version": "2023-06-01"})
    return h


def _seed(store: MemoryStore) -> None:
    store.add_many(Memory.create(text, tags, pinned) for text, tags, pinned in MEMORIES)


def _shown(body: Any, memory_text: str) -> bool:
    """Whether a memory's rendered line reached the provider in this request."""
    needle = json.dumps("- " + escape(memory_text), ensure_ascii=False)[1:-1]
    return needle in json.dumps(body, ensure_ascii=False)


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # binary search on slice equality: C-speed comparisons
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _ideal_cached(bodies: Sequence[tuple[str, Any]]) -> list[int]:
    """Per request: the longest prefix already sent in an earlier request (a perfect cache).
    The earlier sequences are kept sorted: the one sharing the longest prefix with a new
    sequence is a neighbour of its place among them, so two comparisons do, not one per request."""
    seqs: list[tuple[int, ...]] = []
    out = []
    for api, body in bodies:
        seq = tuple(t for blk in request_blocks(body, api) for t in blk.tokens)
        at = bisect.bisect_left(seqs, seq)
        out.append(max((_lcp(seq, seqs[i]) for i in (at - 1, at) if 0 <= i < len(seqs)), default=0))
        seqs.insert(at, seq)
    return out


def _memory_for(fragment: str, store: MemoryStore) -> str:
    for m in store:
        if fragment in m.text:
            return m.text
    raise LookupError(f"demo script names a memory that is not in the store: {fragment!r}")


def run_mode(cfg: Config_, provider: str, model: str) -> ModeResult:
    """Play the whole script through the proxy (or straight to the provider) for one configuration."""
    start = time.perf_counter()
    result = ModeResult(cfg.label)
    # a file a background writer adds as the directory goes must not fail the demo (flushed below)
    with tempfile.TemporaryDirectory(prefix="memwire-demo-", ignore_cleanup_errors=True) as tmp:
        store = MemoryStore(Path(tmp) / "memory")
        mw: Middleware | None = None
        _seed(store)
        fake = FakeProvider()
        upstream = serve_in_thread(fake)
        servers = [upstream]
        base = upstream.base_url
        if cfg.mode is not None:
            mw = Middleware(store=store, config=Config(mode=cfg.mode, history=cfg.history, profile=cfg.profile,
                                                        dir=store.path, use_global=False))
            proxy = serve_in_thread(create_app(mw, openai_upstream=base, anthropic_upstream=base))
            servers.append(proxy)
            base = proxy.base_url
        api = "openai.chat" if provider == "openai" else "anthropic.messages"
        try:
            with httpx.Client(base_url=base, timeout=30.0, trust_env=False) as client:
                for n, session in enumerate(SESSIONS):
                    if n == 1:
                        store.add(LEARNED[0], tags=LEARNED[1])  # written after session 1, needed in session 2
                    conv = _Conversation(provider, model)
                    headers = _headers(provider, f"demo-{session.name}")
                    for t, turn in enumerate(session.turns):
                        # startup shows one block per session: count its memories once
                        count = cfg.mode != "startup" or t == 0
                        _play_turn(client, conv, turn, headers, store, fake, result, count, t == 0)
        finally:
            for s in servers:
                s.stop()
            # what runs in the background (captures, replay ledgers, the memories' metadata) is
            # written before the directory is removed: a write into it as it goes failed the run
            if mw is not None:
                mw.flush(timeout=30)
            store.lifecycle.flush()
        usages: list[Usage] = [r.usage for r in fake.requests if r.usage is not None]
        result.requests = len(usages)
        result.prompt_tokens = sum(u.prompt_tokens for u in usages)
        result.cached_tokens = sum(u.cache_read for u in usages)
        result.cache_write_tokens = sum(u.cache_write for u in usages)
        result.cost = sum(u.cost() for u in usages)
        result.series = [(u.prompt_tokens, u.cache_read) for u in usages]
        result.ideal_cached_tokens = sum(_ideal_cached([(api, r.body) for r in fake.requests if r.usage is not None]))
    result.seconds = time.perf_counter() - start
    return result


def _play_turn(
    client: httpx.Client, conv: _Conversation, turn: Turn, headers: dict[str, str], store: MemoryStore,
    fake: FakeProvider, result: ModeResult, count_injected: bool, first_of_session: bool,
) -> None:
    conv.user(turn.user)
    steps = [*turn.tools, None]
    for i, step in enumerate(steps):
        path, body = conv.request()
        resp = client.post(path, json=body, headers=headers)
        resp.raise_for_status()
        if i == 0:  # the turn's first request: what the model is shown for this user message
            if count_injected:
                result.injected += int(resp.headers.get("x-memwire-injected", "0") or 0)
            if first_of_session:  # the profile block: the same on every request of the session
                result.injected += int(resp.headers.get("x-memwire-profile", "0") or 0)
            if turn.needs:
                result.needed += 1
                memory = _memory_for(turn.needs, store)
                if _shown(fake.requests[-1].body, memory):
                    result.recalled += 1
                else:
                    result.missed.append(turn.needs)
        if step is not None:
            conv.tool_call(step[0], tool_output(step[0], step[1]))
    conv.assistant(turn.reply)


def run_demo(provider: str = "openai", configs: Sequence[Config_] = CONFIGS, model: str | None = None) -> DemoReport:
    if provider not in MODELS:
        raise ConfigError(f"unknown provider {provider!r}; expected one of {', '.join(MODELS)}")
    model = model or MODELS[provider]
    results = [run_mode(cfg, provider, model) for cfg in configs]
    none = next((r for r in results if r.label == "no memory"), None)
    for r in results:
        r.cost_vs_none = r.cost / none.cost if none and none.cost else 1.0
    turns = sum(len(s.turns) for s in SESSIONS)
    return DemoReport(provider, model, turns, len(SESSIONS), len(MEMORIES) + 1, results)


# ---------------------------------------------------------------------------- output

def format_table(report: DemoReport, ideal: bool = False) -> str:
    head = f"{'mode':<26}{'requests':>9}{'injected':>10}{'recalled':>10}{'cached':>9}"
    head += f"{'ideal':>8}{'of ideal':>10}" if ideal else ""
    head += f"{'cost units':>12}{'vs none':>9}"
    lines = [head, "-" * len(head)]
    for r in report.results:
        recalled = f"{r.recalled}/{r.needed}" if r.needed else "-"
        row = f"{r.label:<26}{r.requests:>9}{r.injected:>10}{recalled:>10}{r.cached_ratio:>9.1%}"
        if ideal:
            of = f"{r.cached_ratio / r.ideal_ratio:.1%}" if r.ideal_ratio else "-"
            row += f"{r.ideal_ratio:>8.1%}{of:>10}"
        row += f"{r.cost:>12,.0f}{r.cost_vs_none:>8.2f}x"
        lines.append(row)
    return "\n".join(lines)


def summary(report: DemoReport) -> str:
    """Two sentences on what the user is seeing, from the measured numbers."""
    by = {r.label: r for r in report.results}
    spt, best = by.get("systemPromptPerTurn"), min((r for r in report.results if r.label != "no memory"),
                                                   key=lambda r: (r.cost, -r.recalled), default=None)
    startup, profile = by.get("startup"), by.get("contextPerTurn + profile")
    if spt is None or best is None:
        return ""
    first = (f"Putting memory in the system prompt (systemPromptPerTurn) shows the model {spt.recalled} of "
             f"{spt.needed} memories it needed but caches only {spt.cached_ratio:.0%} of prompt tokens, so it costs "
             f"{spt.cost_vs_none:.2f}x a conversation without memory; {best.label} recalls {best.recalled} of "
             f"{best.needed} while keeping {best.cached_ratio:.0%} cached, at {best.cost_vs_none:.2f}x.")
    second = ""
    if startup is not None:
        per_session = startup.injected // max(1, report.sessions)
        second = (f" startup keeps its prefix cached too ({startup.cached_ratio:.0%}) but sends one broad block of "
                  f"about {per_session} memories with every request of a session, whatever the turn is about: "
                  f"{startup.recalled} of {startup.needed} recalled at {startup.cost_vs_none:.2f}x.")
    if profile is not None:
        second += (f" contextPerTurn + profile carries that block too, cached after each session's first request, and "
                   f"retrieves per turn what it does not show: {profile.recalled} of {profile.needed} recalled at "
                   f"{profile.cost_vs_none:.2f}x ({profile.cached_ratio:.0%} cached).")
    return first + second


def render(report: DemoReport) -> str:
    head = (f"memwire demo: one coding-agent conversation ({report.turns} user turns in {report.sessions} sessions, "
            f"tool loops, social closers) over {report.memories} memories,\nplayed through the memwire proxy "
            f"against a local fake {report.provider} provider ({report.model}) with simulated prompt caching.\n")
    cached_cost = "0.5" if report.provider == "openai" else "read 0.1 / write 1.25"
    notes = ("\ninjected: memories put before the model per turn (startup and the profile: per session); "
             "recalled: turns whose needed memory the model saw;\n"
             "cached: share of prompt tokens read from the provider's cache; "
             f"cost units: uncached input 1.0, cached {cached_cost}; vs none: against no memory at all.\n")
    if get_encoder(report.model).name == "estimate":  # the one warning is silenced here: say it in the output
        notes += ("tokens: estimated at 4 characters each (no tiktoken file on this machine; "
                  "pip install 'memwire[litellm]', or put tiktoken's files in TIKTOKEN_CACHE_DIR, for exact counts).\n")
    return head + "\n" + format_table(report) + "\n" + notes + "\n" + summary(report)
