"""The bill of a run: each call's input counted by a real tokenizer, and what automatic prefix caching would cache.

Providers bill their own token counts, and OpenAI caches the prompt prefix automatically. Source: OpenAI's "Prompt
caching" guide (https://platform.openai.com/docs/guides/prompt-caching, now
https://developers.openai.com/api/docs/guides/prompt-caching) and the OpenAI Cookbook's "Prompt Caching 201"
(https://github.com/openai/openai-cookbook/blob/main/examples/Prompt_Caching_201.ipynb): "Cache hits require an exact,
repeated prefix match and works automatically for prompts containing 1024 tokens or more, with cache hits occurring in
increments of 128 tokens"; the guide lists the tools among what is cached ("Both the messages array and the list of
available tools can be cached, contributing to the minimum 1024 token requirement").

Real tokens: OpenAI's `o200k_base` encoding (the gpt-4o, gpt-4.1 and gpt-5 families), loaded offline from the copy the
installed `litellm` wheel ships, checked against its published SHA-256. A chat call is counted as the OpenAI
Cookbook's `num_tokens_from_messages` counts it: 3 tokens per message (`<|start|>`, the separator after the role,
`<|end|>`) plus the encoded role and content, and 3 for the reply priming (`<|start|>assistant<|message|>`). The call
is rendered into one token sequence in that shape, so calls can be compared token by token:

    system message | tool schemas | history and input messages ... | reply priming

- Tool schemas (the JSON of the tools bound to the call, OpenAI's function-tool format) come right after the system
  message, where OpenAI renders them into the prompt (the `# Tools` namespace of the system message); they are one
  block of encoded JSON with no framing tokens of their own. Fold calls carry no tools.
- An assistant message's tool calls are encoded as the JSON of their names and arguments after its content; a tool
  message is a message of role `tool`.

The cache (`PromptCache`): for each call, in the order made, the longest common token prefix with any of the last
`RECENT_CALLS` calls of the same model; cached only from `MIN_CACHED_TOKENS` tokens, in steps of `CACHE_STEP`:
cached = 0 below 1,024, else 1,024 + 128 * floor((shared - 1,024) / 128). Billed input at cached price share `s`:
uncached + s * cached.
"""

from __future__ import annotations

import json
from collections import deque
from functools import cache, lru_cache
from typing import Any

import tiktoken
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langflow_summarizing_agent.engine.tokens import load_encoding

MIN_CACHED_TOKENS = 1_024
CACHE_STEP = 128
RECENT_CALLS = 4
"""Calls a new call is compared with (the provider's "recent request"): enough to reach back over a whole exchange,
up to three agent calls on a tool turn and a fold, so a turn finds the last call of the turn before; few, since a
provider keeps a prefix for minutes and routes a request to a server by its prefix, not by the whole history."""
CACHED_SHARES = (0.1, 0.5)
"""Price of a cached token as a share of an uncached one: 10% for the gpt-5 family, 50% for gpt-4o and o-series."""
TOKENS_PER_MESSAGE = 3
REPLY_PRIMING = 3

# Framing tokens of a rendered message; ids outside the vocabulary, so they only ever match each other.
_START, _SEPARATOR, _END = -1, -2, -3


@cache
def o200k() -> tiktoken.Encoding:
    """The `o200k_base` encoding the engine counts with (`engine.tokens.load_encoding`): offline, checked."""
    encoding = load_encoding("o200k_base")
    if encoding is None:
        msg = "no offline copy of the o200k_base encoding (the litellm wheel ships one)"
        raise RuntimeError(msg)
    return encoding


@lru_cache(maxsize=8_192)
def encode(text: str) -> tuple[int, ...]:
    """`text` in o200k tokens; special-token strings in it are ordinary text."""
    return tuple(o200k().encode_ordinary(text))


def real_tokens(text: str) -> int:
    return len(encode(text))


def _role(message: BaseMessage) -> str:
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, ToolMessage):
        return "tool"
    return str(message.type)


def _content(message: BaseMessage) -> str:
    content = message.content if isinstance(message.content, str) else json.dumps(message.content)
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = [{"name": c["name"], "arguments": json.dumps(c["args"])} for c in message.tool_calls]
        content += json.dumps(calls)
    return content


def render(messages: list[BaseMessage], tools_json: str = "") -> list[int]:
    """The call as one token sequence: each message framed, the tool schemas after the system message, the priming."""
    tokens: list[int] = []
    for i, message in enumerate(messages):
        tokens += [_START, *encode(_role(message)), _SEPARATOR, *encode(_content(message)), _END]
        if tools_json and i == 0 and isinstance(message, SystemMessage):
            tokens += encode(tools_json)
    if tools_json and not (messages and isinstance(messages[0], SystemMessage)):
        tokens[0:0] = encode(tools_json)
    return [*tokens, _START, *encode("assistant"), _SEPARATOR]


def cacheable(shared: int) -> int:
    """Tokens of a shared prefix the provider caches: none below 1,024, then in steps of 128."""
    if shared < MIN_CACHED_TOKENS:
        return 0
    return MIN_CACHED_TOKENS + CACHE_STEP * ((shared - MIN_CACHED_TOKENS) // CACHE_STEP)


def _shared(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    low, high = 0, n  # a[:low] == b[:low], a[:high] != b[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle
    return low


class PromptCache:
    """One model's automatic prefix cache: the rendered prompts of its last `recent` calls."""

    def __init__(self, recent: int = RECENT_CALLS) -> None:
        self.prompts: deque[list[int]] = deque(maxlen=recent)

    def call(self, messages: list[BaseMessage], tools_json: str = "") -> tuple[int, int]:
        """Record a call; its real input tokens and the tokens of it served from the cache."""
        prompt = render(messages, tools_json)
        shared = max((_shared(prompt, earlier) for earlier in self.prompts), default=0)
        self.prompts.append(prompt)
        return len(prompt), cacheable(shared)


def billed(real: int, cached: int, share: float) -> float:
    """Input billed at full price, in tokens, when a cached token costs `share` of one."""
    return real - cached + share * cached


def share_key(share: float) -> str:
    return f"billed_input_tokens_{round(share * 100)}"


def run_bill(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """A run's bill from its recorded calls (`real_tokens`, `cached_tokens`)."""
    real = sum(c["real_tokens"] for c in calls)
    cached = sum(c["cached_tokens"] for c in calls)
    return {
        "real_input_tokens": real,
        "cached_input_tokens": cached,
        "cached_share": round(cached / real, 4) if real else 0.0,
        **{share_key(s): round(billed(real, cached, s)) for s in CACHED_SHARES},
    }
