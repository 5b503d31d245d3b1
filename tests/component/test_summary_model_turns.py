"""The summary model on whole turns, on the Summarizing Agent and the Summarizing Message History: built only on a
turn that folds, never failing a turn, and a build error says what to change in the component's own fields."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from langflow_summarizing_agent.wiring import agent_turn, history_turn, summary_model
from tests.support.agent_runs import FOLD_EACH_TURN, ChatSession
from tests.support.fake_chat_model import recorder
from tests.support.flow_files import history_template, load_memory_chatbot_flow
from tests.support.history_runs import SESSION_KINDS, HistoryChatSession
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


def patch_build(monkeypatch: pytest.MonkeyPatch, build: Any) -> None:
    """`build(component)` builds the summary model where either component's turn builds it."""
    for module in (agent_turn, history_turn):
        monkeypatch.setattr(module, "summary_model_builder", lambda component: functools.partial(build, component))


@pytest.mark.parametrize("kind", SESSION_KINDS)
async def test_only_a_turn_that_folds_builds_the_summary_model_and_only_once(
    langflow_db: LangflowDatabase, monkeypatch: pytest.MonkeyPatch, kind: type[ChatSession]
) -> None:
    builds: list[Any] = []
    build = summary_model.build_summary_model

    def counted_build(component: Any) -> Any:
        builds.append(component)
        return build(component)

    patch_build(monkeypatch, counted_build)
    chat = kind(settings=FOLD_EACH_TURN)
    recorder(chat.recorder_name)

    for text in TURNS:
        folds_before, builds_before = len(chat.model.fold_calls), len(builds)
        await chat.say(text)
        folded = len(chat.model.fold_calls) > folds_before
        assert len(builds) - builds_before == (1 if folded else 0), text

    assert chat.model.fold_calls, "the session never folded, so this test showed nothing"


@pytest.mark.parametrize("kind", SESSION_KINDS)
async def test_a_summary_model_that_cannot_be_built_fails_the_fold_not_the_turn(
    langflow_db: LangflowDatabase, monkeypatch: pytest.MonkeyPatch, kind: type[ChatSession]
) -> None:
    def build_without_key(component: Any) -> Any:
        raise ValueError(NO_KEY)

    patch_build(monkeypatch, build_without_key)
    failed = await turns_whose_fold_could_not_build_its_model(kind(settings=FOLD_EACH_TURN))

    assert "OPENAI_API_KEY" in failed
    remedy = "pick another Summary Model" if kind is ChatSession else "pick a Summary Model on the node"
    assert remedy in failed
    assert "set the Summary Model API Key" in failed


async def test_the_shipped_memory_chatbots_summary_model_without_a_key_fails_the_fold_not_the_run(
    langflow_db: LangflowDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ready flow picks OpenAI's gpt-4o-mini as its Summary Model; built for real, with no key anywhere."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    picked = history_template(load_memory_chatbot_flow())["summary_model"]["value"]
    failed = await turns_whose_fold_could_not_build_its_model(
        HistoryChatSession(settings=FOLD_EACH_TURN, picked_summary_model=picked)
    )

    assert "API key is required" in failed
    assert "set the Summary Model API Key" in failed


async def turns_whose_fold_could_not_build_its_model(chat: ChatSession) -> str:
    """Every turn answers, none folds, the summary backs off; the status of the first turn whose fold failed."""
    recorder(chat.recorder_name)
    statuses = []
    for text in TURNS:
        assert (await chat.say(text)).strip() == "Noted."
        statuses.append(chat.last_status)

    assert not chat.model.fold_calls
    state = await stored_summary(flow_id=chat.flow_id, user_id=chat.user_id, session_id=chat.session_id)
    assert state is not None
    assert (state.folded_count, state.text) == (0, "")
    assert state.failed_folds >= 1
    assert state.retry_after is not None
    failed = [s for s in statuses if "summary model could not be built" in s]
    assert failed, statuses
    return failed[0]
