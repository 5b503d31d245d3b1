"""The bill of a run: each call's input in the engine's token count, and what automatic prefix caching would cache.

Tokens: the engine's own counter (`engine.tokens`, `o200k_base`, `MESSAGE_FRAMING` tokens a message, the tools'
JSON once). OpenAI's rule (https://platform.openai.com/docs/guides/prompt-caching): a cache hit needs an exact,
repeated prefix of 1,024 tokens or more and grows in steps of 128; the tools are part of the cached prefix. A call
is the blocks system message, tools, then the other messages; its shared prefix is the tokens of the leading blocks
it has in common with one of the last `RECENT_CALLS` calls of the same model.
"""

from __future__ import annotations

import json
from collections import deque
from itertools import takewhile
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from langflow_summarizing_agent.engine.tokens import DEFAULT_ENCODING, TokenCounter

COUNTER = TokenCounter(DEFAULT_ENCODING)
MIN_CACHED_TOKENS, CACHE_STEP = 1_024, 128
RECENT_CALLS = 4
"""Enough to reach back over a whole exchange (up to three agent calls and a fold) to the turn before's last call."""
CACHED_SHARES = (0.1, 0.5)
"""Price of a cached token as a share of an uncached one: 10% for the gpt-5 family, 50% for gpt-4o and o-series."""


def tokens(text: str) -> int:
    """A user message holding `text`, as the engine counts it."""
    return COUNTER.text(text)


def cacheable(shared: int) -> int:
    """Tokens of a shared prefix the provider caches: none below 1,024, then in steps of 128."""
    return 0 if shared < MIN_CACHED_TOKENS else shared - (shared - MIN_CACHED_TOKENS) % CACHE_STEP


def _blocks(messages: list[BaseMessage], tools: list[Any]) -> list[tuple[str, int]]:
    """The call as (identity, tokens) blocks in the order the provider renders them."""
    blocks = [(repr((m.type, m.content, getattr(m, "tool_calls", None))), COUNTER.prompt([m])) for m in messages]
    if tools:
        at = 1 if messages and isinstance(messages[0], SystemMessage) else 0
        blocks.insert(at, (json.dumps(tools), COUNTER.prompt([], tools)))
    return blocks


class PromptCache:
    """One model's automatic prefix cache: the blocks of its last `RECENT_CALLS` calls."""

    def __init__(self) -> None:
        self.prompts: deque[list[tuple[str, int]]] = deque(maxlen=RECENT_CALLS)

    def call(self, messages: list[BaseMessage], tools: list[Any]) -> tuple[int, int]:
        """Record a call; its input tokens and the tokens of it served from the cache."""
        blocks = _blocks(messages, tools)
        # Each earlier call's leading blocks that this one repeats.
        common = (
            takewhile(lambda pair: pair[0] == pair[1], zip(blocks, earlier, strict=False)) for earlier in self.prompts
        )
        shared = max((sum(count for (_, count), _ in pairs) for pairs in common), default=0)
        self.prompts.append(blocks)
        return sum(count for _, count in blocks), cacheable(shared)


def run_bill(calls: list[Any]) -> dict[str, Any]:
    """A run's bill from its calls (`input_tokens`, `cached_tokens`): billed input = uncached + share * cached."""
    real, cached = sum(c.input_tokens for c in calls), sum(c.cached_tokens for c in calls)
    billed = {f"billed_{round(s * 100)}": round(real - cached + s * cached) for s in CACHED_SHARES}
    return {"real_input_tokens": real, "cached_share": round(cached / real, 4) if real else 0.0, **billed}
