"""The load benchmark's offline model, run inside the Langflow server (the flow carries this module's source, so it
is self-contained). A reply echoes the message's marker `#<session>-u<n>#` as `#<session>-a<n>#` after
`agent_seconds`; a summary call (the fold prompt's) answers after `summary_seconds` with the marker of every message
folded along the chain of saved summaries, one a line. The JSON file at `control_path`, rewritten while the server
runs, overrides `summary_seconds` and fails summary calls (`"fail_summary"`). Each call appends a JSON line to
`record_path` when it starts and when it ends (`benchmarks.load_audit` reads them).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from contextlib import suppress

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from lfx.custom.custom_component.component import Component
from lfx.field_typing import LanguageModel
from lfx.io import FloatInput, MessageTextInput, Output

FOLD_PROMPT_START = "You maintain the memory of a long conversation"
MARKER = re.compile(r"#(s\d+)-([ua])(\d+)#")


def markers(text: str) -> list:
    return [f"{m.group(1)}-{m.group(2)}{m.group(3)}" for m in MARKER.finditer(text)]


def read_control(path: str) -> dict:
    with suppress(OSError, ValueError), open(path, encoding="utf-8") as control:
        return json.load(control)
    return {}


class LoadChatModel(BaseChatModel):
    settings: dict  # the component's inputs, by name

    @property
    def _llm_type(self) -> str:
        return "load-benchmark-model"

    def bind_tools(self, tools, **kwargs):
        return self

    def _record(self, record: dict) -> None:
        with open(self.settings["record_path"], "a", encoding="utf-8") as records:
            records.write(json.dumps(record) + "\n")

    def _begin(self, messages) -> dict:
        """Records the call's start; its record, with `fold`, the `seconds` it takes and whether it `fails`."""
        fold = isinstance(messages[0], SystemMessage) and str(messages[0].content).startswith(FOLD_PROMPT_START)
        if fold:
            before, _, conversation = str(messages[-1].content).rpartition("New messages:\n<conversation>")
            previous, folded = markers(before), markers(conversation)
        else:
            questions = [str(m.content) for m in messages if isinstance(m, HumanMessage)]
            previous, folded = [], markers(questions[-1]) if questions else []
        session = folded[0].split("-")[0] if folded else ""
        record = {"pid": os.getpid(), "kind": "summary" if fold else "agent", "session": session}
        record.update(previous=previous, folded=folded, start=time.time())
        self._record({**record, "event": "start"})
        control = read_control(self.settings["control_path"] or "") if fold else {}
        if fold:
            seconds = control.get("summary_seconds", self.settings["summary_seconds"] or 0)
        else:
            seconds = self.settings["agent_seconds"] or 0
        return {"record": record, "fold": fold, "seconds": float(seconds), "fails": bool(control.get("fail_summary"))}

    def _answer(self, call: dict) -> ChatResult:
        previous, folded = call["record"]["previous"], call["record"]["folded"]
        if call["fold"]:
            if call["fails"]:
                raise RuntimeError("summary provider unavailable (load benchmark outage)")
            # One marker a line: a session's whole list stays within the default Summary Word Budget (300).
            summary = "\n".join(f"#{marker}#" for marker in previous + folded)
            text = "```json\n" + json.dumps({"pinned": {}, "summary": summary}) + "\n```"
        else:
            tag = f"#{folded[0].replace('-u', '-a')}# " if folded else ""
            text = tag + " ".join(["Noted."] + ["checked"] * max(int(self.settings["reply_words"] or 0) - 2, 0))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])

    def _end(self, call: dict) -> None:
        failed = call["fold"] and call["fails"]
        self._record({**call["record"], "event": "end", "end": time.time(), "failed": failed})

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        call = self._begin(messages)
        try:
            time.sleep(call["seconds"])
            return self._answer(call)
        finally:
            self._end(call)

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        call = self._begin(messages)
        try:
            await asyncio.sleep(call["seconds"])
            return self._answer(call)
        finally:
            self._end(call)


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
        return LoadChatModel(settings={str(i.name): getattr(self, str(i.name)) for i in self.inputs})
