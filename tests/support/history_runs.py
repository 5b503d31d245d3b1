"""Run one chat turn through a real lfx graph that builds its own prompt: Chat Input -> Prompt ({memory} from a
message history, {question}) -> Language Model (the fake chat model) -> Chat Output."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
HISTORY_FOLD_EACH_TURN = {
    "summarize_older_messages": True,
    "n_messages": 2,
    "fold_batch": 2,
    "history_token_budget": 0,
    "pinned_keys": ["project_id", "cluster"],
}
"""The Message History twin of `FOLD_EACH_TURN`: the same window of 2 messages (the Message History's Number of
Messages counts the input, which Chat Input stored before the history is read) and a fold on every turn once two
messages are older than it."""


@dataclass
class HistoryChatSession(ChatSession):
    """A `ChatSession` whose flow gives the model its memory through a message history component, not an Agent.

    The summary model is the flow's model unless `summary_recorder_name` names another; `output` picks the history
    output the Prompt reads ("messages_text" or "dataframe", through a Type Convert)."""

    history_class: type[MemoryComponent] = SummarizingMessageHistoryComponent
    template: str = PROMPT_TEMPLATE

    async def say(self, text: str) -> str:
        context = {"context_id": self.context_id} if self.context_id else {}
        chat_input = ChatInput(_id="chat_input")
        chat_input.set(input_value=text, **context)
        model = FakeChatModelComponent(_id="recording_model")
        model.set(recorder_name=self.recorder_name, fail_folds=self.fail_folds, reply=self.reply)
        history = self.history_class(_id="history")
        history.set(**{**context, **self.settings})
        if self.history_class is SummarizingMessageHistoryComponent:
            summary_model = model
            if self.summary_recorder_name:
                summary_model = FakeChatModelComponent(_id="summary_model")
                summary_model.set(recorder_name=self.summary_recorder_name)
            history.set(summary_model=summary_model.build_model)
        prompt = PromptComponent(_id="prompt")
        prompt.set(
            template=self.template, memory=history.retrieve_messages_as_text, question=chat_input.message_response
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


def history_settings(**settings: Any) -> dict[str, Any]:
    return {**HISTORY_FOLD_EACH_TURN, **settings}
