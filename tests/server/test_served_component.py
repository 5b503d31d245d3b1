"""A real `langflow run` server serves the extension bundle's components, the Summarizing Agent and the Summarizing
Message History, each with every input and output of the stock component it extends (the Agent, Message History)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.server_fixtures import LangflowServer

EXTENSION_ID = "langflow-summarizing-agent"
BUNDLE_NAME = "summarizing_agent"
STOCK_CATEGORY = "models_and_agents"
# (our component's name, its display name and class, the stock component's name in STOCK_CATEGORY)
COMPONENTS = {
    "agent": ("SummarizingAgent", "Summarizing Agent", "SummarizingAgentComponent", "Agent"),
    "message_history": (
        "SummarizingMessageHistory",
        "Summarizing Message History",
        "SummarizingMessageHistoryComponent",
        "Memory",
    ),
}

# What makes an input that input; `info` texts and similar presentation details may be reworded.
INPUT_IDENTITY_FIELDS = ("name", "_input_type", "type", "display_name", "advanced", "list", "required", "value")


@pytest.fixture(scope="module")
def served_components(langflow_server: LangflowServer) -> dict[str, Any]:
    """The component catalog the server hands to the canvas: `{category: {component key: frontend node}}`."""
    with langflow_server.client(token=langflow_server.superuser_token) as client:
        response = client.get("/api/v1/all")
    response.raise_for_status()
    return response.json()


@pytest.fixture(scope="module", params=sorted(COMPONENTS))
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


def served(served_components: dict[str, Any], name: str) -> dict[str, Any]:
    bundle = served_components.get(BUNDLE_NAME, {})
    nodes = [node for node in bundle.values() if node.get("name") == name]
    assert len(nodes) == 1, f"bundle {BUNDLE_NAME!r} serves {sorted(bundle)}"
    return nodes[0]


@pytest.fixture(scope="module")
def served_ours(served_components: dict[str, Any], kind: str) -> dict[str, Any]:
    return served(served_components, COMPONENTS[kind][0])


@pytest.fixture(scope="module")
def served_stock(served_components: dict[str, Any], kind: str) -> dict[str, Any]:
    return served_components[STOCK_CATEGORY][COMPONENTS[kind][3]]


def test_server_lists_both_components_under_our_bundle(served_ours: dict[str, Any], kind: str) -> None:
    _, display_name, class_name, _ = COMPONENTS[kind]
    assert served_ours["display_name"] == display_name
    assert served_ours["extension"] == EXTENSION_ID
    assert served_ours["bundle"] == BUNDLE_NAME
    assert served_ours["metadata"]["component_class_name"] == class_name


def test_summarize_older_messages_is_a_switch_on_the_node_and_on_by_default(served_ours: dict[str, Any]) -> None:
    switch = served_ours["template"]["summarize_older_messages"]
    assert switch["display_name"] == "Summarize Older Messages"
    assert switch["type"] == "bool"
    assert switch["advanced"] is False
    assert switch["show"] is True
    assert switch["value"] is True
    assert switch["real_time_refresh"] is True


def test_pinned_keys_is_a_list_on_the_node(served_ours: dict[str, Any]) -> None:
    pinned_keys = served_ours["template"]["pinned_keys"]
    assert pinned_keys["display_name"] == "Pinned Keys"
    assert pinned_keys["list"] is True
    assert pinned_keys["advanced"] is False
    assert pinned_keys["show"] is True


def test_every_stock_input_is_served_unchanged(served_ours: dict[str, Any], served_stock: dict[str, Any]) -> None:
    ours = served_ours["template"]
    stock_inputs = {
        name: field for name, field in served_stock["template"].items() if isinstance(field, dict) and name != "code"
    }
    assert len(stock_inputs) > 5
    assert sorted(set(stock_inputs) - set(ours)) == []
    for name, stock_field in stock_inputs.items():
        identity = {key: stock_field.get(key) for key in INPUT_IDENTITY_FIELDS}
        if name == "n_messages":
            # A new node starts at the recommended window; the switch off sets the stock 100 (test_settings). The
            # Message History's is on the node while the switch is on (test_message_history_node).
            assert (stock_field["value"], ours[name]["value"]) == (100, 10)
            identity["value"] = 10
            if served_ours["display_name"] == "Summarizing Message History":
                assert ours[name]["advanced"] is False
                identity["advanced"] = False
        assert {key: ours[name].get(key) for key in INPUT_IDENTITY_FIELDS} == identity, name


def test_stock_inputs_keep_their_order_before_the_new_ones(
    served_ours: dict[str, Any], served_stock: dict[str, Any]
) -> None:
    stock_order = served_stock["field_order"]
    assert served_ours["field_order"][: len(stock_order)] == stock_order
    added = served_ours["field_order"][len(stock_order) :]
    assert {"summarize_older_messages", "pinned_keys"} <= set(added)


def test_stock_outputs_are_served_unchanged(served_ours: dict[str, Any], served_stock: dict[str, Any]) -> None:
    def outputs(node: dict[str, Any]) -> list[tuple[str, str, tuple[str, ...]]]:
        return [(output["name"], output["method"], tuple(output["types"])) for output in node["outputs"]]

    assert outputs(served_ours) == outputs(served_stock)
