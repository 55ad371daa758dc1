"""`memwire demo --json`: structure, and the ordering the product exists for."""

from __future__ import annotations

import json
import logging

import pytest

from memwire.cli import main


@pytest.fixture(scope="module")
def demo_json() -> dict:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["demo", "--json"]) == 0
    logging.getLogger("memwire").setLevel(logging.NOTSET)
    return json.loads(out.getvalue())


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
