"""Run one chat turn through a real lfx graph that builds its own prompt: Chat Input -> Prompt ({memory} from a
message history, {question}) -> Language Model (the fake chat model) -> Chat Output.

`HistoryChatSession` takes the Agent's settings unchanged: at the same Number of (Chat History) Messages, the
Message History retrieves the Agent's window and the current input after it (Chat Input stored it first), so the
same settings fold the same messages. `SESSION_KINDS` runs a test on both flows.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from lfx.components.input_output import ChatInput, ChatOutput
from lfx.components.models_and_agents.language_model import LanguageModelComponent
from lfx.components.models_and_agents.memory import MemoryComponent
from lfx.components.models_and_agents.prompt import PromptComponent
from lfx.graph import Graph

from langflow_summarizing_agent.components.summarizing_agent.summarizing_message_history import (
    SummarizingMessageHistoryComponent,
)
from tests.support.agent_runs import ChatSession
from tests.support.fake_chat_model import FakeChatModelComponent

PROMPT_TEMPLATE = "Conversation so far:\n{memory}\n\nAnswer the customer's last message: {question}"
MESSAGE_TEMPLATE = "[{sender_name}] {text}"
"""The history's Template: each window message on its own line, told apart from the summary by its sender."""
SENDER_MARKS = ("[User] ", "[AI] ")


@dataclass
class HistoryChatSession(ChatSession):
    """A `ChatSession` whose flow gives the model its memory through a message history component, not an Agent.

    The summary model is the flow's model unless `summary_recorder_name` names another."""

    history_class: type[MemoryComponent] = SummarizingMessageHistoryComponent
    picked_summary_model: list[dict] | None = None
    """A Summary Model picked on the node (the ModelInput's value), instead of the flow's model connected to it."""

    async def say(self, text: str) -> str:
        context = {"context_id": self.context_id} if self.context_id else {}
        chat_input = ChatInput(_id="chat_input")
        chat_input.set(input_value=text, **context)
        model = FakeChatModelComponent(_id="recording_model")
        model.set(recorder_name=self.recorder_name, fail_folds=self.fail_folds, reply=self.reply)
        history = self.history_class(_id="history")
        history.set(template=MESSAGE_TEMPLATE, **{**context, **self.settings})
        if self.picked_summary_model is not None:
            history.set(summary_model=self.picked_summary_model)
        elif self.history_class is SummarizingMessageHistoryComponent:
            summary_model = model
            if self.summary_recorder_name:
                summary_model = FakeChatModelComponent(_id="summary_model")
                summary_model.set(recorder_name=self.summary_recorder_name)
            history.set(summary_model=summary_model.build_model)
        prompt = PromptComponent(_id="prompt")
        prompt.set(
            template=PROMPT_TEMPLATE, memory=history.retrieve_messages_as_text, question=chat_input.message_response
        )
        language_model = LanguageModelComponent(_id="language_model")
        language_model.set(model=model.build_model, input_value=prompt.build_prompt)
        chat_output = ChatOutput(_id="chat_output")
        chat_output.set(input_value=language_model.text_response, **context)
        graph = Graph(chat_input, chat_output, flow_id=str(self.flow_id), user_id=str(self.user_id))
        graph.session_id = self.session_id
        async for _ in graph.async_start():
            pass
        self.last_agent = graph.get_vertex("history").custom_component
        return str(graph.get_vertex("language_model").built_object["text_output"].text)

    @property
    def last_prompt(self) -> str:
        """What the model received on the last turn: the Prompt's text."""
        return str(self.model.agent_calls[-1][-1].content)

    @property
    def memory(self) -> str:
        """The {memory} part of the last prompt: what the history component output."""
        return self.last_prompt.split("Conversation so far:\n", 1)[1].rsplit("\n\nAnswer the customer's", 1)[0]

    def sent_history(self) -> list[str]:
        """As `ChatSession.sent_history`: the summary, if any, then the window without the current input."""
        lines = self.memory.split("\n")
        first = next((n for n, line in enumerate(lines) if line.startswith(SENDER_MARKS)), len(lines))
        summary = "\n".join(lines[:first]).strip()
        window = [line.split("] ", 1)[1].strip() for line in lines[first:]]
        return [*([summary] if summary else []), *window[:-1]]


SESSION_KINDS = [
    pytest.param(ChatSession, id="agent"),
    pytest.param(HistoryChatSession, id="message_history"),
]
"""The two flows a guarantee is shown on: the Summarizing Agent's and the Summarizing Message History's."""
