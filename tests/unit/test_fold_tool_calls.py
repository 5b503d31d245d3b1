"""A fold never fails on a tool call: the fold on the agent's prefix binds the agent's tools with tool calls turned
off, a tool call answered there is asked once more with the batch quoted, and the quoted prompt carries no tools."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

from langflow_summarizing_agent.engine.fold import Prefix, SaveFailures
from langflow_summarizing_agent.engine.report import problems
from langflow_summarizing_agent.engine.settings import FoldSettings
from langflow_summarizing_agent.engine.tokens import as_lc_message
from langflow_summarizing_agent.engine.turn import fold_if_due
from langflow_summarizing_agent.wiring.summary_model import summarizer_for, without_tool_calls
from tests.support.fake_chat_model import FOLD_PROMPT_START, FakeChatModel, is_prefix_fold
from tests.support.fakes import InMemoryStore, make_messages

TOOL = {"type": "function", "function": {"name": "evaluate_expression", "parameters": {"type": "object"}}}
TOOL_CALL = AIMessage(
    content="", tool_calls=[{"name": "evaluate_expression", "args": {"expression": "1+1"}, "id": "c1"}]
)
SETTINGS = FoldSettings(window=2, fold_batch=2, history_token_budget=0, pinned_keys=("project_id",))


def session() -> InMemoryStore:
    return InMemoryStore(make_messages(["Project PRJ-123.", "Noted.", "q1", "a1", "q2", "a2"]))


def prefix_of(store: InMemoryStore, model: FakeChatModel) -> Prefix:
    """The agent's last call (system prompt, the stored messages, the question) and its reply, asked with tools."""
    messages = [SystemMessage(content="You help."), *map(as_lc_message, store.messages_stored)]
    messages += [HumanMessage(content="q3"), AIMessage(content="a3")]
    return Prefix(tuple(messages), summarizer_for(lambda: model, 5, tools=[TOOL]))


async def test_a_fold_on_the_prefix_answered_with_a_tool_call_is_asked_again_with_its_batch_quoted_and_no_tools():
    store = session()
    model = FakeChatModel(fold_script=[TOOL_CALL])

    turn = await fold_if_due(
        store, summarizer_for(lambda: model, 5), SETTINGS, prefix=prefix_of(store, model), failures=SaveFailures()
    )

    assert not problems(turn)
    assert turn.fold is not None and (turn.fold.folded, turn.fold.calls, turn.fold.on_prefix) == (4, 2, 1)
    assert turn.summary.pinned == {"project_id": "PRJ-123"}
    on_prefix, quoted = model.calls
    assert is_prefix_fold(on_prefix)
    assert model.tools[0] == [TOOL] and model.tool_choices[0] == "none"
    assert str(quoted[0].content).startswith(FOLD_PROMPT_START)
    assert model.tools[1] == [] and model.tool_choices[1] is None


async def test_a_fold_on_the_prefix_that_answers_its_json_makes_one_call():
    store = session()
    model = FakeChatModel()

    turn = await fold_if_due(
        store, summarizer_for(lambda: model, 5), SETTINGS, prefix=prefix_of(store, model), failures=SaveFailures()
    )

    assert turn.fold is not None and (turn.fold.folded, turn.fold.calls, turn.fold.on_prefix) == (4, 1, 1)
    assert is_prefix_fold(model.calls[0])


async def test_a_quoted_fold_answered_with_a_tool_call_fails_cleanly_with_the_back_off():
    store = session()
    model = FakeChatModel(fold_script=[TOOL_CALL])

    turn = await fold_if_due(store, summarizer_for(lambda: model, 5), SETTINGS, failures=SaveFailures())

    assert turn.fold is not None and turn.fold.folded == 0
    assert any("tool call (evaluate_expression)" in problem for problem in problems(turn))
    assert turn.summary.retry_after is not None
    assert turn.plan.not_summarized == 0, "the messages not folded still go word for word"


class OwnAnthropic(ChatAnthropic):
    """Anthropic's client subclassed outside its package, as an application or a benchmark may."""


@pytest.mark.parametrize(
    ("model", "choice"),
    [
        pytest.param(ChatOpenAI(api_key="sk-test", model="gpt-4o-mini"), "none", id="openai"),
        # Anthropic's cache drops the message blocks when tool_choice changes: the tools go as the agent sent them.
        pytest.param(ChatAnthropic(api_key="sk-test", model="claude-haiku-4-5"), None, id="anthropic"),
        pytest.param(OwnAnthropic(api_key="sk-test", model="claude-haiku-4-5"), None, id="a subclass of anthropic's"),
    ],
)
def test_the_agents_tools_are_bound_with_tool_calls_off_where_that_keeps_the_cache(model: Any, choice: Any) -> None:
    bound = without_tool_calls(model, [TOOL])

    assert bound.kwargs.get("tool_choice") == choice  # type: ignore[attr-defined]
    assert [tool["function"]["name"] if "function" in tool else tool["name"] for tool in bound.kwargs["tools"]] == [  # type: ignore[attr-defined]
        "evaluate_expression"
    ]


def test_a_model_that_takes_no_tool_choice_gets_the_tools_alone() -> None:
    class NoChoice(FakeChatModel):
        def bind_tools(self, tools, *, tool_choice=None, **kwargs):
            if tool_choice is not None:
                raise ValueError("tool_choice is not supported")
            return super().bind_tools(tools)

    bound = without_tool_calls(NoChoice(), [TOOL])

    assert "tool_choice" not in bound.kwargs  # type: ignore[attr-defined]
    assert bound.kwargs["tools"] == [TOOL]  # type: ignore[attr-defined]
