"""Regenerate `flows/summarizing_memory_chatbot.json` on a running Langflow server with this extension installed.

Chat Input and Summarizing Message History feed a Prompt (`{memory}`, `{question}`), whose text goes to a Language
Model and on to Chat Output: the stock Memory Chatbot's shape, with the summarizing history. Put together, saved,
exported and deleted as `scripts/export_support_flow.py` does it for the support agent.

    python -m scripts.export_memory_chatbot_flow --url http://127.0.0.1:7860 --username USER --password PASSWORD

Use a scratch server: the flow is saved under its fixed id, which must not exist there yet.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import httpx
from lfx.base.models.unified_models import normalize_model_names_to_dicts

from scripts.export_support_flow import canvas_edge, export_flow, update_field

FLOW_PATH = Path(__file__).resolve().parent.parent / "flows" / "summarizing_memory_chatbot.json"
FLOW_ID = "8b2f6c3d-1e4a-4f7b-9c5d-2a7e0f3b9d41"
FLOW_NAME = "Summarizing Memory Chatbot"
FLOW_DESCRIPTION = (
    "A chatbot that builds its own prompt: older messages reach the model as a per-session summary that always "
    "keeps the project, customer and cluster, followed by the recent messages."
)
HISTORY_TYPE = "ext:summarizing_agent:SummarizingMessageHistoryComponent@official"
MODEL = "gpt-4o-mini"
PINNED_KEYS = ["project_id", "customer", "cluster"]
N_MESSAGES = 10
PROMPT_TEMPLATE = """You are a technical support assistant for a cloud platform. Help the customer find the cause of
their problem and fix it, one step at a time, and say which facts your answer relies on.

The conversation so far (earlier parts as a summary with pinned facts such as the project, the customer and the
cluster; follow the customer if they correct one):
{memory}

The customer's new message: {question}"""

NODE_IDS = {
    "ChatInput": "ChatInput-Hm4cR",
    HISTORY_TYPE: f"{HISTORY_TYPE}-Sh8vL",
    "Prompt Template": "Prompt-Tq6zW",
    "LanguageModelComponent": "LanguageModelComponent-Lm3pD",
    "ChatOutput": "ChatOutput-Co9xF",
}
POSITIONS = {
    # Nodes are about 410 px wide on the canvas; Chat Input (about 270 px tall) sits above the history node, which
    # grows with its fields.
    "ChatInput": (0, 0),
    HISTORY_TYPE: (0, 340),
    "Prompt Template": (520, 240),
    "LanguageModelComponent": (1020, 200),
    "ChatOutput": (1520, 320),
}


def _node(component_type: str, template_node: dict[str, Any], selected_output: str | None) -> dict[str, Any]:
    node_id = NODE_IDS[component_type]
    x, y = POSITIONS[component_type]
    data: dict[str, Any] = {"id": node_id, "node": template_node, "showNode": True, "type": component_type}
    if selected_output:
        data["selected_output"] = selected_output
    return {"data": data, "id": node_id, "position": {"x": x, "y": y}, "type": "genericNode"}


def with_prompt_template(client: httpx.Client, node: dict[str, Any], template: str) -> dict[str, Any]:
    """Set a Prompt's template as the canvas does: the server adds a field for each variable."""
    node["template"]["template"]["value"] = template
    response = client.post(
        "/api/v1/validate/prompt", json={"name": "template", "template": template, "frontend_node": node}
    )
    return response.raise_for_status().json()["frontend_node"]


def build_flow(client: httpx.Client) -> dict[str, Any]:
    catalog = client.get("/api/v1/all").raise_for_status().json()
    chat_input = catalog["input_output"]["ChatInput"]
    chat_output = catalog["input_output"]["ChatOutput"]
    models = catalog["models_and_agents"]
    history = catalog["summarizing_agent"][HISTORY_TYPE]

    history = update_field(client, history, "summary_model", normalize_model_names_to_dicts(MODEL))
    history = update_field(client, history, "summarize_older_messages", True)
    history["template"]["n_messages"]["value"] = N_MESSAGES
    history["template"]["pinned_keys"]["value"] = PINNED_KEYS
    # Shown on the node (the Parameters panel's "Add"), so the flow says what it does at a glance.
    history["template"]["n_messages"]["advanced"] = False
    prompt = with_prompt_template(client, models["Prompt Template"], PROMPT_TEMPLATE)
    language_model = update_field(
        client, models["LanguageModelComponent"], "model", normalize_model_names_to_dicts(MODEL)
    )

    nodes = [
        _node("ChatInput", chat_input, "message"),
        _node(HISTORY_TYPE, history, "messages_text"),
        _node("Prompt Template", prompt, "prompt"),
        _node("LanguageModelComponent", language_model, "text_output"),
        _node("ChatOutput", chat_output, None),
    ]
    by_type = {node["data"]["type"]: node for node in nodes}
    edges = [
        canvas_edge(by_type["ChatInput"], "message", by_type["Prompt Template"], "question"),
        canvas_edge(by_type[HISTORY_TYPE], "messages_text", by_type["Prompt Template"], "memory"),
        canvas_edge(by_type["Prompt Template"], "prompt", by_type["LanguageModelComponent"], "input_value"),
        canvas_edge(by_type["LanguageModelComponent"], "text_output", by_type["ChatOutput"], "input_value"),
    ]
    return {
        "data": {"edges": edges, "nodes": nodes, "viewport": {"x": 60, "y": 40, "zoom": 0.7}},
        "description": FLOW_DESCRIPTION,
        "id": FLOW_ID,
        "is_component": False,
        "name": FLOW_NAME,
        "tags": ["chatbots", "assistants"],
    }


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
