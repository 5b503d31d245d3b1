"""Run one chat turn through a real lfx graph (Chat Input -> agent -> Chat Output) with the fake chat model."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import SystemMessage
from lfx.components.input_output import ChatInput, ChatOutput
from lfx.components.models_and_agents.agent import AgentComponent
from lfx.graph import Graph

from langflow_summarizing_agent.components.summarizing_agent.summarizing_agent import SummarizingAgentComponent
from langflow_summarizing_agent.engine.records import Summary
from tests.support.fake_chat_model import RECORDERS, FakeChatModel, FakeChatModelComponent, recorder
from tests.support.langflow_db import stored_summary

FIRST = "I'm working on project PRJ-123 on the EU cluster."
"""A first message with both pinned facts (`PINNED_KEYS`) in it."""
PINNED_KEYS = ["project_id", "cluster"]
FOLD_EACH_TURN = {
    "summarize_older_messages": True,
    "n_messages": 3,
    "fold_batch": 2,
    "history_token_budget": 0,
    "pinned_keys": PINNED_KEYS,
}
"""A window of 2 messages and a fold on every turn once two messages are older than it; the pinned keys of the
scripted facts."""

QUIET_AGENT = {
    "add_current_date_tool": False,
    "add_calculator_tool": False,
    "system_prompt": "You are a support agent.",
}


@dataclass
class ChatSession:
    """One session of one flow and user, driven turn by turn."""

    agent_class: type[AgentComponent] = SummarizingAgentComponent
    settings: dict[str, Any] = field(default_factory=dict)
    flow_id: uuid.UUID = field(default_factory=uuid.uuid4)
    user_id: uuid.UUID = field(default_factory=uuid.uuid4)
    session_id: str = field(default_factory=lambda: f"session-{uuid.uuid4().hex[:8]}")
    recorder_name: str = field(default_factory=lambda: f"rec-{uuid.uuid4().hex[:8]}")
    fail_folds: bool = False
    reply: str = "Noted."
    summary_recorder_name: str | None = None
    context_id: str | None = None
    """Set on Chat Input, the agent and Chat Output, as a canvas user sets it on all three."""
    last_agent: AgentComponent | None = None

    @property
    def last_status(self) -> str:
        """The component's status after the last turn."""
        assert self.last_agent is not None, "no turn yet"
        return str(self.last_agent.status)

    @property
    def model(self) -> FakeChatModel:
        return RECORDERS[self.recorder_name]

    async def say(self, text: str) -> str:
        context = {"context_id": self.context_id} if self.context_id else {}
        chat_input = ChatInput(_id="chat_input")
        chat_input.set(input_value=text, **context)
        model = FakeChatModelComponent(_id="recording_model")
        model.set(recorder_name=self.recorder_name, fail_folds=self.fail_folds, reply=self.reply)
        agent = self.agent_class(_id="agent")
        agent.set(
            model=model.build_model,
            input_value=chat_input.message_response,
            **{**QUIET_AGENT, **context, **self.settings},
        )
        if self.summary_recorder_name:
            summary_model = FakeChatModelComponent(_id="summary_model")
            summary_model.set(recorder_name=self.summary_recorder_name)
            agent.set(summary_model=summary_model.build_model)
        chat_output = ChatOutput(_id="chat_output")
        chat_output.set(input_value=agent.message_response, **context)
        graph = Graph(chat_input, chat_output, flow_id=str(self.flow_id), user_id=str(self.user_id))
        graph.session_id = self.session_id
        async for _ in graph.async_start():
            pass
        self.last_agent = graph.get_vertex("agent").custom_component
        response = graph.get_vertex("agent").built_object["response"]
        return str(response.text)

    def sent_history(self) -> list[str]:
        """The history the model got on the last turn, stripped: the summary message, if any, then the window (the
        current input left out)."""
        call = self.model.agent_calls[-1]
        assert isinstance(call[0], SystemMessage)
        return [str(message.content).strip() for message in call[1:-1]]


def scripted_session(settings: dict[str, Any], *, kind: type[ChatSession] = ChatSession, **model: Any) -> ChatSession:
    """A session whose model is a `FakeChatModel` with `model` settings (fold scripts, echo, delays), registered under
    its recorder name before the first turn builds one. `kind` is the flow: the agent's or a message history's."""
    chat = kind(settings=settings)
    recorder(chat.recorder_name, **model)
    return chat


async def state_of(chat: ChatSession) -> Summary:
    """The session's stored summary; there must be one."""
    state = await stored_summary(flow_id=chat.flow_id, user_id=chat.user_id, session_id=chat.session_id)
    assert state is not None
    return state


async def fold_once_then(chat: ChatSession) -> Summary:
    """Three turns: the third folds the first exchange successfully. Returns the state after it."""
    await chat.say(FIRST)
    await chat.say("The deploy fails with error E001.")
    await chat.say("It still fails after a restart.")
    state = await state_of(chat)
    assert state.folded_count == 2
    assert state.pinned == {"project_id": "PRJ-123", "cluster": "EU cluster"}
    return state
