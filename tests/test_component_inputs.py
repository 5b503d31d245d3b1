"""The component's inputs: the switch, and the summary settings it shows and hides."""

from __future__ import annotations

import pytest
from lfx.components.models_and_agents.agent import AgentComponent
from lfx.schema.dotdict import dotdict

from langflow_summarizing_agent.components.summarizing_agent.summarizing_agent import (
    SUMMARY_FIELDS,
    SummarizingAgentComponent,
)


def template_of(component) -> dotdict:
    node = component.to_frontend_node()
    return dotdict(node["data"]["node"]["template"])


def test_every_stock_agent_input_is_kept_and_the_new_ones_are_advanced():
    stock = {i.name for i in AgentComponent.inputs}
    ours = {i.name: i for i in SummarizingAgentComponent.inputs}

    assert stock <= set(ours)
    assert ours["summarize_older_messages"].value is False
    assert all(ours[name].advanced for name in ("summarize_older_messages", *SUMMARY_FIELDS))
    assert ours["pinned_keys"].is_list


@pytest.mark.parametrize("switch", [True, False])
async def test_the_switch_shows_and_hides_the_summary_settings(switch):
    component = SummarizingAgentComponent()
    template = template_of(component)
    assert template["pinned_keys"]["show"] is False

    updated = await component.update_build_config(template, switch, "summarize_older_messages")

    assert all(updated[name]["show"] is switch for name in SUMMARY_FIELDS)
    assert updated["n_messages"]["show"] is True
