"""A real `langflow run` server serves both components with the switch on; over HTTP, as the canvas sends it, an edit
the settings would refuse comes back at the nearest accepted value, so the canvas saves only what a turn accepts; a
value that is no number is refused (400; Langflow's own number field refuses it before the component sees it)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.flow_files import AGENT_TYPE, HISTORY_TYPE
from tests.support.server_fixtures import LangflowServer


def _catalog_node(client: Any, component_type: str) -> dict[str, Any]:
    return client.get("/api/v1/all").raise_for_status().json()["summarizing_agent"][component_type]


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


@pytest.mark.parametrize("component_type", [AGENT_TYPE, HISTORY_TYPE], ids=["agent", "message_history"])
def test_an_edit_comes_back_at_the_nearest_accepted_value_and_no_number_is_refused(
    langflow_server: LangflowServer, component_type: str
):
    with langflow_server.client(token=langflow_server.superuser_token) as client:
        node = _catalog_node(client, component_type)
        assert node["template"]["summarize_older_messages"]["value"] is True
        assert node["template"]["pinned_keys"]["advanced"] is False

        settled = _update(client, node, "fold_batch", 0)
        accepted = _update(client, node, "fold_batch", 4)
        budget = _update(client, node, "history_token_budget", 150)
        keys = _update(client, node, "pinned_keys", ["customer name", "clé"])
        refused = _update(client, node, "fold_batch", "many")

    assert settled.status_code == 200, settled.text
    assert settled.json()["template"]["fold_batch"]["value"] == 1
    assert accepted.json()["template"]["fold_batch"]["value"] == 4
    assert budget.json()["template"]["history_token_budget"]["value"] > 150
    assert keys.json()["template"]["pinned_keys"]["value"] == ["customer_name", "clé"]
    assert refused.status_code == 400, refused.text


def test_switching_the_history_on_clears_its_sender_filter(langflow_server: LangflowServer):
    with langflow_server.client(token=langflow_server.superuser_token) as client:
        node = _catalog_node(client, HISTORY_TYPE)
        node["template"]["sender_type"]["value"] = "User"
        node["template"]["sender_name"]["value"] = "Support Bot"
        switched = _update(client, node, "summarize_older_messages", True)

    assert switched.status_code == 200, switched.text
    template = switched.json()["template"]
    assert (template["sender_type"]["value"], template["sender_name"]["value"]) == ("Machine and User", "")
    assert template["sender_type"]["show"] is False
