"""Every private Langflow name this package uses, each behind one function.

Langflow keeps no promise about names that start with an underscore; a release may rename or drop any of them. Going
through this module, a change shows in one place: `missing()` names what the installed Langflow no longer has and
which function here needs it, and a unit test fails on it before a turn does.

The private methods a component overrides cannot go through a function, and a renamed hook is silently never called,
so they are checked the same way, and read from the component classes rather than listed (`overridden`): every name
a component class defines that starts with one underscore overrides its Langflow base's, except the component's own
helpers, listed in `OWN_HELPERS`. A new private method is therefore either checked or listed there, never missed.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple
from uuid import UUID

if TYPE_CHECKING:
    from lfx.components.models_and_agents.agent import AgentComponent
    from lfx.custom.custom_component.component import Component
    from lfx.graph.vertex.base import Vertex

ShutdownHook = Callable[[], Awaitable[None]]

AGENT = "lfx.components.models_and_agents.agent"
COMPONENT = "lfx.custom.custom_component.component"


class Private(NamedTuple):
    """A private Langflow name: `attribute` is a dotted path from `module`. `user` is what in this package needs it.
    An `instance` attribute exists only on instances: the class's own code (its bases' included) must set or read it.
    """

    module: str
    attribute: str
    user: str
    instance: bool = False


REQUIRED: tuple[Private, ...] = (
    Private("langflow.memory", "_message_scope", "langflow_private.message_scope"),
    Private("langflow.main", "_enterprise_lifespan_hooks", "langflow_private.lifespan_shutdown_hooks"),
    Private("lfx.components.models_and_agents.memory", "_safe_graph_user_id", "langflow_private.graph_user_id"),
    Private(AGENT, "AgentComponent._resolve_selected_model", "langflow_private.resolve_selected_model"),
    Private(AGENT, "AgentComponent._get_max_tokens_value", "langflow_private.max_tokens_value"),
    Private(AGENT, "AgentComponent._model_overrides", "langflow_private.model_overrides", instance=True),
    Private(COMPONENT, "Component._parameters", "langflow_private.built_parameters", instance=True),
    Private(COMPONENT, "Component._vertex", "langflow_private.vertex_of", instance=True),
)
OWN_HELPERS = frozenset(
    {"SummarizingMessageHistoryComponent._summarizes", "SummarizingMessageHistoryComponent._stock_messages"}
)
"""Private methods of the components that override nothing of Langflow's."""


def overridden(component: type) -> tuple[Private, ...]:
    """The private Langflow methods `component` overrides: each name its class body defines that starts with one
    underscore (`OWN_HELPERS` aside), on the nearest Langflow class it derives from."""
    base = next(cls for cls in component.__mro__[1:] if cls.__module__.split(".")[0] in ("lfx", "langflow"))
    return tuple(
        Private(base.__module__, f"{base.__qualname__}.{name}", f"{component.__name__}.{name}")
        for name in vars(component)
        if name.startswith("_") and not name.startswith("__") and f"{component.__name__}.{name}" not in OWN_HELPERS
    )


def message_scope(flow_id: str | UUID | None, user_id: str | UUID | None) -> tuple[UUID | None, UUID | None]:
    """The trusted (flow, owner) of a message query: `langflow.memory._message_scope`."""
    from langflow.memory import _message_scope

    return _message_scope(flow_id, user_id)


def lifespan_shutdown_hooks() -> list[ShutdownHook] | None:
    """The list Langflow's lifespan runs first at shutdown, `langflow.main._enterprise_lifespan_hooks["shutdown"]`;
    None without it."""
    try:
        from langflow.main import _enterprise_lifespan_hooks
    except ImportError:
        return None
    return _enterprise_lifespan_hooks.get("shutdown")


def graph_user_id(component: Component) -> str | UUID | None:
    """The owner of a component's chat history: `lfx.components.models_and_agents.memory._safe_graph_user_id`."""
    from lfx.components.models_and_agents.memory import _safe_graph_user_id

    return _safe_graph_user_id(component)


def resolve_selected_model(component: AgentComponent) -> Any:
    """The Agent's model selection as it builds its model: `AgentComponent._resolve_selected_model()`."""
    return component._resolve_selected_model()


def max_tokens_value(component: AgentComponent) -> int | None:
    """The Agent's Max Tokens, None when unset: `AgentComponent._get_max_tokens_value()`."""
    return component._get_max_tokens_value()


def model_overrides(component: Component) -> dict[str, Any] | None:
    """The settings the Agent's model remediation added for this run: `AgentComponent._model_overrides`."""
    return getattr(component, "_model_overrides", None)


def built_parameters(component: Component) -> Mapping[str, Any]:
    """The inputs Langflow built the component with (a hidden field is missing): `Component._parameters`; empty on a
    component made with `__new__`."""
    parameters = component.__dict__.get("_parameters")
    return parameters if isinstance(parameters, Mapping) else {}


def vertex_of(component: Component) -> Vertex | None:
    """The flow node the component runs as: `Component._vertex` (set by `Component.set_vertex`); None outside a
    graph or on a component made with `__new__`."""
    return component.__dict__.get("_vertex")


def missing(components: Iterable[type]) -> list[str]:
    """What the installed Langflow no longer has, one line each, naming what in this package needs it: the names in
    `REQUIRED`, and the private methods `components` override (`overridden`)."""
    overrides = [symbol for component in components for symbol in overridden(component)]
    return [
        f"Langflow no longer has {symbol.attribute} in {symbol.module}; update {symbol.user}"
        for symbol in (*REQUIRED, *overrides)
        if not _exists(symbol)
    ]


def _exists(symbol: Private) -> bool:
    try:
        owner: Any = importlib.import_module(symbol.module)
    except ImportError:
        return False
    *path, name = symbol.attribute.split(".")
    for part in path:
        owner = getattr(owner, part, None)
        if owner is None:
            return False
    if symbol.instance:
        return isinstance(owner, type) and any(name in _names_in(code) for code in _code_of(owner))
    return hasattr(owner, name)


def _code_of(cls: type) -> Iterator[types.CodeType]:
    for klass in cls.__mro__:
        for value in vars(klass).values():
            function = getattr(value, "fget", value)
            code = getattr(function, "__code__", None)
            if isinstance(code, types.CodeType):
                yield code


def _names_in(code: types.CodeType) -> set[str]:
    """The attribute names and string constants of a function, its nested functions included."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, str):
            names.add(constant)
        elif isinstance(constant, types.CodeType):
            names |= _names_in(constant)
    return names
