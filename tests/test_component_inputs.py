"""The component's inputs as the canvas shows them: on by default, the switch and Pinned Keys on the node, help in
the user's terms, and numeric settings that make no sense refused when edited (in-process and over HTTP)."""

from __future__ import annotations

from typing import Any

import pytest
from lfx.components.models_and_agents.agent import AgentComponent
from lfx.schema.dotdict import dotdict

from langflow_summarizing_agent.agent_memory import N_MESSAGES_INFO, SETTING_NAMES
from langflow_summarizing_agent.components.summarizing_agent.summarizing_agent import (
    SUMMARY_FIELDS,
    SummarizingAgentComponent,
)
from tests.support.flow_files import AGENT_TYPE
from tests.support.server_fixtures import LangflowServer

TUNING = (
    "summary_model",
    "fold_batch",
    "summary_words",
    "history_token_budget",
    "max_folds_per_turn",
    "summary_timeout",
)
NONSENSE = [
    ("fold_batch", 0, "Fold Batch must be at least 1"),
    ("summary_words", 5, "Summary Word Budget must be at least 20"),
    ("history_token_budget", 50, "History Token Budget must be 0 (off) or at least 200"),
    ("history_token_budget", 300, "Raise History Token Budget to at least"),
    ("max_folds_per_turn", 0, "Max Folds per Turn must be at least 1"),
    ("summary_timeout", -1, "Summary Timeout (s) must be a positive number of seconds"),
    ("n_messages", -3, "Number of Chat History Messages must be 0 (no memory) or more"),
    ("fold_batch", "many", "Fold Batch must be a whole number"),
]


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
        assert template[name]["display_name"] == SETTING_NAMES[name]
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


@pytest.mark.parametrize(("field", "value", "message"), NONSENSE)
async def test_a_nonsensical_number_is_refused_when_edited_naming_the_field(field, value, message):
    component = SummarizingAgentComponent()
    template = template_of(component)
    template[field]["value"] = value

    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        await component.update_build_config(template, value, field)


async def test_sensible_numbers_pass_and_the_stock_window_is_free_with_the_switch_off():
    component = SummarizingAgentComponent()
    template = template_of(component)
    for field, value in [("fold_batch", 4), ("history_token_budget", 0), ("summary_timeout", 0), ("n_messages", 0)]:
        template[field]["value"] = value
        await component.update_build_config(template, value, field)

    template["summarize_older_messages"]["value"] = False
    template["fold_batch"]["value"] = 0
    for stock_window in (1, -1):
        await component.update_build_config(template, stock_window, "n_messages")


def _catalog_agent(client: Any) -> dict[str, Any]:
    return client.get("/api/v1/all").raise_for_status().json()["summarizing_agent"][AGENT_TYPE]


def _update(client: Any, node: dict[str, Any], field: str, value: Any) -> Any:
    template = {**node["template"], field: {**node["template"][field], "value": value}}
    return client.post(
        "/api/v1/custom_component/update",
        json={
            "code": template["code"]["value"],
            "frontend_node": {"metadata": node["metadata"]},
            "template": template,
            "field": field,
            "field_value": value,
        },
    )


def test_the_server_refuses_a_nonsensical_edit_with_http_400_naming_the_field(langflow_server: LangflowServer):
    with langflow_server.client(token=langflow_server.superuser_token) as client:
        agent = _catalog_agent(client)
        assert agent["template"]["summarize_older_messages"]["value"] is True
        assert agent["template"]["pinned_keys"]["advanced"] is False

        refused = _update(client, agent, "fold_batch", 0)
        accepted = _update(client, agent, "fold_batch", 4)

    assert refused.status_code == 400, refused.text
    assert "Fold Batch must be at least 1 message" in refused.json()["detail"]
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["template"]["fold_batch"]["value"] == 4
