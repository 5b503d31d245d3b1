"""What the ports of Langflow's Agent tests share (`test_drop_in.py`, `test_drop_in_context.py`; the stand-in vertex
and the mocks' awaited arguments also `test_history_drop_in.py`).

The variants an Agent test runs on (`variant`, the fixture over them, is in this directory's conftest.py), the
models and schemas the ports pass, upstream's mock language model (`tests/unit/mock_language_model.py`) and upstream's
setup of `TestAgentComponent` (`src/backend/tests/base.py::ComponentTestBase.component_setup`), from Langflow's
repository (langflow-ai/langflow, 1.13 line).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any
from unittest.mock import AsyncMock, MagicMock, Mock
from uuid import UUID, uuid4

import pytest
from langchain_core.language_models import BaseLanguageModel
from lfx.components.models_and_agents.agent import AgentComponent
from lfx.graph.graph.base import Graph
from lfx.graph.vertex.base import Vertex
from pydantic import BaseModel, Field
from typing_extensions import override

from langflow_summarizing_agent.components.summarizing_agent.summarizing_agent import SummarizingAgentComponent


@dataclass(frozen=True)
class Variant:
    """The Agent a ported test runs on: the stock one (the control), or ours with the switch off or on."""

    name: str
    agent_class: type[AgentComponent]
    switch: bool | None

    @property
    def inputs(self) -> dict[str, Any]:
        return {} if self.switch is None else {"summarize_older_messages": self.switch}


VARIANTS = [
    Variant("stock", AgentComponent, None),
    Variant("off", SummarizingAgentComponent, False),
    Variant("on", SummarizingAgentComponent, True),
]


def vertex_stand_in(flow_id: str | UUID | None, session_id: str) -> Any:
    """What upstream sets as a component's `_vertex`: only its graph's flow and session ids are read."""
    return SimpleNamespace(graph=SimpleNamespace(flow_id=flow_id, session_id=session_id))


def awaited_kwargs(mock: AsyncMock) -> Mapping[str, Any]:
    """The keyword arguments of the mock's last await (upstream's `mock.await_args.kwargs`)."""
    assert mock.await_args is not None, "never awaited"
    return mock.await_args.kwargs


OPENAI_GPT_4O = [{"name": "gpt-4o", "provider": "OpenAI", "metadata": {}}]
ANSWER_SCHEMA = [{"name": "answer", "type": "str", "description": "the answer", "multiple": False}]
OPENAI_GPT_4O_OPTION = [
    {
        "name": "gpt-4o",
        "provider": "OpenAI",
        "icon": "OpenAI",
        "metadata": {"model_class": "ChatOpenAI", "model_name_param": "model", "api_key_param": "api_key"},
    }
]


class MockLanguageModel(BaseLanguageModel, BaseModel):
    """Port of Langflow's `tests/unit/mock_language_model.py`: a connected model that binds tools, answers nothing."""

    tools: list = Field(default_factory=list)
    response_generator: Callable = Field(default_factory=lambda: lambda msg: f"Response for {msg}")

    @override
    def with_config(self, *args: Any, **kwargs: Any) -> MockLanguageModel:
        return self

    @override
    def with_structured_output(self, *args: Any, **kwargs: Any) -> MockLanguageModel:
        return self

    @override
    async def abatch(
        self, inputs: list[Any], config: Any = None, *, return_exceptions: bool = False, **kwargs: Any
    ) -> list[Any]:
        responses = []
        for msg_list in inputs or []:
            content = msg_list[-1]["content"] if isinstance(msg_list, list) else msg_list
            responses.append(MagicMock(content=self.response_generator(content)))
        return responses

    @override
    def invoke(self, *args: Any, **kwargs: Any) -> MockLanguageModel:
        return self

    @override
    def generate_prompt(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the Agent under test never calls this method of a connected model")

    @override
    async def agenerate_prompt(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the Agent under test never calls this method of a connected model")

    def bind_tools(self, tools: list) -> MockLanguageModel:
        self.tools = tools
        return self


# src/backend/tests/unit/components/models_and_agents/test_agent_component.py::TestAgentComponent
# (set up by src/backend/tests/base.py::ComponentTestBase.component_setup)


class AgentComponentSetup:
    """Upstream's fixtures and setup of `TestAgentComponent`, which both halves of its port subclass."""

    @pytest.fixture
    def component_class(self, variant: Variant) -> type[AgentComponent]:
        return variant.agent_class

    @pytest.fixture
    def default_kwargs(self, variant: Variant) -> dict[str, Any]:
        return {
            "_type": "Agent",
            "add_current_date_tool": True,
            "add_calculator_tool": True,
            "model": MockLanguageModel(),
            "handle_parsing_errors": True,
            "input_value": "",
            "max_iterations": 10,
            "system_prompt": "You are a helpful assistant.",
            "tools": [],
            "n_messages": 100,
            "format_instructions": "You are an AI that extracts structured JSON objects from unstructured text.",
            "output_schema": [],
            **variant.inputs,
        }

    @pytest.fixture(autouse=True)
    def _variant(self, variant: Variant) -> None:
        self.variant = variant

    async def component_setup(self, component_class: type[Any], default_kwargs: dict[str, Any]) -> Any:
        mock_vertex = Mock(spec=Vertex)
        mock_vertex.graph = Mock(spec=Graph)
        mock_vertex.graph.session_id = str(uuid4())
        mock_vertex.graph.flow_id = str(uuid4())
        if self.variant.switch:
            # Not upstream: an owner, as every Langflow run has, so the switch-on path reads and keeps a summary
            # on the database instead of falling back to the stock history for want of an owner.
            mock_vertex.graph.user_id = str(uuid4())
        source_code = await asyncio.to_thread(inspect.getsource, component_class)
        component_instance = component_class(_code=source_code, **default_kwargs)
        component_instance._should_process_output = Mock(return_value=False)
        component_instance._vertex = mock_vertex
        component_instance._should_process_output = lambda output: False
        return component_instance

    def _requirements_stubbed(self, component: Any) -> None:
        component.get_memory_data = AsyncMock(return_value=[])
        component._get_shared_callbacks = list
        component.set_tools_callbacks = lambda *_: None
