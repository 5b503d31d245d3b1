"""The shipped flow `flows/summarizing_support_agent.json` imports into a real server as is, with the switch on."""

from __future__ import annotations

from tests.support.flow_files import (
    SUPPORT_FLOW_PATH,
    SUPPORT_FLOW_PINNED_KEYS,
    agent_template,
    code_of,
    load_support_flow,
)
from tests.support.server_fixtures import LangflowServer


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
    template = agent_template(stored.json())
    assert template["summarize_older_messages"]["value"] is True
    assert template["pinned_keys"]["value"] == SUPPORT_FLOW_PINNED_KEYS
    assert template["pinned_keys"]["show"] is True
    assert code_of(template) == code_of(agent_template(load_support_flow()))
