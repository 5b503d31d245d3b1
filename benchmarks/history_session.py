"""Benchmark: the support session through a message history -> Prompt -> Language Model flow, no tools.

    python -m benchmarks.history_session [--backend sqlite|postgres] [--exchanges 60] [--out benchmarks/results]

The stock Message History and the Summarizing Message History; the model records its prompt less the question as the
history. Writes `history_session_<backend>.json`.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from benchmarks.model import BenchmarkChatModel
from benchmarks.script import support_session
from benchmarks.support_session import Run, compare, parse_args, replay, run_graph, write
from langflow_summarizing_agent.wiring import after_reply, runtime
from tests.support.services import langflow_services

PROMPT = "You are a technical support assistant.\n\nThe conversation so far:\n{memory}\n\nThe customer's new message: "
PROMPT += "{question}"
RUNS = (
    Run("stock_100", "Message History n=100", False, 100),
    Run("stock_10", "Message History n=10", False, 10),
    Run("summarizing_10", "Summarizing History n=10", True, 10),
)


async def history_turn(run: Run, model: BenchmarkChatModel, text: str, settings: dict[str, Any], *ids: Any) -> Any:
    from lfx.components.models_and_agents.language_model import LanguageModelComponent
    from lfx.components.models_and_agents.memory import MemoryComponent
    from lfx.components.models_and_agents.prompt import PromptComponent

    from langflow_summarizing_agent.components.summarizing_agent.summarizing_message_history import (
        SummarizingMessageHistoryComponent,
    )

    def prompted(question: Any, language_model: Any) -> Any:
        history = (SummarizingMessageHistoryComponent if run.summarizing else MemoryComponent)(_id="history")
        # The Agent's settings of the run, less its calculator tool: the same window and the same switch.
        history.set(**{name: value for name, value in settings.items() if name != "add_calculator_tool"})
        if run.summarizing:
            history.set(summary_model=language_model)
        prompt = PromptComponent(_id="prompt")
        prompt.set(template=PROMPT, memory=history.retrieve_messages_as_text, question=question)
        model_component = LanguageModelComponent(_id="language_model")
        model_component.set(model=language_model, input_value=prompt.build_prompt)
        return model_component.text_response

    return await run_graph(model, text, prompted, ids, "language_model")


async def main_async(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(__doc__).parse_args(argv)
    # A Language Model calls no tools: the scripted tool calls of the Agent's session are left out.
    session = [replace(exchange, tool_calls=0) for exchange in support_session(args.exchanges)]
    async with langflow_services(args.backend):
        # As Langflow's server does: a stored reply lets the history's fold run.
        after_reply.install_reply_listener(lambda: runtime.current().timing)
        runs = {}
        for run in RUNS:
            runs[run.key] = (await replay(run, session, BenchmarkChatModel(), turn=history_turn)).metrics()
        compare(runs)
        return write("history_session", args, runs=runs)


if __name__ == "__main__":
    asyncio.run(main_async())
