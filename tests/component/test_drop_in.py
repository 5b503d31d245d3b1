"""A true drop-in: Langflow's own unit tests of the stock Agent pass on the Summarizing Agent, switch off and on.

Ported from Langflow's repository (langflow-ai/langflow, 1.13 line); each group names its upstream file. The setup
and assertions are upstream's; only the class under test is swapped, and with the switch on the Summarizing Agent
runs on Langflow's database. The stock Agent runs the same tests as the control, so a failure that is Langflow's
shows on "stock" too. Here: the inputs, the model the Agent builds and its run (the first half of
`TestAgentComponent`, test_agent_create_agent.py, test_agent_model_remediation.py); the tools, the prompt, structured
output and the memory read are in `test_drop_in_context.py`, and what both share in `drop_in_agents.py`. Left out:
tests that need a provider key or network; tests of Message conversion only; `ComponentTestBase.test_latest_version`,
which fails on the stock Agent here too (its mocked graph has no message ids); and the create_agent / middleware /
run_agent tests, whose methods the Summarizing Agent inherits untouched.
"""

from __future__ import annotations

from typing import Any
from unittest.mock import AsyncMock, MagicMock, patch

import pytest
from lfx.components.models_and_agents.agent import AgentComponent
from lfx.schema.message import Message

from tests.component.drop_in_agents import (
    OPENAI_GPT_4O,
    OPENAI_GPT_4O_OPTION,
    AgentComponentSetup,
    MockLanguageModel,
    Variant,
)

# src/backend/tests/unit/components/models_and_agents/test_agent_component.py::TestAgentComponent, its first half
# (the second is in test_drop_in_context.py)


class TestAgentComponent(AgentComponentSetup):
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
        def bind_tools(self, _tools, **_kwargs):
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
    assert isinstance(result.text, str), "the reply's text, not a stream"
    assert "answer is 4" in result.text


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
