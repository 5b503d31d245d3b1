"""The providers' cache rules the loopback servers and the benchmark bill by (`tests.support.prompt_caches`)."""

from __future__ import annotations

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from tests.support.prompt_caches import (
    LIFETIME_SECONDS,
    AnthropicCache,
    AnthropicUsage,
    OpenAICache,
    TooManyBreakpoints,
    anthropic_blocks,
    openai_cacheable,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def blocks(*names: str, tokens: int = 600) -> list[tuple[str, int]]:
    return [(name, tokens) for name in names]


def test_openai_caches_a_shared_prefix_from_1024_tokens_in_steps_of_128() -> None:
    assert [openai_cacheable(n) for n in (1_023, 1_024, 1_151, 1_152, 5_000)] == [0, 1_024, 1_024, 1_152, 4_992]
    cache = OpenAICache()
    assert cache.call(blocks("system", "a", "b")) == 0
    assert cache.call(blocks("system", "a", "c")) == openai_cacheable(1_200)


def test_anthropic_writes_at_a_breakpoint_and_a_later_call_reads_it_within_five_minutes() -> None:
    clock = Clock()
    cache = AnthropicCache(clock)
    first = cache.call(blocks("tools", "system", "user 1"), [2])
    assert first == AnthropicUsage(input_tokens=0, cache_creation_input_tokens=1_800)
    clock.now += LIFETIME_SECONDS - 1
    # The breakpoint moved to the newest block: the earlier one is found looking back, and refreshed.
    second = cache.call(blocks("tools", "system", "user 1", "reply 1", "user 2"), [4])
    assert second == AnthropicUsage(input_tokens=0, cache_creation_input_tokens=1_200, cache_read_input_tokens=1_800)
    assert second.billed == 1.25 * 1_200 + 0.1 * 1_800
    clock.now += LIFETIME_SECONDS + 1
    assert cache.call(blocks("tools", "system", "user 1"), [2]).cache_read_input_tokens == 0


def test_anthropic_caches_nothing_without_a_breakpoint_or_below_1024_tokens() -> None:
    cache = AnthropicCache(Clock())
    assert cache.call(blocks("a", "b"), []) == AnthropicUsage(input_tokens=1_200)
    assert cache.call(blocks("a", "b"), []) == AnthropicUsage(input_tokens=1_200)
    assert cache.call(blocks("a", tokens=1_000), [0]) == AnthropicUsage(input_tokens=1_000)
    with pytest.raises(TooManyBreakpoints):
        cache.call(blocks(*"abcde"), [0, 1, 2, 3, 4])


def test_anthropic_looks_back_twenty_blocks_for_an_earlier_write() -> None:
    cache = AnthropicCache(Clock())
    cache.call(blocks("system", "m0", tokens=1_100), [1])
    near = [f"m{i}" for i in range(20)]
    assert cache.call(blocks("system", *near, tokens=1_100), [20]).cache_read_input_tokens == 2_200
    far = AnthropicCache(Clock())
    far.call(blocks("system", "m0", tokens=1_100), [1])
    assert far.call(blocks("system", *near, "m20", "m21", tokens=1_100), [22]).cache_read_input_tokens == 0


def test_anthropic_body_breakpoints_and_tool_choice_in_the_messages_identity() -> None:
    marked = {"type": "ephemeral"}
    body = {
        "tools": [{"name": "t", "cache_control": marked}],
        "system": [{"type": "text", "text": "s", "cache_control": marked}],
        "messages": [{"role": "user", "content": "hi"}],
        "cache_control": marked,
    }
    parts, points = anthropic_blocks(body, len)
    assert points == [0, 1, 2]
    # The breakpoint markers are no content; a changed tool_choice changes only the message blocks.
    plain = {
        **body,
        "tools": [{"name": "t"}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    assert anthropic_blocks(plain, len)[0] == parts
    chosen = anthropic_blocks({**body, "tool_choice": {"type": "none"}}, len)[0]
    assert chosen[:2] == parts[:2] and chosen[2] != parts[2]


def test_anthropic_usage_scaled_to_another_count_keeps_its_shares() -> None:
    usage = AnthropicUsage(input_tokens=100, cache_creation_input_tokens=300, cache_read_input_tokens=600)
    assert usage.scaled(2_000) == AnthropicUsage(
        input_tokens=200, cache_creation_input_tokens=600, cache_read_input_tokens=1_200
    )
    assert usage.scaled(2_000).total == 2_000


def test_anthropic_bills_the_body_chat_anthropic_builds_at_the_breakpoints_it_carries() -> None:
    model = ChatAnthropic(model="claude-sonnet-4-5", api_key="offline")
    marked = {"type": "ephemeral", "ttl": "5m"}
    system = SystemMessage(content=[{"type": "text", "text": "system " * 600, "cache_control": marked}])
    first = [system, HumanMessage("question " * 600)]
    later = [*first, AIMessage("answer " * 600), HumanMessage("more " * 600)]
    cache = AnthropicCache(Clock())
    # The system prompt's breakpoint and the top-level one, on the newest message: the first call writes it all.
    billed = cache.request(model._get_request_payload(first, cache_control=marked), len)
    assert billed == AnthropicUsage(input_tokens=0, cache_creation_input_tokens=billed.total)
    # The next call reads the whole first prompt and writes only what is new.
    again = cache.request(model._get_request_payload(later, cache_control=marked), len)
    assert again == AnthropicUsage(0, again.total - billed.total, cache_read_input_tokens=billed.total)
    # Without the top-level breakpoint only the system prompt is read, and nothing written after it.
    alone = cache.request(model._get_request_payload(later), len)
    assert 0 < alone.cache_read_input_tokens < len("system ") * 700 and alone.cache_creation_input_tokens == 0
