"""What the provider reports for the agent's calls corrects the session's token count, and says whether it caches."""

from __future__ import annotations

import uuid

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, LLMResult

from langflow_summarizing_agent.engine.tokens import counter_for
from langflow_summarizing_agent.wiring.usage import SessionUsage, UsageObserver

PROMPT = [SystemMessage(content="You are a support agent."), HumanMessage(content="我们的集群在欧洲区域。")]
TOOLS = [{"type": "function", "function": {"name": "evaluate_expression", "parameters": {"type": "object"}}}]


def answer(input_tokens: int, cached: int = 0) -> LLMResult:
    usage = {
        "input_tokens": input_tokens,
        "output_tokens": 5,
        "total_tokens": input_tokens + 5,
        "input_token_details": {"cache_read": cached},
    }
    return LLMResult(generations=[[ChatGeneration(message=AIMessage(content="ok", usage_metadata=usage))]])


def call(observer: UsageObserver, reported: int, cached: int = 0) -> None:
    run_id = uuid.uuid4()
    observer.on_chat_model_start({}, [PROMPT], run_id=run_id, invocation_params={"tools": TOOLS})
    observer.on_llm_end(answer(reported, cached), run_id=run_id)


def test_the_reported_input_over_the_count_of_the_same_call_is_the_sessions_scale():
    usage = SessionUsage()
    counter = counter_for("claude-sonnet-4-5")
    counted = counter.raw_prompt(PROMPT, TOOLS)
    observer = UsageObserver(("flow", "owner", "session", ""), counter, "claude-sonnet-4-5", usage)

    call(observer, round(counted * 1.3))
    call(observer, round(counted * 1.1))

    assert abs(usage.scale(observer.key) - 1.2) < 0.01, "a running mean of the calls seen"
    assert usage.scale(("flow", "owner", "another session", "")) == 1.0, "per session"
    assert observer.last_call is not None and list(observer.last_call.messages) == PROMPT
    assert list(observer.last_call.tools) == TOOLS


def test_a_report_far_from_the_count_is_no_tokenizer_difference_and_is_ignored():
    usage = SessionUsage()
    counter = counter_for("gpt-4o-mini")
    observer = UsageObserver("key", counter, "gpt-4o-mini", usage)
    call(observer, counter.raw_prompt(PROMPT, TOOLS) * 10)
    call(observer, 0)
    assert usage.scale("key") == 1.0


def test_caching_applies_once_the_provider_reports_cached_tokens_or_by_provider():
    usage = SessionUsage()
    observer = UsageObserver("key", counter_for("llama3"), "llama3", usage)
    assert not usage.caches("llama3", "Ollama")
    assert usage.caches("gpt-4o-mini", "OpenAI")
    assert usage.caches("claude-sonnet-4-5", "Anthropic"), "at the cache_control breakpoints the agent sets"
    call(observer, 100, cached=0)
    assert not usage.caches("llama3", "Ollama")
    call(observer, 100, cached=64)
    assert usage.caches("llama3", "Ollama")


def test_the_scale_corrects_what_the_plan_counts():
    counter = counter_for("claude-sonnet-4-5")
    assert counter.scaled(1.2).text("hello " * 100) == -(-counter.text("hello " * 100) * 12 // 10)


def test_a_call_refused_by_the_provider_is_no_prompt_for_the_fold_after_the_reply():
    observer = UsageObserver(
        ("flow", "owner", "session", ""), counter_for("gpt-4o-mini"), "gpt-4o-mini", SessionUsage()
    )
    call(observer, 100)
    answered = observer.last_call
    run_id = uuid.uuid4()

    observer.on_chat_model_start({}, [[*PROMPT, HumanMessage(content="long")]], run_id=run_id)
    observer.on_llm_error(ValueError("prompt is too long"), run_id=run_id)

    assert answered is not None and observer.last_call is None
