"""What the provider reported for the agent's own calls: the per-session token scale, and whether it caches.

`UsageObserver` is a LangChain callback on the agent's model calls. For each call it keeps what was sent (the
messages and the tools bound) and, when the call ends, the input tokens the provider reported (`usage_metadata`, as
LangChain reports it for every provider) against the tokens the session's `TokenCounter` counts for the same call.
`SessionUsage` keeps, per session, the scale that corrects the counter, and, per model, whether the provider reported
tokens served from or written to its prompt cache.

Langflow also stores usage on the reply (`properties.usage`), but as the sum over the turn's calls, with an estimate
for a call that failed, and with no record of what each call sent; the callback sees each call with its own prompt.

Caching applies to a model when its provider reported cached input tokens on an earlier call in this process, or,
before any call, when the provider is one that caches every prompt automatically (`CACHING_PROVIDERS`) or one the
agent asks to cache (`ASKED_PROVIDERS`, `wiring.prompt_cache`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult

from langflow_summarizing_agent.engine.tokens import TokenCounter

CACHING_PROVIDERS = frozenset({"OpenAI", "Azure OpenAI", "DeepSeek", "Google Generative AI", "Google", "xAI"})
"""Providers that cache every prompt's prefix without being asked: OpenAI from 1,024 tokens, DeepSeek, Gemini's
implicit caching, xAI."""
ASKED_PROVIDERS = frozenset({"Anthropic"})
"""Providers that cache only at `cache_control` breakpoints, which the Summarizing Agent sets (`wiring.prompt_cache`);
the stock Agent sets none."""
CACHE_DETAILS = ("cache_read", "cache_creation", "ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")
"""The `input_token_details` of LangChain's usage that count cached tokens: read, or written (Anthropic's writes are
under `cache_creation`, or by lifetime when it reports them so)."""
SCALE_RANGE = (0.25, 4.0)
"""A reported count this far from the counted one is not a tokenizer difference (an estimate, a proxy): ignored."""


@dataclass(frozen=True)
class AgentCall:
    """One call of the agent's model: what it sent, as the callback saw it, and the top-level `cache_control` it
    carried (Anthropic's breakpoint on the newest message, `wiring.prompt_cache`)."""

    messages: tuple[BaseMessage, ...]
    tools: tuple[Any, ...] = ()
    cache_control: object = None


class SessionUsage:
    """Per session, the scale of reported over counted input tokens (a running mean over the calls seen); per model,
    whether its provider reported cached tokens. Bounded: the oldest sessions are forgotten first."""

    def __init__(self, max_sessions: int = 10_000) -> None:
        self.max_sessions = max_sessions
        self._scales: OrderedDict[Hashable, tuple[float, int]] = OrderedDict()
        self._caching: dict[str, bool] = {}
        self._lock = threading.Lock()

    def scale(self, key: Hashable) -> float:
        found = self._scales.get(key)
        return found[0] if found else 1.0

    def observe(self, key: Hashable, *, counted: int, reported: int) -> None:
        if counted <= 0 or reported <= 0:
            return
        ratio = reported / counted
        if not SCALE_RANGE[0] <= ratio <= SCALE_RANGE[1]:
            return
        with self._lock:
            scale, calls = self._scales.get(key, (1.0, 0))
            calls = min(calls + 1, 20)
            self._scales[key] = (scale + (ratio - scale) / calls, calls)
            self._scales.move_to_end(key)
            while len(self._scales) > self.max_sessions:
                self._scales.popitem(last=False)

    def saw_cache(self, model: str | None, cached: int) -> None:
        if model and cached > 0:
            self._caching[model] = True

    def caches(self, model: str | None, provider: str | None) -> bool:
        """Whether the provider serves this model's repeated prefixes from a cache."""
        if model and self._caching.get(model):
            return True
        return provider in CACHING_PROVIDERS or provider in ASKED_PROVIDERS

    def forget(self, key: Hashable) -> None:
        self._scales.pop(key, None)


class UsageObserver(BaseCallbackHandler):
    """Watches one turn's agent calls: keeps the last call sent, and feeds the runtime's `SessionUsage` what the
    provider reported."""

    run_inline = True

    def __init__(self, key: Hashable, counter: TokenCounter, model: str | None, usage: SessionUsage) -> None:
        super().__init__()
        self.key = key
        self.counter = counter
        self.model = model
        self.usage = usage
        self.last_call: AgentCall | None = None
        self._pending: dict[UUID, AgentCall] = {}

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], *, run_id: UUID, **kwargs: Any
    ) -> None:
        params = kwargs.get("invocation_params") or {}
        tools = params.get("tools") or ()
        call = AgentCall(
            tuple(messages[0]) if messages else (),
            tuple(tools) if isinstance(tools, Sequence) else (),
            params.get("cache_control"),
        )
        self._pending[run_id] = call
        self.last_call = call

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        call = self._pending.pop(run_id, None)
        usage = _usage_of(response)
        if call is None or usage is None:
            return
        reported = int(usage.get("input_tokens") or 0)
        details = usage.get("input_token_details") or {}
        # Anthropic reports the tokens it wrote to its cache apart from those it read: either shows it caches.
        cached = sum(int(details.get(key) or 0) for key in CACHE_DETAILS)
        self.usage.saw_cache(self.model, cached)
        self.usage.observe(self.key, counted=self.counter.raw_prompt(call.messages, call.tools), reported=reported)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        # A refused call is no prompt to fold on: the provider would refuse the fold that repeats it.
        if self._pending.pop(run_id, None) is self.last_call:
            self.last_call = None


def _usage_of(response: LLMResult) -> dict[str, Any] | None:
    try:
        generation = response.generations[0][0]
    except IndexError:
        return None
    # A chat model's generation carries the message, and the message the usage; a plain LLM's has neither.
    message = generation.message if isinstance(generation, ChatGeneration) else None
    usage = getattr(message, "usage_metadata", None)
    return dict(usage) if usage else None
