"""The summary model on whole turns: built only on a turn that folds, never failing a turn."""

from __future__ import annotations

from typing import Any

import pytest

from langflow_summarizing_agent.wiring import agent_turn
from tests.support.agent_runs import FOLD_EACH_TURN, ChatSession
from tests.support.fake_chat_model import recorder
from tests.support.langflow_db import LangflowDatabase, stored_summary

TURNS = [
    "I'm working on project PRJ-123 on the EU cluster.",
    "The deploy fails with error E001.",
    "It still fails after a restart.",
    "Any other idea?",
    "What about the logs?",
]
NO_KEY = (
    "OpenAI API key is required when using OpenAI provider. "
    "Please provide it in the component or configure it globally as OPENAI_API_KEY."
)


async def test_only_a_turn_that_folds_builds_the_summary_model_and_only_once(
    langflow_db: LangflowDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds: list[Any] = []
    build = agent_turn.build_summary_model

    def counted_build(component: Any) -> Any:
        builds.append(component)
        return build(component)

    monkeypatch.setattr(agent_turn, "build_summary_model", counted_build)
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

    monkeypatch.setattr(agent_turn, "build_summary_model", build_without_key)
    chat = ChatSession(settings=FOLD_EACH_TURN)
    recorder(chat.recorder_name)

    statuses = []
    for text in TURNS:
        assert (await chat.say(text)).strip() == "Noted."
        statuses.append(str(chat.last_agent.status))

    assert not chat.model.fold_calls
    state = await stored_summary(flow_id=chat.flow_id, user_id=chat.user_id, session_id=chat.session_id)
    assert state is not None
    assert (state.folded_count, state.text) == (0, "")
    assert state.failed_folds >= 1
    assert state.retry_after is not None
    failed = [s for s in statuses if "summary model could not be built" in s]
    assert failed, statuses
    assert "OPENAI_API_KEY" in failed[0]
    assert "connect a Summary Model" in failed[0]
