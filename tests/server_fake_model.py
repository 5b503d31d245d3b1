"""A test-only offline chat model component that a real Langflow server can run.

A saved flow carries each component's module source in its `code` field and the server execs it, so this module is
self-contained: it imports only what the server has (lfx, LangChain, pydantic), never `tests.*`. Annotations are
builtin types because the server compiles component code with postponed annotations.

Agent calls are answered with a reply that names the question and the worker process that ran it, so every stored
text is unique. Fold calls wait `fold_delay` seconds, so concurrent runs overlap while they fold, then answer with a
summary that keeps the previous lines and adds one line per folded message: the summary lists every message folded
along the chain of saved states.
"""

import asyncio
import json
import os

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from lfx.custom.custom_component.component import Component
from lfx.field_typing import LanguageModel
from lfx.io import FloatInput, MessageTextInput, Output

FOLD_PROMPT_START = "You maintain the memory of a long conversation"


def is_fold_prompt(messages) -> bool:
    return isinstance(messages[0], SystemMessage) and str(messages[0].content).startswith(FOLD_PROMPT_START)


class OfflineChatModel(BaseChatModel):
    reply: str = "Noted:"
    fold_delay: float = 0.0

    @property
    def _llm_type(self) -> str:
        return "offline-fake"

    def bind_tools(self, tools, **kwargs):
        return self

    def _answer(self, messages) -> str:
        if not is_fold_prompt(messages):
            question = next(m for m in reversed(messages) if isinstance(m, HumanMessage))
            return f"{self.reply} {question.content} [worker {os.getpid()}]"
        data = str(messages[-1].content)
        previous = data.split("<summary>\n", 1)[1].split("\n</summary>", 1)[0]
        lines = [line for line in previous.splitlines() if line.startswith("- ")]
        quoted = json.loads(data.split("<conversation>\n", 1)[1].rsplit("\n</conversation>", 1)[0])
        lines += [f"- {item['text']}" for item in quoted]
        return json.dumps({"pinned": {}, "summary": "\n".join(lines)})

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self._answer(messages)))])

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        if self.fold_delay and is_fold_prompt(messages):
            await asyncio.sleep(self.fold_delay)
        return self._generate(messages)


class OfflineModelComponent(Component):
    display_name = "Offline Model"
    description = "Offline chat model for server tests: replies name the question; folds list what they fold."
    name = "OfflineModel"

    inputs = [  # noqa: RUF012
        MessageTextInput(name="reply", display_name="Reply", value="Noted:"),
        FloatInput(name="fold_delay", display_name="Fold Delay (s)", value=0.0),
    ]
    outputs = [Output(display_name="Language Model", name="model_output", method="build_model")]  # noqa: RUF012

    def build_model(self) -> LanguageModel:
        return OfflineChatModel(reply=self.reply, fold_delay=float(self.fold_delay or 0))
