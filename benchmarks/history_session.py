"""Benchmark: the support session through a message history -> Prompt -> Language Model flow, no tools.

    python -m benchmarks.history_session [--backend sqlite|postgres] [--exchanges 60] [--out benchmarks/results]

The stock Message History and the Summarizing Message History; the model records its prompt less the question as the
history. Writes `history_session_<backend>.json`.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from benchmarks.model import BenchmarkChatModel, BenchmarkModelComponent
from benchmarks.script import support_session
from benchmarks.support_session import Run, compare, parse_args, replay, run_graph, write
from langflow_summarizing_agent.wiring import runtime
from tests.support.services import langflow_services

PROMPT = "You are a technical support assistant.\n\nThe conversation so far:\n{memory}\n\nThe customer's new message: "
PROMPT += "{question}"
RUNS = (
    Run("stock_100", "Message History n=100", False, 100),
    Run("stock_10", "Message History n=10", False, 10),
    Run("summarizing_10", "Summarizing History n=10", True, 10),
)


async def history_turn(run: Run, model: BenchmarkChatModel, text: str, settings: dict[str, Any], *ids: Any) -> Any:
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
    prompt.set(template=PROMPT, memory=history.retrieve_messages_as_text, question=chat_input.message_response)
    language_model = LanguageModelComponent(_id="language_model")
    language_model.set(model=model_component.build_model, input_value=prompt.build_prompt)
    chat_output = ChatOutput(_id="chat_output")
    chat_output.set(input_value=language_model.text_response)
    graph = Graph(chat_input, chat_output, flow_id=str(ids[0]), user_id=str(ids[1]))
    return await run_graph(graph, ids[2], "language_model")


async def main_async(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv, __doc__).parse_args(argv)
    # A Language Model calls no tools: the scripted tool calls of the Agent's session are left out.
    session = [replace(exchange, tool_calls=0) for exchange in support_session(args.exchanges)]
    async with langflow_services(args.backend):
        runtime.install_reply_listener()  # As Langflow's server does: a stored reply lets the history's fold run.
        runs = {}
        for run in RUNS:
            runs[run.key] = (await replay(run, session, BenchmarkChatModel(), turn=history_turn)).metrics()
        compare(runs)
        return write("history_session", args, runs=runs)


if __name__ == "__main__":
    asyncio.run(main_async())
