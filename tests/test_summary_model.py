"""The summary model: built only on a turn that folds, the way the Agent builds its own, never failing a turn."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch
from uuid import uuid4

import pytest

from langflow_summarizing_agent import agent_memory
from langflow_summarizing_agent.components.summarizing_agent.summarizing_agent import SummarizingAgentComponent
from tests.support.agent_runs import FOLD_EACH_TURN, ChatSession
from tests.support.langflow_db import LangflowDatabase, stored_state
from tests.support.fake_chat_model import FakeChatModel, recorder

TURNS = [
    "I'm working on project PRJ-123 on the EU cluster.",
    "The deploy fails with error E001.",
    "It still fails after a restart.",
    "Any other idea?",
    "What about the logs?",
]
OPENAI_GPT_4O = [{"name": "gpt-4o", "provider": "OpenAI", "metadata": {}}]
NO_KEY = (
    "OpenAI API key is required when using OpenAI provider. "
    "Please provide it in the component or configure it globally as OPENAI_API_KEY."
)


async def test_only_a_turn_that_folds_builds_the_summary_model_and_only_once(
    langflow_db: LangflowDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds: list[Any] = []
    build = agent_memory.build_summary_model

    def counted_build(component: Any) -> Any:
        builds.append(component)
        return build(component)

    monkeypatch.setattr(agent_memory, "build_summary_model", counted_build)
    chat = ChatSession(settings=FOLD_EACH_TURN)
    recorder(chat.recorder_name)

    for text in TURNS:
        folds_before, builds_before = len(chat.model.fold_calls), len(builds)
        await chat.say(text)
        folded = len(chat.model.fold_calls) > folds_before
        assert len(builds) - builds_before == (1 if folded else 0), text

    assert chat.model.fold_calls, "the session never folded, so this test showed nothing"


async def test_a_summary_model_that_cannot_be_built_fails_the_fold_not_the_turn(
    langflow_db: LangflowDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    def build_without_key(component: Any) -> Any:
        raise ValueError(NO_KEY)

    monkeypatch.setattr(agent_memory, "build_summary_model", build_without_key)
    chat = ChatSession(settings=FOLD_EACH_TURN)
    recorder(chat.recorder_name)

    statuses = []
    for text in TURNS:
        assert (await chat.say(text)).strip() == "Noted."
        statuses.append(str(chat.last_agent.status))

    assert not chat.model.fold_calls
    state = await stored_state(flow_id=chat.flow_id, user_id=chat.user_id, session_id=chat.session_id)
    assert state is not None
    assert (state.folded_count, state.summary) == (0, "")
    assert state.failed_folds >= 1
    assert state.retry_after is not None
    failed = [s for s in statuses if "summary model could not be built" in s]
    assert failed, statuses
    assert "OPENAI_API_KEY" in failed[0]
    assert "connect a Summary Model" in failed[0]


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
        agent_memory.build_summary_model(component)

    assert agent_call["stream"] is True
    assert summary_call == {**agent_call, "stream": False}


def test_a_connected_summary_model_is_used_as_it_is() -> None:
    connected = FakeChatModel()
    component = SummarizingAgentComponent()
    component.set_attributes({"model": OPENAI_GPT_4O, "summary_model": connected})

    with patch("lfx.base.models.unified_models.get_llm", side_effect=AssertionError("built a model")):
        assert agent_memory.build_summary_model(component) is connected


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
        assert agent_memory.summary_model_name(component) == name
