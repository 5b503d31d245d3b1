"""The load benchmark's offline model, run inside the Langflow server: set latencies, faults from a control file.

A flow carries this module's source in its model node's `code` and the server execs it, so the module is
self-contained: lfx, LangChain, pydantic and the standard library only, builtin types in model fields.

Every message the benchmark sends carries a marker `#<session>-u<n>#` (a user message) and the model's reply echoes
it as `#<session>-a<n>#`, so a call names the session it belongs to and a fold names the messages it folds. Agent
calls sleep `agent_seconds`. Summary calls (their system message is the fold prompt's) sleep `summary_seconds` and
answer with a summary that lists the marker of every message folded along the chain of saved summaries, one line
each and nothing else on it: the audit reads it back from the database. The control file, a JSON object rewritten by
the benchmark while the server runs, overrides `summary_seconds` and makes summary calls fail (`"fail_summary":
true`), so faults start and end without touching the server.

Each call appends one JSON line to `record_path` when it starts and one when it ends: the worker's pid, the kind
("agent" or "summary"), the session, the markers of the previous summary and of the folded messages, wall-clock
times, and whether it failed.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from lfx.custom.custom_component.component import Component
from lfx.field_typing import LanguageModel
from lfx.io import FloatInput, MessageTextInput, Output

FOLD_PROMPT_START = "You maintain the memory of a long conversation"
MARKER = re.compile(r"#(s\d+)-([ua])(\d+)#")
SUMMARY_FAILURE = "summary provider unavailable (load benchmark outage)"


def is_fold_prompt(messages: list) -> bool:
    return (
        bool(messages)
        and isinstance(messages[0], SystemMessage)
        and str(messages[0].content).startswith(FOLD_PROMPT_START)
    )


def markers(text: str) -> list:
    return [f"{m.group(1)}-{m.group(2)}{m.group(3)}" for m in MARKER.finditer(text)]


def read_control(path: str) -> dict:
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as control:
            return json.load(control)
    except (OSError, ValueError):
        return {}


class LoadChatModel(BaseChatModel):
    agent_seconds: float = 0.3
    summary_seconds: float = 2.0
    reply_words: int = 150
    control_path: str = ""
    record_path: str = ""

    @property
    def _llm_type(self) -> str:
        return "load-benchmark-model"

    def bind_tools(self, tools, **kwargs):
        return self

    def _record(self, record: dict) -> None:
        if self.record_path:
            with open(self.record_path, "a", encoding="utf-8") as records:
                records.write(json.dumps(record) + "\n")

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        msg = "the load benchmark model answers asynchronously only"
        raise NotImplementedError(msg)

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        fold = is_fold_prompt(messages)
        data = str(messages[-1].content)
        if fold:
            before, _, conversation = data.rpartition("New messages:\n<conversation>")
            previous, folded = markers(before), markers(conversation)
            session = folded[0].split("-")[0] if folded else ""
        else:
            questions = [str(m.content) for m in messages if isinstance(m, HumanMessage)]
            asked = markers(questions[-1]) if questions else []
            previous, folded = [], asked
            session = asked[0].split("-")[0] if asked else ""
        record = {
            "pid": os.getpid(),
            "kind": "summary" if fold else "agent",
            "session": session,
            "previous": previous,
            "folded": folded,
            "start": time.time(),
        }
        self._record({**record, "event": "start"})
        failed = False
        try:
            if fold:
                control = read_control(self.control_path)
                await asyncio.sleep(float(control.get("summary_seconds", self.summary_seconds)))
                if control.get("fail_summary"):
                    failed = True
                    raise RuntimeError(SUMMARY_FAILURE)
                # One word a line: a session's whole list stays within the default Summary Word Budget (300), which
                # clips a longer summary.
                lines = [f"#{marker}#" for marker in previous + folded]
                text = "```json\n" + json.dumps({"pinned": {}, "summary": "\n".join(lines)}) + "\n```"
            else:
                await asyncio.sleep(self.agent_seconds)
                tag = f"#{folded[0].replace('-u', '-a')}# " if folded else ""
                text = tag + " ".join(["Noted."] + ["checked"] * max(self.reply_words - 2, 0))
        finally:
            self._record({**record, "event": "end", "end": time.time(), "failed": failed})
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


class LoadModelComponent(Component):
    display_name = "Load Benchmark Model"
    description = "Offline chat model of the load benchmark: set latencies, faults from a control file; records."
    name = "LoadBenchmarkModel"

    inputs = [  # noqa: RUF012 - Langflow declares inputs as a class list
        FloatInput(name="agent_seconds", display_name="Agent Seconds", value=0.3),
        FloatInput(name="summary_seconds", display_name="Summary Seconds", value=2.0),
        FloatInput(name="reply_words", display_name="Reply Words", value=150),
        MessageTextInput(name="control_path", display_name="Control Path", value=""),
        MessageTextInput(name="record_path", display_name="Record Path", value=""),
    ]
    outputs = [Output(display_name="Language Model", name="model_output", method="build_model")]  # noqa: RUF012

    def build_model(self) -> LanguageModel:
        return LoadChatModel(
            agent_seconds=float(self.agent_seconds or 0),
            summary_seconds=float(self.summary_seconds or 0),
            reply_words=int(self.reply_words or 0),
            control_path=self.control_path or "",
            record_path=self.record_path or "",
        )
