"""The component's inputs as the canvas shows them: on by default, the switch and Pinned Keys on the node, help in
the user's terms, and the switch showing and hiding the summary settings."""

from __future__ import annotations

import pytest
from lfx.components.models_and_agents.agent import AgentComponent
from lfx.schema.dotdict import dotdict

from langflow_summarizing_agent.components.summarizing_agent.summarizing_agent import (
    N_MESSAGES_INFO,
    SUMMARY_FIELDS,
    SummarizingAgentComponent,
)
from langflow_summarizing_agent.engine.settings import FIELD_NAMES

TUNING = (
    "summary_model",
    "fold_batch",
    "summary_words",
    "history_token_budget",
    "max_folds_per_turn",
    "summary_timeout",
)


def template_of(component: SummarizingAgentComponent) -> dotdict:
    node = component.to_frontend_node()
    return dotdict(node["data"]["node"]["template"])


def test_a_dropped_agent_summarizes_with_the_switch_and_pinned_keys_on_the_node():
    stock = {i.name for i in AgentComponent.inputs}
    template = template_of(SummarizingAgentComponent())

    assert stock <= set(template)
    switch, pinned = template["summarize_older_messages"], template["pinned_keys"]
    assert switch["value"] is True
    assert (switch["show"], switch["advanced"]) == (True, False)
    assert (pinned["show"], pinned["advanced"], pinned["list"]) == (True, False, True)
    assert all(template[name]["show"] and template[name]["advanced"] for name in TUNING)


def test_each_setting_has_help_in_user_terms_and_its_ui_name():
    template = template_of(SummarizingAgentComponent())

    for name in ("summarize_older_messages", *SUMMARY_FIELDS):
        assert template[name]["display_name"] == FIELD_NAMES[name]
        assert len(template[name]["info"]) > 40, name
    for name in ("summarize_older_messages", "fold_batch", "history_token_budget"):
        assert "Number of Chat History Messages" in template[name]["info"], name
    assert template["n_messages"]["info"] == N_MESSAGES_INFO
    assert "word for word" in N_MESSAGES_INFO


@pytest.mark.parametrize("switch", [True, False])
async def test_the_switch_shows_and_hides_the_summary_settings(switch):
    component = SummarizingAgentComponent()
    template = template_of(component)

    updated = await component.update_build_config(template, switch, "summarize_older_messages")

    assert all(updated[name]["show"] is switch for name in SUMMARY_FIELDS)
    assert updated["n_messages"]["show"] is True
    stock_info = next(i.info for i in AgentComponent.inputs if i.name == "n_messages")
    assert updated["n_messages"]["info"] == (N_MESSAGES_INFO if switch else stock_info)
