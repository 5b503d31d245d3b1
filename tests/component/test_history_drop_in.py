"""A true drop-in: Langflow's own unit tests of the stock Message History pass on the Summarizing Message History,
switch off and on.

Ported from Langflow's repository (langflow-ai/langflow, 1.13 line); each group names its upstream file. The setup
and assertions are upstream's; only the class under test is swapped. The stock Message History runs the same tests
as the control, so a failure that is Langflow's shows on "stock" too. Upstream's mocked graphs carry a flow id but
no owner, so with the switch on Retrieve mode runs the summarizing turn on Langflow's database, finds no owner and
falls back to the stock retrieval (as the Summarizing Agent does in test_drop_in_context.py); each retrieval test also
checks that the turn reported that fallback. Options the switch refuses by design (External Memory) assert the
refusal with the switch on.

Left out: `TestCoerceFlowIdToUuid` and `TestAgetAgentChatHistoryHelper` of test_memory_flow_id_scoping.py, which
test module functions of lfx's memory module with no component to swap (ours reaches them through the inherited
stock retrieval); its `TestAgentGetMemoryDataIntegration`, ported for the Agent in test_drop_in_context.py, and
`TestCugaGetMemoryDataIntegration` (the Cuga agent); the Memory Chatbot starter project tests
(src/backend/tests/unit/initial_setup/starter_projects/test_memory_chatbot.py), which test that graph's build order
and dump, not the component, and whose stored versions import modules Langflow 1.13 no longer ships; and
src/backend/tests/unit/components/helpers/test_memory_component.py, from a closed, unmerged pull request (#6428),
not in the 1.13 line. None of the component's upstream tests needs a provider key or network.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, cast
from unittest.mock import AsyncMock, patch
from uuid import UUID

import pytest
from lfx.components.models_and_agents.memory import MemoryComponent

from langflow_summarizing_agent.components.summarizing_agent.summarizing_message_history import (
    SummarizingMessageHistoryComponent,
)
from langflow_summarizing_agent.wiring.agent_turn import report_of
from langflow_summarizing_agent.wiring.history_turn import NO_SCOPE_NOTE
from tests.component.drop_in_agents import awaited_kwargs, vertex_stand_in
from tests.support.langflow_db import LangflowDatabase


@dataclass(frozen=True)
class Variant:
    """The Message History a ported test runs on: the stock one (the control), or ours with the switch off or on."""

    name: str
    history_class: type[MemoryComponent]
    switch: bool | None

    @property
    def inputs(self) -> dict[str, Any]:
        if self.switch is None:
            return {}
        # Picked, never built: the turn falls back before any fold.
        return {"summarize_older_messages": self.switch, "summary_model": PICKED_SUMMARY_MODEL}


PICKED_SUMMARY_MODEL = [{"name": "gpt-4o-mini", "provider": "OpenAI", "icon": "OpenAI", "metadata": {}}]


VARIANTS = [
    Variant("stock", MemoryComponent, None),
    Variant("off", SummarizingMessageHistoryComponent, False),
    Variant("on", SummarizingMessageHistoryComponent, True),
]


@pytest.fixture(params=VARIANTS, ids=[v.name for v in VARIANTS])
def variant(request: pytest.FixtureRequest, langflow_db: LangflowDatabase) -> Variant:
    return request.param


def assert_stock_retrieval_ran(variant: Variant, *components: MemoryComponent) -> None:
    """Not upstream: with the switch on, the summarizing turn ran and fell back to the stock retrieval for want of an
    owner on the mocked graph (so upstream's assertions check that fallback); off and stock never run the turn."""
    for component in components:
        assert report_of(component) == (NO_SCOPE_NOTE if variant.switch else None)


# src/backend/tests/unit/components/models_and_agents/test_memory_flow_id_scoping.py
# (TestRetrieveMessagesPassesFlowId, TestStoreMessagePassesFlowId, with its `_build_component()`)


def stored_rows(retrieved: Any) -> list[Any]:
    """What `retrieve_messages` returns: lfx annotates it `Data` and returns the list of stored rows."""
    return cast("list[Any]", retrieved)


def build_component(
    variant: Variant, flow_id: str | UUID | None, session_id: str = "session-shared"
) -> MemoryComponent:
    component = variant.history_class()
    component.set(session_id=session_id, n_messages=10, order="Ascending", **variant.inputs)
    component._vertex = vertex_stand_in(flow_id, session_id)
    return component


class TestRetrieveMessagesPassesFlowId:
    async def test_passes_graph_flow_id_as_uuid(self, variant: Variant):
        flow_id_str = "22222222-2222-2222-2222-222222222222"
        component = build_component(variant, flow_id=flow_id_str)

        with patch("lfx.components.models_and_agents.memory.aget_messages", new=AsyncMock(return_value=[])) as mock_get:
            await component.retrieve_messages()

        mock_get.assert_awaited_once()
        kwargs = awaited_kwargs(mock_get)
        assert kwargs["flow_id"] == UUID(flow_id_str)
        assert kwargs["session_id"] == "session-shared"
        assert_stock_retrieval_ran(variant, component)

    async def test_isolates_two_flows_sharing_a_session_name(self, variant: Variant):
        flow_a = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
        flow_b = "bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb"
        shared_session = "New Session 0"
        component_a = build_component(variant, flow_id=flow_a, session_id=shared_session)
        component_b = build_component(variant, flow_id=flow_b, session_id=shared_session)

        with patch("lfx.components.models_and_agents.memory.aget_messages", new=AsyncMock(return_value=[])) as mock_get:
            await component_a.retrieve_messages()
            await component_b.retrieve_messages()

        assert mock_get.await_count == 2
        first_call_kwargs = mock_get.await_args_list[0].kwargs
        second_call_kwargs = mock_get.await_args_list[1].kwargs
        assert first_call_kwargs["flow_id"] == UUID(flow_a)
        assert second_call_kwargs["flow_id"] == UUID(flow_b)
        assert first_call_kwargs["session_id"] == shared_session
        assert second_call_kwargs["session_id"] == shared_session
        assert_stock_retrieval_ran(variant, component_a, component_b)

    async def test_falls_back_to_none_when_flow_id_missing(self, variant: Variant):
        component = build_component(variant, flow_id=None)

        with patch("lfx.components.models_and_agents.memory.aget_messages", new=AsyncMock(return_value=[])) as mock_get:
            await component.retrieve_messages()

        assert awaited_kwargs(mock_get)["flow_id"] is None
        assert_stock_retrieval_ran(variant, component)

    async def test_falls_back_to_none_when_flow_id_is_not_a_uuid(self, variant: Variant):
        component = build_component(variant, flow_id="not-a-uuid")

        with patch("lfx.components.models_and_agents.memory.aget_messages", new=AsyncMock(return_value=[])) as mock_get:
            await component.retrieve_messages()

        assert awaited_kwargs(mock_get)["flow_id"] is None
        assert_stock_retrieval_ran(variant, component)

    async def test_external_memory_path_is_untouched(self, variant: Variant):
        class _FakeExternalMemory:
            session_id: str | None = None
            context_id: str | None = None

            async def aget_messages(self):
                return []

        component = build_component(variant, flow_id="33333333-3333-3333-3333-333333333333")
        component.set(memory=_FakeExternalMemory())

        with patch("lfx.components.models_and_agents.memory.aget_messages", new=AsyncMock(return_value=[])) as mock_get:
            if variant.switch:
                # By design: a summary folds Langflow's tables, so the switch on refuses External Memory.
                with pytest.raises(ValueError, match="disconnect External Memory"):
                    await component.retrieve_messages()
            else:
                await component.retrieve_messages()

        mock_get.assert_not_awaited()

    async def test_fetches_desc_and_reverses_for_ascending_order(self, variant: Variant):
        component = build_component(variant, flow_id="22222222-2222-2222-2222-222222222222")
        desc_rows = [SimpleNamespace(id=f"msg-{i}") for i in (4, 3, 2, 1, 0)]
        with patch(
            "lfx.components.models_and_agents.memory.aget_messages", new=AsyncMock(return_value=desc_rows)
        ) as mock_get:
            result = stored_rows(await component.retrieve_messages())

        assert awaited_kwargs(mock_get)["order"] == "DESC"
        assert awaited_kwargs(mock_get)["limit"] == 10
        assert [m.id for m in result] == ["msg-0", "msg-1", "msg-2", "msg-3", "msg-4"]
        assert_stock_retrieval_ran(variant, component)

    async def test_descending_order_passthrough_keeps_desc_view(self, variant: Variant):
        component = build_component(variant, flow_id="22222222-2222-2222-2222-222222222222")
        component.set(order="Descending")
        desc_rows = [SimpleNamespace(id=f"msg-{i}") for i in (4, 3, 2, 1, 0)]
        with patch("lfx.components.models_and_agents.memory.aget_messages", new=AsyncMock(return_value=desc_rows)):
            result = stored_rows(await component.retrieve_messages())

        assert [m.id for m in result] == ["msg-4", "msg-3", "msg-2", "msg-1", "msg-0"]
        assert_stock_retrieval_ran(variant, component)


class TestStoreMessagePassesFlowId:
    async def test_store_passes_coerced_flow_id_to_astore_and_aget(self, variant: Variant):
        flow_id_str = "22222222-2222-2222-2222-222222222222"
        component = build_component(variant, flow_id=flow_id_str)
        component.set(mode="Store", message="hi", sender="User", sender_name="Tester")

        stored = SimpleNamespace(id="stored-1")
        with (
            patch(
                "lfx.components.models_and_agents.memory.astore_message", new=AsyncMock(return_value=None)
            ) as mock_store,
            patch(
                "lfx.components.models_and_agents.memory.aget_messages", new=AsyncMock(return_value=[stored])
            ) as mock_get,
        ):
            await component.store_message()

        assert awaited_kwargs(mock_store)["flow_id"] == UUID(flow_id_str)
        assert awaited_kwargs(mock_get)["flow_id"] == UUID(flow_id_str)
        assert awaited_kwargs(mock_store)["flow_id"] == awaited_kwargs(mock_get)["flow_id"]

    async def test_store_does_not_crash_without_vertex(self, variant: Variant):
        component = variant.history_class()
        component.set(
            session_id="s",
            n_messages=10,
            order="Ascending",
            mode="Store",
            message="hi",
            sender="User",
            sender_name="Tester",
            **variant.inputs,
        )
        stored = SimpleNamespace(id="stored-1")
        with (
            patch(
                "lfx.components.models_and_agents.memory.astore_message", new=AsyncMock(return_value=None)
            ) as mock_store,
            patch("lfx.components.models_and_agents.memory.aget_messages", new=AsyncMock(return_value=[stored])),
        ):
            await component.store_message()

        assert awaited_kwargs(mock_store)["flow_id"] is None


# src/backend/tests/unit/components/models_and_agents/test_message_history_component_outputs.py


def test_message_history_update_outputs_sets_types_and_selected_for_retrieve_mode(variant: Variant):
    component = variant.history_class(**variant.inputs)

    node: dict[str, Any] = {"outputs": []}
    updated = component.update_outputs(node, field_name="mode", field_value="Retrieve")

    outputs = updated["outputs"]
    assert len(outputs) == 2

    by_name = {o.name: o for o in outputs}

    assert by_name["messages_text"].types == ["Message"]
    assert by_name["messages_text"].selected == "Message"

    assert by_name["dataframe"].types == ["Table"]
    assert by_name["dataframe"].selected == "Table"


def test_message_history_update_outputs_sets_types_and_hidden_for_store_mode(variant: Variant):
    component = variant.history_class(**variant.inputs)

    node: dict[str, Any] = {"outputs": []}
    updated = component.update_outputs(node, field_name="mode", field_value="Store")

    outputs = updated["outputs"]
    assert len(outputs) == 1

    output = outputs[0]
    assert output.name == "stored_messages"
    assert output.types == ["Message"]
    assert output.selected == "Message"
    assert output.hidden is True
