"""Make docs/img's screenshots of /memwire/ui as a user would see it: five memories written with
`memwire add`, `memwire proxy --capture review` in front of memwire's fake provider (no network,
no key), a few turns from the OpenAI and Anthropic SDKs (one with a tool loop, two saying
"remember that ..."), then Debian's Chromium (Playwright) at 1280x800 and at 375 px.

    python docs/img/screenshots.py docs/img
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anthropic
import httpx
import openai
from playwright.sync_api import sync_playwright

from memwire._sim.fake_provider import FakeProvider, serve_in_thread

SYSTEM = "You are a careful coding assistant for the payments service. " * 300
MEMORIES = [("The staging database is Postgres 15 on port 5433", ["--tag", "db"]),
            ("Deploys go out on Tuesdays via the GitHub Actions deploy workflow", ["--tag", "process"]),
            ("User prefers tabs over spaces, width 4, in every Python file", ["--tag", "preference"]),
            ("The payments service is owned by team Kestrel", ["--tag", "owner", "--pin"]),
            ("Code review needs one approval from the payments team", ["--tag", "process"])]
PORT = 8799


def traffic(base: str) -> None:
    oa = openai.OpenAI(base_url=base + "/v1", api_key="sk-fake", default_headers={"x-memwire-session": "pay-refactor"})
    msgs: list = [{"role": "system", "content": SYSTEM}]
    for q in ["Which port does the staging database use?", "Remember that the release branch is cut on Thursdays.",
              "When do deploys go out, and who reviews?", "Tabs or spaces for the new module?",
              "Who owns the payments service?"]:
        msgs.append({"role": "user", "content": q})
        msgs.append({"role": "assistant", "content": oa.chat.completions.create(
            model="gpt-4o", messages=msgs).choices[0].message.content})
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    msgs[-1] = {"role": "assistant", "content": None, "tool_calls": [call]}  # the last turn became a tool loop
    msgs.append({"role": "tool", "tool_call_id": "c1", "content": "OWNERS: kestrel"})
    oa.chat.completions.create(model="gpt-4o", messages=msgs)
    an = anthropic.Anthropic(base_url=base, api_key="sk-ant-fake",
                             default_headers={"x-memwire-session": "db-migration"})
    hist: list = []
    for q in ["Which database does staging run?", "Remember that the staging database was moved to port 6543."]:
        hist.append({"role": "user", "content": q})
        reply = an.messages.create(model="claude-sonnet-4-5", max_tokens=50, system=SYSTEM, messages=hist)
        hist.append({"role": "assistant", "content": reply.content[0].text})


def shoot(base: str, out: Path) -> None:
    chromium = os.environ.get("MEMWIRE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for width, height in ((1280, 800), (375, 812)):
            page = browser.new_page(viewport={"width": width, "height": height})
            outside: list[str] = []
            page.on("request", lambda r, seen=outside: None if r.url.startswith(base) else seen.append(r.url))
            for name, path in (("page", "/memwire/ui"), ("search", "/memwire/ui?q=staging+database+port"),
                               ("sessions", "/memwire/ui/sessions"), ("session", "/memwire/ui/sessions/pay-refactor")):
                page.goto(base + path)
                page.screenshot(path=str(out / f"{name}-{width}.png"))
            if width > 400:
                page.goto(base + "/memwire/ui")
                page.locator("#memories .mtext").nth(1).click()  # editing in place
                page.screenshot(path=str(out / f"edit-{width}.png"))
            assert not outside, outside
            page.close()
        browser.close()


def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "MEMWIRE_HOME": tmp}
        mem = str(Path(tmp) / "mem")
        for text, flags in MEMORIES:
            subprocess.run(["memwire", "add", "--dir", mem, text, *flags], env=env, check=True, capture_output=True)
        with serve_in_thread(FakeProvider(reply=lambda body, api: "Noted.")) as up:
            proc = subprocess.Popen(["memwire", "proxy", "--dir", mem, "--port", str(PORT), "--capture", "review",
                                     "--openai-upstream", up.base_url, "--anthropic-upstream", up.base_url], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                base = f"http://127.0.0.1:{PORT}"
                for _ in range(300):
                    try:
                        if httpx.get(base + "/memwire/healthz").status_code == 200:
                            break
                    except httpx.HTTPError:
                        time.sleep(0.1)
                traffic(base)
                time.sleep(1.5)  # the request records reach the store's log (every worker's page reads it)
                shoot(base, out)
            finally:
                proc.terminate()
                proc.wait(10)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/img"))
