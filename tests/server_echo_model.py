"""A test-only offline chat model component for flows run by a real Langflow server: it echoes what it was sent.

A saved flow carries this module's source in its `code` field and the server execs it, so the module is
self-contained (lfx, LangChain and pydantic only, never `tests.*`), and annotations are builtin types because the
server compiles component code with postponed annotations.

Agent calls are answered with `ECHO_PREFIX` and the texts of the user-role messages the agent was sent (the summary
message is one), so a test reads from the reply what history the turn used. Fold calls are answered with valid
fold JSON whose summary lists the folded messages' texts.
"""

import json

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from lfx.custom.custom_component.component import Component
from lfx.field_typing import LanguageModel
from lfx.io import Output

FOLD_PROMPT_START = "You maintain the memory of a long conversation"
ECHO_PREFIX = "echo:"
FOLDED_PREFIX = "folded "


def is_fold_prompt(messages) -> bool:
    return isinstance(messages[0], SystemMessage) and str(messages[0].content).startswith(FOLD_PROMPT_START)


def fold_answer(data: str) -> str:
    previous = data.split("Previous summary:\n<summary>\n", 1)[1].split("\n</summary>", 1)[0]
    quoted = json.loads(data.split("<conversation>\n", 1)[1].rsplit("\n</conversation>", 1)[0])
    lines = [line for line in previous.splitlines() if line.startswith("- ")]
    lines += [f"- {FOLDED_PREFIX}{item['text']}" for item in quoted]
    return json.dumps({"pinned": {}, "summary": "\n".join(lines)})


class EchoChatModel(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "echo-fake"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        if is_fold_prompt(messages):
            text = fold_answer(str(messages[-1].content))
        else:
            sent = [str(m.content) for m in messages if isinstance(m, HumanMessage)]
            text = ECHO_PREFIX + " " + " || ".join(sent)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


class EchoModelComponent(Component):
    display_name = "Echo Model"
    description = "Offline chat model for server tests; replies with the messages it was sent."
    name = "EchoModel"

    inputs = []  # noqa: RUF012
    outputs = [Output(display_name="Language Model", name="model_output", method="build_model")]  # noqa: RUF012

    def build_model(self) -> LanguageModel:
        return EchoChatModel()
