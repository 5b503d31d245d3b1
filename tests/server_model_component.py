"""A test-only offline chat model component that records what it receives to a file, for flows run by a server or lfx.

A saved flow carries this module's source in a node's `code` field and the server (or `lfx run`) execs it, so the
module is self-contained: it imports only lfx, LangChain and the standard library, never `tests.*`. Fields use builtin
types because component code is compiled with postponed annotations.

Each model call appends one JSON line to `record_path`: `{"kind": "agent" | "fold", "messages": [{"type", "content"}]}`.
Agent calls get `reply`. Fold calls get valid fold JSON built from the facts in the messages (the project id, the
customer and the cluster, found by pattern), keeping the previous summary's bullets, so a fact told once survives
every later fold.
"""

import json
import re

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from lfx.custom.custom_component.component import Component
from lfx.field_typing import LanguageModel
from lfx.io import MessageTextInput, Output

FOLD_PROMPT_START = "You maintain the memory of a long conversation"
FACT_PATTERNS = {
    "project_id": re.compile(r"\b(PRJ-\d+)\b"),
    "customer": re.compile(r"\bcustomer ([A-Z][A-Za-z]+)\b"),
    "cluster": re.compile(r"\b([A-Z]{2}) cluster\b"),
}


def is_fold_prompt(messages) -> bool:
    return (
        bool(messages) and isinstance(messages[0], SystemMessage) and messages[0].content.startswith(FOLD_PROMPT_START)
    )


def fold_answer(data: str) -> str:
    previous = data.split("<summary>\n", 1)[1].split("\n</summary>", 1)[0]
    conversation = data.split("<conversation>\n", 1)[1].rsplit("\n</conversation>", 1)[0]
    pinned = {}
    for key, pattern in FACT_PATTERNS.items():
        found = pattern.findall(conversation)
        if found:
            pinned[key] = found[-1]
    bullets = [line for line in previous.splitlines() if line.startswith("- ")]
    bullets += [f"- {key} is {value}" for key, value in pinned.items() if f"- {key} is {value}" not in bullets]
    return json.dumps({"pinned": pinned, "summary": "\n".join(bullets) or "- small talk"})


class FileRecordingChatModel(BaseChatModel):
    reply: str = "Noted."
    record_path: str = ""

    @property
    def _llm_type(self) -> str:
        return "file-recording-fake"

    def bind_tools(self, tools, **kwargs):
        return self

    def _respond(self, messages) -> str:
        fold = is_fold_prompt(messages)
        if self.record_path:
            record = {
                "kind": "fold" if fold else "agent",
                "messages": [{"type": m.type, "content": str(m.content)} for m in messages],
            }
            with open(self.record_path, "a", encoding="utf-8") as records:
                records.write(json.dumps(record) + "\n")
        return fold_answer(str(messages[-1].content)) if fold else self.reply

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self._respond(messages)))])

    def _stream(self, messages, stop=None, run_manager=None, **kwargs):
        # Word by word like a real provider, so the Playground receives token events.
        for index, word in enumerate(self._respond(messages).split(" ")):
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=word if index == 0 else " " + word))
            if run_manager:
                run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk


class FileRecordingModelComponent(Component):
    display_name = "File Recording Model"
    description = "Offline chat model for tests: a fixed reply, fold JSON from the facts it reads; records every call."
    name = "FileRecordingModel"

    inputs = [  # noqa: RUF012 - Langflow declares inputs as a class list
        MessageTextInput(name="reply", display_name="Reply", value="Noted."),
        MessageTextInput(name="record_path", display_name="Record Path", value=""),
    ]
    outputs = [Output(display_name="Language Model", name="model_output", method="build_model")]  # noqa: RUF012

    def build_model(self) -> LanguageModel:
        return FileRecordingChatModel(reply=self.reply, record_path=self.record_path or "")
