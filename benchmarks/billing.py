"""The bill of a run: each call's input in the engine's token count, and what the provider's prompt cache serves.

Tokens: the engine's own counter (`engine.tokens`, `o200k_base`, `MESSAGE_FRAMING` tokens a message, the tools' JSON
once). The cache rules are the loopback provider servers' (`tests.support.prompt_caches`). OpenAI's applies to the
call's messages as blocks: the system message, the tools, then each other message. Anthropic's applies to the request
body `ChatAnthropic` builds, with the breakpoints it carries; its shares of the body are taken of the engine's count.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from langflow_summarizing_agent.engine.tokens import DEFAULT_ENCODING, TokenCounter
from tests.support.prompt_caches import READ_PRICE, WRITE_PRICE, AnthropicCache, OpenAICache

COUNTER = TokenCounter(DEFAULT_ENCODING)


def openai_usage(cache: OpenAICache, messages: list[BaseMessage], tools: list[Any]) -> tuple[int, int, int]:
    """A call's input, read and written tokens by OpenAI's rule (which writes at no extra price)."""
    blocks = [(repr((m.type, m.content, getattr(m, "tool_calls", None))), COUNTER.prompt([m])) for m in messages]
    if tools:
        at = 1 if messages and isinstance(messages[0], SystemMessage) else 0
        blocks.insert(at, (json.dumps(tools), COUNTER.prompt([], tools)))
    cached = cache.call(blocks)
    return sum(count for _, count in blocks), cached, 0


def anthropic_usage(cache: AnthropicCache, body: dict[str, Any], messages: list[BaseMessage]) -> tuple[int, int, int]:
    """A Messages API request's input, read and written tokens by Anthropic's rule, in the engine's count of the call
    (its messages and the body's tools)."""
    usage = cache.request(body, COUNTER.text).scaled(COUNTER.prompt(messages, body.get("tools") or []))
    return usage.total, usage.cache_read_input_tokens, usage.cache_creation_input_tokens


def run_bill(calls: list[Any]) -> dict[str, Any]:
    """A run's bill from its calls (`input_tokens`, `cached_tokens` read, `written_tokens`): billed input = uncached +
    `READ_PRICE` * read + `WRITE_PRICE` * written, cache reads at a tenth of the price as on gpt-5 and Anthropic (an
    OpenAI call writes none)."""
    real, read, written = (
        sum(getattr(c, part) for c in calls) for part in ("input_tokens", "cached_tokens", "written_tokens")
    )
    billed = round(real - read - written + READ_PRICE * read + WRITE_PRICE * written)
    parts = {"total_input_tokens": real, "cached_tokens": read, "written_tokens": written}
    return {**parts, "cached_share": round(read / real, 4) if real else 0.0, "billed_10": billed}
