"""The shipped flow files, and test variants of them that run offline with `FakeChatModelComponent`."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from scripts.export_support_flow import canvas_edge
from tests.support.fake_chat_model import FakeChatModelComponent

FLOWS_DIR = Path(__file__).resolve().parents[2] / "flows"
SUPPORT_FLOW_PATH = FLOWS_DIR / "summarizing_support_agent.json"
AGENT_TYPE = "ext:summarizing_agent:SummarizingAgentComponent@official"
OFFLINE_MODEL_ID = "FakeChatModel-Off1n"
MEMORY_CHATBOT_PATH = FLOWS_DIR / "summarizing_memory_chatbot.json"
HISTORY_TYPE = "ext:summarizing_agent:SummarizingMessageHistoryComponent@official"
LANGUAGE_MODEL_TYPE = "LanguageModelComponent"


def load_support_flow() -> dict[str, Any]:
    return json.loads(SUPPORT_FLOW_PATH.read_text(encoding="utf-8"))


SUPPORT_FLOW_PINNED_KEYS = ["project_id", "customer", "cluster"]


def agent_node(flow: dict[str, Any]) -> dict[str, Any]:
    agents = [node for node in flow["data"]["nodes"] if node["data"]["type"] == AGENT_TYPE]
    assert len(agents) == 1, [node["data"]["type"] for node in flow["data"]["nodes"]]
    return agents[0]


def agent_template(flow: dict[str, Any]) -> dict[str, Any]:
    return agent_node(flow)["data"]["node"]["template"]


def code_of(template: dict[str, Any]) -> str:
    """A node's component source as the export stores it (a list of lines or one string)."""
    code = template["code"]["value"]
    return "\n".join(code) if isinstance(code, list) else code


def with_offline_model(flow: dict[str, Any], record_path: Path, **agent_values: Any) -> dict[str, Any]:
    """A copy of `flow` (without its id) whose agent uses the fake chat model recording to `record_path`, with
    `agent_values` set."""
    model = FakeChatModelComponent(_id=OFFLINE_MODEL_ID)
    model.set(record_path=str(record_path))
    return with_model(flow, model, **agent_values)


def with_model(flow: dict[str, Any], model: Any, **agent_values: Any) -> dict[str, Any]:
    """A copy of `flow` (without its id) whose agent's model is the component `model` (a node of the flow, connected
    as the canvas connects one), with `agent_values` set."""
    variant = copy.deepcopy(flow)
    variant.pop("id", None)
    variant["name"] = f"{flow['name']} (offline)"
    agent = agent_node(variant)
    template = agent["data"]["node"]["template"]
    # What the canvas stores after "Connect other models" in the model field.
    template["model"]["value"] = "connect_other_models"
    template["model"]["input_types"] = ["LanguageModel"]
    for name, value in agent_values.items():
        template[name]["value"] = value

    model_node = {**model.to_frontend_node(), "type": "genericNode", "position": {"x": 0, "y": 0}}
    variant["data"]["nodes"].append(model_node)
    variant["data"]["edges"].append(canvas_edge(model_node, "model_output", agent, "model"))
    return variant


def load_memory_chatbot_flow() -> dict[str, Any]:
    return json.loads(MEMORY_CHATBOT_PATH.read_text(encoding="utf-8"))


def node_of_type(flow: dict[str, Any], component_type: str) -> dict[str, Any]:
    nodes = [node for node in flow["data"]["nodes"] if node["data"]["type"] == component_type]
    assert len(nodes) == 1, [node["data"]["type"] for node in flow["data"]["nodes"]]
    return nodes[0]


def history_template(flow: dict[str, Any]) -> dict[str, Any]:
    return node_of_type(flow, HISTORY_TYPE)["data"]["node"]["template"]


def memory_chatbot_offline(
    flow: dict[str, Any], record_path: Path, *, reply_delay: float = 0.0, **history_values: Any
) -> dict[str, Any]:
    """A copy of the memory chatbot flow (without its id) whose Language Model and Summary Model are one fake chat
    model recording to `record_path` (answering after `reply_delay` seconds), with `history_values` set on the
    Summarizing Message History."""
    variant = copy.deepcopy(flow)
    variant.pop("id", None)
    variant["name"] = f"{flow['name']} (offline)"
    model = FakeChatModelComponent(_id=OFFLINE_MODEL_ID)
    model.set(record_path=str(record_path), reply_delay=reply_delay)
    model_node = {**model.to_frontend_node(), "type": "genericNode", "position": {"x": 0, "y": 0}}
    variant["data"]["nodes"].append(model_node)
    for component_type, field in ((LANGUAGE_MODEL_TYPE, "model"), (HISTORY_TYPE, "summary_model")):
        node = node_of_type(variant, component_type)
        template = node["data"]["node"]["template"]
        # What the canvas stores after "Connect other models" in a model field.
        template[field]["value"] = "connect_other_models"
        template[field]["input_types"] = ["LanguageModel"]
        variant["data"]["edges"].append(canvas_edge(model_node, "model_output", node, field))
    template = history_template(variant)
    for name, value in history_values.items():
        template[name]["value"] = value
    return variant


def read_records(path: Path) -> list[dict[str, Any]]:
    """The calls the fake chat model recorded, oldest first."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
