"""Benchmark: turn latency with a slow summary model, the stock Agent against the Summarizing Agent.

    python -m benchmarks.latency [--backend sqlite|postgres] [--exchanges 60] [--summary-seconds 2] [--out DIR]

The support session's turns in one process whose event loop outlives them, as on `langflow run`; the runs and what a
turn that waited is: docs/benchmarks.md, "Turn latency". Writes `latency_<backend>.json`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
from pydantic import Field

from benchmarks import tables
from benchmarks.memory_path import measure_memory_path
from benchmarks.model import BenchmarkChatModel, is_fold_prompt
from benchmarks.script import support_session
from benchmarks.support_session import Run, parse_args, replay, write
from langflow_summarizing_agent.wiring.timing import Inline
from tests.support.services import langflow_services

STEADY_FROM = 10
"""Exchanges before this one are the session's start, left out of the steady-state count of turns that waited."""
RUNS = (
    (Run("stock_10", "Agent n=10", False, 10), False),
    (Run("summarizing_10_after_reply", "Summarizing, fold after reply", True, 10), True),
    (Run("summarizing_10_inline", "Summarizing, fold in turn", True, 10), False),
)
KEPT = ("label", "errors", "total_input_tokens", "summary_calls_per_exchange", "calls")
TARGETS = (
    ("steady_turns_waited", "==", 0, ("summarizing_10_after_reply",)),
    ("p95_vs_stock", "<=", 1.1, ("summarizing_10_after_reply",)),
)


class SlowSummaryModel(BenchmarkChatModel):
    """The scripted model whose summary calls take `summary_seconds`; records when calls ran."""

    summary_seconds: float = 2.0
    summary_spans: list[tuple[float, float]] = Field(default_factory=list)
    agent_starts: dict[int, float] = Field(default_factory=dict)

    async def _agenerate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        if not is_fold_prompt(messages):
            self.agent_starts.setdefault(self.plan.index if self.plan else -1, time.perf_counter())
            return self._generate(messages, stop, run_manager, **kwargs)
        started = time.perf_counter()
        try:
            await asyncio.sleep(self.summary_seconds)
            return self._generate(messages, stop, run_manager, **kwargs)
        finally:
            self.summary_spans.append((started, time.perf_counter()))


async def main_async(argv: list[str] | None = None) -> dict[str, Any]:
    parser = parse_args(__doc__)
    parser.add_argument("--summary-seconds", type=float, default=2.0, help="time each summary call takes")
    parser.add_argument("--think-seconds", type=float, default=3.0, help="pause between exchanges, fold after reply")
    args = parser.parse_args(argv)
    session = support_session(args.exchanges)
    async with langflow_services(args.backend):
        runs = {}
        for run, after_reply in RUNS:
            model = SlowSummaryModel(summary_seconds=args.summary_seconds)
            options = {"pause": args.think_seconds} if after_reply else {"timing": Inline(), "pause": 0}
            result = await replay(run, session, model, **options)
            waited = [
                index
                for index, start, end in result.turns
                if any(start <= s and e <= model.agent_starts.get(index, end) for s, e in model.summary_spans)
            ]
            seconds = [end - start for _, start, end in result.turns]
            metrics = result.metrics()
            percentiles = {f"p{q}_seconds": round(float(np.percentile(seconds, q)), 3) for q in (50, 95)}
            runs[run.key] = {key: metrics[key] for key in KEPT} | percentiles | {"turns_waited": waited}
            runs[run.key]["steady_turns_waited"] = sum(index >= STEADY_FROM for index in waited)
        [cost] = await measure_memory_path([2 * len(session)], args.repeats)
        fixed_ms = max(cost["summarizing"]["ms"] - cost["stock"]["ms"], 0.0)
        ours, stock = runs["summarizing_10_after_reply"], runs["stock_10"]
        ours["p95_vs_stock"] = round((ours["p95_seconds"] - fixed_ms / 1000) / stock["p95_seconds"], 3)
        more = {"summary_seconds": args.summary_seconds, "fixed_ms": round(fixed_ms, 2)}
        return write("latency", args, **more, runs=runs, targets=tables.check(TARGETS, runs))


if __name__ == "__main__":
    asyncio.run(main_async())
