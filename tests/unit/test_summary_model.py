"""The summary model wrapper: built the way the Agent builds its own (streaming off), a connected one used as it is,
named without being built; an answer its provider cut off at the length limit is refused."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch
from uuid import uuid4

import pytest
from langchain_core.messages import AIMessage

from langflow_summarizing_agent.components.summarizing_agent.summarizing_agent import SummarizingAgentComponent
from langflow_summarizing_agent.engine.fold_cost import ReportedAnswer
from langflow_summarizing_agent.engine.prompt import FoldAnswerCutOff, build_fold_prompt
from langflow_summarizing_agent.engine.records import Summary
from langflow_summarizing_agent.wiring import summary_model
from tests.support.fake_chat_model import FakeChatModel, fold_json
from tests.support.fakes import make_messages

OPENAI_GPT_4O = [{"name": "gpt-4o", "provider": "OpenAI", "metadata": {}}]


def test_the_summary_model_is_built_as_the_agent_builds_its_own_with_streaming_off() -> None:
    component = SummarizingAgentComponent()
    component.set_attributes(
        {
            "model": OPENAI_GPT_4O,
            "api_key": "OPENAI_API_KEY",
            "max_tokens": 321,
            "base_url_ibm_watsonx": "https://us-south.ml.cloud.ibm.com",
            "project_id": "project-1",
        }
    )
    component._user_id = str(uuid4())
    component._model_overrides = {"use_responses_api": True}
    agent_call: dict[str, Any] = {}
    summary_call: dict[str, Any] = {}

    with (
        patch("lfx.components.models_and_agents.agent.get_llm", side_effect=lambda **kw: agent_call.update(kw)),
        patch("lfx.base.models.unified_models.get_llm", side_effect=lambda **kw: summary_call.update(kw)),
    ):
        component._get_llm()
        summary_model.build_summary_model(component)

    assert agent_call["stream"] is True
    assert summary_call == {**agent_call, "stream": False}


def test_a_connected_summary_model_is_used_as_it_is() -> None:
    connected = FakeChatModel()
    component = SummarizingAgentComponent()
    component.set_attributes({"model": OPENAI_GPT_4O, "summary_model": connected})

    with patch("lfx.base.models.unified_models.get_llm", side_effect=AssertionError("built a model")):
        assert summary_model.build_summary_model(component) is connected


@pytest.mark.parametrize(
    ("inputs", "name"),
    [
        pytest.param({"model": OPENAI_GPT_4O}, "gpt-4o", id="selected-model"),
        pytest.param({"model": OPENAI_GPT_4O, "summary_model": FakeChatModel()}, "FakeChatModel", id="summary-model"),
        pytest.param({"model": FakeChatModel()}, "FakeChatModel", id="connected-model"),
        pytest.param({"model": None}, None, id="no-model"),
    ],
)
def test_the_state_names_the_summary_model_without_building_it(inputs: dict[str, Any], name: str | None) -> None:
    component = SummarizingAgentComponent()
    component.set_attributes(inputs)

    with patch("lfx.base.models.unified_models.get_llm", side_effect=AssertionError("built a model")):
        assert summary_model.summary_model_name(component) == name


def test_a_summary_model_picked_on_the_message_history_is_built_as_the_language_model_builds_it_without_streaming():
    from langflow_summarizing_agent.components.summarizing_agent.summarizing_message_history import (
        SummarizingMessageHistoryComponent,
    )

    component = SummarizingMessageHistoryComponent()
    component.set_attributes({"summary_model": OPENAI_GPT_4O, "api_key": "OPENAI_API_KEY"})
    component._user_id = str(uuid4())
    built: dict[str, Any] = {}

    with patch("lfx.base.models.unified_models.get_llm", side_effect=lambda **kw: built.update(kw)):
        summary_model.build_summary_model(component)
        name = summary_model.summary_model_name(component)

    assert (built["model"], built["api_key"], built["stream"]) == (OPENAI_GPT_4O, "OPENAI_API_KEY", False)
    assert name == "gpt-4o"


@pytest.mark.parametrize(
    "picked", [None, [], "connect_other_models"], ids=["unset", "nothing-picked", "nothing-connected"]
)
def test_a_message_history_without_a_summary_model_fails_its_fold_saying_what_to_pick(picked: Any) -> None:
    from langflow_summarizing_agent.components.summarizing_agent.summarizing_message_history import (
        SummarizingMessageHistoryComponent,
    )

    component = SummarizingMessageHistoryComponent()
    component.set_attributes({"summary_model": picked})

    with pytest.raises(ValueError, match="no Summary Model is picked; pick one on the node"):
        summary_model.build_summary_model(component)


def test_a_summary_model_picked_on_the_agent_is_built_with_its_own_key_not_the_agents() -> None:
    component = SummarizingAgentComponent()
    component.set_attributes(
        {
            "model": OPENAI_GPT_4O,
            "api_key": "the Agent's key",
            "summary_model": [{"name": "claude-haiku-4-5", "provider": "Anthropic"}],
            "summary_model_api_key": "the Summary Model's key",
        }
    )
    component._user_id = str(uuid4())
    built: dict[str, Any] = {}

    with patch("lfx.base.models.unified_models.get_llm", side_effect=lambda **kw: built.update(kw)):
        summary_model.build_summary_model(component)

    assert built["model"] == [{"name": "claude-haiku-4-5", "provider": "Anthropic"}]
    assert (built["api_key"], built["stream"]) == ("the Summary Model's key", False)
    assert summary_model.summary_model_name(component) == "claude-haiku-4-5"


@pytest.mark.parametrize("picked", [None, []], ids=["unset", "nothing-picked"])
def test_an_agent_with_no_summary_model_picked_folds_with_its_own_model(picked: Any) -> None:
    component = SummarizingAgentComponent()
    component.set_attributes({"model": OPENAI_GPT_4O, "api_key": "the Agent's key", "summary_model": picked})
    component._user_id = str(uuid4())
    built: dict[str, Any] = {}

    with patch("lfx.base.models.unified_models.get_llm", side_effect=lambda **kw: built.update(kw)):
        summary_model.build_summary_model(component)

    assert (built["model"][0]["name"], built["api_key"]) == ("gpt-4o", "the Agent's key")
    assert summary_model.summary_model_name(component) == "gpt-4o"


async def test_an_empty_summary_model_stays_empty_when_the_agent_is_edited(monkeypatch: pytest.MonkeyPatch) -> None:
    """Langflow fills an empty model picker with the first option on any edit; the Agent's Summary Model stays empty,
    so the Agent's own model keeps folding."""
    from lfx.base.models import unified_models

    options = [
        {"name": "gpt-4o-mini", "provider": "OpenAI", "icon": "OpenAI", "metadata": {}},
        {"name": "gpt-4o", "provider": "OpenAI", "icon": "OpenAI", "metadata": {}},
    ]
    monkeypatch.setattr(unified_models, "get_language_model_options", lambda **_: options)
    component = SummarizingAgentComponent()
    component._user_id = str(uuid4())
    template = component.to_frontend_node()["data"]["node"]["template"]

    updated = await component.update_build_config(template, 4, "fold_batch")

    assert not updated["summary_model"]["value"]
    assert updated["summary_model"]["options"] == options
    # The canvas sends the template with the pick in it.
    updated["summary_model"]["value"] = options[1:]
    picked = await component.update_build_config(updated, options[1:], "summary_model")
    assert picked["summary_model"]["value"] == options[1:]
    # The Agent's own model (Langflow's default pick for its picker) picked as Summary Model: none picked.
    assert [m["name"] for m in picked["model"]["value"]] == ["gpt-4o-mini"]
    picked["summary_model"]["value"] = options[:1]
    again = await component.update_build_config(picked, options[:1], "summary_model")
    assert not again["summary_model"]["value"]


WHOLE_ANSWER = fold_json({"project_id": "PRJ-7"}, "- the user works on PRJ-7")
"""A fold answer that parses: only the provider's word can say it stopped at the length limit."""


async def summarized(response_metadata: dict[str, Any]) -> str:
    """The summarizer's text for `WHOLE_ANSWER` answered with `response_metadata`."""
    model = FakeChatModel(fold_script=[AIMessage(content=WHOLE_ANSWER, response_metadata=response_metadata)])
    prompt = build_fold_prompt(
        Summary(),
        make_messages(["I work on PRJ-7."]),
        pinned_keys=("project_id",),
        summary_words=50,
        max_message_chars=99,
    )
    return await summary_model.summarizer_for(lambda: model, 5)(prompt)


@pytest.mark.parametrize(
    ("response_metadata", "reason"),
    [
        pytest.param({"finish_reason": "length"}, 'finish_reason "length"', id="openai"),
        pytest.param({"stop_reason": "max_tokens"}, 'stop_reason "max_tokens"', id="anthropic"),
        pytest.param({"finish_reason": "MAX_TOKENS"}, 'finish_reason "MAX_TOKENS"', id="google"),
        pytest.param({"stopReason": "max_tokens"}, 'stopReason "max_tokens"', id="bedrock-converse"),
        pytest.param(
            {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}},
            'incomplete_details.reason "max_output_tokens"',
            id="openai-responses",
        ),
    ],
)
async def test_an_answer_its_provider_cut_off_at_the_length_limit_fails_the_fold_saying_what_to_change(
    response_metadata: dict[str, Any], reason: str
) -> None:
    expected = f"answer was cut off at its length limit ({reason}); lower Summary Word Budget, or raise Max Tokens"
    with pytest.raises(FoldAnswerCutOff) as refused:
        await summarized(response_metadata)
    assert expected in str(refused.value)


@pytest.mark.parametrize(
    "response_metadata",
    [{"finish_reason": "stop"}, {"stop_reason": "end_turn"}, {"finish_reason": "STOP"}, {}],
    ids=["openai", "anthropic", "google", "none"],
)
async def test_an_answer_that_ended_on_its_own_is_the_summary(response_metadata: dict[str, Any]) -> None:
    assert await summarized(response_metadata) == WHOLE_ANSWER


GPT_5_4 = [{"name": "gpt-5.4", "provider": "OpenAI", "icon": "OpenAI", "metadata": {}}]


@pytest.mark.parametrize(
    ("picked", "agents_model", "none"),
    [
        pytest.param(GPT_5_4, [{**GPT_5_4[0], "metadata": {"tool_calling": True}}], True, id="the-agents-own"),
        pytest.param(GPT_5_4, [{**GPT_5_4[0], "name": "gpt-5.4-mini"}], False, id="another-model"),
        pytest.param(GPT_5_4, [{**GPT_5_4[0], "provider": "OpenRouter"}], False, id="another-provider"),
        pytest.param(GPT_5_4, "connect_other_models", False, id="the-agents-model-connected"),
        pytest.param([], [], False, id="none-picked-nor-any-agent-model"),
    ],
)
def test_picking_the_agents_own_model_as_summary_model_is_none_picked(picked, agents_model, none: bool) -> None:
    assert summary_model.picks_the_agents_own_model(picked, agents_model) is none


def test_an_answer_carries_the_usage_its_provider_reported_with_the_cached_share() -> None:
    usage = {
        "input_tokens": 900,
        "output_tokens": 40,
        "total_tokens": 940,
        "input_token_details": {"cache_read": 768},
    }

    answer = summary_model.reported("- a summary", AIMessage(content="- a summary", usage_metadata=usage))
    bare = summary_model.reported("- a summary", AIMessage(content="- a summary"))

    assert answer == "- a summary"
    assert isinstance(answer, ReportedAnswer)
    assert (answer.input_tokens, answer.output_tokens, answer.cached_tokens) == (900, 40, 768)
    assert not isinstance(bare, ReportedAnswer)
