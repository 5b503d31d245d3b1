"""A recording chat model whose fold answers are scripted, for fault, injection and concurrency tests.

Register it under a `ChatSession`'s recorder name before the first turn (`scripted_session`), and the graph's
`RecordingModelComponent` hands it to the agent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from pydantic import Field

from tests.agent_runs import ChatSession
from tests.fake_models import RECORDERS, RecordingChatModel, is_fold_prompt

FoldAnswer = str | BaseException | Callable[[list[BaseMessage]], str]


class ScriptedChatModel(RecordingChatModel):
    """Fold calls take the next answer of `fold_script` (a text, an exception to raise, or a function of the
    prompt); once the script is used up, `fold_rule` answers, or the deterministic summarizer.

    `fold_delay` makes every fold call wait that long first, like a slow provider. `echo_input` makes agent replies
    name the question they answer, so every stored message text is unique.
    """

    fold_script: list[Any] = Field(default_factory=list)
    fold_rule: Any = None
    fold_delay: float = 0.0
    echo_input: bool = False

    def _respond(self, messages: list[BaseMessage]) -> str:
        if not is_fold_prompt(messages):
            if self.echo_input:
                self.calls.append(list(messages))
                question = next(m for m in reversed(messages) if isinstance(m, HumanMessage))
                return f"Noted: {question.content}"
            return super()._respond(messages)
        answer = self.fold_script.pop(0) if self.fold_script else self.fold_rule
        if answer is None:
            return super()._respond(messages)
        self.calls.append(list(messages))
        if isinstance(answer, BaseException):
            raise answer
        return answer(messages) if callable(answer) else answer

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        if self.fold_delay and is_fold_prompt(messages):
            await asyncio.sleep(self.fold_delay)
        return await super()._agenerate(messages, *args, **kwargs)

    @property
    def fold_prompts(self) -> list[tuple[str, str]]:
        """(system, data) text of every fold call that reached the model."""
        return [(str(call[0].content), str(call[-1].content)) for call in self.fold_calls]


def scripted_session(settings: dict[str, Any], **model: Any) -> ChatSession:
    chat = ChatSession(settings=settings)
    RECORDERS[chat.recorder_name] = ScriptedChatModel(**model)
    return chat


def quoted_batch(data: str) -> list[dict[str, str]]:
    """The conversation messages of a fold prompt's data block."""
    after_summary = data.split("\n</summary>", 1)[1]
    return json.loads(after_summary.split("<conversation>\n", 1)[1].rsplit("\n</conversation>", 1)[0])


def list_every_folded_message(messages: list[BaseMessage]) -> str:
    """A fold answer whose summary keeps the previous lines and adds one line per folded message, in order."""
    data = str(messages[-1].content)
    previous = data.split("<summary>\n", 1)[1].split("\n</summary>", 1)[0]
    lines = [line for line in previous.splitlines() if line.startswith("- ")]
    lines += [f"- {item['text']}" for item in quoted_batch(data)]
    return json.dumps({"pinned": {}, "summary": "\n".join(lines)})
