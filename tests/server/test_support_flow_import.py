"""The shipped flow `flows/summarizing_support_agent.json` imports into a real server as is, with the switch on."""

from __future__ import annotations

from typing import Any

from tests.support.flow_files import SUPPORT_FLOW_PATH, agent_node, load_support_flow
from tests.support.server_fixtures import LangflowServer

PINNED_KEYS = ["project_id", "customer", "cluster"]


def _agent_template(flow: dict[str, Any]) -> dict[str, Any]:
    return agent_node(flow)["data"]["node"]["template"]


def _code(template: dict[str, Any]) -> str:
    code = template["code"]["value"]
    return "\n".join(code) if isinstance(code, list) else code


def test_support_flow_imports_into_a_real_server_with_the_switch_on(langflow_server: LangflowServer) -> None:
    user = langflow_server.create_user()
    with langflow_server.client(token=user.token) as client:
        with SUPPORT_FLOW_PATH.open("rb") as flow_file:
            uploaded = client.post("/api/v1/flows/upload/", files={"file": (SUPPORT_FLOW_PATH.name, flow_file)})
        assert uploaded.status_code == 201, uploaded.text
        [imported] = uploaded.json()
        stored = client.get(f"/api/v1/flows/{imported['id']}")
    stored.raise_for_status()

    assert stored.json()["name"] == "Summarizing Support Agent"
    template = _agent_template(stored.json())
    assert template["summarize_older_messages"]["value"] is True
    assert template["pinned_keys"]["value"] == PINNED_KEYS
    assert template["pinned_keys"]["show"] is True
    assert _code(template) == _code(_agent_template(load_support_flow()))
