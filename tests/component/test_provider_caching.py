"""The provider's prompt cache through the real clients: `ChatAnthropic` and `ChatOpenAI` in whole lfx turns, sending
over HTTP to the loopback provider servers (`tests.support.provider_servers`), which answer the usage each provider's
cache rule gives. What the provider receives: the breakpoints, the tools, the fold's prefix byte for byte; and what
the agent makes of the usage it reports.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_openai import ChatOpenAI
from lfx.components.input_output import ChatInput, ChatOutput
from lfx.custom.custom_component.component import Component
from lfx.field_typing import LanguageModel
from lfx.graph import Graph
from lfx.io import Output

from langflow_summarizing_agent.components.summarizing_agent.summarizing_agent import SummarizingAgentComponent
from langflow_summarizing_agent.wiring import runtime
from langflow_summarizing_agent.wiring.after_reply import AfterReply
from langflow_summarizing_agent.wiring.prompt_cache import CACHE_CONTROL
from tests.support.prompt_caches import anthropic_blocks, openai_blocks, openai_cacheable
from tests.support.provider_servers import COUNTER, FOLD_OPENING, Providers, Recorded, running_providers
from tests.support.runtimes import folding_after_replies

pytestmark = pytest.mark.parametrize("langflow_db", ["sqlite"], indirect=True)

SYSTEM_PROMPT = "You are the support agent of a hosting company. Answer briefly and precisely. " * 90
"""Over 1,024 tokens, the least prefix either provider caches."""
FOLDING = {"summarize_older_messages": True, "n_messages": 3, "fold_batch": 2, "history_token_budget": 0}
TURNS = ("My project is PRJ-7.", "please calculate the monthly cost", "And the yearly one?", "Thanks, one more.")


@pytest.fixture(scope="module")
def providers() -> Iterator[Providers]:
    with running_providers() as running:
        yield running


@pytest.fixture
def folds() -> Iterator[AfterReply]:
    with folding_after_replies() as timing:
        yield timing


class ClientModelComponent(Component):
    """Hands its `chat_model`, set after construction, to the Agent's model input."""

    display_name = "Client Model"
    outputs = [Output(display_name="Language Model", name="model_output", method="build_model")]  # noqa: RUF012
    chat_model: Any = None

    def build_model(self) -> LanguageModel:
        return self.chat_model


def anthropic(providers: Providers) -> ChatAnthropic:
    return ChatAnthropic(
        model="claude-sonnet-4-5", api_key="any", base_url=providers.anthropic_base_url, streaming=True
    )


def openai(providers: Providers) -> ChatOpenAI:
    # As Langflow's model picker builds it: streaming with the usage chunk, which a custom base URL does not get alone.
    url = providers.openai_base_url
    return ChatOpenAI(model="gpt-4o-mini", api_key="any", base_url=url, streaming=True, stream_usage=True)


async def chat(model: Any, folds: AfterReply, settings: dict[str, Any], turns: tuple[str, ...] = TURNS) -> None:
    """`turns` in one fresh session of the Summarizing Agent on `model`, each fold after the reply awaited."""
    flow_id, user_id, session_id = str(uuid.uuid4()), str(uuid.uuid4()), f"cache-{uuid.uuid4().hex[:8]}"
    for text in turns:
        chat_input = ChatInput(_id="chat_input")
        chat_input.set(input_value=text)
        client = ClientModelComponent(_id="model")
        client.chat_model = model
        agent = SummarizingAgentComponent(_id="agent")
        agent.set(
            model=client.build_model, input_value=chat_input.message_response, system_prompt=SYSTEM_PROMPT, **settings
        )
        agent.set(add_current_date_tool=False, add_calculator_tool=True)
        chat_output = ChatOutput(_id="chat_output")
        chat_output.set(input_value=agent.message_response)
        graph = Graph(chat_input, chat_output, flow_id=flow_id, user_id=user_id)
        graph.session_id = session_id
        await asyncio.wait_for(asyncio.create_task(_run(graph)), timeout=60)
        await asyncio.sleep(0)
        await folds.wait_all()


async def _run(graph: Graph) -> None:
    async for _ in graph.async_start():
        pass


def fold_and_its_agent_call(requests: list[Recorded]) -> tuple[Recorded, Recorded]:
    """The first fold on the agent's prefix and the agent call just before it."""
    at = next(i for i, r in enumerate(requests) if r.is_fold and "tools" in r.body)
    return requests[at], requests[at - 1]


def breakpoints(body: dict[str, Any]) -> list[int]:
    return anthropic_blocks(body, COUNTER.text)[1]


def total(body: dict[str, Any]) -> int:
    return sum(tokens for _, tokens in anthropic_blocks(body, COUNTER.text)[0])


async def test_anthropic_agent_calls_carry_breakpoints_on_the_system_prompt_the_tools_and_the_newest_message(
    langflow_db: Any, providers: Providers, folds: AfterReply
) -> None:
    start = len(providers.requests)
    await chat(anthropic(providers), folds, FOLDING)

    agent_calls = [r for r in providers.requests[start:] if not r.is_fold]
    assert len(agent_calls) >= len(TURNS) + 1, "the calculator turn makes two agent calls"
    for call in agent_calls:
        assert call.body["cache_control"] == CACHE_CONTROL
        assert call.body["system"][-1]["cache_control"] == CACHE_CONTROL
        assert call.body["tools"][-1]["cache_control"] == CACHE_CONTROL
        assert [t.get("cache_control") for t in call.body["tools"][:-1]] == [None] * (len(call.body["tools"]) - 1)
    # Between folds each agent call reads everything the call before it sent, and is billed as written only what
    # is new; the first call of the session writes its whole prompt.
    first, second = agent_calls[0], agent_calls[1]
    assert (first.usage["cache_read_input_tokens"], first.usage["cache_creation_input_tokens"]) == (
        0,
        total(first.body),
    )
    assert second.usage["cache_read_input_tokens"] == total(first.body)
    assert second.usage["input_tokens"] == 0


async def test_anthropic_fold_after_the_reply_sends_the_agents_prompt_as_it_was_and_reads_it_from_the_cache(
    langflow_db: Any, providers: Providers, folds: AfterReply
) -> None:
    start = len(providers.requests)
    await chat(anthropic(providers), folds, FOLDING)

    fold, agent_call = fold_and_its_agent_call(providers.requests[start:])
    sent = agent_call.body["messages"]
    assert fold.body["tools"] == agent_call.body["tools"]
    assert fold.body["system"] == agent_call.body["system"]
    assert fold.body["messages"][: len(sent)] == sent
    reply, instruction = fold.body["messages"][len(sent) :]
    assert reply["role"] == "assistant"
    assert instruction["content"].startswith(FOLD_OPENING)
    assert "tool_choice" not in fold.body, "a changed tool_choice makes Anthropic miss every message breakpoint"
    assert fold.body["cache_control"] == CACHE_CONTROL
    # The whole agent's prompt is read; the reply and the fold instruction are written.
    assert fold.usage["cache_read_input_tokens"] == total(agent_call.body)
    assert fold.usage["cache_creation_input_tokens"] == total(fold.body) - total(agent_call.body)
    assert fold.usage["input_tokens"] == 0


async def test_anthropic_cache_reports_make_the_session_a_caching_one_and_scale_its_tokens(
    langflow_db: Any, providers: Providers, folds: AfterReply
) -> None:
    model = anthropic(providers)
    usage = runtime.current().usage
    assert not usage.caches(model.model, None)

    await chat(model, folds, FOLDING, TURNS[:1])

    # Anthropic reports the first call's prompt as written to its cache, not read: that shows it caches.
    assert usage.caches(model.model, None)
    assert len(usage._scales) == 1
    [(scale, _)] = usage._scales.values()
    assert scale != 1.0, "the reported tokens (written, read and not cached) reach the token scale"


async def test_switched_off_the_anthropic_agent_sets_no_breakpoint(
    langflow_db: Any, providers: Providers, folds: AfterReply
) -> None:
    start = len(providers.requests)
    await chat(anthropic(providers), folds, {"summarize_older_messages": False, "n_messages": 3}, TURNS[:2])

    for call in providers.requests[start:]:
        assert breakpoints(call.body) == []
        assert "cache_control" not in call.body


async def test_openai_fold_after_the_reply_sends_the_agents_prompt_as_it_was_and_it_is_cached(
    langflow_db: Any, providers: Providers, folds: AfterReply
) -> None:
    start = len(providers.requests)
    await chat(openai(providers), folds, FOLDING)

    fold, agent_call = fold_and_its_agent_call(providers.requests[start:])
    sent = agent_call.body["messages"]
    assert fold.body["tools"] == agent_call.body["tools"]
    assert fold.body["messages"][: len(sent)] == sent
    assert fold.body["messages"][-1]["content"].startswith(FOLD_OPENING)
    prefix = sum(tokens for _, tokens in openai_blocks(agent_call.body, COUNTER.text))
    assert fold.usage["prompt_tokens_details"]["cached_tokens"] == openai_cacheable(prefix)
    assert agent_call.body["stream"] and agent_call.body["stream_options"] == {"include_usage": True}
    assert "cache_control" not in str(agent_call.body)
