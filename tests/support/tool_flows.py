"""Flows with a tool on the agent, put together on a real server as a user does it on the canvas.

`with_python_interpreter` adds Langflow's Python Interpreter (`PythonREPLComponent`) to a flow: the node as
`GET /api/v1/all` serves it, under a canvas-style id, switched to Tool Mode by the request the canvas's Tool Mode toggle
makes (the node toolbar's `handleActivateToolMode` -> `mutateTemplate` -> `usePostTemplateValue`:
`POST /api/v1/custom_component/update` with `field` and `tool_mode` set, whose template and outputs replace the node's),
and its `component_as_tool` output edged to the agent's Tools field. In Tool Mode the agent gets the tool
`run_python_repl`, which takes the code as `python_code`.
"""

from __future__ import annotations

import copy
import secrets
import string
from typing import Any

import httpx

from scripts.export_support_flow import canvas_edge
from tests.support.flow_files import agent_node

PYTHON_INTERPRETER_TYPE = "PythonREPLComponent"
TOOL_OUTPUT = "component_as_tool"
"""The output a component in Tool Mode has instead of its own."""
ID_ALPHABET = string.ascii_letters + string.digits


def canvas_id(component_type: str) -> str:
    """A node id as the canvas makes one for a new node: its type and five random letters or digits."""
    return f"{component_type}-{''.join(secrets.choice(ID_ALPHABET) for _ in range(5))}"


def catalog_node(client: httpx.Client, component_type: str) -> dict[str, Any]:
    """The node of `component_type` as the sidebar gets it from `GET /api/v1/all`."""
    catalog = client.get("/api/v1/all").raise_for_status().json()
    found = [category[component_type] for category in catalog.values() if component_type in category]
    assert len(found) == 1, f"{component_type} is in {len(found)} categories of /api/v1/all"
    return found[0]


def switch_to_tool_mode(client: httpx.Client, node: dict[str, Any]) -> dict[str, Any]:
    """`node` after the Tool Mode toggle is switched on: the request the canvas makes, and the node it keeps from the
    answer (the template replaced, the outputs replaced keeping each one's `hidden`, `tool_mode` set)."""
    template = node["template"]
    response = client.post(
        "/api/v1/custom_component/update",
        json={
            "code": template["code"]["value"],
            "template": {**template, "is_refresh": False},
            "field": "tool_mode",
            "field_value": True,
            "tool_mode": True,
        },
    )
    updated = response.raise_for_status().json()
    hidden = {output["name"]: output.get("hidden") for output in node.get("outputs") or []}
    outputs = [{**o, "hidden": hidden[o["name"]]} if o["name"] in hidden else o for o in updated["outputs"]]
    return {**node, "template": updated["template"], "outputs": outputs, "tool_mode": True}


def with_python_interpreter(flow: dict[str, Any], client: httpx.Client) -> dict[str, Any]:
    """A copy of `flow` (a flow file, as exported) with the Python Interpreter in Tool Mode connected to its agent's
    Tools, as a user adds it on the canvas of the server `client` talks to."""
    variant = copy.deepcopy(flow)
    node_id = canvas_id(PYTHON_INTERPRETER_TYPE)
    interpreter = switch_to_tool_mode(client, catalog_node(client, PYTHON_INTERPRETER_TYPE))
    assert [output["name"] for output in interpreter["outputs"]] == [TOOL_OUTPUT], interpreter["outputs"]
    node = {
        "data": {"id": node_id, "node": interpreter, "showNode": True, "type": PYTHON_INTERPRETER_TYPE},
        "id": node_id,
        "position": {"x": 0, "y": 700},
        "type": "genericNode",
    }
    variant["data"]["nodes"].append(node)
    variant["data"]["edges"].append(canvas_edge(node, TOOL_OUTPUT, agent_node(variant), "tools"))
    return variant
