"""A real `langflow run` server serves both components with the switch on and refuses a nonsensical edit over HTTP
(400, naming the field as the component shows it) while accepting a sensible one."""

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
def test_the_server_refuses_a_nonsensical_edit_with_http_400_naming_the_field(
    langflow_server: LangflowServer, component_type: str
):
    with langflow_server.client(token=langflow_server.superuser_token) as client:
        node = _catalog_node(client, component_type)
        assert node["template"]["summarize_older_messages"]["value"] is True
        assert node["template"]["pinned_keys"]["advanced"] is False

        refused = _update(client, node, "fold_batch", 0)
        accepted = _update(client, node, "fold_batch", 4)

    assert refused.status_code == 400, refused.text
    assert "Fold Batch must be at least 1 message" in refused.json()["detail"]
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["template"]["fold_batch"]["value"] == 4


def test_the_server_refuses_a_sender_filter_on_the_summarizing_message_history_saying_why(
    langflow_server: LangflowServer,
):
    with langflow_server.client(token=langflow_server.superuser_token) as client:
        node = _catalog_node(client, HISTORY_TYPE)
        refused = _update(client, node, "sender_name", "Support Bot")

    assert refused.status_code == 400, refused.text
    assert "Sender Name" in refused.json()["detail"]
