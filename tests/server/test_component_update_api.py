"""A real `langflow run` server serves the component with the switch on and refuses a nonsensical numeric edit over
HTTP (400, naming the field) while accepting a sensible one."""

from __future__ import annotations

from typing import Any

from tests.support.flow_files import AGENT_TYPE
from tests.support.server_fixtures import LangflowServer


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
