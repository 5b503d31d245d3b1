"""Benchmark: a scripted support session through the stock Agent and the Summarizing Agent, and the memory-path cost.

    python -m benchmarks.support_session [--backend sqlite|postgres] [--exchanges 60] [--out benchmarks/results]

Every exchange is a real lfx graph run (Chat Input -> agent -> Chat Output) on a real Langflow database, started in
this process on a fresh SQLite file or Postgres database and removed afterwards. The model is offline and scripted
(`benchmarks.model`); it records the input tokens of every call it receives, agent and summary calls alike. Prints
the numbers and the issue's targets with PASS/FAIL, and writes `support_session_<backend>.json` and `.png` to `--out`.
Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.memory_path import PathCost, StateCost, measure_memory_path, measure_state_io
from benchmarks.model import BenchmarkChatModel, BenchmarkModelComponent, ModelCall, TurnPlan
from benchmarks.script import Exchange, log_exchange, support_session
from benchmarks.services import BACKENDS, database_backend, langflow_services
from langflow_summarizing_agent.fold import DEFAULT_HISTORY_TOKEN_BUDGET

LAST_EXCHANGES = 20
COLUMN = 26
"""Width of a run's column in the printed table."""
TOTAL_SHARE_TARGET = 0.20
MEAN_SHARE_TARGET = 0.125
SUMMARY_CALLS_PER_EXCHANGE_TARGET = 0.25
MEMORY_PATH_RATIO_TARGET = 1.5
PINNED_KEYS = ["project_id", "cluster"]


@dataclass(frozen=True)
class Run:
    key: str
    label: str
    summarizing: bool
    n_messages: int
    fail_summaries: bool = False

    @property
    def settings(self) -> dict[str, Any]:
        # The calculator tool stays on for the tool-using turns; every other setting keeps its default.
        settings: dict[str, Any] = {"n_messages": self.n_messages, "add_calculator_tool": True}
        if self.summarizing:
            settings |= {"summarize_older_messages": True, "pinned_keys": PINNED_KEYS}
        return settings


STOCK_100 = Run("stock_100", "Agent n=100", summarizing=False, n_messages=100)
STOCK_10 = Run("stock_10", "Agent n=10", summarizing=False, n_messages=10)
SUMMARIZING = Run("summarizing_10", "Summarizing n=10", summarizing=True, n_messages=10)
FAILING = Run("summarizing_10_failing", "Summarizing n=10 failing", True, 10, fail_summaries=True)
RUNS = (STOCK_100, STOCK_10, SUMMARIZING, FAILING)
PLOTTED = (STOCK_100, STOCK_10, SUMMARIZING)


@dataclass
class RunResult:
    run: Run
    exchanges: int
    calls: list[ModelCall]
    completed: int
    errors: list[str] = field(default_factory=list)

    def metrics(self, budget: int) -> dict[str, Any]:
        last = self.exchanges - 1
        agent = [c for c in self.calls if c.kind == "agent"]
        summary = [c for c in self.calls if c.kind == "summary"]
        recent = [c.input_tokens for c in agent if c.exchange > last - LAST_EXCHANGES]
        in_last = [c for c in self.calls if c.exchange == last]
        return {
            "label": self.run.label,
            "exchanges": self.exchanges,
            "turns_completed": self.completed,
            "errors": self.errors,
            "total_input_tokens": sum(c.input_tokens for c in self.calls),
            "agent_calls": len(agent),
            "agent_input_tokens": sum(c.input_tokens for c in agent),
            "summary_calls": len(summary),
            "failed_summary_calls": sum(1 for c in summary if c.failed),
            "summary_input_tokens": sum(c.input_tokens for c in summary),
            "summary_calls_per_exchange": round(len(summary) / self.exchanges, 3),
            "last_exchange_input_tokens": [c.input_tokens for c in in_last if c.kind == "agent"],
            "last_exchange_summary_input_tokens": [c.input_tokens for c in in_last if c.kind == "summary"],
            f"mean_agent_input_last_{LAST_EXCHANGES}_exchanges": round(statistics.fmean(recent), 1) if recent else 0,
            "max_history_tokens": max((c.history_tokens for c in agent), default=0),
            "history_token_budget": budget if self.run.summarizing else None,
            "max_input_tokens": max((c.input_tokens for c in agent), default=0),
            "first_facts_in_last_exchange": any(c.first_facts for c in in_last if c.kind == "agent"),
            "calls": [asdict(c) for c in self.calls],
        }


async def replay(run: Run, session: list[Exchange]) -> RunResult:
    """The session through `run`'s agent, one graph run per exchange, in a fresh flow, owner and session."""
    model = BenchmarkChatModel(fail_summaries=run.fail_summaries)
    flow_id, user_id, session_id = uuid.uuid4(), uuid.uuid4(), f"benchmark-{run.key}-{uuid.uuid4().hex[:8]}"
    result = RunResult(run, len(session), model.calls, completed=0)
    for exchange in session:
        model.plan = TurnPlan(exchange.index, exchange.reply, exchange.tool_calls, exchange.expression)
        try:
            reply = await _exchange(run, model, exchange.user_text, flow_id, user_id, session_id)
        except Exception as exc:  # noqa: BLE001 - a failed turn is a result to report, not a crash
            result.errors.append(f"exchange {exchange.index}: {type(exc).__name__}: {exc}")
            continue
        if reply == exchange.reply:
            result.completed += 1
        else:
            result.errors.append(f"exchange {exchange.index}: unexpected reply {reply[:80]!r}")
    return result


async def _exchange(
    run: Run, model: BenchmarkChatModel, text: str, flow_id: uuid.UUID, user_id: uuid.UUID, session_id: str
) -> str:
    from lfx.components.input_output import ChatInput, ChatOutput
    from lfx.components.models_and_agents.agent import AgentComponent
    from lfx.graph import Graph

    from langflow_summarizing_agent.components.summarizing_agent.summarizing_agent import (
        SummarizingAgentComponent,
    )

    chat_input = ChatInput(_id="chat_input")
    chat_input.set(input_value=text)
    model_component = BenchmarkModelComponent(_id="model")
    model_component.chat_model = model
    agent_class = SummarizingAgentComponent if run.summarizing else AgentComponent
    agent = agent_class(_id="agent")
    agent.set(model=model_component.build_model, input_value=chat_input.message_response, **run.settings)
    chat_output = ChatOutput(_id="chat_output")
    chat_output.set(input_value=agent.message_response)
    graph = Graph(chat_input, chat_output, flow_id=str(flow_id), user_id=str(user_id))
    graph.session_id = session_id
    async for _ in graph.async_start():
        pass
    return str(graph.get_vertex("agent").built_object["response"].text)


def targets(runs: dict[str, dict[str, Any]], memory: list[PathCost], budget: int) -> list[dict[str, Any]]:
    """The issue's targets, each with the measured value and whether it holds."""
    ours, stock, failing = runs[SUMMARIZING.key], runs[STOCK_100.key], runs[FAILING.key]
    mean_key = f"mean_agent_input_last_{LAST_EXCHANGES}_exchanges"
    total_share = ours["total_input_tokens"] / stock["total_input_tokens"]
    mean_share = ours[mean_key] / stock[mean_key]
    found = [
        _target(
            "total input tokens vs Agent n=100 (summary calls included)",
            total_share,
            f"<= {TOTAL_SHARE_TARGET:.0%}",
            total_share <= TOTAL_SHARE_TARGET,
            percent=True,
        ),
        _target(
            f"mean input per agent call, last {LAST_EXCHANGES} exchanges, vs Agent n=100",
            mean_share,
            f"<= {MEAN_SHARE_TARGET:.1%}",
            mean_share <= MEAN_SHARE_TARGET,
            percent=True,
        ),
        _target(
            "max history tokens of any call",
            ours["max_history_tokens"],
            f"<= {budget} (budget)",
            ours["max_history_tokens"] <= budget,
        ),
        _target(
            "summary calls per exchange",
            ours["summary_calls_per_exchange"],
            f"<= {SUMMARY_CALLS_PER_EXCHANGE_TARGET}",
            ours["summary_calls_per_exchange"] <= SUMMARY_CALLS_PER_EXCHANGE_TARGET,
        ),
        _target(
            "first message's facts reach the model in the last exchange",
            ours["first_facts_in_last_exchange"],
            "yes",
            ours["first_facts_in_last_exchange"],
        ),
        _target(
            "failing summarizer: every turn completes",
            f"{failing['turns_completed']}/{failing['exchanges']}",
            "all",
            failing["turns_completed"] == failing["exchanges"],
        ),
        _target(
            "failing summarizer: max history tokens of any call",
            failing["max_history_tokens"],
            f"<= {budget} (budget)",
            failing["max_history_tokens"] <= budget,
        ),
    ]
    for cost in memory:
        found.append(
            _target(
                f"get_memory_data() time vs Agent, {cost.messages} messages",
                cost.ratio,
                f"<= {MEMORY_PATH_RATIO_TARGET}x",
                cost.ratio <= MEMORY_PATH_RATIO_TARGET,
            )
        )
    if memory:
        trips = [_round_trips(cost.summarizing_statements, cost.summarizing_commits) for cost in memory]
        found.append(
            _target(
                "round trips per get_memory_data() independent of session length",
                " / ".join(trips),
                "same at every size",
                len(set(trips)) == 1,
            )
        )
    return found


def _round_trips(statements: int, commits: int) -> str:
    return f"{_plural(statements, 'statement')} + {_plural(commits, 'commit')}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _target(name: str, measured: Any, limit: str, holds: bool, *, percent: bool = False) -> dict[str, Any]:
    if isinstance(measured, bool):
        shown = "yes" if measured else "no"
    else:
        shown = f"{measured:.1%}" if percent else str(measured)
    value = round(measured, 4) if isinstance(measured, float) else measured
    return {"target": name, "measured": value, "shown": shown, "limit": limit, "pass": bool(holds)}


def report_text(report: dict[str, Any]) -> str:
    runs = report["runs"]
    columns = [run.key for run in RUNS]
    mean_key = f"mean_agent_input_last_{LAST_EXCHANGES}_exchanges"
    rows = [
        ("turns completed", lambda m: f"{m['turns_completed']}/{m['exchanges']}"),
        ("total input tokens", lambda m: f"{m['total_input_tokens']:,}"),
        ("  of it in summary calls", lambda m: f"{m['summary_input_tokens']:,}"),
        ("agent model calls", lambda m: str(m["agent_calls"])),
        ("summary calls (failed)", lambda m: f"{m['summary_calls']} ({m['failed_summary_calls']})"),
        ("summary calls per exchange", lambda m: f"{m['summary_calls_per_exchange']:.3f}"),
        ("input per call, last exchange", lambda m: "+".join(f"{t:,}" for t in m["last_exchange_input_tokens"])),
        ("  summary calls there", lambda m: "+".join(f"{t:,}" for t in m["last_exchange_summary_input_tokens"]) or "-"),
        (f"mean input/agent call, last {LAST_EXCHANGES}", lambda m: f"{m[mean_key]:,.0f}"),
        (
            "max history tokens (budget)",
            lambda m: (
                f"{m['max_history_tokens']:,}"
                + (f" ({m['history_token_budget']:,})" if m["history_token_budget"] else "")
            ),
        ),
        ("max input tokens of a call", lambda m: f"{m['max_input_tokens']:,}"),
        ("first facts in last exchange", lambda m: "yes" if m["first_facts_in_last_exchange"] else "no"),
    ]
    width = max(len(name) for name, _ in rows) + 2
    lines = [
        f"Support session on {report['backend']}: {report['exchanges']} exchanges "
        f"(first message + {report['exchanges'] - 1}); history token budget {report['history_token_budget']:,}",
        "",
        " " * width + "".join(f"{runs[key]['label']:>{COLUMN}}" for key in columns),
    ]
    lines += [name.ljust(width) + "".join(f"{show(runs[key]):>{COLUMN}}" for key in columns) for name, show in rows]
    for key in columns:
        lines += [f"  {runs[key]['label']}: {error}" for error in runs[key]["errors"]]
    memory = report["memory_path"]
    if memory["sizes"]:
        lines += ["", f"Memory path: get_memory_data() on a turn without a fold, median of {memory['repeats']}:"]
        for cost in memory["sizes"]:
            lines.append(
                f"  {cost['messages']:>6,} messages: Agent {cost['stock_ms']:6.2f} ms "
                f"({_round_trips(cost['stock_statements'], cost['stock_commits'])}), "
                f"Summarizing {cost['summarizing_ms']:6.2f} ms "
                f"({_round_trips(cost['summarizing_statements'], cost['summarizing_commits'])}), "
                f"ratio {cost['ratio']:.2f}x"
            )
    state = memory["state_io"]
    if state:
        lines.append(
            f"  state with {state['sessions']:,} sessions stored: read {state['read_ms']:.2f} ms "
            f"({_round_trips(state['read_statements'], state['read_commits'])}), write {state['write_ms']:.2f} ms "
            f"({_round_trips(state['write_statements'], state['write_commits'])})"
        )
    lines += ["", "Targets (Summarizing n=10 against Agent n=100 in the same run):"]
    lines += [
        f"  {'PASS' if t['pass'] else 'FAIL'}  {t['target']}: {t['shown']} (target {t['limit']})"
        for t in report["targets"]
    ]
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> None:
    """Input tokens of every model call over the session, for the three main runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(11, 5.5))
    for run, colour in zip(PLOTTED, ("tab:red", "tab:orange", "tab:blue"), strict=True):
        calls = report["runs"][run.key]["calls"]
        agent = _spread([c for c in calls if c["kind"] == "agent"])
        axes.plot(
            [x for x, _ in agent],
            [y for _, y in agent],
            ".-",
            color=colour,
            markersize=3,
            linewidth=0.8,
            label=f"{report['runs'][run.key]['label']}: agent calls",
        )
        summary = [(c["exchange"] + 0.5, c["input_tokens"]) for c in calls if c["kind"] == "summary"]
        if summary:
            axes.plot(
                [x for x, _ in summary],
                [y for _, y in summary],
                "x",
                color=colour,
                markersize=7,
                label=f"{report['runs'][run.key]['label']}: summary calls",
            )
    log_at = report["pasted_log_exchange"]
    axes.axvline(log_at, color="grey", linestyle=":", linewidth=1)
    axes.annotate("log pasted", (log_at, 0), xytext=(4, 4), textcoords="offset points", fontsize=8, color="grey")
    axes.set_xlabel("exchange (several model calls per exchange on tool-using turns)")
    axes.set_ylabel("input tokens per model call")
    axes.set_title(f"Scripted support session, {report['exchanges']} exchanges ({report['backend']})")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _spread(calls: list[dict[str, Any]]) -> list[tuple[float, int]]:
    """Calls of one exchange spread over it, so each call is its own point."""
    by_exchange: dict[int, list[int]] = {}
    for call in calls:
        by_exchange.setdefault(call["exchange"], []).append(call["input_tokens"])
    points = []
    for exchange, tokens in sorted(by_exchange.items()):
        points += [(exchange + i / (len(tokens) + 1), t) for i, t in enumerate(tokens)]
    return points


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.support_session", description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=BACKENDS, default="sqlite")
    parser.add_argument("--exchanges", type=int, default=60, help="exchanges after the first message (default 60)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--memory-sizes", default="100,1000,10000", help="stored messages per memory-path session")
    parser.add_argument("--repeats", type=int, default=31, help="timed repetitions per memory-path measurement")
    parser.add_argument("--state-sessions", type=int, default=10_000, help="sessions stored for the state read/write")
    return parser.parse_args(argv)


async def amain(argv: list[str] | None = None, *, services_running: bool = False) -> dict[str, Any]:
    """Run the benchmark; with `services_running`, on the Langflow services already started in this process."""
    args = parse_args(argv)
    if services_running:
        return await _benchmark(args, database_backend(), argv)
    async with langflow_services(args.backend):
        return await _benchmark(args, args.backend, argv)


async def _benchmark(args: argparse.Namespace, backend: str, argv: list[str] | None) -> dict[str, Any]:
    budget = DEFAULT_HISTORY_TOKEN_BUDGET
    session = support_session(args.exchanges)
    runs = {run.key: (await replay(run, session)).metrics(budget) for run in RUNS}
    sizes = [int(size) for size in args.memory_sizes.split(",") if size.strip()]
    memory = await measure_memory_path(sizes, args.repeats)
    state: StateCost | None = await measure_state_io(args.state_sessions, args.repeats) if args.state_sessions else None
    command = " ".join(["python -m benchmarks.support_session", *(sys.argv[1:] if argv is None else argv)])
    report: dict[str, Any] = {
        "command": command,
        "backend": backend,
        "exchanges": len(session),
        "pasted_log_exchange": log_exchange(args.exchanges),
        "tool_exchanges": {e.index: e.tool_calls for e in session if e.tool_calls},
        "history_token_budget": budget,
        "runs": runs,
        "memory_path": {
            "repeats": args.repeats,
            "sizes": [asdict(cost) for cost in memory],
            "state_io": asdict(state) if state else None,
        },
        "targets": targets(runs, memory, budget),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"support_session_{backend}"
    stem.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    plot(report, stem.with_suffix(".png"))
    print(report_text(report))
    print(f"\nWrote {stem}.json and {stem}.png")
    return report


def main(argv: list[str] | None = None) -> None:
    asyncio.run(amain(argv))


if __name__ == "__main__":
    main()
