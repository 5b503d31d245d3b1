"""Regenerate `flows/summarizing_support_agent.json` on a running Langflow server with this extension installed.

The flow is put together the way the canvas does it (component templates from `GET /api/v1/all`, the model and the
switch set through `POST /api/v1/custom_component/update` as the UI does for real-time fields), saved with
`POST /api/v1/flows/`, exported with `POST /api/v1/flows/download/` (what Langflow writes for an export) and deleted.
The export's `last_modified_by` and `version_token` are dropped: they belong to the exporting server.

    python scripts/export_support_flow.py --url http://127.0.0.1:7860 --username USER --password PASSWORD

Use a scratch server: the flow is saved under its fixed id, which must not exist there yet.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import httpx
from lfx.base.models.unified_models import normalize_model_names_to_dicts

FLOW_PATH = Path(__file__).resolve().parent.parent / "flows" / "summarizing_support_agent.json"
FLOW_ID = "5d0a4e1c-3b7f-4c52-9a4e-6f1d2c8b7a10"
FLOW_NAME = "Summarizing Support Agent"
FLOW_DESCRIPTION = (
    "A support agent for long conversations: older messages are folded into a per-session summary that always keeps "
    "the project, customer and cluster."
)
AGENT_TYPE = "ext:summarizing_agent:SummarizingAgentComponent@official"
MODEL = "gpt-4o-mini"
PINNED_KEYS = ["project_id", "customer", "cluster"]
N_MESSAGES = 10
SYSTEM_PROMPT = """You are a technical support agent for a cloud platform.

Help the customer find the cause of their problem and fix it, one step at a time. Ask for what you need (project,
cluster, error messages, what changed) instead of guessing, and say which facts your answer relies on.

Earlier parts of a long conversation may reach you as a summary of the conversation to date, with pinned facts such
as the project, the customer and the cluster. Treat them as what the customer told you before; if the customer
corrects one of them, follow the correction."""

NODE_IDS = {"ChatInput": "ChatInput-Kq3vB", AGENT_TYPE: f"{AGENT_TYPE}-Sm7rT", "ChatOutput": "ChatOutput-Wp2xN"}
POSITIONS = {"ChatInput": (0, 300), AGENT_TYPE: (420, 120), "ChatOutput": (860, 360)}


def _handle(value: dict[str, Any]) -> str:
    # The canvas stores a handle as JSON with `"` written as `œ`.
    return json.dumps(value).replace('"', "œ")


def canvas_edge(source: dict[str, Any], output: str, target: dict[str, Any], field: str) -> dict[str, Any]:
    """The edge the canvas writes from `source`'s `output` to `target`'s `field`."""
    source_output = next(o for o in source["data"]["node"]["outputs"] if o["name"] == output)
    target_field = target["data"]["node"]["template"][field]
    source_handle = {
        "dataType": source["data"]["type"],
        "id": source["id"],
        "name": output,
        "output_types": source_output["types"],
    }
    target_handle = {
        "fieldName": field,
        "id": target["id"],
        "inputTypes": target_field["input_types"],
        "type": target_field["type"],
    }
    source_string, target_string = _handle(source_handle), _handle(target_handle)
    return {
        "animated": False,
        "className": "",
        "data": {"sourceHandle": source_handle, "targetHandle": target_handle},
        "id": f"xy-edge__{source['id']}{source_string}-{target['id']}{target_string}",
        "selected": False,
        "source": source["id"],
        "sourceHandle": source_string,
        "target": target["id"],
        "targetHandle": target_string,
    }


def _node(component_type: str, template_node: dict[str, Any], selected_output: str | None) -> dict[str, Any]:
    node_id = NODE_IDS[component_type]
    x, y = POSITIONS[component_type]
    show_node = not template_node.get("minimized", False)
    data: dict[str, Any] = {"id": node_id, "node": template_node, "showNode": show_node, "type": component_type}
    if selected_output:
        data["selected_output"] = selected_output
    return {"data": data, "id": node_id, "position": {"x": x, "y": y}, "type": "genericNode"}


def update_field(client: httpx.Client, node: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    """Set a real-time field as the canvas does: new value in the template, then the server's update_build_config,
    whose template and outputs replace the node's."""
    template = node["template"]
    template[field]["value"] = value
    response = client.post(
        "/api/v1/custom_component/update",
        json={
            "code": template["code"]["value"],
            "frontend_node": {"metadata": node["metadata"]},
            "template": template,
            "field": field,
            "field_value": value,
        },
    )
    updated = response.raise_for_status().json()
    return {**node, "template": updated["template"], "outputs": updated["outputs"]}


def build_flow(client: httpx.Client) -> dict[str, Any]:
    catalog = client.get("/api/v1/all").raise_for_status().json()
    chat_input = catalog["input_output"]["ChatInput"]
    chat_output = catalog["input_output"]["ChatOutput"]
    agent = catalog["summarizing_agent"][AGENT_TYPE]

    agent = update_field(client, agent, "model", normalize_model_names_to_dicts(MODEL))
    agent = update_field(client, agent, "summarize_older_messages", True)
    template = agent["template"]
    template["system_prompt"]["value"] = SYSTEM_PROMPT
    template["n_messages"]["value"] = N_MESSAGES
    template["pinned_keys"]["value"] = PINNED_KEYS
    # Shown on the node (the Parameters panel's "Add"), so the flow says what it does at a glance.
    for field in ("summarize_older_messages", "pinned_keys", "n_messages"):
        template[field]["advanced"] = False

    nodes = [
        _node("ChatInput", chat_input, "message"),
        _node(AGENT_TYPE, agent, "response"),
        _node("ChatOutput", chat_output, None),
    ]
    by_type = {node["data"]["type"]: node for node in nodes}
    edges = [
        canvas_edge(by_type["ChatInput"], "message", by_type[AGENT_TYPE], "input_value"),
        canvas_edge(by_type[AGENT_TYPE], "response", by_type["ChatOutput"], "input_value"),
    ]
    return {
        "data": {"edges": edges, "nodes": nodes, "viewport": {"x": 80, "y": 40, "zoom": 0.8}},
        "description": FLOW_DESCRIPTION,
        "id": FLOW_ID,
        "is_component": False,
        "name": FLOW_NAME,
        "tags": ["agents", "assistants"],
    }


def export_flow(client: httpx.Client, flow: dict[str, Any]) -> dict[str, Any]:
    """Save the flow on the server, download it as Langflow exports it, and delete it again."""
    response = client.post("/api/v1/flows/", json=flow)
    if response.is_error:
        raise SystemExit(
            f"saving the flow failed ({response.status_code}: {response.text[:300]}); is {flow['id']} there?"
        )
    saved = response.json()
    try:
        exported = client.post("/api/v1/flows/download/", json=[saved["id"]]).raise_for_status().json()
    finally:
        client.delete(f"/api/v1/flows/{saved['id']}").raise_for_status()
    for server_specific in ("last_modified_by", "version_token"):
        exported.pop(server_specific, None)
    return exported


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--url", default="http://127.0.0.1:7860")
    parser.add_argument("--username", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--output", type=Path, default=FLOW_PATH)
    args = parser.parse_args()

    login = httpx.post(f"{args.url}/api/v1/login", data={"username": args.username, "password": args.password})
    token = login.raise_for_status().json()["access_token"]
    with httpx.Client(base_url=args.url, headers={"Authorization": f"Bearer {token}"}, timeout=120) as client:
        exported = export_flow(client, build_flow(client))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(exported, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
