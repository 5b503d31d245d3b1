"""Benchmark: turn latency with a slow summary model, the stock Agent against the Summarizing Agent.

    python -m benchmarks.latency [--backend sqlite|postgres] [--exchanges 60] [--summary-seconds 2] [--out DIR]

The support session of `benchmarks.support_session` runs through real lfx graph runs on a real Langflow database, in
one process whose event loop outlives the turns, as on `langflow run`. The model is offline: agent calls answer at
once, summary calls sleep `--summary-seconds` first, as a provider would take. Runs, at the same `n_messages`:

- the stock Agent;
- the Summarizing Agent folding after the reply (as on `langflow run`), with `--think-seconds` between exchanges, as a
  person reading the reply and typing the next message;
- the Summarizing Agent folding inside the turn (as under `lfx run`), for reference.

A turn is the graph run of one exchange. It waited for a summary call when a summary call started and ended inside
it before its first agent call. Prints p50 and p95 turn times, the turns that waited, tokens, summary calls per
exchange and the fidelity numbers of `benchmarks.fidelity`; writes `latency_<backend>.json` and `.png` to `--out`.
Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from benchmarks.fidelity import message_numbers
from benchmarks.memory_path import measure_memory_path
from benchmarks.model import BenchmarkChatModel, TurnPlan, is_fold_prompt
from benchmarks.revision import commit
from benchmarks.script import Exchange, support_session
from benchmarks.support_session import Run, RunResult, _exchange, _unexpected
from langflow_summarizing_agent.engine.settings import DEFAULT_HISTORY_TOKEN_BUDGET
from langflow_summarizing_agent.wiring import runtime
from langflow_summarizing_agent.wiring.timing import AfterReply, Inline
from tests.support.services import BACKENDS, database_backend, langflow_services

N_MESSAGES = 10
P95_RATIO_TARGET = 1.10
STEADY_STATE_FROM = 10
"""Exchanges before this one are the session's start, left out of the steady-state count of turns that waited."""


@dataclass(frozen=True)
class LatencyRun:
    run: Run
    fold_after_reply: bool
    think_seconds: bool
    """Pause `--think-seconds` between exchanges: background folds need the time a person takes."""


STOCK = LatencyRun(Run("stock_10", "Agent n=10", summarizing=False, n_messages=N_MESSAGES), False, False)
AFTER_REPLY = LatencyRun(
    Run("summarizing_10_after_reply", "Summarizing n=10, fold after reply", True, N_MESSAGES), True, True
)
INLINE = LatencyRun(Run("summarizing_10_inline", "Summarizing n=10, fold in turn", True, N_MESSAGES), False, False)
RUNS = (STOCK, AFTER_REPLY, INLINE)


class SlowSummaryModel(BenchmarkChatModel):
    """The benchmark's scripted model, whose summary calls take `summary_seconds`; records when calls ran."""

    summary_seconds: float = 2.0
    summary_spans: list[tuple[float, float]] = Field(default_factory=list)
    agent_starts: list[tuple[int, float]] = Field(default_factory=list)

    async def _agenerate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        if not is_fold_prompt(messages):
            self.agent_starts.append((self.plan.exchange if self.plan else -1, time.perf_counter()))
            return self._generate(messages, stop, run_manager, **kwargs)
        started = time.perf_counter()
        try:
            await asyncio.sleep(self.summary_seconds)
            return self._generate(messages, stop, run_manager, **kwargs)
        finally:
            self.summary_spans.append((started, time.perf_counter()))


@dataclass
class Timed:
    result: RunResult
    turn_seconds: list[float]
    waited: list[int]
    """Exchanges whose turn waited for a summary call."""


async def replay_timed(latency_run: LatencyRun, session: list[Exchange], args: argparse.Namespace) -> Timed:
    """`session` through the run's agent, one timed graph run per exchange."""
    run = latency_run.run
    model = SlowSummaryModel(message_numbers=message_numbers(session), summary_seconds=args.summary_seconds)
    folds = AfterReply()
    timing = folds if latency_run.fold_after_reply else Inline()
    flow_id, user_id, session_id = uuid.uuid4(), uuid.uuid4(), f"latency-{run.key}-{uuid.uuid4().hex[:8]}"
    result = RunResult(run, session, model.calls, completed=0)
    turns: list[tuple[int, float, float]] = []
    with runtime.using(runtime.Runtime(timing=timing)):
        for exchange in session:
            model.plan = TurnPlan(exchange.index, exchange.reply, exchange.tool_calls, exchange.expression)
            settings = run.settings(exchange.index, len(session) - 1)
            started = time.perf_counter()
            try:
                # A task per run, as Langflow's server builds each run in a task of its own: folds after the reply
                # start when it ends.
                reply, _ = await asyncio.create_task(
                    _exchange(run, model, exchange.user_text, settings, flow_id, user_id, session_id)
                )
            except Exception as exc:  # noqa: BLE001 - a failed turn is a result to report, not a crash
                result.errors.append(f"exchange {exchange.index}: {type(exc).__name__}: {exc}")
                continue
            turns.append((exchange.index, started, time.perf_counter()))
            if problem := _unexpected(exchange, reply, model.calls):
                result.errors.append(f"exchange {exchange.index}: {problem}")
            else:
                result.completed += 1
            if latency_run.think_seconds:
                await asyncio.sleep(args.think_seconds)
        await folds.wait_all()
    first_agent_call = {}
    for exchange_index, at in model.agent_starts:
        first_agent_call.setdefault(exchange_index, at)
    waited = [
        index
        for index, start, end in turns
        if any(start <= s and e <= first_agent_call.get(index, end) for s, e in model.summary_spans)
    ]
    return Timed(result, [end - start for _, start, end in turns], waited)


def quantile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


def run_report(timed: Timed, budget: int) -> dict[str, Any]:
    metrics = timed.result.metrics(budget)
    return {
        "label": timed.result.run.label,
        "turns": len(timed.turn_seconds),
        "errors": timed.result.errors,
        "p50_seconds": round(quantile(timed.turn_seconds, 0.5), 3),
        "p95_seconds": round(quantile(timed.turn_seconds, 0.95), 3),
        "max_seconds": round(max(timed.turn_seconds, default=0.0), 3),
        "turns_waited": timed.waited,
        "steady_state_turns_waited": [index for index in timed.waited if index >= STEADY_STATE_FROM],
        "turn_seconds": [round(seconds, 4) for seconds in timed.turn_seconds],
        "total_input_tokens": metrics["total_input_tokens"],
        "summary_calls": metrics["summary_calls"],
        "summary_calls_per_exchange": metrics["summary_calls_per_exchange"],
        "stock_window": metrics["stock_window"],
        "stock_window_verbatim_min_within_budget": metrics["stock_window_verbatim_min_within_budget"],
        "previous_exchange_missing_turns": metrics["previous_exchange_missing_turns"],
        "never_reached_again": metrics["never_reached_again"],
    }


def targets(runs: dict[str, dict[str, Any]], fixed_ms: float) -> list[dict[str, Any]]:
    stock, ours = runs[STOCK.run.key], runs[AFTER_REPLY.run.key]
    limit = P95_RATIO_TARGET * stock["p95_seconds"] + fixed_ms / 1000
    waited = ours["steady_state_turns_waited"]
    return [
        {
            "name": f"turns that waited for a summary call from exchange {STEADY_STATE_FROM} on",
            "measured": len(waited),
            "limit": "0",
            "holds": not waited,
        },
        {
            "name": "p95 turn time, fold after reply",
            "measured": ours["p95_seconds"],
            "limit": f"<= {P95_RATIO_TARGET:g} x stock p95 + memory path {fixed_ms:.1f} ms = {limit:.3f} s",
            "holds": ours["p95_seconds"] <= limit,
        },
    ]


def report_text(report: dict[str, Any]) -> str:
    lines = [
        f"Turn latency, {report['backend']}: {report['exchanges']} exchanges, summary calls take "
        f"{report['summary_seconds']:g} s, {report['think_seconds']:g} s between exchanges when folding after the "
        "reply",
        "",
        f"{'':38}{'p50 s':>8}{'p95 s':>8}{'max s':>8}{'waited':>8}{'tokens':>10}{'calls/ex':>10}{'window':>8}"
        f"{'no prev':>9}{'lost':>6}",
    ]
    for run in report["runs"].values():
        lines.append(
            f"{run['label']:38}{run['p50_seconds']:8.3f}{run['p95_seconds']:8.3f}{run['max_seconds']:8.3f}"
            f"{len(run['turns_waited']):8d}{run['total_input_tokens']:10d}{run['summary_calls_per_exchange']:10.3f}"
            f"{run['stock_window_verbatim_min_within_budget']!s:>5}/{run['stock_window']:<2}"
            f"{len(run['previous_exchange_missing_turns']):9d}{len(run['never_reached_again']):6d}"
        )
    lines.append(
        "window: fewest of the stock window's messages sent word for word within the budget; no prev: turns without "
        "the previous exchange; lost: messages that left the window and never reached the model again"
    )
    lines.append("")
    lines.append(f"Memory path fixed cost at {report['memory_path_messages']} messages: {report['fixed_ms']:.1f} ms")
    for target in report["targets"]:
        verdict = "PASS" if target["holds"] else "FAIL"
        lines.append(f"{verdict}  {target['name']}: {target['measured']} (target {target['limit']})")
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(9, 4.5))
    for run in report["runs"].values():
        axis.plot(range(len(run["turn_seconds"])), run["turn_seconds"], marker=".", linewidth=1, label=run["label"])
    axis.set_xlabel("exchange")
    axis.set_ylabel("turn time (s)")
    axis.set_title(f"Turn time per exchange, summary calls of {report['summary_seconds']:g} s ({report['backend']})")
    axis.legend()
    axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.latency", description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=BACKENDS, default="sqlite")
    parser.add_argument("--exchanges", type=int, default=60, help="exchanges after the first message (default 60)")
    parser.add_argument("--summary-seconds", type=float, default=2.0, help="time each summary call takes")
    parser.add_argument("--think-seconds", type=float, default=3.0, help="pause between exchanges, fold after reply")
    parser.add_argument("--repeats", type=int, default=31, help="timed repetitions of the memory path")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    return parser.parse_args(argv)


async def amain(argv: list[str] | None = None, *, services_running: bool = False) -> dict[str, Any]:
    args = parse_args(argv)
    if services_running:
        return await _benchmark(args, database_backend(), argv)
    async with langflow_services(args.backend):
        return await _benchmark(args, args.backend, argv)


async def _benchmark(args: argparse.Namespace, backend: str, argv: list[str] | None) -> dict[str, Any]:
    ran_at = commit()
    session = support_session(args.exchanges)
    budget = DEFAULT_HISTORY_TOKEN_BUDGET
    runs = {run.run.key: run_report(await replay_timed(run, session, args), budget) for run in RUNS}
    messages = 2 * len(session)
    [cost] = await measure_memory_path([messages], args.repeats)
    fixed_ms = max(cost.summarizing_ms - cost.stock_ms, 0.0)
    report: dict[str, Any] = {
        "command": " ".join(["python -m benchmarks.latency", *(sys.argv[1:] if argv is None else argv)]),
        "commit": ran_at,
        "backend": backend,
        "exchanges": len(session),
        "summary_seconds": args.summary_seconds,
        "think_seconds": args.think_seconds,
        "memory_path_messages": messages,
        "fixed_ms": round(fixed_ms, 2),
        "runs": runs,
        "targets": targets(runs, fixed_ms),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"latency_{backend}"
    stem.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    plot(report, stem.with_suffix(".png"))
    print(report_text(report))
    print(f"\nWrote {stem}.json and {stem}.png")
    return report


def main(argv: list[str] | None = None) -> None:
    asyncio.run(amain(argv))


if __name__ == "__main__":
    main()
