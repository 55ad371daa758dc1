"""The e2e harness's own measures, on hand-made bodies (no client needed: these run everywhere)."""

from __future__ import annotations

from memwire.policies.modes._render import render_lines

from .harness import (
    block_lines,
    count_breakpoints,
    memory_blocks,
    prefix_ratio,
    serialized_messages,
)

CC = {"type": "ephemeral"}


def test_prefix_ratio_is_the_common_prefix_over_the_earlier_length() -> None:
    assert prefix_ratio("", "anything") == 1.0
    assert prefix_ratio("abcd", "abcdef") == 1.0
    assert prefix_ratio("abcd", "abXd") == 0.5
    assert prefix_ratio("abcd", "") == 0.0
    long = "x" * 5000
    assert prefix_ratio(long + "yz", long + "yQ") == 5001 / 5002  # past the 1024-character strides


def test_serialized_messages_ignore_cache_control_but_not_other_changes() -> None:
    a = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": CC}]}]}
    b = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    assert serialized_messages(a, "anthropic.messages") == serialized_messages(b, "anthropic.messages")
    c = {"messages": [{"role": "user", "content": "hi"}]}
    assert serialized_messages(c, "anthropic.messages") != serialized_messages(b, "anthropic.messages")
    assert serialized_messages({"input": "hi"}, "openai.responses") == serialized_messages(c, "anthropic.messages")


def test_breakpoints_are_counted_everywhere_including_nested_tool_results() -> None:
    body = {
        "cache_control": CC,
        "tools": [{"name": "Bash", "cache_control": CC}],
        "system": [{"type": "text", "text": "s", "cache_control": CC}],
        "messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "r", "cache_control": CC}]},
            {"type": "text", "text": "q", "cache_control": None}]}],
    }
    assert count_breakpoints(body) == 4


def test_memory_blocks_are_found_in_any_text_of_the_request() -> None:
    block = render_lines(["- The staging database host is db-staging.internal:5433"])
    body = {"instructions": "x", "input": [{"role": "user", "content": [{"type": "input_text", "text": block}]},
                                            {"role": "user", "content": "question"}]}
    assert memory_blocks(body) == [block]
    assert block_lines(block) == ["- The staging database host is db-staging.internal:5433"]
    assert memory_blocks({"messages": [{"role": "user", "content": "no memory here"}]}) == []
