"""The providers' prompt-cache rules on a call given as blocks: what each bills as cached, written and read.

One place for the rules, used by the loopback provider servers (`tests.support.provider_servers`) and by the
billed-cost benchmark (`benchmarks.billing`), so that the suite and the benchmark bill alike. A block is a part of a
call that must repeat byte for byte to be served from the cache (its identity) and its tokens.

- OpenAI (https://platform.openai.com/docs/guides/prompt-caching): every call is cached automatically. Its cached
  tokens are the longest prefix it shares with one of the provider's recent calls, none below 1,024 tokens, then in
  steps of 128.
- Anthropic (https://docs.claude.com/en/docs/build-with-claude/prompt-caching): only at `cache_control` breakpoints,
  at most 4 a request (a top-level `cache_control` puts one on the last block). Blocks come in the order tools,
  system, messages. A breakpoint reads the longest prefix that an earlier call wrote at a block boundary from the
  breakpoint back `LOOKBACK_BLOCKS` blocks, if that entry was used within `LIFETIME_SECONDS`; it writes its own
  prefix from `ANTHROPIC_MIN_TOKENS` tokens. A read refreshes the entry. `tool_choice` belongs to the message
  blocks' prefix: changing it misses every breakpoint in the messages. Written tokens cost `WRITE_PRICE`, read
  ones `READ_PRICE`, of an input token.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from itertools import accumulate, takewhile
from typing import Any

Block = tuple[str, int]
"""A block's identity and its tokens."""

OPENAI_MIN_TOKENS, OPENAI_STEP = 1_024, 128
OPENAI_RECENT_CALLS = 4
"""Enough to reach back over a whole exchange (up to three agent calls and a fold) to the turn before's last call."""
ANTHROPIC_MIN_TOKENS = 1_024
"""The least prefix a breakpoint caches on Claude Sonnet and Opus (Haiku needs more)."""
MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
LIFETIME_SECONDS = 300.0
WRITE_PRICE, READ_PRICE = 1.25, 0.1


def openai_cacheable(shared: int) -> int:
    """Tokens of a shared prefix OpenAI caches: none below 1,024, then in steps of 128."""
    return 0 if shared < OPENAI_MIN_TOKENS else shared - (shared - OPENAI_MIN_TOKENS) % OPENAI_STEP


class OpenAICache:
    """One model's automatic prefix cache: the blocks of its last `OPENAI_RECENT_CALLS` calls."""

    def __init__(self) -> None:
        self.calls: deque[Sequence[Block]] = deque(maxlen=OPENAI_RECENT_CALLS)

    def call(self, blocks: Sequence[Block]) -> int:
        """Record a call; its tokens served from the cache."""
        common = (
            takewhile(lambda pair: pair[0] == pair[1], zip(blocks, earlier, strict=False)) for earlier in self.calls
        )
        shared = max((sum(tokens for (_, tokens), _ in pairs) for pairs in common), default=0)
        self.calls.append(blocks)
        return openai_cacheable(shared)


@dataclass(frozen=True)
class AnthropicUsage:
    """What Anthropic reports for a call: `input_tokens` excludes the written and the read ones."""

    input_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    @property
    def billed(self) -> float:
        """Input tokens billed, in uncached input tokens."""
        return (
            self.input_tokens
            + WRITE_PRICE * self.cache_creation_input_tokens
            + READ_PRICE * self.cache_read_input_tokens
        )

    def scaled(self, total: int) -> AnthropicUsage:
        """The same shares of `total` tokens: the call as another counter counts it."""
        share = total / self.total if self.total else 0.0
        read, written = round(self.cache_read_input_tokens * share), round(self.cache_creation_input_tokens * share)
        return AnthropicUsage(total - read - written, written, read)


class TooManyBreakpoints(ValueError):
    """Anthropic refuses a request with more than `MAX_BREAKPOINTS` breakpoints."""


class AnthropicCache:
    """One organisation's cache at Anthropic: the prefixes written at breakpoints, each with its last use."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.entries: dict[str, float] = {}

    def call(self, blocks: Sequence[Block], breakpoints: Collection[int]) -> AnthropicUsage:
        """Record a call whose blocks at the indexes `breakpoints` carry `cache_control`; what it is billed."""
        if len(breakpoints) > MAX_BREAKPOINTS:
            msg = f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(breakpoints)}."
            raise TooManyBreakpoints(msg)
        now, keys, digest = self.clock(), [], hashlib.sha256()
        for identity, _ in blocks:
            digest.update(identity.encode())
            keys.append(digest.copy().hexdigest())
        upto = list(accumulate(tokens for _, tokens in blocks))
        alive = {key for key, used in self.entries.items() if now - used <= LIFETIME_SECONDS}
        read_at = max(
            (p for b in breakpoints for p in range(b, max(b - LOOKBACK_BLOCKS, 0) - 1, -1) if keys[p] in alive),
            default=-1,
        )
        written = [b for b in breakpoints if upto[b] >= ANTHROPIC_MIN_TOKENS]
        for position in [*written, read_at] if read_at >= 0 else written:
            self.entries[keys[position]] = now
        read = upto[read_at] if read_at >= 0 else 0
        creation = max([upto[b] - read for b in written if b > read_at], default=0)
        return AnthropicUsage(sum(t for _, t in blocks) - read - creation, creation, read)

    def request(self, body: dict[str, Any], count: Callable[[str], int]) -> AnthropicUsage:
        """Record a Messages API request body (`anthropic_blocks`); what it is billed."""
        return self.call(*anthropic_blocks(body, count))


def _identity(part: object) -> str:
    return json.dumps(part, sort_keys=True, ensure_ascii=False)


def _uncached(block: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in block.items() if key != "cache_control"}


def _blocks_of(content: object) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])  # type: ignore[call-overload]


def anthropic_blocks(body: dict[str, Any], count: Callable[[str], int]) -> tuple[list[Block], list[int]]:
    """A Messages API request body as blocks (tools, system, then each message's content blocks, `tool_choice` in the
    messages' identity) and the indexes of its breakpoints; `count` counts a block's tokens from its JSON."""
    parts: list[tuple[object, dict[str, Any]]] = [(None, tool) for tool in body.get("tools") or []]
    parts += [(None, block) for block in _blocks_of(body.get("system"))]
    choice = body.get("tool_choice")
    for message in body.get("messages") or []:
        parts += [((message["role"], choice), block) for block in _blocks_of(message.get("content"))]
    blocks = [(_identity([scope, _uncached(block)]), count(_identity(_uncached(block)))) for scope, block in parts]
    breakpoints = [index for index, (_, block) in enumerate(parts) if "cache_control" in block]
    if body.get("cache_control") and parts and len(parts) - 1 not in breakpoints:
        breakpoints.append(len(parts) - 1)
    return blocks, breakpoints


def openai_blocks(body: dict[str, Any], count: Callable[[str], int]) -> list[Block]:
    """A chat-completions request body as blocks: the system message, the tools as one block, each other message."""
    messages = list(body.get("messages") or [])
    system = messages[:1] if messages and messages[0].get("role") in ("system", "developer") else []
    parts: list[object] = [*system, *([body["tools"]] if body.get("tools") else []), *messages[len(system) :]]
    return [(_identity(part), count(_identity(part))) for part in parts]
