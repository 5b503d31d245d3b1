"""Placeholder replaced on merge."""

from typing import Any


def graph_user_id(component: Any) -> Any:
    from lfx.components.models_and_agents.memory import _safe_graph_user_id

    return _safe_graph_user_id(component)


def built_parameters(component: Any) -> Any:
    return component.__dict__.get("_parameters") or {}


def vertex_of(component: Any) -> Any:
    return component.__dict__.get("_vertex")
