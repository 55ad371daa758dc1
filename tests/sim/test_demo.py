"""`memwire demo --json`: structure, and the ordering the product exists for."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from memwire.cli import main


def _run_demo(into: Path) -> str:
    """`memwire demo --json --html into/demo.html`: what it printed."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["demo", "--json", "--html", str(into / "demo.html")]) == 0
    logging.getLogger("memwire").setLevel(logging.NOTSET)
    return out.getvalue()


@pytest.fixture(scope="module")
def demo_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """One `memwire demo --json --html FILE` run for the whole test run: its JSON and its page.
    A module fixture runs once in each xdist worker that gets a test of the module (worksteal
    can split it: the demo twice, ~16 s each): the first worker runs it, the others wait for it
    under a lock in the run's directory all workers share and read what it printed."""
    if not hasattr(request.config, "workerinput"):  # not under xdist
        into = tmp_path_factory.mktemp("demo")
        return json.loads(_run_demo(into)), into / "demo.html"
    import fcntl

    shared = tmp_path_factory.getbasetemp().parent / "memwire-demo"  # this run's (pytest-N), not the worker's
    shared.mkdir(exist_ok=True)
    printed = shared / "demo.json"
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not printed.exists():
            text = _run_demo(shared)
            printed.write_text(text)  # only once the run succeeded: a failed run fails in every worker
    return json.loads(printed.read_text()), shared / "demo.html"


@pytest.fixture(scope="module")
def demo_json(demo_run: tuple[dict, Path]) -> dict:
    return demo_run[0]


@pytest.mark.browser
def test_the_html_page_in_a_real_browser(demo_run: tuple[dict, Path], tmp_path: Path) -> None:
    """The page loads offline in Chromium: the table's rows, one chart per mode whose points are
    the requests' cached shares, and a screenshot."""
    from ..browser import browser_page

    data, page_file = demo_run
    with browser_page() as page:
        page.goto(page_file.as_uri())
        rows = page.locator("tbody tr")
        assert rows.count() == len(data["modes"])
        assert rows.nth(0).locator("td").first.inner_text() == "no memory"
        for mode in data["modes"]:
            chart = page.locator(f'svg[data-chart="{mode["label"]}"]')
            dots = chart.locator("circle")
            assert dots.count() == mode["requests"] == len(mode["series"])
            prompt, cached = mode["series"][-1]
            assert (dots.last.locator("title").text_content() or "").startswith(
                f"request {mode['requests']}: {cached:,} of {prompt:,} prompt tokens cached")
        shot = tmp_path / "demo.png"
        page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_html_to_a_path_that_cannot_be_written_fails_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--html", "/nonexistent-dir/demo.html"]) == 2
    assert "--html /nonexistent-dir/demo.html: cannot write it" in capsys.readouterr().err


def test_demo_json_structure(demo_json: dict) -> None:
    assert demo_json["provider"] == "openai" and demo_json["turns"] >= 12 and demo_json["memories"] >= 50
    labels = [m["label"] for m in demo_json["modes"]]
    assert labels[0] == "no memory"
    assert {"startup", "systemPromptPerTurn"} <= set(labels)
    assert any(label.startswith("contextPerTurn") for label in labels)
    for m in demo_json["modes"]:
        for key in ("requests", "injected", "recalled", "needed", "cached_ratio", "cost", "cost_vs_none", "ideal_ratio"):
            assert key in m
        assert m["requests"] > 14  # tool loops: several requests per turn
        assert 0 <= m["cached_ratio"] <= m["ideal_ratio"] <= 1
    none = demo_json["modes"][0]
    assert none["recalled"] == 0 and none["injected"] == 0 and none["cost_vs_none"] == 1.0


def test_context_per_turn_keeps_more_cached_than_system_prompt_per_turn(demo_json: dict) -> None:
    by = {m["label"]: m for m in demo_json["modes"]}
    spt = by["systemPromptPerTurn"]
    for label, m in by.items():
        if label.startswith("contextPerTurn"):
            assert m["cached_ratio"] > spt["cached_ratio"]
            assert m["cost"] < spt["cost"]
            assert m["recalled"] >= 1


def test_replay_is_cheapest_and_recalls_what_drop_recalls(demo_json: dict) -> None:
    by = {m["label"]: m for m in demo_json["modes"]}
    replay, drop = by["contextPerTurn (replay)"], by["contextPerTurn (drop)"]
    assert replay["recalled"] >= drop["recalled"]
    assert replay["cost"] == min(m["cost"] for label, m in by.items() if label != "no memory")


def test_the_table_says_when_tokens_are_estimated(monkeypatch: pytest.MonkeyPatch) -> None:
    from memwire._sim import demo
    from memwire.policies._tokens import EstimateEncoder

    monkeypatch.setattr(demo, "format_table", lambda report: "")
    monkeypatch.setattr(demo, "summary", lambda report: "")
    report = demo.DemoReport("openai", "gpt-4.1", turns=1, sessions=1, memories=1, results=[])
    monkeypatch.setattr(demo, "get_encoder", lambda model: type("Tiktoken", (), {"name": "o200k_base"})())
    assert "estimated" not in demo.render(report)
    monkeypatch.setattr(demo, "get_encoder", lambda model: EstimateEncoder())
    assert "tokens: estimated at 4 characters each" in demo.render(report)


def test_the_profile_row_recalls_what_replay_recalls_and_stays_cached(demo_json: dict) -> None:
    by = {m["label"]: m for m in demo_json["modes"]}
    profile, replay, startup = by["contextPerTurn + profile"], by["contextPerTurn (replay)"], by["startup"]
    assert profile["recalled"] >= max(replay["recalled"], startup["recalled"])
    assert profile["injected"] > replay["injected"]  # the profile's memories, once per session
    assert profile["cached_ratio"] >= replay["cached_ratio"] and profile["of_ideal"] > 0.98  # a prefix-extension log
