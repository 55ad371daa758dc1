"""No memory text, message text or header value reaches the log, at any level (issue 30 item 3).

A full ``memwire proxy`` run, at debug level, in both log formats: capture on (auto, then review)
with distillation through a fake upstream, a refused secret, an upstream error, malformed
requests, an invalid namespace, a broken memory file, the memory API refusing a memory, a stream.
Every message, memory, header and file line carries its own canary string; none may appear
anywhere in what the proxy printed. The run is checked to have logged what it did (captures, the
refusal, the distillation, the broken file, the error statuses), so an empty log cannot pass.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from memwire._sim.fake_provider import ErrorReply, FakeProvider, Reply, default_reply, last_user_text, serve_in_thread

ROOT = Path(__file__).resolve().parents[2]
MARK = "Qz7cnry"  # every canary starts with it; nothing else memwire prints does


def canary(name: str) -> str:
    return f"{MARK}{name}"


def scripted(body: dict[str, Any], api: str) -> Reply | ErrorReply | str:
    """The fake model: a distillation answer (with a proposal holding a secret, one not of the
    shape asked, and a good one), an error whose body carries a canary, else the usual reply."""
    system = body.get("system") or (body.get("messages") or [{}])[0].get("content")
    if isinstance(system, str) and "long-term memory of durable facts" in system:
        return json.dumps({"memories": [
            {"text": f"The user runs the {canary('distilled')} pipeline nightly", "kind": "fact",
             "confidence": 0.95, "action": "add", "replaces": None},
            {"text": f"The staging password is {canary('dsecret')}Tr0ub4dor&3", "kind": "fact",
             "confidence": 0.95, "action": "add", "replaces": None},
            {"text": canary("dshape"), "kind": "nonsense", "confidence": 2},
        ]})
    if "please fail" in last_user_text(body, api):
        return ErrorReply(500, f"upstream exploded near {canary('upstream-body')}")
    return default_reply(body, api)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def broken_memory_file(mem: Path) -> None:
    mem.mkdir(parents=True)
    (mem / "MEMORY.md").write_text(f"## Facts\n- The vault is in room {canary('stored')} #infra\n", encoding="utf-8")
    (mem / "broken.md").write_bytes(
        f"---\ntitle: [unclosed {canary('yaml')}\n---\n## Notes\n-   \n".encode()
        + b"- bad bytes \xff\xfe " + canary("utf8").encode() + b"\n"
        + f"- a fine line {canary('fine')}\n".encode())


def run_proxy(tmp_path: Path, fmt: str, capture: str, upstream: str) -> tuple[str, Path]:
    mem = tmp_path / "mem"
    broken_memory_file(mem)
    port = free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMWIRE_")}, "PYTHONPATH": str(ROOT),
           "MEMWIRE_HOME": str(tmp_path / "home"), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "MEMWIRE_DISTILL_MODEL": "gpt-4o-mini", "MEMWIRE_DISTILL_VIA_UPSTREAM": "true"}
    out = tmp_path / "out"
    with open(out, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "memwire.cli", "proxy", "--dir", str(mem), "--port", str(port),
                                 "--workers", "1", "--log-format", fmt, "--log-level", "debug", "--capture", capture,
                                 "--mode", "contextPerTurn", "--openai-upstream", upstream,
                                 "--anthropic-upstream", upstream],
                                env=env, cwd=tmp_path, stdout=fh, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        with httpx.Client(timeout=5, trust_env=False) as http:  # one client for every try (see test_proxy_workers)
            while True:
                try:
                    http.get(base + "/memwire/healthz")
                    break
                except httpx.HTTPError:
                    assert time.monotonic() < deadline and proc.poll() is None, out.read_text(errors="replace")
                    time.sleep(0.02)
        traffic(base)
        wanted = mem / ("MEMORY.md" if capture == "auto" else "inbox/MEMORY.md")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the capture worker wrote what was said, and what was distilled
            text = wanted.read_text(encoding="utf-8") if wanted.exists() else ""
            if canary("said") in text and canary("distilled") in text:
                break
            time.sleep(0.02)
        else:
            pytest.fail(f"nothing captured: {out.read_text(errors='replace')[-3000:]}")
        time.sleep(0.5)
    finally:
        proc.terminate()
        proc.wait(30)
    return out.read_text(encoding="utf-8", errors="replace"), mem


def traffic(base: str) -> None:
    headers = {"authorization": f"Bearer sk-{canary('authkey')}", "x-memwire-session": canary("session"),
               "x-custom": canary("header"), "user-agent": canary("agent"), "cookie": f"sid={canary('cookie')}"}
    with httpx.Client(base_url=base, headers=headers, timeout=30, trust_env=False) as c:
        chat = "/v1/chat/completions"
        first = {"role": "user", "content": f"Remember that the deploy window is {canary('said')} on Fridays."}
        system = {"role": "system", "content": f"You are terse. {canary('system')}"}
        assert c.post(chat, json={"model": "gpt-4o-mini", "messages": [system, first]}).status_code == 200
        second = [system, first, {"role": "assistant", "content": f"Noted {canary('reply')}."},
                  {"role": "user", "content": f"I prefer {canary('pref')} over tabs. Remember that my password is "
                                              f"{canary('secret')}hunter2. What time is it in {canary('q')}?"}]
        assert c.post(chat, json={"model": "gpt-4o-mini", "messages": second}).status_code == 200  # distills the first
        r = c.post(chat, json={"model": "gpt-4o-mini", "stream": True, "messages": [
            {"role": "user", "content": f"Stream me something about {canary('stream')}"}]})
        assert r.status_code == 200
        assert c.post(chat, json={"model": "gpt-4o-mini", "messages": [
            {"role": "user", "content": f"please fail {canary('failing')}"}]}).status_code == 500
        assert c.post(chat, content=f'{{"model": "gpt-4o-mini", "messages": [{canary("malformed")}',
                      headers={"content-type": "application/json"}).status_code == 400
        assert c.post(chat, json={"model": "gpt-4o-mini", "messages": canary("shape")}).status_code == 400
        assert c.post(chat, json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
                      headers={"x-memwire-namespace": f"../{canary('namespace')}"}).status_code == 400
        assert c.post("/v1/messages", json={"model": "claude-sonnet-4-5", "max_tokens": 20,
                                            "system": f"Be kind {canary('asystem')}",
                                            "messages": [{"role": "user", "content": [
                                                {"type": "text", "text": f"From now on, answer in {canary('anth')} style"}]}]},
                      headers={"x-api-key": canary("xapikey"), "anthropic-version": "2023-06-01"}).status_code == 200
        refused = c.post("/memwire/v1/memories", json={"text": f"the root pw is {canary('apisecret')}Summer2024!"})
        assert refused.status_code in (400, 422), refused.text
        refused = c.post("/memwire/v1/memories", json={"text": f"bell {canary('control')}\x07\x1b[31m"})
        assert refused.status_code in (201, 400, 422), refused.text
        assert c.get("/memwire/v1/memories/0123456789").status_code in (400, 404)  # a path: ids may be logged
        assert c.get("/memwire/v1/memories", params={"q": canary("query")}).status_code == 200


@pytest.mark.parametrize(("fmt", "capture"), [("text", "auto"), ("json", "review")])
def test_a_full_proxy_run_logs_no_message_memory_or_header_text(tmp_path: Path, fmt: str, capture: str) -> None:
    with serve_in_thread(FakeProvider(scripted)) as upstream:
        out, mem = run_proxy(tmp_path, fmt, capture, upstream.base_url)
    if fmt == "json":
        records = [json.loads(line) for line in out.splitlines()]  # every line is JSON
        said = "\n".join(r["message"] + "\n" + r.get("error", "") for r in records)
    else:
        said = out
    # the run did log: captures, the refused secret, the distillation, the broken file, the errors
    assert "captured" in said and "looks like it holds a secret" in said
    assert "distilled memory refused" in said
    assert "broken.md" in said
    assert " 500 " in said and " 400 " in said
    assert MARK not in out, [line for line in out.splitlines() if MARK in line]
    assert canary("said") in (mem / ("MEMORY.md" if capture == "auto" else "inbox/MEMORY.md")).read_text()


async def test_faults_whose_exceptions_quote_the_text_log_no_text(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The proxy app in process under ``configure_logging`` (debug, both formats), with faults
    whose exception messages quote what they were handed: a store write refusing the statement
    (quoting it), a retrieval failing (quoting the query), a distillation model call failing
    (quoting the exchange), a full disk under the capture log. The log says what failed, never
    the text."""
    from memwire import MemoryStore, Middleware
    from memwire._errors import InvalidMemoryError
    from memwire._logs import configure_logging
    from memwire.adapters.server._proxy import create_app
    from memwire.middleware import _capture
    from memwire.middleware._capture import Capture
    from memwire.middleware._distill import Distiller

    store = MemoryStore(tmp_path / "mem")
    store.add(f"The vault is in room {canary('stored')}", tags=["infra"])

    def refuse(messages: list[dict[str, str]]) -> str:
        raise RuntimeError(f"the model choked on {messages[1]['content'][-300:]}")

    real_add, real_search = MemoryStore.add, MemoryStore.search

    def add(self: MemoryStore, text: str, *a: Any, **k: Any) -> Any:
        if "refuse" in text:
            raise InvalidMemoryError(f"this memory's text cannot be stored exactly as given: {text[:80]!r}")
        return real_add(self, text, *a, **k)

    def search(self: MemoryStore, query: Any, *a: Any, **k: Any) -> Any:
        if canary("boom") in str(getattr(query, "text", query)):
            raise ValueError(f"cannot search for {query!r}")
        return real_search(self, query, *a, **k)

    def full(*a: Any, **k: Any) -> None:
        raise OSError(28, f"No space left writing {canary('oserror')}", str(store.path / ".captured.jsonl"))

    monkeypatch.setattr(MemoryStore, "add", add)
    monkeypatch.setattr(MemoryStore, "search", search)
    monkeypatch.setattr(_capture, "log_event", full)
    monkeypatch.setattr(_capture, "RETRY_S", 3600.0)
    mw = Middleware(store=store, mode="contextPerTurn")
    mw.capture = Capture("auto", distiller=Distiller(refuse))
    mw.warm_up(("gpt-4o-mini",))
    fake = FakeProvider(scripted)
    app = create_app(mw, openai_upstream="http://openai.upstream", anthropic_upstream="http://anthropic.upstream",
                     client=httpx.AsyncClient(transport=httpx.ASGITransport(app=fake)))
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy.test",
                               headers={"authorization": f"Bearer {canary('key')}",
                                        "x-memwire-session": canary("session")})
    outputs = []
    try:
        # two runs say two different things (a run number alone would be a new value of one fact)
        for n, (fmt, fact) in enumerate((("text", "the alpha build ships {} on Mondays"),
                                          ("json", "our beta printer stores {} in room nine"))):
            configure_logging("debug", fmt)
            capsys.readouterr()
            first = {"role": "user", "content": f"Remember that run {n} refuses {canary('refused')}."}
            said = [first, {"role": "assistant", "content": f"Noted {canary('reply')}."},
                    {"role": "user", "content": f"Remember that {fact.format(canary('shipped'))}."}]
            for messages in ([first], said, [{"role": "user", "content": f"Where is the {canary('boom')} vault?"}]):
                r = await client.post("/v1/chat/completions", json={"model": "gpt-4o-mini", "messages": messages})
                assert r.status_code == 200
                mw.flush()
            outputs.append(capsys.readouterr().err)
    finally:
        configure_logging("warning", "text")
        await client.aclose()
    out = "\n".join(outputs)
    assert "a statement was not captured (InvalidMemoryError)" in out
    assert "distillation failed (RuntimeError)" in out
    assert "memory retrieval failed (ValueError" in out
    assert "not appended to the capture log" in out and "ENOSPC" in out and "capture failed" not in out
    assert [m.text for m in store.memories() if "captured" in m.tags] == [
        f"The alpha build ships {canary('shipped')} on Mondays.",
        f"Our beta printer stores {canary('shipped')} in room nine."]
    assert MARK not in out, [line for line in out.splitlines() if MARK in line]
