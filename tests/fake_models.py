"""Chat models that work offline and record every input they receive."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import Field

from langflow_summarizing_agent.fold import FOLD_SYSTEM_PROMPT
from tests.fakes import summarize_deterministically

FOLD_PROMPT_START = FOLD_SYSTEM_PROMPT.split("\n", 1)[0]


def is_fold_prompt(messages: list[BaseMessage]) -> bool:
    return (
        bool(messages)
        and isinstance(messages[0], SystemMessage)
        and str(messages[0].content).startswith(FOLD_PROMPT_START)
    )


class RecordingChatModel(BaseChatModel):
    """Answers agent calls with `reply` and fold calls deterministically; keeps every input in `calls`.

    `fail_folds` makes every fold call raise, as a provider outage would.
    """

    reply: str = "Noted."
    fail_folds: bool = False
    calls: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "recording-fake"

    def bind_tools(self, tools: Any, **kwargs: Any) -> RecordingChatModel:
        return self

    def _respond(self, messages: list[BaseMessage]) -> str:
        self.calls.append(list(messages))
        if not is_fold_prompt(messages):
            return self.reply
        if self.fail_folds:
            msg = "summary provider unavailable"
            raise RuntimeError(msg)
        return summarize_deterministically(str(messages[-1].content))

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any):
        text = self._respond(messages)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])

    def _stream(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any):
        # Word by word, so the Agent's event stream carries real token events.
        for index, word in enumerate(self._respond(messages).split(" ")):
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=word if index == 0 else " " + word))
            if run_manager:
                run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk

    @property
    def agent_calls(self) -> list[list[BaseMessage]]:
        return [call for call in self.calls if not is_fold_prompt(call)]

    @property
    def fold_calls(self) -> list[list[BaseMessage]]:
        return [call for call in self.calls if is_fold_prompt(call)]


RECORDERS: dict[str, RecordingChatModel] = {}
"""Models built by `RecordingModelComponent` in this process, by recorder name, so tests can read their calls."""


def recorder(name: str, **settings: Any) -> RecordingChatModel:
    RECORDERS[name] = RecordingChatModel(**settings)
    return RECORDERS[name]
