"""A true drop-in: Langflow's own unit tests of the stock Agent pass on the Summarizing Agent, switch off and on.

Ported from Langflow's repository (langflow-ai/langflow, 1.13 line); each group names its upstream file. The setup
and assertions are upstream's; only the class under test is swapped, and with the switch on the Summarizing Agent
runs on Langflow's database. Here: what the Agent gives its model besides the input (the second half of
`TestAgentComponent`: the tools, the system prompt, structured output, the Agent used as a tool; and
test_memory_flow_id_scoping.py's `TestAgentGetMemoryDataIntegration`: the chat memory it reads). The first half and
what is left out are in `test_drop_in.py`, what both share in `drop_in_agents.py`.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any
from unittest.mock import AsyncMock, MagicMock, patch
from uuid import UUID

from lfx.components.models_and_agents.agent import AgentComponent
from lfx.schema.message import Message

from tests.component.drop_in_agents import (
    ANSWER_SCHEMA,
    OPENAI_GPT_4O,
    OPENAI_GPT_4O_OPTION,
    AgentComponentSetup,
    MockLanguageModel,
    Variant,
    awaited_kwargs,
    vertex_stand_in,
)

# src/backend/tests/unit/components/models_and_agents/test_agent_component.py::TestAgentComponent, its second half
# (the first is in test_drop_in.py)


class TestAgentComponent(AgentComponentSetup):
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
    agent._vertex = vertex_stand_in(flow_id, session_id)
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
    kwargs = awaited_kwargs(mock_helper)
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
