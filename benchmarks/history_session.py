"""Benchmark: the support session through flows that build their own prompt, with the stock Message History and the
Summarizing Message History.

    python -m benchmarks.history_session [--backend sqlite|postgres] [--exchanges 60] [--out benchmarks/results]

The session and the scripted model are the support session's (`benchmarks.support_session`); each exchange is a real
lfx graph run of Chat Input and a message history -> Prompt (`{memory}`, `{question}`) -> Language Model -> Chat
Output on a real Langflow database. The model answers without tools (a Language Model calls none) and records what
each call received: its input tokens, its history (the prompt less its question) and the stored messages whose full
text the prompt holds. Runs: the stock Message History at Number of Messages 100 and 10, the Summarizing Message
History at 10.
Writes `history_session_<backend>.json` to `--out` and prints the numbers; timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.model import BenchmarkChatModel, BenchmarkModelComponent
from benchmarks.revision import commit
from benchmarks.support_session import COLUMN, DEFAULT, LAST_EXCHANGES, Run, replay, sessions
from langflow_summarizing_agent.engine.settings import DEFAULT_HISTORY_TOKEN_BUDGET
from langflow_summarizing_agent.wiring.agent_turn import turn_of
from tests.support.services import BACKENDS, database_backend, langflow_services

PROMPT_TEMPLATE = (
    "You are a technical support assistant.\n\nThe conversation so far:\n{memory}\n\nThe customer's new message: "
    "{question}"
)
HISTORY_STOCK_100 = Run("history_stock_100", "Message History n=100", summarizing=False, n_messages=100)
HISTORY_STOCK_10 = Run("history_stock_10", "Message History n=10", summarizing=False, n_messages=10)
HISTORY_SUMMARIZING = Run("history_summarizing_10", "Summarizing History n=10", summarizing=True, n_messages=10)
HISTORY_RUNS = (HISTORY_STOCK_100, HISTORY_STOCK_10, HISTORY_SUMMARIZING)
SHOWN = (
    ("total_input_tokens", "total input tokens"),
    ("agent_input_tokens", "input tokens of model calls"),
    ("summary_calls", "summary calls"),
    ("summary_input_tokens", "input tokens of summary calls"),
    (f"mean_agent_input_last_{LAST_EXCHANGES}_exchanges", f"mean input, last {LAST_EXCHANGES} exchanges"),
    ("max_input_tokens", "max input tokens of a call"),
    ("first_facts_in_last_exchange", "first message's facts in the last call"),
    ("verbatim_min", "messages verbatim, min (window filled)"),
    ("never_reached_again", "messages never reached again"),
    ("turns_completed", "exchanges completed"),
)


async def history_exchange(
    run: Run,
    model: BenchmarkChatModel,
    text: str,
    settings: dict[str, Any],
    flow_id: uuid.UUID,
    user_id: uuid.UUID,
    session_id: str,
) -> tuple[str, bool]:
    """One exchange through Chat Input -> (Summarizing) Message History -> Prompt -> Language Model -> Chat Output; the
    reply, and whether the turn folded before the model's call."""
    from lfx.components.input_output import ChatInput, ChatOutput
    from lfx.components.models_and_agents.language_model import LanguageModelComponent
    from lfx.components.models_and_agents.memory import MemoryComponent
    from lfx.components.models_and_agents.prompt import PromptComponent
    from lfx.graph import Graph

    from langflow_summarizing_agent.components.summarizing_agent.summarizing_message_history import (
        SummarizingMessageHistoryComponent,
    )

    chat_input = ChatInput(_id="chat_input")
    chat_input.set(input_value=text)
    model_component = BenchmarkModelComponent(_id="model")
    model_component.chat_model = model
    history = (SummarizingMessageHistoryComponent if run.summarizing else MemoryComponent)(_id="history")
    # The Agent's settings of the run, less its calculator tool: the same window and the same switch.
    history.set(**{name: value for name, value in settings.items() if name != "add_calculator_tool"})
    if run.summarizing:
        history.set(summary_model=model_component.build_model)
    prompt = PromptComponent(_id="prompt")
    prompt.set(template=PROMPT_TEMPLATE, memory=history.retrieve_messages_as_text, question=chat_input.message_response)
    language_model = LanguageModelComponent(_id="language_model")
    language_model.set(model=model_component.build_model, input_value=prompt.build_prompt)
    chat_output = ChatOutput(_id="chat_output")
    chat_output.set(input_value=language_model.text_response)
    graph = Graph(chat_input, chat_output, flow_id=str(flow_id), user_id=str(user_id))
    graph.session_id = session_id
    async for _ in graph.async_start():
        pass
    kept = turn_of(graph.get_vertex("history").custom_component) if run.summarizing else None
    inline = kept is not None and kept.turn is not None and kept.turn.fold is not None
    return str(graph.get_vertex("language_model").built_object["text_output"].text), inline


def report_text(report: dict[str, Any]) -> str:
    runs = report["runs"]
    lines = [f"{'':44}" + "".join(f"{runs[run.key]['label']:>{COLUMN}}" for run in HISTORY_RUNS)]
    for key, label in SHOWN:
        values = []
        for run in HISTORY_RUNS:
            value = runs[run.key][key]
            values.append(len(value) if isinstance(value, list) else value)
        lines.append(f"{label:44}" + "".join(f"{value!s:>{COLUMN}}" for value in values))
    return "\n".join(lines)


async def amain(argv: list[str] | None = None, *, services_running: bool = False) -> dict[str, Any]:
    args = parse_args(argv)
    if services_running:
        return await _benchmark(args, database_backend(), argv)
    async with langflow_services(args.backend):
        return await _benchmark(args, args.backend, argv)


async def _benchmark(args: argparse.Namespace, backend: str, argv: list[str] | None) -> dict[str, Any]:
    started = time.perf_counter()
    budget = DEFAULT_HISTORY_TOKEN_BUDGET
    session = sessions(args.exchanges)[DEFAULT]
    # The Language Model calls no tools: the scripted tool calls of the Agent's session are left out.
    without_tools = [replace(exchange, tool_calls=0) for exchange in session]
    runs = {run.key: (await replay(run, without_tools, history_exchange)).metrics(budget) for run in HISTORY_RUNS}
    report = {
        "command": " ".join(["python -m benchmarks.history_session", *(sys.argv[1:] if argv is None else argv)]),
        "commit": commit(),
        "backend": backend,
        "exchanges": len(session),
        "prompt_template": PROMPT_TEMPLATE,
        "history_token_budget": budget,
        "runs": runs,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"history_session_{backend}.json"
    path.write_text(json.dumps(report, indent=1) + "\n")
    print(report_text(report))
    print(f"\nWrote {path} in {time.perf_counter() - started:.0f} s")
    return report


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.history_session", description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=BACKENDS, default="sqlite")
    parser.add_argument("--exchanges", type=int, default=60, help="exchanges after the first message (default 60)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    asyncio.run(amain(argv))


if __name__ == "__main__":
    main()
