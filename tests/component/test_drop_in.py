"""A true drop-in: Langflow's own unit tests of the stock Agent pass on the Summarizing Agent, switch off and on.

Ported from Langflow's repository (langflow-ai/langflow, 1.13 line); each group names its upstream file. The setup
and assertions are upstream's; only the class under test is swapped, and with the switch on the Summarizing Agent
runs on Langflow's database. The stock Agent runs the same tests as the control, so a failure that is Langflow's
shows on "stock" too. Left out: tests that need a provider key or network; tests of Message conversion only;
`ComponentTestBase.test_latest_version`, which fails on the stock Agent here too (its mocked graph has no message
ids); and the create_agent / middleware / run_agent tests, whose methods the Summarizing Agent inherits untouched.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any
from unittest.mock import AsyncMock, MagicMock, Mock, patch
from uuid import UUID, uuid4

import pytest
from langchain_core.language_models import BaseLanguageModel
from lfx.components.models_and_agents.agent import AgentComponent
from lfx.graph.graph.base import Graph
from lfx.graph.vertex.base import Vertex
from lfx.schema.message import Message
from pydantic import BaseModel, Field
from typing_extensions import override

from langflow_summarizing_agent.components.summarizing_agent.summarizing_agent import SummarizingAgentComponent
from tests.support.langflow_db import LangflowDatabase


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


@pytest.fixture(params=VARIANTS, ids=[v.name for v in VARIANTS])
def variant(request: pytest.FixtureRequest, langflow_db: LangflowDatabase) -> Variant:
    return request.param


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
    async def abatch(self, messages: Any, *args: Any, **kwargs: Any) -> list:
        responses = []
        for msg_list in messages or []:
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

    @override
    def predict(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the Agent under test never calls this method of a connected model")

    @override
    def predict_messages(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the Agent under test never calls this method of a connected model")

    @override
    async def apredict(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the Agent under test never calls this method of a connected model")

    @override
    async def apredict_messages(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the Agent under test never calls this method of a connected model")

    def bind_tools(self, tools: list) -> MockLanguageModel:  # type: ignore[override]
        self.tools = tools
        return self


# src/backend/tests/unit/components/models_and_agents/test_agent_component.py::TestAgentComponent
# (set up by src/backend/tests/base.py::ComponentTestBase.component_setup)


class TestAgentComponent:
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

    async def test_max_tokens_input_field_present(self, component_class, default_kwargs):
        component = await self.component_setup(component_class, default_kwargs)

        assert "max_tokens" in [inp.name for inp in component.inputs if hasattr(inp, "name")]
        assert hasattr(component, "max_tokens")

    async def test_watsonx_input_fields_present(self, component_class, default_kwargs):
        component = await self.component_setup(component_class, default_kwargs)

        input_names = [inp.name for inp in component.inputs if hasattr(inp, "name")]
        assert "base_url_ibm_watsonx" in input_names
        assert "project_id" in input_names

    async def test_watsonx_fields_hidden_by_default(self, component_class, default_kwargs):
        component = await self.component_setup(component_class, default_kwargs)

        by_name = {inp.name: inp for inp in component.inputs if hasattr(inp, "name")}
        assert by_name["base_url_ibm_watsonx"].show is False
        assert by_name["project_id"].show is False

    @patch("lfx.base.models.unified_models.get_language_model_options")
    async def test_update_build_config_shows_watsonx_fields(self, mock_opts, component_class, default_kwargs):
        from lfx.schema.dotdict import dotdict

        watsonx_model_value = [
            {
                "name": "ibm/granite-13b-chat-v2",
                "provider": "IBM WatsonX",
                "icon": "IBM",
                "metadata": {"model_class": "ChatWatsonx", "model_name_param": "model_id", "api_key_param": "apikey"},
            }
        ]
        mock_opts.return_value = watsonx_model_value
        component = await self.component_setup(component_class, default_kwargs)
        build_config = component.to_frontend_node()["data"]["node"]["template"]

        updated_config = await component.update_build_config(
            dotdict(build_config), watsonx_model_value, field_name="model"
        )

        assert updated_config["base_url_ibm_watsonx"]["show"] is True
        assert updated_config["project_id"]["show"] is True
        assert updated_config["base_url_ibm_watsonx"]["required"] is False
        assert updated_config["project_id"]["required"] is False

    @patch("lfx.base.models.unified_models.get_language_model_options")
    async def test_update_build_config_hides_watsonx_fields_for_other_providers(
        self, mock_opts, component_class, default_kwargs
    ):
        from lfx.schema.dotdict import dotdict

        mock_opts.return_value = OPENAI_GPT_4O_OPTION
        component = await self.component_setup(component_class, default_kwargs)
        build_config = component.to_frontend_node()["data"]["node"]["template"]

        updated_config = await component.update_build_config(
            dotdict(build_config), OPENAI_GPT_4O_OPTION, field_name="model"
        )

        assert updated_config["base_url_ibm_watsonx"]["show"] is False
        assert updated_config["project_id"]["show"] is False

    async def test_get_agent_requirements_passes_watsonx_params(self, component_class, default_kwargs):
        component = await self.component_setup(component_class, default_kwargs)
        component.base_url_ibm_watsonx = "https://us-south.ml.cloud.ibm.com"
        component.project_id = "test-project-id"
        component.model = [
            {
                "name": "ibm/granite-13b-chat-v2",
                "provider": "IBM WatsonX",
                "metadata": {"model_class": "ChatWatsonx", "model_name_param": "model_id", "api_key_param": "apikey"},
            }
        ]
        component.api_key = "test-api-key"

        with patch("lfx.components.models_and_agents.agent.get_llm") as mock_get_llm:
            mock_get_llm.return_value = MockLanguageModel()
            self._requirements_stubbed(component)
            await component.get_agent_requirements()

            mock_get_llm.assert_called_once()
            call_kwargs = mock_get_llm.call_args.kwargs
            assert call_kwargs.get("watsonx_url") == "https://us-south.ml.cloud.ibm.com"
            assert call_kwargs.get("watsonx_project_id") == "test-project-id"

    @patch("lfx.components.models_and_agents.agent.get_language_model_options")
    @patch("lfx.components.models_and_agents.agent.get_llm")
    async def test_get_agent_requirements_supports_legacy_agent_llm_model_name(
        self, mock_get_llm, mock_get_options, component_class, default_kwargs
    ):
        default_kwargs["model"] = ""
        component = await self.component_setup(component_class, default_kwargs)
        component.agent_llm = "OpenAI"
        component.model_name = "gpt-4o"
        self._requirements_stubbed(component)
        mock_get_options.return_value = [
            {
                "name": "gpt-4o",
                "provider": "OpenAI",
                "metadata": {"model_class": "ChatOpenAI", "model_name_param": "model", "api_key_param": "api_key"},
            }
        ]
        mock_get_llm.return_value = MockLanguageModel()

        await component.get_agent_requirements()

        assert mock_get_llm.call_args.kwargs["model"] == [mock_get_options.return_value[0]]

    @patch("lfx.components.models_and_agents.agent.get_llm")
    async def test_get_agent_requirements_accepts_connected_model_instance(
        self, mock_get_llm, component_class, default_kwargs
    ):
        connected_model = MockLanguageModel()
        default_kwargs["model"] = connected_model
        component = await self.component_setup(component_class, default_kwargs)
        self._requirements_stubbed(component)
        mock_get_llm.return_value = connected_model

        llm_model, _, _ = await component.get_agent_requirements()

        assert llm_model is connected_model
        assert mock_get_llm.call_args.kwargs["model"] is connected_model

    # The next five patch the stock Agent's get_memory_data on the class: the Summarizing Agent's own
    # get_memory_data runs, and with the switch on it must not build a summary model (no OpenAI key here).

    @patch("lfx.components.models_and_agents.agent.AgentComponent.get_memory_data")
    @patch("lfx.components.models_and_agents.agent.get_llm")
    async def test_agent_passes_max_tokens_to_get_llm(
        self, mock_get_llm, mock_get_memory_data, component_class, default_kwargs
    ):
        mock_get_memory_data.return_value = AsyncMock(return_value=[])
        mock_get_llm.return_value = MagicMock()
        default_kwargs["max_tokens"] = 500
        component = await self.component_setup(component_class, default_kwargs)
        component.model = OPENAI_GPT_4O

        await component.get_agent_requirements()

        mock_get_llm.assert_called_once()
        call_kwargs = mock_get_llm.call_args.kwargs
        assert "max_tokens" in call_kwargs
        assert call_kwargs["max_tokens"] == 500

    @patch("lfx.components.models_and_agents.agent.AgentComponent.get_memory_data")
    @patch("lfx.components.models_and_agents.agent.get_llm")
    async def test_agent_passes_none_max_tokens_when_not_set(
        self, mock_get_llm, mock_get_memory_data, component_class, default_kwargs
    ):
        mock_get_memory_data.return_value = AsyncMock(return_value=[])
        mock_get_llm.return_value = MagicMock()
        default_kwargs.pop("max_tokens", None)
        component = await self.component_setup(component_class, default_kwargs)
        component.model = OPENAI_GPT_4O

        await component.get_agent_requirements()

        mock_get_llm.assert_called_once()
        call_kwargs = mock_get_llm.call_args.kwargs
        assert "max_tokens" in call_kwargs
        assert call_kwargs["max_tokens"] is None

    @patch("lfx.components.models_and_agents.agent.AgentComponent.get_memory_data")
    @patch("lfx.components.models_and_agents.agent.get_llm")
    async def test_agent_max_tokens_with_provider_specific_field_name(
        self, mock_get_llm, mock_get_memory_data, component_class, default_kwargs
    ):
        mock_get_memory_data.return_value = AsyncMock(return_value=[])
        mock_get_llm.return_value = MagicMock()
        default_kwargs["max_tokens"] = 1000
        component = await self.component_setup(component_class, default_kwargs)
        component.model = OPENAI_GPT_4O

        await component.get_agent_requirements()

        mock_get_llm.assert_called_once()
        call_kwargs = mock_get_llm.call_args.kwargs
        assert "max_tokens" in call_kwargs
        assert call_kwargs["max_tokens"] == 1000

    @patch("lfx.components.models_and_agents.agent.AgentComponent.get_memory_data")
    @patch("lfx.components.models_and_agents.agent.get_llm")
    async def test_should_force_stream_true_to_get_llm_even_when_toggle_is_false(
        self, mock_get_llm, mock_get_memory_data, component_class, default_kwargs
    ):
        mock_get_memory_data.return_value = AsyncMock(return_value=[])
        mock_get_llm.return_value = MagicMock()
        default_kwargs["stream"] = False
        component = await self.component_setup(component_class, default_kwargs)
        component.model = OPENAI_GPT_4O

        await component.get_agent_requirements()

        mock_get_llm.assert_called_once()
        assert mock_get_llm.call_args.kwargs.get("stream") is True

    @patch("lfx.components.models_and_agents.agent.AgentComponent.get_memory_data")
    @patch("lfx.components.models_and_agents.agent.get_llm")
    async def test_should_pass_stream_value_to_get_llm_when_stream_input_is_enabled(
        self, mock_get_llm, mock_get_memory_data, component_class, default_kwargs
    ):
        mock_get_memory_data.return_value = AsyncMock(return_value=[])
        mock_get_llm.return_value = MagicMock()
        default_kwargs["stream"] = True
        component = await self.component_setup(component_class, default_kwargs)
        component.model = OPENAI_GPT_4O

        await component.get_agent_requirements()

        mock_get_llm.assert_called_once()
        call_kwargs = mock_get_llm.call_args.kwargs
        assert "stream" in call_kwargs
        assert call_kwargs["stream"] is True

    async def test_should_expose_stream_input_when_agent_component_is_loaded(self, component_class, default_kwargs):
        component = await self.component_setup(component_class, default_kwargs)

        assert "stream" in [inp.name for inp in component.inputs if hasattr(inp, "name")]
        assert hasattr(component, "stream")

    async def test_should_default_stream_input_value_to_true_when_agent_loaded(self, component_class, default_kwargs):
        component = await self.component_setup(component_class, default_kwargs)

        stream_input = next((inp for inp in component.inputs if getattr(inp, "name", None) == "stream"), None)
        assert stream_input is not None
        assert getattr(stream_input, "value", None) is True
        assert getattr(stream_input, "advanced", False) is True

    async def test_should_append_calculator_tool_when_add_calculator_toggle_is_true(
        self, component_class, default_kwargs
    ):
        from langchain_core.tools import StructuredTool

        default_kwargs["add_calculator_tool"] = True
        default_kwargs["add_current_date_tool"] = False
        component = await self.component_setup(component_class, default_kwargs)
        component.model = OPENAI_GPT_4O
        self._requirements_stubbed(component)

        with patch("lfx.components.models_and_agents.agent.get_llm") as mock_get_llm:
            mock_get_llm.return_value = MockLanguageModel()
            _, _, tools = await component.get_agent_requirements()

        assert len(tools) == 1
        assert isinstance(tools[0], StructuredTool)
        assert "evaluate" in tools[0].name.lower()

    async def test_should_not_append_calculator_tool_when_add_calculator_toggle_is_false(
        self, component_class, default_kwargs
    ):
        default_kwargs["add_calculator_tool"] = False
        default_kwargs["add_current_date_tool"] = False
        component = await self.component_setup(component_class, default_kwargs)
        component.model = OPENAI_GPT_4O
        self._requirements_stubbed(component)

        with patch("lfx.components.models_and_agents.agent.get_llm") as mock_get_llm:
            mock_get_llm.return_value = MockLanguageModel()
            _, _, tools = await component.get_agent_requirements()

        assert tools == []

    async def test_should_register_calculator_tool_only_once_when_external_calculator_connected_and_toggle_enabled(
        self, component_class, default_kwargs
    ):
        from lfx.components.utilities.calculator_core import CalculatorComponent

        external_calc_tool = (await CalculatorComponent().to_toolkit()).pop(0)
        assert external_calc_tool.name == "evaluate_expression"
        default_kwargs["add_calculator_tool"] = True
        default_kwargs["add_current_date_tool"] = False
        default_kwargs["tools"] = [external_calc_tool]
        component = await self.component_setup(component_class, default_kwargs)
        component.model = OPENAI_GPT_4O
        self._requirements_stubbed(component)

        with patch("lfx.components.models_and_agents.agent.get_llm") as mock_get_llm:
            mock_get_llm.return_value = MockLanguageModel()
            _, _, tools = await component.get_agent_requirements()

        assert [t.name for t in tools].count("evaluate_expression") == 1

    def test_should_replace_current_date_and_model_name_when_both_placeholders_present(self, component_class):
        import re

        component = component_class()
        component.model = OPENAI_GPT_4O

        result = component._inject_dynamic_prompt_values("Today is {current_date}. You are powered by {model_name}.")

        assert "{current_date}" not in result
        assert "{model_name}" not in result
        assert "gpt-4o" in result
        assert re.search(r"Today is (\d{4}-\d{2}-\d{2})\.", result) is not None

    def test_should_leave_literal_braces_untouched_when_prompt_has_no_known_placeholders(self, component_class):
        component = component_class()
        component.model = OPENAI_GPT_4O

        prompt = 'Respond with JSON: {"key": 1, "nested": {"a": [1, 2]}}.'
        assert component._inject_dynamic_prompt_values(prompt) == prompt

    def test_should_return_empty_when_prompt_is_empty(self, component_class):
        component = component_class()

        assert component._inject_dynamic_prompt_values("") == ""
        assert component._inject_dynamic_prompt_values(None) is None

    async def test_should_inject_dynamic_values_into_system_prompt_when_message_response_runs(
        self, component_class, default_kwargs
    ):
        default_kwargs["system_prompt"] = "Powered by {model_name}."
        default_kwargs["add_calculator_tool"] = False
        default_kwargs["add_current_date_tool"] = False
        component = await self.component_setup(component_class, default_kwargs)
        component.model = OPENAI_GPT_4O
        self._requirements_stubbed(component)
        captured: dict = {}

        def fake_set(**kwargs):
            captured.update(kwargs)
            return component

        component.set = fake_set
        component.create_agent_runnable = MagicMock(return_value=MagicMock())
        component.run_agent = AsyncMock(return_value=MagicMock())

        with patch("lfx.components.models_and_agents.agent.get_llm") as mock_get_llm:
            mock_get_llm.return_value = MockLanguageModel()
            await component.message_response()

        assert captured.get("system_prompt") == "Powered by gpt-4o."

    async def test_should_expose_structured_response_output_when_class_loaded(self, component_class):
        output_names = {o.name: o for o in component_class.outputs}

        assert "structured_response" in output_names
        assert output_names["structured_response"].method == "json_response"
        assert "Data" in output_names["structured_response"].types

    def _structured_fallback_setup(self, component: Any) -> None:
        component.model = OPENAI_GPT_4O
        self._requirements_stubbed(component)
        # A tool forces the structured-output orchestrator into its prompt fallback.
        fake_tool = MagicMock()
        fake_tool.name = "fake_tool"
        component.tools = [fake_tool]

    async def test_should_not_mutate_format_instructions_when_json_response_runs(self, component_class, default_kwargs):
        default_kwargs["system_prompt"] = "Powered by {model_name}."
        default_kwargs["format_instructions"] = "Return JSON with fields {current_date} and {model_name} preserved."
        default_kwargs["add_calculator_tool"] = False
        default_kwargs["add_current_date_tool"] = False
        default_kwargs["output_schema"] = ANSWER_SCHEMA
        component = await self.component_setup(component_class, default_kwargs)
        self._structured_fallback_setup(component)
        captured: dict = {}

        def fake_set(**kwargs):
            captured.update(kwargs)
            return component

        component.set = fake_set
        component.create_agent_runnable = MagicMock(return_value=MagicMock())
        component.run_agent = AsyncMock(return_value=MagicMock(content='{"answer": "42"}'))

        with patch("lfx.components.models_and_agents.agent.get_llm") as mock_get_llm:
            mock_get_llm.return_value = MockLanguageModel()
            await component.json_response()

        prompt = captured.get("system_prompt") or ""
        assert "Powered by gpt-4o." in prompt
        assert "{current_date}" in prompt
        assert "{model_name} preserved" in prompt

    async def test_should_not_emit_chat_message_when_json_response_uses_fallback(self, component_class, default_kwargs):
        default_kwargs["add_calculator_tool"] = False
        default_kwargs["add_current_date_tool"] = False
        default_kwargs["output_schema"] = ANSWER_SCHEMA
        component = await self.component_setup(component_class, default_kwargs)
        self._structured_fallback_setup(component)
        component.set = MagicMock(return_value=component)
        component.create_agent_runnable = MagicMock(return_value=MagicMock())
        chat_emissions: list[Message] = []

        async def tracked_send_message(message, *_args, **_kwargs):
            chat_emissions.append(message)
            return message

        component.send_message = tracked_send_message

        async def fake_run_agent(_agent_runnable):
            emitted = Message(text='{"answer": "42"}')
            await component.send_message(emitted)
            return emitted

        component.run_agent = fake_run_agent

        with patch("lfx.components.models_and_agents.agent.get_llm") as mock_get_llm:
            mock_get_llm.return_value = MockLanguageModel()
            await component.json_response()

        assert chat_emissions == []

    async def test_should_restore_send_message_when_run_agent_raises_in_fallback(self, component_class, default_kwargs):
        default_kwargs["add_calculator_tool"] = False
        default_kwargs["add_current_date_tool"] = False
        default_kwargs["output_schema"] = ANSWER_SCHEMA
        component = await self.component_setup(component_class, default_kwargs)
        self._structured_fallback_setup(component)
        component.set = MagicMock(return_value=component)
        component.create_agent_runnable = MagicMock(return_value=MagicMock())
        post_emissions: list[Any] = []

        async def sentinel_send_message(message, *_args, **_kwargs):
            post_emissions.append(message)
            return message

        component.send_message = sentinel_send_message

        async def exploding_run_agent(_runnable):
            msg = "boom"
            raise ValueError(msg)

        component.run_agent = exploding_run_agent

        with patch("lfx.components.models_and_agents.agent.get_llm") as mock_get_llm:
            mock_get_llm.return_value = MockLanguageModel()
            await component.json_response()

        assert component.send_message is sentinel_send_message
        await component.send_message(Message(text="post-fallback"))
        assert len(post_emissions) == 1

    async def test_should_accept_add_calculator_tool_in_default_keys(self, component_class, default_kwargs):
        from lfx.schema.dotdict import dotdict

        with patch("lfx.components.models_and_agents.agent.get_language_model_options") as mock_opts:
            mock_opts.return_value = OPENAI_GPT_4O_OPTION
            component = await self.component_setup(component_class, default_kwargs)
            build_config = component.to_frontend_node()["data"]["node"]["template"]
            assert "add_calculator_tool" in build_config

            updated_config = await component.update_build_config(
                dotdict(build_config), mock_opts.return_value, field_name="model"
            )
            assert "add_calculator_tool" in updated_config

    def test_should_have_placeholders_in_default_system_prompt(self, component_class):
        prompt_input = next(
            (inp for inp in component_class.inputs if getattr(inp, "name", None) == "system_prompt"), None
        )

        assert prompt_input is not None
        assert "{current_date}" in prompt_input.value
        assert "{model_name}" in prompt_input.value

    async def test_should_keep_description_in_sync_when_agent_used_as_tool(self, component_class, default_kwargs):
        component = await self.component_setup(component_class, default_kwargs)

        await component._build_tools_metadata_input()

        assert component.tools_metadata
        for item in component.tools_metadata:
            assert item["description"] == item["display_description"]

    async def test_should_propagate_description_change_when_agent_used_as_tool(self, component_class, default_kwargs):
        component = await self.component_setup(component_class, default_kwargs)
        await component._build_tools_metadata_input()
        first_description = component.tools_metadata[0]["description"]

        component.description = "An updated agent description"
        await component._build_tools_metadata_input()
        second_description = component.tools_metadata[0]["description"]

        assert second_description != first_description
        assert "An updated agent description" in second_description

    async def test_update_build_config_does_not_require_deprecated_agent_description(
        self, component_class, default_kwargs
    ):
        from lfx.schema.dotdict import dotdict

        with patch("lfx.components.models_and_agents.agent.get_language_model_options") as mock_opts:
            mock_opts.return_value = OPENAI_GPT_4O_OPTION
            component = await self.component_setup(component_class, default_kwargs)
            build_config = component.to_frontend_node()["data"]["node"]["template"]
            assert "agent_description" not in build_config

            updated_config = await component.update_build_config(
                dotdict(build_config), mock_opts.return_value, field_name="model"
            )

        assert "agent_description" not in updated_config

    async def test_get_tools_does_not_call_removed_api(self, component_class, default_kwargs):
        component = await self.component_setup(component_class, default_kwargs)

        assert await component._get_tools()

    async def test_get_tool_description_backward_compat_shim(self, component_class, default_kwargs):
        from lfx.base.agents.agent import DEFAULT_TOOLS_DESCRIPTION

        component = await self.component_setup(component_class, default_kwargs)

        assert component.get_tool_description() == DEFAULT_TOOLS_DESCRIPTION
        component.agent_description = "Legacy serialized description"
        assert component.get_tool_description() == "Legacy serialized description"


# src/backend/tests/unit/components/models_and_agents/test_memory_flow_id_scoping.py::TestAgentGetMemoryDataIntegration
# These build the Agent with `__new__` and set only the stock attributes get_memory_data reads; with the switch
# on, ours is set too.


def make_bare_agent(
    variant: Variant, flow_id: str | UUID | None, session_id: str = "New Session 0", n_messages: int = 10
) -> AgentComponent:
    agent = variant.agent_class.__new__(variant.agent_class)
    agent._vertex = SimpleNamespace(graph=SimpleNamespace(flow_id=flow_id, session_id=session_id))
    agent.context_id = ""
    agent.n_messages = n_messages
    agent.input_value = SimpleNamespace(id="current-input-id")
    for name, value in variant.inputs.items() if variant.switch else ():
        setattr(agent, name, value)
    return agent


async def test_agent_routes_through_helper_with_flow_id(variant: Variant):
    flow_id_str = "88888888-8888-8888-8888-888888888888"
    agent = make_bare_agent(variant, flow_id=flow_id_str)

    with patch(
        "lfx.components.models_and_agents.agent.aget_agent_chat_history", new=AsyncMock(return_value=[])
    ) as mock_helper:
        await agent.get_memory_data()

    mock_helper.assert_awaited_once()
    kwargs = mock_helper.await_args.kwargs
    assert kwargs["flow_id"] == flow_id_str
    assert kwargs["session_id"] == "New Session 0"
    assert kwargs["n_messages"] == 10


async def test_agent_filters_out_current_input_message(variant: Variant):
    agent = make_bare_agent(variant, flow_id="55555555-5555-5555-5555-555555555555")
    current = SimpleNamespace(id="current-input-id", text="ping")
    old = SimpleNamespace(id="old-msg-id", text="earlier")

    with patch(
        "lfx.components.models_and_agents.agent.aget_agent_chat_history", new=AsyncMock(return_value=[old, current])
    ):
        result = await agent.get_memory_data()

    assert [m.id for m in result] == ["old-msg-id"]


async def test_agent_n_messages_zero_disables_memory(variant: Variant):
    agent = make_bare_agent(variant, flow_id="99999999-9999-9999-9999-999999999999", n_messages=0)

    with patch(
        "lfx.components.models_and_agents.memory.aget_messages",
        new=AsyncMock(return_value=[SimpleNamespace(id=f"msg-{i}") for i in range(5)]),
    ) as mock_get:
        result = await agent.get_memory_data()

    assert result == []
    mock_get.assert_not_awaited()


# src/lfx/tests/unit/components/models_and_agents/test_agent_create_agent.py (its `_build_component()`)


def build_component(variant: Variant) -> AgentComponent:
    component = variant.agent_class()
    component._user_id = None
    component.set_attributes(
        {
            "model": "fake-model",
            "api_key": None,
            "tools": [],
            "chat_history": [],
            "input_value": "what's 2+2?",
            "system_prompt": "You are a helpful agent.",
            "max_iterations": 7,
            "handle_parsing_errors": True,
            "verbose": False,
            **variant.inputs,
        }
    )
    return component


async def test_should_return_final_ai_text_when_message_response_runs_end_to_end(variant: Variant):
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage

    class _ToolCapableFakeChat(FakeMessagesListChatModel):
        def bind_tools(self, _tools, **_kwargs):  # type: ignore[override]
            return self

    fake_llm = _ToolCapableFakeChat(responses=[AIMessage(content="The answer is 4.")])
    component = build_component(variant)
    component.set_attributes({"input_value": "what's 2+2?", "chat_history": []})

    with (
        patch.object(type(component), "_get_llm", return_value=fake_llm),
        patch.object(type(component), "get_agent_requirements", new=AsyncMock(return_value=(fake_llm, [], []))),
        patch.object(type(component), "send_message", new=AsyncMock(side_effect=lambda message, **_kw: message)),
    ):
        result = await component.message_response()

    assert isinstance(result, Message)
    assert "answer is 4" in (result.text or "")


async def test_should_not_require_verbose_in_update_build_config(variant: Variant):
    from lfx.schema.dotdict import dotdict

    component = build_component(variant)
    build_config = dotdict(
        {
            "code": {"value": ""},
            "_type": {"value": "AgentComponent"},
            "model": {"value": "fake-model"},
            "tools": {"value": []},
            "input_value": {"value": ""},
            "add_current_date_tool": {"value": False},
            "add_calculator_tool": {"value": False},
            "system_prompt": {"value": ""},
            "agent_description": {"value": ""},
            "max_iterations": {"value": 15},
            "handle_parsing_errors": {"value": True},
        }
    )

    with (
        patch(
            "lfx.components.models_and_agents.agent.handle_model_input_update",
            side_effect=lambda **kwargs: kwargs["build_config"],
        ),
        patch.object(type(component), "update_input_types", side_effect=lambda bc: bc),
    ):
        await component.update_build_config(build_config, [], field_name="model")


@pytest.mark.parametrize("stream", [False, True])
def test_should_pass_stream_true_to_get_llm_whatever_the_stream_toggle(variant: Variant, stream: bool):
    # Upstream's test_should_pass_stream_true_to_get_llm_when_self_stream_toggle_is_false / _is_true.
    captured: dict[str, Any] = {}

    def _capture_get_llm(**kwargs):
        captured.update(kwargs)
        return MagicMock(name="fake_chat_model")

    component = build_component(variant)
    component.set_attributes({"stream": stream})

    with patch("lfx.components.models_and_agents.agent.get_llm", side_effect=_capture_get_llm):
        component._get_llm()

    assert captured.get("stream") is True


# src/lfx/tests/unit/components/models_and_agents/test_agent_model_remediation.py

GPT56_RESPONSES_API_ERROR = RuntimeError(
    "Error building Component Agent: Error code: 400 - Function tools with "
    "reasoning_effort are not supported for gpt-5.6 in /v1/chat/completions. "
    "To use function tools, use /v1/responses or set reasoning_effort to 'none'."
)


def remediation_agent(variant: Variant) -> AgentComponent:
    agent = variant.agent_class()
    agent.input_value = "hi"
    agent.system_prompt = ""
    agent.tools = []
    for name, value in variant.inputs.items():
        setattr(agent, name, value)
    return agent


def remediation_patches(agent_class: type[AgentComponent], run_agent: AsyncMock) -> list[Any]:
    return [
        patch.object(agent_class, "_resolve_selected_model", return_value=[{"provider": "OpenAI", "name": "gpt-5.6"}]),
        patch.object(agent_class, "get_agent_requirements", new=AsyncMock(return_value=(MagicMock(), [], []))),
        patch.object(agent_class, "create_agent_runnable", return_value=MagicMock()),
        patch.object(agent_class, "_inject_dynamic_prompt_values", return_value=""),
        patch.object(agent_class, "set", new=MagicMock()),
        patch.object(agent_class, "run_agent", new=run_agent),
    ]


async def test_message_response_remediates_responses_api_error_and_remembers(variant: Variant):
    from contextlib import ExitStack

    from lfx.base.models import model_remediation

    model_remediation.reset_remediation_cache()
    try:
        agent = remediation_agent(variant)
        run_agent = AsyncMock(side_effect=[GPT56_RESPONSES_API_ERROR, Message(text="ok")])
        with ExitStack() as stack:
            for each in remediation_patches(variant.agent_class, run_agent):
                stack.enter_context(each)
            result = await agent.message_response()

        assert isinstance(result, Message)
        assert result.text == "ok"
        assert run_agent.await_count == 2
        assert agent._model_overrides == {"use_responses_api": True}
        assert model_remediation.cached_overrides("OpenAI", "gpt-5.6") == {"use_responses_api": True}
    finally:
        model_remediation.reset_remediation_cache()


async def test_message_response_does_not_retry_unrelated_errors(variant: Variant):
    from contextlib import ExitStack

    from lfx.base.models import model_remediation

    model_remediation.reset_remediation_cache()
    try:
        agent = remediation_agent(variant)
        run_agent = AsyncMock(side_effect=RuntimeError("rate limit exceeded"))
        with ExitStack() as stack:
            for each in remediation_patches(variant.agent_class, run_agent):
                stack.enter_context(each)
            with pytest.raises(RuntimeError, match="rate limit"):
                await agent.message_response()

        assert run_agent.await_count == 1
        assert model_remediation.cached_overrides("OpenAI", "gpt-5.6") == {}
    finally:
        model_remediation.reset_remediation_cache()
