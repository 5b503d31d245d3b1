"""The model that folds: the Summary Model picked on the node (a flow saved with a model connected to it keeps that
model), else the Agent's own model, or for the Message History the flow's own (`flow_model_node`), with streaming off.

`summarizer_for()` wraps it as the engine's `Summarizer`: built on its first call (a turn that does not fold never
builds one), called with no callbacks (fold tokens never reach the Playground stream or the agent's trace) and
abandoned after Summary Timeout (s). A build error (no API key, say) is a failed fold with back-off, never a failed
turn; so is an answer the provider says it cut off at its length limit (`CUT_OFF_REASONS`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel, BaseLanguageModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable

from langflow_summarizing_agent import langflow_private
from langflow_summarizing_agent.engine.fold import Summarizer
from langflow_summarizing_agent.engine.fold_cost import ReportedAnswer
from langflow_summarizing_agent.engine.prompt import FoldAnswerCutOff, FoldToolCall

if TYPE_CHECKING:
    from lfx.custom.custom_component.component import Component
    from lfx.graph.vertex.base import Vertex
    from lfx.io import ModelInput

logger = logging.getLogger(__name__)


def summary_model_picker(**fields: Any) -> ModelInput:
    """The Summary Model input: a model picker only, without "Connect other models" (the canvas shows a model field's
    handle only in that mode). A model node connected to it would be built with the flow, before any fold, and its
    failure would fail the turn; a picked model is built only when a fold runs, so its failure is a failed fold."""
    from lfx.io import ModelInput

    return ModelInput(external_options={}, **fields)


def picks_the_agents_own_model(picked: object, agent_model: object) -> bool:
    """A Summary Model pick that names the Agent's own model (same provider and name): none picked, which folds with
    the Agent's own model and its settings. Langflow 1.13's model picker can neither be cleared nor list an entry of
    its own ("none"): it lists only the enabled models of configured providers. So picking the Agent's own model is
    the way back to none."""
    return _model_key(picked) is not None and _model_key(picked) == _model_key(agent_model)


def _model_key(value: object) -> tuple[str, str] | None:
    selected = value[0] if isinstance(value, list) and value else None
    if not isinstance(selected, dict):
        return None
    name, provider = selected.get("name"), selected.get("provider")
    return (provider, name) if isinstance(name, str) and name and isinstance(provider, str) else None


def build_summary_model(component: Component) -> BaseLanguageModel:
    """The Summary Model input if connected or picked, else the Agent's own model, built without streaming."""
    return summary_model_builder(component)()


def summary_model_builder(component: Component) -> Callable[[], BaseLanguageModel]:
    """What builds the summary model, with the component's inputs read now: a catch-up after the reply builds it once
    the build has ended, from these values, never from the component. Reading them never raises: a failure is raised
    when the model is built, a failed fold.

    The Summary Model input if connected or picked, else the Agent's own model, built as
    `AgentComponent.get_agent_requirements()` builds the Agent's model (its model selection, then `_get_llm`'s
    `get_llm` call: provider policy, API key from the flow or the user's global variable, Max Tokens, watsonx
    settings, remediation overrides); only `stream` differs, as fold tokens must not stream.
    """
    try:
        return _builder(component)
    except Exception as exc:  # noqa: BLE001 - raised when the fold builds the model: a failed fold, not a failed turn
        failure = exc

        def fail() -> BaseLanguageModel:
            raise failure

        return fail


def _builder(component: Component) -> Callable[[], BaseLanguageModel]:
    from lfx.base.models.unified_models import get_llm
    from lfx.components.models_and_agents.agent import AgentComponent

    # The Agent's Summary Model has a key of its own; the Message History's only model uses the history's API Key.
    key = getattr(component, "summary_model_api_key" if isinstance(component, AgentComponent) else "api_key", None)
    connected = getattr(component, "summary_model", None)
    if isinstance(connected, list) and connected:
        return _picked_model(component, connected, key)
    if connected and not isinstance(connected, list | str):
        return lambda: connected
    # A component without a model of its own (the Message History) folds with the one picked on it, else with the
    # flow's own language model, or none.
    if not isinstance(component, AgentComponent):
        node = flow_model_node(component)
        return _flow_model(component, node) if node is not None else _picked_model(component, [], key)
    return functools.partial(
        get_llm,
        model=langflow_private.resolve_selected_model(component),
        user_id=component.user_id,
        api_key=getattr(component, "api_key", None),
        stream=False,
        max_tokens=langflow_private.max_tokens_value(component),
        watsonx_url=getattr(component, "base_url_ibm_watsonx", None),
        watsonx_project_id=getattr(component, "project_id", None),
        overrides=langflow_private.model_overrides(component),
    )


def _picked_model(component: Component, picked: list[Any], api_key: object) -> Callable[[], BaseLanguageModel]:
    """A Summary Model picked on the node (a ModelInput, as the Language Model component picks its model), built as
    that component builds it, without streaming, with `api_key` (blank: the key configured for its provider)."""
    if not picked:

        def none_picked() -> BaseLanguageModel:
            msg = "no Summary Model is picked; pick one on the node"
            raise ValueError(msg)

        return none_picked
    from lfx.base.models.unified_models import get_llm

    return functools.partial(
        get_llm,
        model=picked,
        user_id=component.user_id,
        api_key=api_key,
        stream=False,
        watsonx_url=getattr(component, "base_url_ibm_watsonx", None),
        watsonx_project_id=getattr(component, "project_id", None),
        ollama_base_url=getattr(component, "ollama_base_url", None),
    )


MODEL_FIELD = "model"
"""The input a flow's language model is picked in: Langflow's model picker on the Language Model component, the Agent
and any component built like them."""


def flow_model_node(component: Component) -> Vertex | None:
    """The flow's own language model for a component without one (the Message History): the first node its outputs
    reach, breadth first over the flow's edges, with a model picked in its `MODEL_FIELD` (a connected model is no
    pick and is passed over). None outside a flow or when no node after it has a model picked."""
    vertex = langflow_private.vertex_of(component)
    graph = getattr(vertex, "graph", None)
    if vertex is None or graph is None:
        return None
    seen = {vertex.id}
    queue = deque(graph.successor_map.get(vertex.id, ()))
    while queue:
        node_id = queue.popleft()
        if node_id in seen:
            continue
        seen.add(node_id)
        node = graph.get_vertex(node_id)
        if _model_key(node.params.get(MODEL_FIELD)) is not None:
            return node
        queue.extend(graph.successor_map.get(node_id, ()))
    return None


def _flow_model(component: Component, node: Vertex) -> Callable[[], BaseLanguageModel]:
    """The model picked on `node`, built as the Language Model component builds it, without streaming, with the
    values its fields hold now (read once: a catch-up after the reply never reads the flow)."""
    from lfx.base.models.unified_models import get_llm

    params: Mapping[str, Any] = dict(node.params)
    return functools.partial(
        get_llm,
        model=params[MODEL_FIELD],
        user_id=component.user_id,
        api_key=_key_of(node),
        stream=False,
        max_tokens=params.get("max_tokens"),
        watsonx_url=params.get("base_url_ibm_watsonx"),
        watsonx_project_id=params.get("project_id"),
        ollama_base_url=params.get("ollama_base_url"),
    )


def _key_of(node: Vertex) -> object:
    """The node's API Key as `get_llm` takes it: a key typed in the field, or, from a field that loads from the
    database, the name of the user's global variable, which `get_llm` resolves for the user as Langflow resolves the
    node's own (the user's variable, else the environment); blank: the key configured for the provider."""
    key = node.params.get("api_key")
    return key or None


def summary_model_name(component: Component) -> str | None:
    """The summary model's name for the stored summary, read off the inputs: nothing is built for it."""
    connected = getattr(component, "summary_model", None)
    if isinstance(connected, list) and connected:
        return _picked_name(connected)
    if connected and not isinstance(connected, str):
        return model_name_of(connected)
    from lfx.components.models_and_agents.agent import AgentComponent

    if not isinstance(component, AgentComponent):
        node = flow_model_node(component)
        return _picked_name(node.params[MODEL_FIELD]) if node is not None else None
    return agent_model_name(component)


def agent_model_name(component: Component) -> str | None:
    """The name of the Agent's own model, read off its Language Model input: nothing is built for it."""
    model = getattr(component, "model", None)
    if isinstance(model, list):
        return _picked_name(model)
    # A string here is no model (nothing selected, or "connect_other_models" with nothing connected).
    if model is None or isinstance(model, str):
        return None
    return model_name_of(model)


def agent_model_provider(component: Component) -> str | None:
    """The provider picked with the Agent's model ("OpenAI", "Anthropic", ...); None for a connected model."""
    model = getattr(component, "model", None)
    selected = model[0] if isinstance(model, list) and model else None
    provider = selected.get("provider") if isinstance(selected, dict) else None
    return provider if isinstance(provider, str) and provider else None


def _picked_name(picked: Sequence[object]) -> str | None:
    selected = picked[0] if picked else None
    name = selected.get("name") if isinstance(selected, dict) else None
    return name if isinstance(name, str) and name else None


def model_name_of(llm: object) -> str | None:
    for attribute in ("model_name", "model", "model_id"):
        value = getattr(llm, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(llm).__name__ if llm is not None else None


BUILD_REMEDY_OF_AGENT = (
    "pick another Summary Model or set the Summary Model API Key (with none picked, fix the Language Model's settings)"
)
BUILD_REMEDY_OF_HISTORY = "pick a Summary Model on the node and set the Summary Model API Key"
"""What to change when the summary model cannot be built, in the fields each component shows."""


TOOL_CHOICE_NONE: dict[str, Any] = {"langchain_anthropic": None, "langchain_aws": None}
"""`tool_choice` that forbids tool calls, by the LangChain package of the model where it is not OpenAI's "none". None
sets no choice: Anthropic's cache drops every message block when `tool_choice` differs from the cached call's, and
Bedrock's Converse API has no such choice; there a tool call is answered by the quoted retry."""


CUT_OFF_REASONS: dict[str, frozenset[str]] = {
    "finish_reason": frozenset({"length", "MAX_TOKENS"}),
    "stop_reason": frozenset({"max_tokens", "length"}),
    "stopReason": frozenset({"max_tokens"}),
    "done_reason": frozenset({"length"}),
    "incomplete_details.reason": frozenset({"max_output_tokens"}),
}
"""How LangChain's chat models say, in an answer's `response_metadata`, that it stopped at its length limit (a dot
reads into a nested dict):
- `finish_reason` "length": OpenAI's Chat Completions (`ChatOpenAI`) and the APIs that copy it (Groq, Mistral,
  watsonx, DeepSeek, ...); "MAX_TOKENS": Google's Gemini (`ChatGoogleGenerativeAI`), Cohere on Bedrock.
- `stop_reason` "max_tokens": Anthropic (`ChatAnthropic`) and Anthropic on Bedrock (`ChatBedrock`); "length": Mistral
  and Meta on Bedrock.
- `stopReason` "max_tokens": Bedrock's Converse API (`ChatBedrockConverse`).
- `done_reason` "length": Ollama (`ChatOllama`).
- `incomplete_details.reason` "max_output_tokens": OpenAI's Responses API (`ChatOpenAI(use_responses_api=True)`).
A provider not listed is still caught when its JSON never closes (`engine.prompt.parse_fold_output`)."""


def cut_off_reason(response: object) -> str | None:
    """The provider's word for an answer cut off at its length limit, as `key "value"`; None for any other end."""
    metadata = getattr(response, "response_metadata", None)
    for key, values in CUT_OFF_REASONS.items():
        value: object = metadata
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, str) and value in values:
            return f'{key} "{value}"'
    return None


def summarizer_for(
    build_model: Callable[[], BaseLanguageModel],
    timeout_seconds: float,
    tools: Sequence[Any] = (),
    remedy: str = BUILD_REMEDY_OF_AGENT,
) -> Summarizer:
    """A summarizer that builds its model on its first call, with `tools` bound when given: a fold on the agent's
    prefix sends the tools the agent's call had, as they are part of the prefix the provider caches, with tool calls
    turned off where the provider takes that (`without_tool_calls`). A build error is reported with `remedy`; an
    answer cut off at its length limit raises `FoldAnswerCutOff`, one that is a tool call `FoldToolCall`."""
    llm: Runnable[list[BaseMessage], object] | None = None

    async def summarize(prompt: list[BaseMessage]) -> str:
        nonlocal llm
        if llm is None:
            try:
                model = build_model()
            except Exception as exc:
                msg = f"the summary model could not be built ({exc}); {remedy}"
                raise RuntimeError(msg) from exc
            llm = without_tool_calls(model, tools) if tools and isinstance(model, BaseChatModel) else model
        try:
            response = await asyncio.wait_for(
                llm.ainvoke(prompt, config={"callbacks": [], "run_name": "summarizing_agent_fold"}),
                timeout=timeout_seconds,
            )
        except asyncio.TimeoutError:
            msg = f"no answer within {timeout_seconds:g} s; raise Summary Timeout if the summary model is this slow"
            raise TimeoutError(msg) from None
        reason = cut_off_reason(response)
        if reason is not None:
            raise FoldAnswerCutOff(f"at its length limit ({reason})")
        text = _text_of(response)
        calls = getattr(response, "tool_calls", None)
        if calls and not text.strip():
            names = ", ".join(str(call.get("name")) for call in calls)
            msg = f"the summary model answered with a tool call ({names}) instead of the summary"
            raise FoldToolCall(msg)
        return reported(text, response)

    return summarize


def reported(text: str, response: object) -> str:
    """`text` with the usage the provider reported for the call (`ReportedAnswer`), or as it is when none was."""
    usage = getattr(response, "usage_metadata", None)
    if not usage:
        return text
    details = usage.get("input_token_details") or {}
    return ReportedAnswer(
        text,
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        cached_tokens=int(details.get("cache_read") or 0),
    )


def without_tool_calls(model: BaseChatModel, tools: Sequence[Any]) -> Runnable[list[BaseMessage], object]:
    """`model` with `tools` bound and `tool_choice` set to call none (`TOOL_CHOICE_NONE`, by the package of the nearest
    class of the model's that is listed there: a subclass of `ChatAnthropic` is Anthropic's); with the tools alone when
    its `bind_tools` takes no such choice."""
    packages = [cls.__module__.split(".", 1)[0] for cls in type(model).__mro__]
    choice = next((TOOL_CHOICE_NONE[package] for package in packages if package in TOOL_CHOICE_NONE), "none")
    if choice is not None:
        try:
            return model.bind_tools(list(tools), tool_choice=choice)
        except (TypeError, ValueError) as refused:
            # A tool-call answer is then caught by the fold and asked again quoted, without tools.
            logger.debug("Summarizing Agent: %s takes no tool_choice (%s); tools bound alone", model, refused)
    return model.bind_tools(list(tools))


def _text_of(response: object) -> str:
    content = getattr(response, "content", response)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") if isinstance(part, dict) else str(part) for part in content if part is not None
        )
    return str(content or "")
