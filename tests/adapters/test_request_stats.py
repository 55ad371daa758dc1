"""`memwire stats --requests`: the real cache figures of proxied traffic, from a running proxy's
/metrics or from its request log; mistakes get a clear error, never a traceback."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from memwire import Middleware
from memwire._config import load_config
from memwire._sim.fake_provider import FakeProvider, serve_in_thread
from memwire.adapters.server._proxy import create_app
from memwire.cli import main
from memwire.middleware._records import read_records

SYSTEM = "You are a careful coding assistant for the payments service. " * 400


@pytest.fixture
def traffic(store, tmp_path: Path) -> Iterator[tuple[FakeProvider, str, Path]]:  # type: ignore[no-untyped-def]
    log = tmp_path / "requests.jsonl"
    cfg = load_config(None, env={}, project_config=False, dir=store.path, use_global=False, proxy_request_log=log)
    mw = Middleware(store=store, config=cfg)
    mw.warm_up()
    fake = FakeProvider(reply=lambda body, api: "Noted.")
    with serve_in_thread(fake) as upstream, serve_in_thread(create_app(
            mw, openai_upstream=upstream.base_url, proxy_key="k-2")) as proxy:
        client = openai.OpenAI(base_url=proxy.base_url + "/v1", api_key="sk-fake", max_retries=0,
                               default_headers={"x-memwire-key": "k-2", "x-memwire-session": "s"})
        messages = [{"role": "system", "content": SYSTEM}]
        for q in ("Which port does the staging database use?", "When do deploys go out?", "thanks!"):
            messages.append({"role": "user", "content": q})
            reply = client.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
            messages.append({"role": "assistant", "content": reply.choices[0].message.content})
        deadline = time.monotonic() + 5  # a record is written just after its reply is out
        while len(read_records(log)) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        mw.flush(10)  # and kept in the store in the background
        yield fake, proxy.base_url, log


def stats(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["stats", "--requests", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_from_the_log_and_from_the_running_proxy_alike(traffic, store, capsys) -> None:  # type: ignore[no-untyped-def]
    fake, url, log = traffic
    prompt = sum(u.prompt_tokens for u in fake.usages())
    cached = sum(u.cache_read for u in fake.usages())
    assert cached > 0
    code, out, _ = stats(capsys, "--log", str(log), "--json")
    assert code == 0
    (row,) = json.loads(out)
    assert (row["mode"], row["provider"], row["requests"], row["prompt_tokens"], row["cached_tokens"]) == (
        "contextPerTurn", "openai", 3, prompt, cached)
    assert row["injected"] == 2  # "thanks!" got none
    assert row["cost_units"] == pytest.approx(prompt - cached + 0.5 * cached, abs=0.1)
    code, out, _ = stats(capsys, "--url", url, "--key", "k-2", "--json")
    assert code == 0 and json.loads(out) == [row]
    code, out, _ = stats(capsys, "--dir", str(store.path), "--json")  # what the proxies kept in the store
    assert code == 0 and json.loads(out) == [row]
    code, out, _ = stats(capsys, "--log", str(log))
    assert "contextPerTurn" in out and f"{prompt:,}" in out and f"{cached / prompt:.1%}" in out
    assert "Which port" not in log.read_text()  # figures, never message text


def test_mistakes_are_named(traffic, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    _, url, _ = traffic
    code, _, err = stats(capsys, "--url", url)
    assert code == 2 and "wants the proxy key" in err
    code, _, err = stats(capsys, "--url", "http://127.0.0.1:9")
    assert code == 2 and "cannot reach http://127.0.0.1:9/metrics" in err
    code, _, err = stats(capsys, "--log", str(tmp_path / "nope.jsonl"))
    assert code == 2 and "no such file" in err and "Traceback" not in err


def test_a_request_log_that_cannot_be_written_stops_the_proxy_at_once(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    code = main(["proxy", "--dir", str(tmp_path / "mem"), "--request-log", str(tmp_path / "no" / "such" / "dir" / "x")])
    err = capsys.readouterr().err
    assert code == 2 and "--request-log" in err and "cannot write it" in err
