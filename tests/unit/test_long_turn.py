"""A run's model calls within the model's input limit (`wiring.long_turn`): the limit from Model Input Limit or the
model's profile, a History Token Budget above it refused, and a call refused for its length retried once with less;
any other error is not retried."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langflow_summarizing_agent.engine.tokens import TokenCounter
from langflow_summarizing_agent.wiring.fields import check_model_input_limit
from langflow_summarizing_agent.wiring.long_turn import (
    PROFILE,
    LongTurnMiddleware,
    LongTurnWatch,
    check_budget,
    input_limit,
    limit_in,
)

COUNTER = TokenCounter("o200k_base")
OPENAI_REFUSAL = (
    "Error code: 400 - This model's maximum context length is {limit} tokens. However, your messages resulted in "
    "40210 tokens. Please reduce the length of the messages."
)
ANTHROPIC_REFUSAL = "Error code: 400 - prompt is too long: 40210 tokens > {limit} maximum"


def run(results: int, size: int = 3_000, history: Sequence[BaseMessage] = ()) -> list[BaseMessage]:
    messages: list[BaseMessage] = [*history, HumanMessage(content="read the pages")]
    for i in range(results):
        call = {"name": "run_python_repl", "args": {"python_code": f"print({i})"}, "id": f"call_{i}"}
        messages += [
            AIMessage(content="", tool_calls=[call]),
            ToolMessage(content="lorem " * size, tool_call_id=f"call_{i}"),
        ]
    return messages


def request(messages: list[BaseMessage]) -> ModelRequest[Any]:
    model = GenericFakeChatModel(messages=iter([]))
    return ModelRequest(model=model, messages=messages, system_message=SystemMessage(content="be brief"))  # type: ignore[arg-type]


class Provider:
    """Answers a call of at most `limit` tokens, refuses a longer one as `ChatOpenAI` does; records what it was sent."""

    def __init__(self, limit: int, refusal: str = OPENAI_REFUSAL, scale: float = 1.0) -> None:
        self.limit, self.refusal, self.scale = limit, refusal, scale
        self.sent: list[list[BaseMessage]] = []

    async def __call__(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        self.sent.append(list(request.messages))
        assert request.system_message is not None
        if COUNTER.prompt([request.system_message, *request.messages]) * self.scale > self.limit:
            raise ContextOverflowError(self.refusal.format(limit=self.limit))
        return ModelResponse(result=[AIMessage(content="answered")])


def results_sent(messages: list[BaseMessage]) -> list[str]:
    return [str(m.content)[:12] for m in messages if isinstance(m, ToolMessage)]


def test_a_call_refused_for_its_length_is_retried_once_with_every_result_but_the_newest_cleared() -> None:
    watch = LongTurnWatch()
    provider = Provider(limit=12_000)

    response = asyncio.run(LongTurnMiddleware(COUNTER, watch).awrap_model_call(request(run(6)), provider))

    assert isinstance(response, ModelResponse) and response.result[0].content == "answered"
    assert len(provider.sent) == 2
    assert [r.startswith("[run_python") for r in results_sent(provider.sent[1])] == [True] * 5 + [False]
    assert (watch.retried, watch.cleared, watch.limit, watch.source) == (1, 5, 12_000, "the provider's refusal")
    assert "retried with less" in (watch.note() or "")


def test_with_a_known_limit_the_run_is_trimmed_before_the_call_and_nothing_is_refused() -> None:
    watch = LongTurnWatch(limit=12_000, source="Model Input Limit")
    provider = Provider(limit=12_000)

    asyncio.run(LongTurnMiddleware(COUNTER, watch).awrap_model_call(request(run(6)), provider))

    assert len(provider.sent) == 1
    assert watch.retried == 0 and watch.cleared >= 4 and watch.saved_tokens > 0
    assert "of 12000 tokens (Model Input Limit)" in (watch.note() or "")


def test_a_retry_still_too_long_cuts_the_history_and_one_that_still_does_not_fit_ends_the_run_in_plain_words() -> None:
    history = [HumanMessage(content="old " * 6_000), AIMessage(content="old answer")] * 2
    cuts: list[list[BaseMessage]] = []

    async def history_cut(messages: list[BaseMessage]) -> list[BaseMessage]:
        cuts.append(messages)
        return messages[2:]

    provider = Provider(limit=2_000, refusal=ANTHROPIC_REFUSAL)
    watch = LongTurnWatch()

    response = asyncio.run(
        LongTurnMiddleware(COUNTER, watch, history_cut).awrap_model_call(request(run(2, history=history)), provider)
    )

    assert len(cuts) == 1 and len(provider.sent) == 2
    assert provider.sent[1] == cuts[0][2:]
    assert isinstance(response, AIMessage) and response.text.startswith("I could not answer")
    assert "input limit of 2000 tokens" in response.text
    assert watch.unfit


def test_an_error_other_than_the_length_is_not_retried() -> None:
    calls = []

    async def failing(request: ModelRequest[Any]) -> ModelResponse[Any]:
        calls.append(request)
        raise ValueError("invalid api key")

    with pytest.raises(ValueError, match="invalid api key"):
        asyncio.run(LongTurnMiddleware(COUNTER, LongTurnWatch()).awrap_model_call(request(run(3)), failing))
    assert len(calls) == 1


def test_the_input_limit_is_model_input_limit_else_the_models_profile() -> None:
    profiled = GenericFakeChatModel(messages=iter([]), profile={"max_input_tokens": 128_000})

    assert input_limit(32_000, profiled) == (32_000, "Model Input Limit")
    assert input_limit(0, profiled) == (128_000, PROFILE)
    assert input_limit(None, GenericFakeChatModel(messages=iter([]))) == (None, "")


def test_a_history_token_budget_above_the_input_limit_is_refused_with_both_numbers() -> None:
    with pytest.raises(ValueError, match=r"History Token Budget \(40000 tokens\) is more than .* 32000 tokens"):
        check_budget(40_000, 32_000, "Model Input Limit")
    check_budget(32_000, 32_000, "Model Input Limit")
    check_budget(40_000, None, "")


def test_the_limit_is_read_from_each_providers_refusal() -> None:
    assert limit_in(ContextOverflowError(OPENAI_REFUSAL.format(limit=32_000))) == 32_000
    assert limit_in(ContextOverflowError(ANTHROPIC_REFUSAL.format(limit=32_000))) == 32_000
    assert limit_in(ContextOverflowError("too long")) is None


def test_on_the_node_a_history_token_budget_above_model_input_limit_is_refused_naming_both_fields() -> None:
    build_config = {"model_input_limit": {"value": 0}, "history_token_budget": {"value": 40_000}}

    check_model_input_limit(build_config, "model_input_limit", 50_000)
    with pytest.raises(
        ValueError, match=r"History Token Budget \(40000 tokens\) .* 32000 tokens \(Model Input Limit\)"
    ):
        check_model_input_limit(build_config, "model_input_limit", 32_000)
    with pytest.raises(ValueError, match="Model Input Limit must be 0"):
        check_model_input_limit(build_config, "model_input_limit", -1)


def test_a_refused_call_that_this_counter_counts_under_the_limit_is_retried_with_the_history_cut() -> None:
    """The provider counts 40% more than this counter: the request fits by this count, and is refused."""
    history = [HumanMessage(content="old " * 4_400), AIMessage(content="old answer")] * 2
    cuts: list[list[BaseMessage]] = []

    async def history_cut(messages: list[BaseMessage]) -> list[BaseMessage]:
        cuts.append(messages)
        return messages[2:]

    provider = Provider(limit=12_000, scale=1.4)
    watch = LongTurnWatch(limit=12_000, source="Model Input Limit")

    response = asyncio.run(
        LongTurnMiddleware(COUNTER, watch, history_cut).awrap_model_call(request(run(0, history=history)), provider)
    )

    assert isinstance(response, ModelResponse), response
    assert len(cuts) == 1 and provider.sent[1] == cuts[0][2:]


def test_after_a_refusal_the_runs_later_calls_keep_below_what_was_refused() -> None:
    """The provider counts 65% more and names the limit the run already keeps to: the next call, under the trim
    threshold by this counter, would be refused again if the run kept that limit."""
    provider = Provider(limit=12_000, scale=1.65)
    watch = LongTurnWatch(limit=12_000, source="Model Input Limit")
    middleware = LongTurnMiddleware(COUNTER, watch)

    asyncio.run(middleware.awrap_model_call(request(run(6, size=1_200)), provider))
    asyncio.run(middleware.awrap_model_call(request(run(7, size=1_200)), provider))

    assert len(provider.sent) == 3, "refused, retried, then the next call within the lowered limit"
    assert watch.limit is not None and watch.limit < 12_000 and watch.retried == 1
