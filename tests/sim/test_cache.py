"""The cache simulator: OpenAI prefix rules, Anthropic breakpoint rules, costs, serialization."""

from __future__ import annotations

import pytest

from memwire._errors import ConfigError, RequestFormatError
from memwire._sim import (
    ANTHROPIC_COSTS,
    Block,
    CacheRuleError,
    CacheSimulator,
    CostModel,
    Usage,
    anthropic_min_tokens,
    request_blocks,
)


def seq(n: int, start: int = 0) -> list[int]:
    return list(range(start, start + n))


def blocks(sizes: list[int], breakpoints: set[int] = frozenset(), salt: dict[int, int] | None = None) -> list[Block]:
    """Blocks whose content depends only on (index, salt): equal index+salt → equal tokens."""
    salt = salt or {}
    out, offset = [], 0
    for i, size in enumerate(sizes):
        base = 1_000_000 * (salt.get(i, 0) + 1) + offset
        out.append(Block(tuple(range(base, base + size)), i in breakpoints))
        offset += size
    return out


# -- OpenAI --------------------------------------------------------------------------------------


def test_openai_same_prompt_twice_caches_1920_of_2006() -> None:
    sim = CacheSimulator("openai")
    first = sim.observe_tokens(seq(2006))
    second = sim.observe_tokens(seq(2006))
    assert (first.prompt_tokens, first.cached_tokens) == (2006, 0)
    assert (second.prompt_tokens, second.cached_tokens) == (2006, 1920)
    assert second.input_tokens == 86 and second.cache_write == 0


def test_openai_prompt_under_1024_tokens_is_never_cached() -> None:
    sim = CacheSimulator("openai")
    sim.observe_tokens(seq(1000))
    assert sim.observe_tokens(seq(1000)).cached_tokens == 0
    assert sim.observe_tokens(seq(1023)).cached_tokens == 0


def test_openai_change_at_position_1500_caches_1408() -> None:
    sim = CacheSimulator("openai")
    tokens = seq(2006)
    sim.observe_tokens(tokens)
    changed = list(tokens)
    changed[1500] = 999_999
    assert sim.observe_tokens(changed).cached_tokens == 1408


def test_openai_hit_below_1024_is_not_counted_even_for_a_long_prompt() -> None:
    sim = CacheSimulator("openai")
    tokens = seq(2006)
    sim.observe_tokens(tokens)
    changed = list(tokens)
    changed[1000] = -1  # common prefix 1000 → 896 after rounding, under the minimum
    assert sim.observe_tokens(changed).cached_tokens == 0
    exact = seq(1024)
    sim2 = CacheSimulator("openai")
    sim2.observe_tokens(exact)
    assert sim2.observe_tokens(exact).cached_tokens == 1024


def test_openai_reads_the_longest_prefix_of_any_earlier_prompt() -> None:
    sim = CacheSimulator("openai")
    base = seq(3000)
    a = base[:1300] + seq(1700, 50_000)
    b = base[:2600] + seq(400, 60_000)
    sim.observe_tokens(a)
    sim.observe_tokens(b)  # shares 1300 with a → 1280
    assert sim.history[-1].cached_tokens == 1280
    assert sim.observe_tokens(base).cached_tokens == 2560  # longest: b's 2600 → 2560


def test_openai_cache_is_per_model() -> None:
    sim = CacheSimulator("openai")
    sim.observe_tokens(seq(2006), model="gpt-4o")
    assert sim.observe_tokens(seq(2006), model="gpt-4.1").cached_tokens == 0
    assert sim.observe_tokens(seq(2006), model="gpt-4o").cached_tokens == 1920


def test_openai_ttl_expires_entries_and_hits_refresh_them() -> None:
    now = [0.0]
    sim = CacheSimulator("openai", ttl=300, clock=lambda: now[0])
    sim.observe_tokens(seq(2006))
    now[0] = 200
    assert sim.observe_tokens(seq(2006)).cached_tokens == 1920  # refreshes to t=200
    now[0] = 450
    assert sim.observe_tokens(seq(2006)).cached_tokens == 1920
    now[0] = 800
    assert sim.observe_tokens(seq(2006)).cached_tokens == 0


def chat(system: str, *turns: str, tools: list[dict] | None = None) -> dict:
    messages = [{"role": "system", "content": system}]
    for i, text in enumerate(turns):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    body: dict = {"model": "gpt-4o-mini", "messages": messages}
    if tools:
        body["tools"] = tools
    return body


LONG = "You are a careful assistant. " * 300  # ~1,800 tokens


def test_openai_chat_bodies_keep_the_prefix_when_only_the_end_changes() -> None:
    sim = CacheSimulator("openai")
    first = sim.observe(chat(LONG, "hello"))
    assert first.cached_tokens == 0 and first.prompt_tokens > 1024
    grown = sim.observe(chat(LONG, "hello", "hi there", "tell me more"))
    assert grown.cached_tokens >= 1024 and grown.cached_tokens % 128 == 0
    assert grown.prompt_tokens - grown.cached_tokens < 128 + 40
    changed_system = sim.observe(chat("Be brief. " + LONG, "hello"))
    assert changed_system.cached_tokens == 0


def test_openai_tools_come_first_so_changing_them_loses_the_cache() -> None:
    sim = CacheSimulator("openai")
    tool = {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}
    sim.observe(chat(LONG, "hello", tools=[tool]))
    assert sim.observe(chat(LONG, "hello", tools=[tool])).cached_tokens > 0
    other = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    assert sim.observe(chat(LONG, "hello", tools=[other])).cached_tokens == 0


def test_openai_responses_body_is_inferred_and_cached() -> None:
    sim = CacheSimulator("openai")
    body = {"model": "gpt-4.1", "instructions": LONG, "input": "what is new?"}
    sim.observe(body)
    again = sim.observe({**body, "input": [{"role": "user", "content": "another question"}]})
    assert again.cached_tokens >= 1024


# -- Anthropic -----------------------------------------------------------------------------------


def test_anthropic_write_then_read_at_a_breakpoint() -> None:
    sim = CacheSimulator("anthropic")
    req = blocks([2000, 50], {0})
    first = sim.observe_blocks(req)
    assert (first.cache_read, first.cache_write, first.input_tokens) == (0, 2000, 50)
    second = sim.observe_blocks(req)
    assert (second.cache_read, second.cache_write, second.input_tokens) == (2000, 0, 50)
    assert second.prompt_tokens == 2050


def test_anthropic_nothing_is_cached_without_a_breakpoint() -> None:
    sim = CacheSimulator("anthropic")
    sim.observe_blocks(blocks([2000, 50]))
    again = sim.observe_blocks(blocks([2000, 50]))
    assert (again.cache_read, again.cache_write, again.input_tokens) == (0, 0, 2050)


def test_anthropic_prefix_under_the_minimum_is_neither_written_nor_read() -> None:
    sim = CacheSimulator("anthropic", model="claude-sonnet-4-5")
    req = blocks([500, 50], {0})
    assert sim.observe_blocks(req).cache_write == 0
    assert sim.observe_blocks(req).cache_read == 0
    lenient = CacheSimulator("anthropic", min_tokens=100)
    assert lenient.observe_blocks(req).cache_write == 500
    assert lenient.observe_blocks(req).cache_read == 500


def test_anthropic_minimum_depends_on_the_model() -> None:
    assert anthropic_min_tokens("claude-sonnet-4-5-20250929") == 1024
    assert anthropic_min_tokens("claude-3-5-haiku-20241022") == 2048
    assert anthropic_min_tokens("anthropic/claude-haiku-4-5") == 4096
    assert anthropic_min_tokens("claude-opus-4.5") == 4096
    assert anthropic_min_tokens(None) == 1024
    sim = CacheSimulator("anthropic")
    req = blocks([3000, 10], {0})
    assert sim.observe_blocks(req, model="claude-haiku-4-5").cache_write == 0
    assert sim.observe_blocks(req, model="claude-sonnet-4").cache_write == 3000


def test_anthropic_growing_conversation_reads_the_last_breakpoint_and_writes_the_rest() -> None:
    sim = CacheSimulator("anthropic")
    turn1 = sim.observe_blocks(blocks([1200, 10], {1}))
    assert (turn1.cache_read, turn1.cache_write, turn1.input_tokens) == (0, 1210, 0)
    turn2 = sim.observe_blocks(blocks([1200, 10, 30, 20], {3}))  # breakpoint moved to the new end
    assert (turn2.cache_read, turn2.cache_write, turn2.input_tokens) == (1210, 50, 0)


def test_anthropic_tokens_after_the_last_breakpoint_are_plain_input() -> None:
    sim = CacheSimulator("anthropic")
    sim.observe_blocks(blocks([1500, 100, 40], {0}))
    usage = sim.observe_blocks(blocks([1500, 100, 40], {0}, salt={2: 7}))
    assert (usage.cache_read, usage.cache_write, usage.input_tokens) == (1500, 0, 140)


def test_anthropic_lookback_finds_a_write_19_blocks_back_but_not_20_or_21() -> None:
    sizes = [1100] + [5] * 40
    for back, hit in ((19, True), (20, False), (21, False)):
        sim = CacheSimulator("anthropic")
        sim.observe_blocks(blocks(sizes[:2], {1}))  # writes the prefix ending at block 1
        usage = sim.observe_blocks(blocks(sizes[: 2 + back], {1 + back}))
        assert (usage.cache_read == 1105) is hit, back
        if hit:
            assert usage.cache_write == 5 * back
        else:
            assert usage.cache_write == 1105 + 5 * back


def test_anthropic_a_second_breakpoint_rescues_a_long_gap() -> None:
    sim = CacheSimulator("anthropic")
    sizes = [1100] + [5] * 40
    sim.observe_blocks(blocks(sizes[:2], {1}))
    usage = sim.observe_blocks(blocks(sizes[:30], {10, 29}))
    assert usage.cache_read == 1105
    assert usage.cache_write == sum(sizes[:30]) - 1105


def test_anthropic_only_breakpoints_write_the_lookback_only_reads() -> None:
    sim = CacheSimulator("anthropic")
    sim.observe_blocks(blocks([1100, 10, 10, 10], {3}))  # writes the prefix ending at block 3 only
    usage = sim.observe_blocks(blocks([1100, 10, 10, 10], {3}, salt={3: 1}))
    assert usage.cache_read == 0  # block 2's boundary was never written


def test_anthropic_changed_earlier_block_is_a_miss() -> None:
    sim = CacheSimulator("anthropic")
    sim.observe_blocks(blocks([1100, 10], {1}))
    usage = sim.observe_blocks(blocks([1100, 10], {1}, salt={0: 3}))
    assert (usage.cache_read, usage.cache_write) == (0, 1110)


def test_anthropic_multiple_breakpoints_read_the_longest_and_write_to_the_last() -> None:
    sim = CacheSimulator("anthropic")
    first = sim.observe_blocks(blocks([1100, 200, 30], {0, 2}))
    assert (first.cache_read, first.cache_write, first.input_tokens) == (0, 1330, 0)
    other_question = sim.observe_blocks(blocks([1100, 200, 30], {0, 2}, salt={1: 5}))
    assert (other_question.cache_read, other_question.cache_write) == (1100, 230)


def test_anthropic_at_most_four_breakpoints() -> None:
    sim = CacheSimulator("anthropic")
    sim.observe_blocks(blocks([300] * 6, {0, 1, 2, 3}))
    with pytest.raises(CacheRuleError, match="maximum of 4"):
        sim.observe_blocks(blocks([300] * 6, {0, 1, 2, 3, 4}))


def anthropic_body(system_text: str, *texts: str, bp_system: bool = True, bp_last: bool = False) -> dict:
    system = [{"type": "text", "text": system_text}]
    if bp_system:
        system[0]["cache_control"] = {"type": "ephemeral"}
    messages = []
    for i, text in enumerate(texts):
        block: dict = {"type": "text", "text": text}
        if bp_last and i == len(texts) - 1:
            block["cache_control"] = {"type": "ephemeral"}
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": [block]})
    return {"model": "claude-sonnet-4-5", "max_tokens": 100, "system": system, "messages": messages}


def test_anthropic_bodies_moving_a_breakpoint_does_not_change_the_prefix() -> None:
    sim = CacheSimulator("anthropic")
    first = sim.observe(anthropic_body(LONG, "hello"))
    assert first.cache_write > 1024 and first.cache_read == 0
    # Same system, breakpoint now on the last message only: the lookback reaches the system write.
    second = sim.observe(anthropic_body(LONG, "hello", "hi", "more", bp_system=False, bp_last=True))
    assert second.cache_read == first.cache_write
    assert second.cache_write == second.prompt_tokens - second.cache_read


def test_anthropic_body_top_level_cache_control_counts_toward_the_limit() -> None:
    sim = CacheSimulator("anthropic")
    body = anthropic_body(LONG, "a", "b", "c", "d", bp_last=True)
    for msg in body["messages"][:2]:
        msg["content"][0]["cache_control"] = {"type": "ephemeral"}
    sim.observe(body)  # 4 breakpoints
    with pytest.raises(CacheRuleError, match="Found 5"):
        sim.observe({**body, "cache_control": {"type": "ephemeral"}})
    fresh = CacheSimulator("anthropic")
    auto = fresh.observe({**anthropic_body(LONG, "x", bp_system=False), "cache_control": {"type": "ephemeral"}})
    assert auto.cache_write == auto.prompt_tokens  # automatic caching: breakpoint on the last block


def test_observe_tokens_with_boundaries_and_breakpoints() -> None:
    sim = CacheSimulator("anthropic")
    tokens = seq(2100)
    first = sim.observe_tokens(tokens, boundaries=[1500, 2000], breakpoints=[0, -1])
    assert (first.cache_read, first.cache_write, first.input_tokens) == (0, 2100, 0)
    changed = tokens[:2000] + seq(100, 90_000)
    second = sim.observe_tokens(changed, boundaries=[1500, 2000], breakpoints=[0])
    assert (second.cache_read, second.cache_write, second.input_tokens) == (1500, 0, 600)
    plain = CacheSimulator("anthropic").observe_tokens(tokens, breakpoints=[-1])
    assert plain.cache_write == 2100


def test_anthropic_ttl() -> None:
    now = [0.0]
    sim = CacheSimulator("anthropic", ttl=300, clock=lambda: now[0])
    req = blocks([2000, 50], {0})
    sim.observe_blocks(req)
    now[0] = 299
    assert sim.observe_blocks(req).cache_read == 2000
    now[0] = 700
    expired = sim.observe_blocks(req)
    assert (expired.cache_read, expired.cache_write) == (0, 2000)


# -- costs and usage -----------------------------------------------------------------------------


def test_costs() -> None:
    openai = Usage("openai", 2006, cache_read=1920)
    assert openai.cost() == pytest.approx(86 + 960)
    assert openai.uncached_cost() == 2006
    assert openai.cost(CostModel(cache_read=0.25)) == pytest.approx(86 + 480)
    read = Usage("anthropic", 2050, cache_read=2000)
    write = Usage("anthropic", 2050, cache_write=2000)
    assert read.cost() == pytest.approx(50 + 200)
    assert write.cost() == pytest.approx(50 + 2500)
    assert write.cost(ANTHROPIC_COSTS) == write.cost()
    assert (read + write).prompt_tokens == 4100
    with pytest.raises(ConfigError, match="cache_read"):
        CostModel(cache_read=-1)


def test_simulator_total_and_reset() -> None:
    sim = CacheSimulator("openai")
    for _ in range(3):
        sim.observe_tokens(seq(2006))
    total = sim.total()
    assert (total.prompt_tokens, total.cached_tokens) == (6018, 3840)
    assert total.cost() < total.uncached_cost()
    sim.reset()
    assert sim.history == [] and sim.observe_tokens(seq(2006)).cached_tokens == 0
    assert Usage.total([], "anthropic") == Usage("anthropic", 0)


def test_bad_configuration_names_the_value() -> None:
    with pytest.raises(ConfigError, match="'gemini'"):
        CacheSimulator("gemini")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="min_tokens"):
        CacheSimulator("anthropic", min_tokens=-5)


# -- serialization -------------------------------------------------------------------------------


def test_serialization_is_deterministic_and_ignores_key_order_and_cache_control() -> None:
    a = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    b = {"messages": [{"content": "hi", "role": "user"}], "model": "gpt-4o"}
    assert request_blocks(a, "openai.chat") == request_blocks(b, "openai.chat")
    plain = anthropic_body("sys", "hi", bp_system=False)
    marked = anthropic_body("sys", "hi", bp_system=True)
    tokens = [blk.tokens for blk in request_blocks(plain, "anthropic.messages")]
    assert tokens == [blk.tokens for blk in request_blocks(marked, "anthropic.messages")]
    assert [blk.breakpoint for blk in request_blocks(marked, "anthropic.messages")] == [True, False]


def test_serialization_block_order_per_api() -> None:
    tool = {"name": "t", "input_schema": {"type": "object"}}
    body = {
        "model": "claude-sonnet-4-5",
        "tools": [tool],
        "system": "sys",
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "tool_use", "id": "1", "name": "t", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "1", "content": "r"}]},
        ],
    }
    labels = [blk.label for blk in request_blocks(body, "anthropic.messages")]
    assert labels == [
        "tools[0]",
        "system",
        "messages[0]",
        "messages[1].content[0]",
        "messages[1].content[1]",
        "messages[2].content[0]",
    ]
    resp = {"model": "gpt-4.1", "tools": [tool], "instructions": "i", "input": "q"}
    assert [blk.label for blk in request_blocks(resp, "openai.responses")] == ["tools[0]", "instructions", "input[0]"]
    with pytest.raises(RequestFormatError, match="unknown api"):
        request_blocks(resp, "gemini.generate")


def test_inline_images_cost_a_few_tokens_and_still_differ() -> None:
    def image(data: str) -> dict:
        source = {"type": "base64", "media_type": "image/png", "data": data}
        return {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": [{"type": "image", "source": source}]}]}

    one = request_blocks(image("A" * 50_000), "anthropic.messages")
    two = request_blocks(image("B" * 50_000), "anthropic.messages")
    assert len(one[0].tokens) < 60 and one[0].tokens != two[0].tokens
    url = {"model": "gpt-4o", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 50_000}}]}]}
    assert len(request_blocks(url, "openai.chat")[0].tokens) < 60
