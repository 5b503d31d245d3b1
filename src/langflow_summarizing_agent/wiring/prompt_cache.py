"""Anthropic's prompt cache, asked for: breakpoints on the Summarizing Agent's calls and on its folds after the reply.

Anthropic caches a prompt only up to a `cache_control` breakpoint, and reads at a breakpoint the longest prefix an
earlier call wrote at most 20 blocks before it. With the switch on and an Anthropic model (`ChatAnthropic`), the
agent's calls carry LangChain's `AnthropicPromptCachingMiddleware`: breakpoints on the system prompt, the last tool,
and (a top-level `cache_control`) the newest message. Between folds each call repeats the previous one and adds at its
end, so it reads the system prompt, the tools, the summary message and the history sent before, and writes only what
is new. A fold changes the summary message, so the next call reads the system prompt and the tools only.

The catch-up after the reply is not an agent call: it asks the agent's model on the agent's last prompt, which holds the
system prompt's and the last tool's breakpoints as sent, and `on_the_agents_prefix` adds the top-level `cache_control`,
so the fold reads that whole prompt and writes only the reply and the fold instruction.

Other providers that Langflow's model picker offers cache without being asked (OpenAI, Azure OpenAI, Google's Gemini
2.5, Groq, DeepSeek through OpenRouter) or not at all (Ollama, watsonx); OpenRouter's Claude models would need
breakpoints inside OpenAI-format messages, which `ChatOpenAI` does not know to be Anthropic's.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseLanguageModel

CACHE_CONTROL = {"type": "ephemeral", "ttl": "5m"}
"""The breakpoints' kind: Anthropic's five-minute cache, whose writes cost 1.25 times an input token."""


def _chat_anthropic() -> type | None:
    try:
        from langchain_anthropic import ChatAnthropic
    except ImportError:
        return None
    return ChatAnthropic


def is_anthropic(model: object) -> bool:
    anthropic = _chat_anthropic()
    return anthropic is not None and isinstance(model, anthropic)


def agent_middleware(model: object) -> list[Any]:
    """The middleware that sets the agent's breakpoints when `model` is Anthropic's; none otherwise."""
    if not is_anthropic(model):
        return []
    from langchain_anthropic.middleware import AnthropicPromptCachingMiddleware

    return [AnthropicPromptCachingMiddleware(ttl=CACHE_CONTROL["ttl"], unsupported_model_behavior="ignore")]  # type: ignore[arg-type]


def on_the_agents_prefix(model: BaseLanguageModel, cache_control: object) -> BaseLanguageModel:
    """`model` for the fold on the agent's prefix: an Anthropic model sends the `cache_control` the agent's call
    carried (None: the agent set no breakpoints) on every call; any other model is returned as it is."""
    if cache_control is None or not is_anthropic(model):
        return model
    kwargs = {**getattr(model, "model_kwargs", {}), "cache_control": cache_control}
    return model.model_copy(update={"model_kwargs": kwargs})
