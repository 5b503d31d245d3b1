"""The Summarizing Message History in real graph runs on Langflow's database (SQLite and Postgres): a flow that builds
its own prompt (Chat Input -> Prompt with {memory} -> Language Model -> Chat Output), with a recording model."""

from __future__ import annotations

from uuid import uuid4

import pytest
from lfx.components.models_and_agents.memory import MemoryComponent

from langflow_summarizing_agent.components.summarizing_agent.summarizing_message_history import (
    SummarizingMessageHistoryComponent,
)
from langflow_summarizing_agent.engine.prompt import SUMMARY_PREFIX
from langflow_summarizing_agent.wiring.history_turn import ALL_SENDERS
from tests.support.agent_runs import FOLD_EACH_TURN, ChatSession, state_of
from tests.support.history_runs import HistoryChatSession

FIRST = "I'm working on project PRJ-123 on the EU cluster."
TURNS = [
    FIRST,
    "The deploy fails with error E001.",
    "It still fails after a restart.",
    "The logs show a timeout on the database.",
    "Which cluster were we on again?",
]


async def hold(chat: ChatSession, turns: list[str] = TURNS) -> None:
    for text in turns:
        await chat.say(text)


async def test_switch_off_retrieves_exactly_what_the_stock_message_history_retrieves(langflow_db):
    stock = HistoryChatSession(history_class=MemoryComponent, settings={"n_messages": 4})
    ours = HistoryChatSession(settings={"n_messages": 4, "summarize_older_messages": False})
    for chat in (stock, ours):
        await hold(chat)

    assert [c[-1].content for c in ours.model.agent_calls] == [c[-1].content for c in stock.model.agent_calls]
    assert not ours.model.fold_calls


async def test_the_prompt_holds_the_summary_first_then_the_stock_window_formatted_by_the_template(langflow_db):
    stock = HistoryChatSession(history_class=MemoryComponent, settings={"n_messages": 3})
    ours = HistoryChatSession(settings=FOLD_EACH_TURN)
    for chat in (stock, ours):
        await hold(chat)

    assert ours.memory.startswith(SUMMARY_PREFIX)
    assert "project_id: PRJ-123" in ours.memory
    assert "cluster: EU cluster" in ours.memory
    assert stock.memory == "[User] The logs show a timeout on the database.\n[AI] Noted.\n[User] " + TURNS[-1]
    assert ours.memory.endswith("\n" + stock.memory), "the window is the stock one, formatted by the Template"
    assert FIRST not in ours.memory, "the first message reaches the model through the summary only"
    assert ours.model.fold_calls, "the summary model is the one connected to it"
    assert (await state_of(ours)).pinned == {"project_id": "PRJ-123", "cluster": "EU cluster"}


async def test_the_table_output_starts_with_the_summary_row(langflow_db):
    chat = HistoryChatSession(settings=FOLD_EACH_TURN)
    await hold(chat)

    rows = (await chat.last_agent.retrieve_messages_dataframe()).to_dict("records")
    assert rows[0]["text"].startswith(SUMMARY_PREFIX)
    assert [row["text"] for row in rows[1:]] == [TURNS[-2], "Noted.", TURNS[-1]]


async def test_descending_order_keeps_the_summary_first_and_reverses_the_window(langflow_db):
    chat = HistoryChatSession(settings={**FOLD_EACH_TURN, "order": "Descending"})
    await hold(chat)

    assert chat.memory.startswith(SUMMARY_PREFIX)
    assert chat.memory.endswith(f"\n[User] {TURNS[-1]}\n[AI] Noted.\n[User] {TURNS[-2]}")


@pytest.mark.parametrize(
    ("settings", "field"),
    [({"sender_type": "User"}, "Sender Type"), ({"sender_name": "AI"}, "Sender Name")],
)
async def test_a_sender_filter_is_refused_with_what_to_change(langflow_db, settings, field):
    with pytest.raises(Exception, match=field) as refused:
        await HistoryChatSession(settings={**FOLD_EACH_TURN, **settings}).say(FIRST)
    assert "turn Summarize Older Messages off to filter by sender" in str(refused.value)

    await HistoryChatSession(settings={**FOLD_EACH_TURN, **settings, "summarize_older_messages": False}).say(FIRST)


def test_external_memory_is_refused_with_what_to_change():
    from langflow_summarizing_agent.wiring.history_turn import refusal

    problem = refusal({"memory": object(), "sender_type": "Machine and User"})
    assert problem is not None
    assert "disconnect External Memory" in problem
    assert refusal({"memory": None, "sender_type": "Machine and User", "sender_name": ""}) is None


async def test_an_agent_and_a_message_history_in_one_session_share_its_summary(langflow_db):
    agent = ChatSession(settings=FOLD_EACH_TURN)
    await hold(agent, TURNS[:3])
    by_agent = await state_of(agent)
    history = HistoryChatSession(
        settings=FOLD_EACH_TURN, flow_id=agent.flow_id, user_id=agent.user_id, session_id=agent.session_id
    )
    await history.say("Remind me of the project.")

    assert history.memory.startswith(SUMMARY_PREFIX)
    assert "project_id: PRJ-123" in history.memory
    by_history = await state_of(agent)
    assert by_history.row_id == by_agent.row_id, "one summary row per session"
    assert by_history.version > by_agent.version, "the history folded on from the Agent's summary"
    await agent.say("And the cluster?")
    shared = await state_of(agent)
    assert shared.row_id == by_agent.row_id
    assert shared.version > by_history.version, "the Agent folded on from the history's summary"
    assert shared.folded_count == by_history.folded_count + 2


def test_store_mode_is_the_stock_one():
    assert SummarizingMessageHistoryComponent.store_message is MemoryComponent.store_message
    assert SummarizingMessageHistoryComponent.mode_config["Store"] == MemoryComponent.mode_config["Store"]


def test_the_switch_pinned_keys_and_summary_model_are_on_the_node_and_the_fold_settings_in_the_parameters_panel():
    inputs = {i.name: i for i in SummarizingMessageHistoryComponent.inputs}
    for name in ("summarize_older_messages", "pinned_keys", "summary_model"):
        assert not inputs[name].advanced, name
    assert inputs["summarize_older_messages"].value is True
    for name in ("fold_batch", "summary_words", "history_token_budget", "max_folds_per_turn", "summary_timeout"):
        assert inputs[name].advanced, name
    assert [i.name for i in MemoryComponent.inputs] == [i.name for i in SummarizingMessageHistoryComponent.inputs][
        : len(MemoryComponent.inputs)
    ], "the stock inputs come first, unchanged in name"


def _build_config() -> dict:
    component = SummarizingMessageHistoryComponent()
    return {
        name: dict(field)
        for name, field in component.to_frontend_node()["data"]["node"]["template"].items()
        if isinstance(field, dict)
    }


@pytest.mark.parametrize(("field", "value", "kept"), [("fold_batch", 0, 1), ("n_messages", -1, 0)])
def test_a_refused_number_edited_on_the_node_is_kept_at_the_nearest_accepted_value(field, value, kept):
    component = SummarizingMessageHistoryComponent()
    assert component.update_build_config(_build_config(), value, field)[field]["value"] == kept


def test_a_value_that_is_no_number_is_refused_when_edited_naming_the_field_as_the_history_shows_it():
    component = SummarizingMessageHistoryComponent()
    with pytest.raises(ValueError, match="Number of Messages must be a whole number"):
        component.update_build_config(_build_config(), "ten", "n_messages")


def test_with_the_switch_on_retrieve_filters_no_sender_and_hides_the_filter():
    component = SummarizingMessageHistoryComponent()
    config = _build_config()
    config["sender_type"]["value"], config["sender_name"]["value"] = "User", "AI"

    on = component.update_build_config(config, True, "summarize_older_messages")

    assert (on["sender_type"]["value"], on["sender_name"]["value"]) == (ALL_SENDERS, "")
    assert not on["sender_type"]["show"]
    off = component.update_build_config(on, False, "summarize_older_messages")
    assert off["sender_type"]["show"]


async def test_a_number_of_messages_of_minus_one_runs_as_memory_off(langflow_db):
    chat = HistoryChatSession(settings={**FOLD_EACH_TURN, "n_messages": -1})
    await hold(chat)

    assert chat.memory == "", "no summary and no window: memory off"
    assert not chat.model.fold_calls


def test_switching_off_hides_the_fold_settings_and_allows_a_sender_filter():
    component = SummarizingMessageHistoryComponent()
    config = component.update_build_config(_build_config(), False, "summarize_older_messages")
    assert not config["fold_batch"]["show"]
    assert not config["pinned_keys"]["show"]
    config["summarize_older_messages"]["value"] = False
    component.update_build_config(config, "User", "sender_type")


async def test_the_status_names_the_message_history_and_counts_with_the_summary_models_tokenizer(langflow_db):
    from langflow_summarizing_agent.wiring.runner import turn_of

    chat = HistoryChatSession(settings=FOLD_EACH_TURN)
    await hold(chat)

    kept = turn_of(chat.last_agent)
    assert kept is not None and kept.turn is not None
    assert kept.report.startswith("Summarizing Message History. The model got: ")
    assert kept.turn.counter.name == "o200k_base", "a model tiktoken does not know is counted in o200k_base"
    assert f"~{kept.turn.plan.history_tokens:,} tokens (counted in o200k_base)" in kept.report


async def test_with_no_summary_model_and_no_model_picked_after_it_it_retrieves_as_the_stock_one_and_says_to_pick_one(
    langflow_db,
):
    from langflow_summarizing_agent.wiring.history_turn import NO_SUMMARY_MODEL_NOTE
    from tests.support.langflow_db import stored_summary

    stock = HistoryChatSession(history_class=MemoryComponent, settings={"n_messages": 3})
    ours = HistoryChatSession(settings=FOLD_EACH_TURN, picked_summary_model=[])
    for chat in (stock, ours):
        await hold(chat)

    assert ours.memory == stock.memory
    assert not ours.model.fold_calls
    assert NO_SUMMARY_MODEL_NOTE in ours.last_status
    assert "no language model found after this Message History" in NO_SUMMARY_MODEL_NOTE
    assert "Pick a Summary Model on the node" in NO_SUMMARY_MODEL_NOTE
    stored = await stored_summary(flow_id=ours.flow_id, user_id=ours.user_id, session_id=ours.session_id)
    assert stored is None, "no fold was tried, so no failure is kept"


def test_with_no_summary_model_it_folds_with_the_model_picked_on_the_first_language_model_after_it():
    """Message History -> Prompt -> Language Model: the fold is built as the Language Model builds its model, with the
    key typed in its API Key field, without streaming, and the summary names that model."""
    from unittest.mock import patch

    from lfx.components.input_output import ChatInput, ChatOutput
    from lfx.components.models_and_agents.language_model import LanguageModelComponent
    from lfx.components.models_and_agents.prompt import PromptComponent
    from lfx.graph import Graph

    from langflow_summarizing_agent.wiring import summary_model

    picked = [{"name": "gpt-4o-mini", "provider": "OpenAI", "metadata": {}}]
    chat_input = ChatInput(_id="chat_input")
    history = SummarizingMessageHistoryComponent(_id="history")
    history.set(summary_model=[])
    prompt = PromptComponent(_id="prompt")
    prompt.set(
        template="{memory} {question}", memory=history.retrieve_messages_as_text, question=chat_input.message_response
    )
    language_model = LanguageModelComponent(_id="language_model")
    language_model.set(model=picked, api_key="the flow model's key", input_value=prompt.build_prompt)
    chat_output = ChatOutput(_id="chat_output")
    chat_output.set(input_value=language_model.text_response)
    graph = Graph(chat_input, chat_output, user_id=str(uuid4()))
    component = graph.get_vertex("history").custom_component
    built: dict = {}

    with patch("lfx.base.models.unified_models.get_llm", side_effect=lambda **kw: built.update(kw)):
        summary_model.build_summary_model(component)

    assert (built["model"], built["api_key"], built["stream"]) == (picked, "the flow model's key", False)
    assert summary_model.summary_model_name(component) == "gpt-4o-mini"
