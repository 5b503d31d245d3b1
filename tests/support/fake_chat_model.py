"""The one offline chat model of the tests, the component that puts it in a flow, and the one reader of fold prompts.

A flow carries this module's source in its model node's `code`, and a Langflow server (or `lfx run`) execs it, so the
module is self-contained: it imports lfx, LangChain, pydantic, the standard library and this package (installed beside
the server), never `tests.*`. The server runs only the imports, assignments, functions and classes at module level,
and compiles them with postponed annotations, so model fields have builtin types.

`FakeChatModel` answers agent calls with `reply`, echoing what it was sent if asked, and fold calls with an answer
built from `parse_fold_prompt`. It records every call in `calls` and, for a model that runs in another process, as one
JSON line per call in `record_path`: `{"kind": "agent" | "fold", "messages": [{"type", "content"}]}`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from dataclasses import dataclass

from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from lfx.custom.custom_component.component import Component
from lfx.field_typing import LanguageModel
from lfx.io import BoolInput, DropdownInput, FloatInput, MessageTextInput, Output
from pydantic import Field, field_validator

from langflow_summarizing_agent.engine.prompt import FOLD_INSTRUCTION, FOLD_SYSTEM_PROMPT, SUMMARY_PREFIX
from langflow_summarizing_agent.engine.tokens import counter_for

FOLD_PROMPT_START = FOLD_SYSTEM_PROMPT.split("\n", 1)[0]
FOLD_INSTRUCTION_START = FOLD_INSTRUCTION.split("{", 1)[0]
_OPENING, _MARKED = FOLD_INSTRUCTION.split("{fold_id}")[:2]
INSTRUCTION = re.compile(re.escape(_OPENING) + r"(\w+)" + re.escape(_MARKED) + r"\1\b")
"""The fold instruction's opening, its id named twice: a user message that imitates it does not match."""
FACT_PATTERNS = {
    "project_id": re.compile(r"\b(PRJ-\d+)\b"),
    "customer": re.compile(r"\bcustomer ([A-Z][A-Za-z]+)\b"),
    "cluster": re.compile(r"\b([A-Z]{2} cluster)\b"),
}
"""The facts the "facts" fold answer pins, by pattern: the project id, the customer and the cluster."""
FOLDED_PREFIX = "- folded "
"""Starts each line of a "list" fold answer; the rest of the line is a folded message's text."""
FAILED_FOLD = "summary provider unavailable"


def is_fold_prompt(messages: list) -> bool:
    """A fold call: its system message is the fold prompt's, or it asks on the agent's prefix (its last message
    is the fold instruction)."""
    return bool(messages) and (
        (isinstance(messages[0], SystemMessage) and str(messages[0].content).startswith(FOLD_PROMPT_START))
        or is_prefix_fold(messages)
    )


def is_prefix_fold(messages: list) -> bool:
    return isinstance(messages[-1], HumanMessage) and INSTRUCTION.match(str(messages[-1].content)) is not None


@dataclass(frozen=True)
class FoldPrompt:
    """A fold prompt read back into the data it quotes."""

    system: str
    data: str
    pinned: dict
    """The previous pinned facts."""
    summary: str
    """The previous summary, "" before the first fold."""
    conversation: list
    """The folded messages, oldest first, as quoted: `{"role", "text"}`, and `"files"` when the message had any."""


def parse_fold_prompt(messages: list) -> FoldPrompt:
    """The one reader of the fold prompt: its system rules and its data block, taken apart in order.

    Quoted text cannot close its block (`</` is sent as `<\\/`), so the summary ends at the first `</summary>`, and the
    conversation that follows it is the JSON before the closing `</conversation>`. The summary is read back with `</`.
    """
    if is_prefix_fold(messages):
        return _parse_prefix_fold(messages)
    system, data = str(messages[0].content), str(messages[-1].content)
    pinned_part, rest = data.split("\n\nPrevious summary:\n<summary>\n", 1)
    summary, rest = rest.split("\n</summary>", 1)
    conversation = rest.split("<conversation>\n", 1)[1].rsplit("\n</conversation>", 1)[0]
    summary = "" if summary == "(none yet)" else summary.replace("<\\/", "</")
    return FoldPrompt(
        system=system,
        data=data,
        pinned=json.loads(pinned_part.removeprefix("Previous pinned facts (JSON):\n")),
        summary=summary,
        conversation=json.loads(conversation),
    )


def _parse_prefix_fold(messages: list) -> FoldPrompt:
    """A fold on the agent's prefix: the messages that follow the summary message, as many as the instruction says."""
    instruction = str(messages[-1].content)
    count = int(re.search(r"Fold the (\d+) messages", instruction).group(1))
    pinned = json.loads(re.search(r"the previous pinned facts are (\{.*?\})\.\n", instruction).group(1))
    start = 1 if isinstance(messages[0], SystemMessage) else 0
    summary = ""
    first = str(messages[start].content)
    if isinstance(messages[start], HumanMessage) and first.startswith(SUMMARY_PREFIX):
        summary = first.split("Summary:\n", 1)[1].split("\n\n(", 1)[0] if "Summary:\n" in first else ""
        start += 1
    conversation = [
        {"role": "user" if isinstance(m, HumanMessage) else "assistant", "text": str(m.content)}
        for m in messages[start : start + count]
    ]
    return FoldPrompt(
        system=str(messages[0].content), data=instruction, pinned=pinned, summary=summary, conversation=conversation
    )


def fold_json(pinned: dict, summary: str) -> str:
    """A fold answer as a model might write it: the JSON object in a fenced block."""
    return "```json\n" + json.dumps({"pinned": pinned, "summary": summary}, ensure_ascii=False) + "\n```"


def previous_bullets(prompt: FoldPrompt) -> list:
    return [line for line in prompt.summary.splitlines() if line.startswith("- ")]


def facts_answer(prompt: FoldPrompt) -> str:
    """Pins the facts of `FACT_PATTERNS` found in the folded messages (the latest of each) and adds a bullet per new
    fact to the previous bullets, so a fact told once survives every later fold."""
    text = "\n".join(item["text"] for item in prompt.conversation)
    pinned = {}
    for key, pattern in FACT_PATTERNS.items():
        found = pattern.findall(text)
        if found:
            pinned[key] = found[-1]
    bullets = previous_bullets(prompt)
    bullets += [line for line in (f"- {key} is {value}" for key, value in pinned.items()) if line not in bullets]
    return fold_json(pinned, "\n".join(bullets) or "- small talk")


def list_answer(prompt: FoldPrompt) -> str:
    """Adds a line per folded message, in order, to the previous bullets: the summary lists every message folded along
    the chain of saved states (read it back with `folded_texts`)."""
    lines = previous_bullets(prompt) + [FOLDED_PREFIX + item["text"] for item in prompt.conversation]
    return fold_json({}, "\n".join(lines))


def folded_texts(summary: str) -> list:
    """The folded messages' texts, stripped, in a summary written by the "list" fold answer.

    The fold keeps lines right-stripped, so the line of an empty message is the prefix without its space.
    """
    return [line.removeprefix(FOLDED_PREFIX.rstrip()).strip() for line in summary.splitlines()]


FOLD_ANSWERS = {"facts": facts_answer, "list": list_answer}
ECHO_MODES = ("off", "question", "question_line", "user_messages")


class FakeChatModel(BaseChatModel):
    """An offline chat model that records every call.

    Agent calls get `reply`; with `echo="question"` it is followed by the current question, with `echo="question_line"`
    by the question's last line (a prompt that ends with the question), with `echo="user_messages"` by every user-role
    message the agent sent (the summary message is one), joined by " || ".
    `worker_name` appends the process id, so a reply names the server worker that ran it.

    Agent calls wait `reply_delay` seconds before they are recorded (a streamed call in LangChain's worker thread).
    Fold calls wait `fold_delay` seconds (async) and for `fold_gate.wait()` (an `asyncio.Event`, say), then raise if
    `fail_folds`, else take the next answer of `fold_script` (a text, an exception to raise, a function of the
    `FoldPrompt`, an `AIMessage` answered as it is, such as a tool call, or None for the default), else the
    `fold_answer`: "facts" (`facts_answer`), "list" (`list_answer`) or a function of the `FoldPrompt`.
    """

    reply: str = "Noted."
    echo: str = "off"
    worker_name: bool = False
    fold_answer: object = "facts"
    fold_script: list = Field(default_factory=list)
    reply_delay: float = 0.0
    fold_delay: float = 0.0
    fold_gate: object = None
    fail_folds: bool = False
    record_path: str = ""
    reported_scale: float = 1.0
    """Reported input tokens are the o200k count times this (a provider whose tokenizer differs)."""
    reported_cached_share: float = -1.0
    """From 0: every answer reports usage as a provider does, input tokens in o200k, this share of them cached."""
    input_limit: int = 0
    """From 1: an agent call of more tokens (o200k) is refused for its length, in OpenAI's words."""
    calls: list = Field(default_factory=list)
    tools: list = Field(default_factory=list)
    """The tools bound to each call, in call order."""
    tool_choices: list = Field(default_factory=list)
    """The `tool_choice` bound to each call (None when none is), in call order."""

    @field_validator("echo")
    @classmethod
    def _known_echo(cls, value: str) -> str:
        if value not in ECHO_MODES:
            msg = f"echo must be one of {', '.join(ECHO_MODES)}, not {value!r}"
            raise ValueError(msg)
        return value

    @field_validator("fold_answer")
    @classmethod
    def _known_fold_answer(cls, value: object) -> object:
        # Checked here: inside a fold, an unusable answer would only read as a failed fold.
        if not callable(value) and value not in FOLD_ANSWERS:
            msg = f"fold_answer must be one of {', '.join(FOLD_ANSWERS)} or a function of the FoldPrompt, not {value!r}"
            raise ValueError(msg)
        return value

    @property
    def _llm_type(self) -> str:
        return "fake-chat-model"

    def bind_tools(self, tools, *, tool_choice=None, **kwargs):
        formatted = [tool if isinstance(tool, dict) else {"name": getattr(tool, "name", "")} for tool in tools]
        return self.bind(tools=formatted, **({"tool_choice": tool_choice} if tool_choice is not None else {}))

    @property
    def agent_calls(self) -> list:
        return [call for call in self.calls if not is_fold_prompt(call)]

    @property
    def fold_calls(self) -> list:
        return [call for call in self.calls if is_fold_prompt(call)]

    @property
    def fold_prompts(self) -> list:
        """Every fold call that reached the model, read back with `parse_fold_prompt`."""
        return [parse_fold_prompt(call) for call in self.fold_calls]

    def _record(self, messages: list) -> None:
        self.calls.append(list(messages))
        if self.record_path:
            record = {
                "kind": "fold" if is_fold_prompt(messages) else "agent",
                "messages": [{"type": m.type, "content": str(m.content)} for m in messages],
            }
            with open(self.record_path, "a", encoding="utf-8") as records:
                records.write(json.dumps(record) + "\n")

    def _answer(self, messages: list) -> str | AIMessage:
        if not is_fold_prompt(messages):
            tokens = counter_for("gpt-4o-mini").raw_prompt(messages)
            if self.input_limit and tokens > self.input_limit:
                msg = (
                    f"This model's maximum context length is {self.input_limit} tokens. However, your messages "
                    f"resulted in {tokens} tokens. Please reduce the length of the messages."
                )
                raise ContextOverflowError(msg)
            return self._agent_answer(messages)
        if self.fail_folds:
            raise RuntimeError(FAILED_FOLD)
        scripted = self.fold_script.pop(0) if self.fold_script else None
        if isinstance(scripted, BaseException):
            raise scripted
        if isinstance(scripted, str | AIMessage):
            return scripted
        answer = scripted or FOLD_ANSWERS.get(self.fold_answer, self.fold_answer)
        return answer(parse_fold_prompt(messages))

    def _agent_answer(self, messages: list) -> str:
        user_messages = [str(m.content) for m in messages if isinstance(m, HumanMessage)]
        echoed = {
            "off": [],
            "question": user_messages[-1:],
            "question_line": [line.splitlines()[-1] for line in user_messages[-1:] if line],
            "user_messages": [" || ".join(user_messages)],
        }
        text = " ".join([self.reply, *echoed[self.echo]])
        return f"{text} [worker {os.getpid()}]" if self.worker_name else text

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.tools.append(kwargs.get("tools") or [])
        self.tool_choices.append(kwargs.get("tool_choice"))
        self._record(messages)
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages, self._answer(messages)))])

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        self.tools.append(kwargs.get("tools") or [])
        self.tool_choices.append(kwargs.get("tool_choice"))
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages, await self.respond(messages)))])

    def _reply(self, messages: list, text: str | AIMessage) -> AIMessage:
        if isinstance(text, AIMessage):
            return text
        if self.reported_cached_share < 0:
            return AIMessage(content=text)
        tokens = round(counter_for("gpt-4o-mini").raw_prompt(messages) * self.reported_scale)
        usage = {
            "input_tokens": tokens,
            "output_tokens": 10,
            "total_tokens": tokens + 10,
            "input_token_details": {"cache_read": int(tokens * self.reported_cached_share)},
        }
        return AIMessage(content=text, usage_metadata=usage)

    async def respond(self, messages: list) -> str:
        """Records a call and answers it as `ainvoke` does, without LangChain's run machinery: a summarizer for the
        fold logic (`Summarizer`) that is fast enough for property tests."""
        if self.reply_delay and not is_fold_prompt(messages):
            await asyncio.sleep(self.reply_delay)
        self._record(messages)
        if self.fold_delay and is_fold_prompt(messages):
            await asyncio.sleep(self.fold_delay)
        if self.fold_gate is not None and is_fold_prompt(messages):
            await self.fold_gate.wait()
        return self._answer(messages)

    def _stream(self, messages, stop=None, run_manager=None, **kwargs):
        # Word by word like a real provider, so a flow's event stream (the Playground's) carries token events.
        if self.reply_delay and not is_fold_prompt(messages):
            time.sleep(self.reply_delay)  # LangChain runs a synchronous stream in a worker thread
        self._record(messages)
        self.tools.append(kwargs.get("tools") or [])
        self.tool_choices.append(kwargs.get("tool_choice"))
        words = self._answer(messages).split(" ")
        usage = self._reply(messages, "").usage_metadata
        for index, word in enumerate(words):
            last = index == len(words) - 1
            chunk = ChatGenerationChunk(
                message=AIMessageChunk(
                    content=word if index == 0 else " " + word, usage_metadata=usage if last else None
                )
            )
            if run_manager:
                run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk


RECORDERS = {}
"""Models built in this process by a `FakeChatModelComponent` with a recorder name, by that name, so a test reads the
calls of the model its graph used."""


def recorder(name: str, **settings) -> FakeChatModel:
    """Registers a model with `settings` under `name` before a graph's first run builds one."""
    RECORDERS[name] = FakeChatModel(**settings)
    return RECORDERS[name]


class FakeChatModelComponent(Component):
    display_name = "Fake Chat Model"
    description = "Offline chat model for tests: a fixed or echoing reply, fold answers from the fold prompt; records."
    name = "FakeChatModel"

    inputs = [  # noqa: RUF012 - Langflow declares inputs as a class list
        MessageTextInput(name="reply", display_name="Reply", value="Noted."),
        DropdownInput(name="echo", display_name="Echo", options=list(ECHO_MODES), value="off"),
        BoolInput(name="worker_name", display_name="Worker Name", value=False),
        DropdownInput(name="fold_answer", display_name="Fold Answer", options=list(FOLD_ANSWERS), value="facts"),
        FloatInput(name="reply_delay", display_name="Reply Delay (s)", value=0.0),
        FloatInput(name="fold_delay", display_name="Fold Delay (s)", value=0.0),
        BoolInput(name="fail_folds", display_name="Fail Folds", value=False),
        MessageTextInput(name="record_path", display_name="Record Path", value=""),
        MessageTextInput(
            name="recorder_name",
            display_name="Recorder Name",
            value="",
            info="In-process flows only: reuse the model registered in RECORDERS under this name, or register one.",
        ),
    ]
    outputs = [Output(display_name="Language Model", name="model_output", method="build_model")]  # noqa: RUF012

    def build_model(self) -> LanguageModel:
        if self.recorder_name in RECORDERS:
            return RECORDERS[self.recorder_name]
        model = FakeChatModel(
            reply=self.reply,
            echo=self.echo,
            worker_name=self.worker_name,
            fold_answer=self.fold_answer,
            reply_delay=float(self.reply_delay or 0),
            fold_delay=float(self.fold_delay or 0),
            fail_folds=self.fail_folds,
            record_path=self.record_path or "",
        )
        if self.recorder_name:
            RECORDERS[self.recorder_name] = model
        return model


class FoldGate:
    """A fake model's `fold_gate`: fold calls wait for `set()`; `started` is set by the first call that waits."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self._open = asyncio.Event()

    async def wait(self) -> None:
        self.started.set()
        await self._open.wait()

    def set(self) -> None:
        self._open.set()
