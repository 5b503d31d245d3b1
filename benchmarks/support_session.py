"""Benchmark: a scripted support session through the stock Agent and the Summarizing Agent, and the memory-path cost.

    python -m benchmarks.support_session [--backend sqlite|postgres] [--exchanges 60] [--out benchmarks/results]

Every exchange is a real lfx graph run (Chat Input -> agent -> Chat Output) on a real Langflow database, started in
this process on a fresh SQLite file or Postgres database and removed afterwards. The model is offline and scripted
(`benchmarks.model`); it records the input tokens of every call it receives, agent and summary calls alike, and which
stored messages each call received, from which `benchmarks.fidelity` reports what reached the model against the stock
Agent's window. Runs: the stock Agent at `n_messages` 100 and 10, the Summarizing Agent at 10, the same with a failing
summarizer, and three scenarios of the Summarizing Agent at 10: the switch turned on three quarters into a running
session, messages of about 1,500 tokens, and `/compact` sent half way; and two sessions whose text the 4-characters
estimate misjudges, a short log pasted in every other user message and the whole conversation in Chinese, each through
the stock Agent at 100 and 10 and the Summarizing Agent at 10. Every run is billed as well (`benchmarks.billing`): real
input tokens (o200k), the tokens automatic prefix caching serves from the cache, and the input billed with cached
tokens at 10% and at 50% of the price. Prints the numbers and the issue's targets with PASS/FAIL, and writes
`support_session_<backend>.json`, `.png` (input tokens per call), `_verbatim.png` (messages sent verbatim per turn)
and `_billed.png` (billed input per call) to `--out`. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.billing import (
    CACHE_STEP,
    CACHED_SHARES,
    MIN_CACHED_TOKENS,
    RECENT_CALLS,
    billed,
    real_tokens,
    run_bill,
    share_key,
)
from benchmarks.fidelity import fidelity, message_numbers
from benchmarks.memory_path import PathCost, StateCost, measure_memory_path, measure_state_io
from benchmarks.model import BenchmarkChatModel, BenchmarkModelComponent, ModelCall, TurnPlan
from benchmarks.revision import commit
from benchmarks.script import (
    CHINESE,
    LOGS,
    LONG_MESSAGE_TOKENS,
    Exchange,
    compact_exchange,
    log_exchange,
    support_session,
    switch_exchange,
)
from langflow_summarizing_agent.engine.plan import COMPACT_REPLY_PREFIX
from langflow_summarizing_agent.engine.settings import DEFAULT_HISTORY_TOKEN_BUDGET
from langflow_summarizing_agent.wiring import runtime
from langflow_summarizing_agent.wiring.agent_turn import turn_of
from langflow_summarizing_agent.wiring.timing import AfterReply
from tests.support.services import BACKENDS, database_backend, langflow_services

LAST_EXCHANGES = 20
COLUMN = 26
"""Width of a run's column in the printed table."""
TOTAL_SHARE_TARGET = 0.15
MEAN_SHARE_TARGET = 0.125
SUMMARY_CALLS_PER_EXCHANGE_TARGET = 0.25
MEMORY_PATH_RATIO_TARGET = 1.5
PINNED_KEYS = ["project_id", "cluster"]


DEFAULT, LONG, COMPACT = "default", "long messages", "/compact"
"""The scripted sessions: the support session, the same with long messages, the same with `/compact` half way."""
SHORT_LOGS, IN_CHINESE = "short logs", "Chinese"
"""The same shape with a short log pasted in every other user message, and in Chinese."""


@dataclass(frozen=True)
class Run:
    key: str
    label: str
    summarizing: bool
    n_messages: int
    fail_summaries: bool = False
    session: str = DEFAULT
    switched_on_late: bool = False
    """The Summarizing Agent runs with its switch off until `switch_exchange()`, then on, in the same session."""
    caches: bool = True
    """The model's provider caches prompt prefixes (and reports the cached tokens); False: a model that does not."""

    def settings(self, exchange: int, exchanges: int) -> dict[str, Any]:
        """The agent's settings for `exchange` of a session of `exchanges` exchanges after the first."""
        # The calculator tool stays on for the tool-using turns; every other setting keeps its default.
        settings: dict[str, Any] = {"n_messages": self.n_messages, "add_calculator_tool": True}
        if self.summarizing:
            switch_on = not self.switched_on_late or exchange >= switch_exchange(exchanges)
            settings |= {"summarize_older_messages": switch_on, "pinned_keys": PINNED_KEYS}
        return settings


STOCK_100 = Run("stock_100", "Agent n=100", summarizing=False, n_messages=100)
STOCK_10 = Run("stock_10", "Agent n=10", summarizing=False, n_messages=10)
SUMMARIZING = Run("summarizing_10", "Summarizing n=10", summarizing=True, n_messages=10)
FAILING = Run("summarizing_10_failing", "Summarizing n=10 failing", True, 10, fail_summaries=True)
SWITCHED = Run("summarizing_10_switched", "Summarizing, on late", True, 10, switched_on_late=True)
LONG_MESSAGES = Run("summarizing_10_long", "Summarizing, long msgs", True, 10, session=LONG)
COMPACTED = Run("summarizing_10_compact", "Summarizing, /compact", True, 10, session=COMPACT)
STOCK_100_LOGS = Run("stock_100_logs", "Agent n=100, logs", False, 100, session=SHORT_LOGS)
STOCK_10_LOGS = Run("stock_10_logs", "Agent n=10, logs", False, 10, session=SHORT_LOGS)
SUMMARIZING_LOGS = Run("summarizing_10_logs", "Summarizing n=10, logs", True, 10, session=SHORT_LOGS)
STOCK_100_CHINESE = Run("stock_100_chinese", "Agent n=100, Chinese", False, 100, session=IN_CHINESE)
STOCK_10_CHINESE = Run("stock_10_chinese", "Agent n=10, Chinese", False, 10, session=IN_CHINESE)
SUMMARIZING_CHINESE = Run("summarizing_10_chinese", "Summarizing n=10, Chinese", True, 10, session=IN_CHINESE)
NO_CACHE = Run("summarizing_10_no_cache", "Summarizing n=10, no cache", True, 10, caches=False)
NO_CACHE_LOGS = Run(
    "summarizing_10_logs_no_cache", "Summarizing n=10, logs, no cache", True, 10, session=SHORT_LOGS, caches=False
)
NO_CACHE_CHINESE = Run(
    "summarizing_10_chinese_no_cache", "Summarizing n=10, Chinese, no cache", True, 10, session=IN_CHINESE, caches=False
)
MAIN_RUNS = (STOCK_100, STOCK_10, SUMMARIZING, FAILING)
SCENARIOS = (SWITCHED, LONG_MESSAGES, COMPACTED)
TEXT_SCENARIOS = (
    STOCK_100_LOGS,
    STOCK_10_LOGS,
    SUMMARIZING_LOGS,
    STOCK_100_CHINESE,
    STOCK_10_CHINESE,
    SUMMARIZING_CHINESE,
)
NO_CACHE_RUNS = (NO_CACHE, NO_CACHE_LOGS, NO_CACHE_CHINESE)
RUNS = MAIN_RUNS + SCENARIOS + TEXT_SCENARIOS + NO_CACHE_RUNS
BILL_SESSIONS = ((DEFAULT, SUMMARIZING, NO_CACHE), (SHORT_LOGS, SUMMARIZING_LOGS, NO_CACHE_LOGS))
BILL_SESSIONS += ((IN_CHINESE, SUMMARIZING_CHINESE, NO_CACHE_CHINESE),)
"""Each session of the bill targets: its Summarizing run, and the same with a model that does not cache."""
BILLED_VS_100_TARGET = 0.18
BILLED_VS_10_TARGET = 0.5
NO_CACHE_VS_10_TARGET = 1.2
BILL_SUMMARY_CALLS_TARGET = 0.2
STOCK_RUNS = {
    DEFAULT: (STOCK_100, STOCK_10),
    SHORT_LOGS: (STOCK_100_LOGS, STOCK_10_LOGS),
    IN_CHINESE: (STOCK_100_CHINESE, STOCK_10_CHINESE),
}
"""The stock runs a run's bill is compared with: those of its own session, else of the default session."""
BILLED_PLOTTED = (
    (DEFAULT, (STOCK_100, STOCK_10, SUMMARIZING)),
    (SHORT_LOGS, TEXT_SCENARIOS[:3]),
    (IN_CHINESE, TEXT_SCENARIOS[3:]),
)
PLOTTED = (STOCK_100, STOCK_10, SUMMARIZING)
VERBATIM_PLOTTED = (STOCK_10, SUMMARIZING, *SCENARIOS)


def sessions(exchanges: int) -> dict[str, list[Exchange]]:
    return {
        DEFAULT: support_session(exchanges),
        LONG: support_session(exchanges, message_tokens=LONG_MESSAGE_TOKENS),
        COMPACT: support_session(exchanges, compact=True),
        SHORT_LOGS: support_session(exchanges, language=LOGS),
        IN_CHINESE: support_session(exchanges, language=CHINESE),
    }


@dataclass
class RunResult:
    run: Run
    session: list[Exchange]
    calls: list[ModelCall]
    completed: int
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    tool_schema_tokens: int = 0
    """Real tokens of the tool schemas bound to the agent calls."""
    inline_folds: list[int] = field(default_factory=list)
    """Exchanges whose turn folded before the agent's call (it waited for a summary call)."""

    @property
    def exchanges(self) -> int:
        return len(self.session)

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
            "max_history_tokens": max((c.history_real_tokens for c in agent), default=0),
            "max_history_estimate_tokens": max((c.history_tokens for c in agent), default=0),
            "history_token_budget": budget if self.run.summarizing else None,
            "max_input_tokens": max((c.input_tokens for c in agent), default=0),
            "first_facts_in_last_exchange": any(c.first_facts for c in in_last if c.kind == "agent"),
            "replay_seconds": round(self.seconds, 1),
            "inline_fold_turns": self.inline_folds,
            "folds_on_prefix": sum(1 for c in summary if c.on_prefix),
            **fidelity(self.session, self.calls, self.run.n_messages, budget),
            **run_bill([asdict(c) for c in self.calls]),
            "tool_schema_tokens": self.tool_schema_tokens,
            "calls": [asdict(c) for c in self.calls],
        }


def bill_ratios(runs: dict[str, dict[str, Any]]) -> None:
    """Each run's billed input against the stock Agent at n=100 and n=10 of its session (`STOCK_RUNS`), in place."""
    for run in RUNS:
        metrics = runs[run.key]
        stock_100, stock_10 = STOCK_RUNS.get(run.session, STOCK_RUNS[DEFAULT])
        metrics["billed_against"] = [stock_100.key, stock_10.key]
        for stock in (stock_100, stock_10):
            for share in CACHED_SHARES:
                key = share_key(share)
                ratio = metrics[key] / runs[stock.key][key]
                metrics[f"{key}_vs_{stock.n_messages}"] = round(ratio, 4)


async def replay(run: Run, session: list[Exchange], exchange_turn: Any = None) -> RunResult:
    """The session through `run`'s agent (or `exchange_turn`'s flow), one graph run per exchange, in a fresh flow,
    owner and session. `exchange_turn` returns the reply and whether the turn folded before the model's call."""
    exchange_turn = exchange_turn or _exchange
    model = BenchmarkChatModel(
        fail_summaries=run.fail_summaries, message_numbers=message_numbers(session), caches=run.caches
    )
    flow_id, user_id, session_id = uuid.uuid4(), uuid.uuid4(), f"benchmark-{run.key}-{uuid.uuid4().hex[:8]}"
    result = RunResult(run, session, model.calls, completed=0)
    start = time.perf_counter()
    # Folds run after the reply, as on `langflow run`; each ends before the next exchange, as while a person reads
    # the reply and types.
    # Each run is a server process of its own: its folds, and what it learned of the provider's usage.
    folds = AfterReply()
    with runtime.using(runtime.Runtime(timing=folds)):
        await _replay(run, session, model, result, exchange_turn, (flow_id, user_id, session_id), folds)
    result.seconds = time.perf_counter() - start
    result.tool_schema_tokens = real_tokens(model.tools_json)
    return result


async def _replay(
    run: Run,
    session: list[Exchange],
    model: BenchmarkChatModel,
    result: RunResult,
    exchange_turn: Any,
    ids: tuple[uuid.UUID, uuid.UUID, str],
    folds: AfterReply,
) -> None:
    flow_id, user_id, session_id = ids
    for exchange in session:
        model.plan = TurnPlan(exchange.index, exchange.reply, exchange.tool_calls, exchange.expression)
        settings = run.settings(exchange.index, len(session) - 1)
        try:
            # A task of its own, as Langflow's server runs a build: the fold after the reply starts when it ends.
            reply, inline = await asyncio.create_task(
                exchange_turn(run, model, exchange.user_text, settings, flow_id, user_id, session_id)
            )
            if inline:
                result.inline_folds.append(exchange.index)
        except Exception as exc:  # noqa: BLE001 - a failed turn is a result to report, not a crash
            result.errors.append(f"exchange {exchange.index}: {type(exc).__name__}: {exc}")
            continue
        if problem := _unexpected(exchange, reply, model.calls):
            result.errors.append(f"exchange {exchange.index}: {problem}")
        else:
            result.completed += 1
        await asyncio.sleep(0)
        await folds.wait_all()


def _unexpected(exchange: Exchange, reply: str, calls: list[ModelCall]) -> str | None:
    """What went wrong with the exchange's reply, if anything; `/compact` is answered without an agent call."""
    if not exchange.compact:
        return None if reply == exchange.reply else f"unexpected reply {reply[:80]!r}"
    if not reply.startswith(COMPACT_REPLY_PREFIX):
        return f"/compact answered with {reply[:80]!r}, not a reply starting {COMPACT_REPLY_PREFIX!r}"
    if any(c.exchange == exchange.index and c.kind == "agent" for c in calls):
        return "/compact made an agent model call"
    return None


async def _exchange(
    run: Run,
    model: BenchmarkChatModel,
    text: str,
    settings: dict[str, Any],
    flow_id: uuid.UUID,
    user_id: uuid.UUID,
    session_id: str,
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
    agent.set(model=model_component.build_model, input_value=chat_input.message_response, **settings)
    chat_output = ChatOutput(_id="chat_output")
    chat_output.set(input_value=agent.message_response)
    graph = Graph(chat_input, chat_output, flow_id=str(flow_id), user_id=str(user_id))
    graph.session_id = session_id
    async for _ in graph.async_start():
        pass
    vertex = graph.get_vertex("agent")
    kept = turn_of(vertex.custom_component) if run.summarizing else None
    inline = kept is not None and kept.turn is not None and kept.turn.fold is not None
    return str(vertex.built_object["response"].text), inline


def targets(
    runs: dict[str, dict[str, Any]], memory: list[PathCost], memory_error: str | None, budget: int
) -> list[dict[str, Any]]:
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
        *fidelity_targets(ours),
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
    found += bill_targets(runs, budget)
    if memory_error:
        found.append(_target("get_memory_data() with the flow's model selection runs", memory_error, "no error", False))
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


def bill_targets(runs: dict[str, dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """The bill's targets on each session: billed input under prefix caching, total input without caching, summary
    calls, the budget in the model's tokens, and the fidelity rules, all in the same run."""
    key = share_key(0.1)
    found = []
    for session, run, no_cache in BILL_SESSIONS:
        ours, plain = runs[run.key], runs[no_cache.key]
        stock_100, stock_10 = (runs[stock.key] for stock in STOCK_RUNS[session])
        name = f"{session} session"
        vs_100 = ours[key] / stock_100[key]
        vs_10 = ours[key] / stock_10[key]
        uncached = plain["real_input_tokens"] / stock_10["real_input_tokens"]
        found += [
            _target(
                f"{name}: billed input, cached at 10%, vs Agent n=100",
                vs_100,
                f"<= {BILLED_VS_100_TARGET:.0%}",
                vs_100 <= BILLED_VS_100_TARGET,
                percent=True,
            ),
            _target(
                f"{name}: billed input, cached at 10%, vs Agent n=10",
                vs_10,
                f"<= {BILLED_VS_10_TARGET:.0%}",
                vs_10 <= BILLED_VS_10_TARGET,
                percent=True,
            ),
            _target(
                f"{name}: total input of a model that does not cache, vs Agent n=10",
                uncached,
                f"<= {NO_CACHE_VS_10_TARGET:.0%}",
                uncached <= NO_CACHE_VS_10_TARGET,
                percent=True,
            ),
            _target(
                f"{name}: summary calls per exchange",
                ours["summary_calls_per_exchange"],
                f"<= {BILL_SUMMARY_CALLS_TARGET}",
                ours["summary_calls_per_exchange"] <= BILL_SUMMARY_CALLS_TARGET,
            ),
            _target(
                f"{name}: max history tokens of any call, in the model's tokens",
                ours["max_history_tokens"],
                f"<= {budget} (budget)",
                ours["max_history_tokens"] <= budget,
            ),
            _target(
                f"{name}: first message's facts reach the model in the last exchange",
                ours["first_facts_in_last_exchange"],
                "yes",
                ours["first_facts_in_last_exchange"],
            ),
            _target(
                f"{name}: turns that waited for a summary call (folds after the reply, as on langflow run)",
                len(ours["inline_fold_turns"]),
                "0",
                not ours["inline_fold_turns"],
            ),
            *({**t, "target": f"{name}: {t['target']}"} for t in fidelity_targets(ours)),
        ]
    return found


def fidelity_targets(ours: dict[str, Any]) -> list[dict[str, Any]]:
    """Recent messages verbatim as the stock Agent sends them, the previous exchange always, nothing dropped."""
    window = ours["stock_window"]
    least = ours["stock_window_verbatim_min_within_budget"]
    exempt = len(ours["turns_window_over_budget"])
    missing = ours["previous_exchange_missing_turns"]
    over_budget = len(ours["previous_exchange_over_budget_turns"])
    lost = ours["never_reached_again"]
    return [
        _target(
            f"stock window messages sent verbatim, fewest in a turn ({exempt} turns with the window over budget "
            "not counted)",
            "no turn" if least is None else least,
            f"= {window} (the stock window)",
            least == window,
        ),
        _target(
            "turns without the previous exchange verbatim, but for an exchange alone over the budget (sent cut)",
            f"{len(missing) - over_budget}"
            + (
                f" (exchanges {_list(missing)}; {over_budget} with that exchange alone over the budget)"
                if missing
                else ""
            ),
            "0",
            len(missing) == over_budget,
        ),
        _target(
            "stored messages never reached again after leaving the window",
            f"{len(lost)}" + (f" (messages {_list(lost)})" if lost else ""),
            "0",
            not lost,
        ),
    ]


def _list(numbers: list[int], most: int = 12) -> str:
    shown = ", ".join(str(n) for n in numbers[:most])
    return shown + (f", ... {len(numbers) - most} more" if len(numbers) > most else "")


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
        (
            "verbatim per turn, min / median",
            lambda m: f"{_number(m['verbatim_min'])} / {_number(m['verbatim_median'])}",
        ),
        (
            "  of the stock window, fewest",
            lambda m: f"{_number(m['stock_window_verbatim_min_within_budget'])} of {m['stock_window']}",
        ),
        ("  turns window over budget", lambda m: str(len(m["turns_window_over_budget"]))),
        ("previous exchange missing", lambda m: str(len(m["previous_exchange_missing_turns"]))),
        ("never reached again / left", lambda m: f"{len(m['never_reached_again'])} / {m['left_window']}"),
        ("out of sight, message-turns", lambda m: f"{m['out_of_sight_message_turns']:,}"),
        ("replay time", lambda m: f"{m['replay_seconds']:.0f} s"),
    ]
    width = max(len(name) for name, _ in rows) + 2
    exchanges = report["exchanges"] - 1
    lines = [
        f"Support session on {report['backend']}: {report['exchanges']} exchanges "
        f"(first message + {exchanges}); history token budget {report['history_token_budget']:,}; "
        f"log pasted at exchange {report['pasted_log_exchange']}",
        f"Scenarios (Summarizing n=10): switch on from exchange {report['switch_exchange']} of the same session; "
        f"messages of ~{LONG_MESSAGE_TOKENS:,} tokens; /compact at exchange {report['compact_exchange']}",
        "Verbatim: stored messages sent whole, per turn once the stock window (n - 1 messages) has filled; "
        "'of the stock window' leaves out turns whose window alone exceeds the budget (benchmarks/fidelity.py)",
    ]
    text_runs = [run for run in TEXT_SCENARIOS if run.key in runs]
    if text_runs:
        lines.append(
            "Text scenarios: a short log pasted in every other user message, and the session in Chinese; "
            "~300 real (o200k) tokens a message"
        )
    for table in (MAIN_RUNS, SCENARIOS, tuple(text_runs)):
        columns = [run.key for run in table]
        lines += ["", " " * width + "".join(f"{runs[key]['label']:>{COLUMN}}" for key in columns)]
        lines += [name.ljust(width) + "".join(f"{show(runs[key]):>{COLUMN}}" for key in columns) for name, show in rows]
        for key in columns:
            lines += [f"  {runs[key]['label']}: {error}" for error in runs[key]["errors"]]
    lines += billing_text(report)
    memory = report["memory_path"]
    if memory["error"]:
        lines += ["", f"Memory path failed: {memory['error']}"]
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


def billing_text(report: dict[str, Any]) -> list[str]:
    """The bill of every run: raw and real input tokens, cached share, billed input at 10% and 50%, ratios."""
    runs = report["runs"]
    low, high = (share_key(share) for share in CACHED_SHARES)
    header = (
        f"{'':26}{'raw tokens':>12}{'real tokens':>13}{'cached':>8}{'billed 10%':>12}{'billed 50%':>12}"
        f"{'vs n=100 10%/50%':>18}{'vs n=10 10%/50%':>17}"
    )
    lines = [
        "",
        f"Bill: real input tokens (o200k, tool schemas and 3 tokens a message included), cached by automatic prefix "
        f"caching (longest prefix shared with one of the last {RECENT_CALLS} calls, from {MIN_CACHED_TOKENS:,} "
        f"tokens in steps of {CACHE_STEP}), billed with cached tokens at 10% and 50%; ratios against the stock "
        "Agent of the run's own session (the default one for the Summarizing scenarios); tool schemas of the "
        f"agent calls: {runs[STOCK_100.key]['tool_schema_tokens']:,} tokens",
        header,
    ]
    for m in runs.values():
        lines.append(
            f"{m['label']:<26}{m['total_input_tokens']:>12,}{m['real_input_tokens']:>13,}{m['cached_share']:>8.1%}"
            f"{m[low]:>12,}{m[high]:>12,}{m[f'{low}_vs_100']:>11.1%} /{m[f'{high}_vs_100']:>6.1%}"
            f"{m[f'{low}_vs_10']:>10.1%} /{m[f'{high}_vs_10']:>6.1%}"
        )
    return lines


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


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


def plot_verbatim(report: dict[str, Any], path: Path) -> None:
    """Stored messages sent verbatim in each turn, against the stock Agent's window at the same `n_messages`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(11, 5.5))
    # Runs often coincide (before the switch, before the first fold): wide pale lines under narrow dark ones.
    styles = (
        ("tab:orange", 5.0, 0.35, "-"),
        ("tab:blue", 2.5, 0.8, "-"),
        ("tab:green", 1.5, 0.9, "--"),
        ("tab:purple", 1.2, 0.9, "-."),
        ("tab:brown", 1.0, 0.9, ":"),
    )
    for run, (colour, width, alpha, line) in zip(VERBATIM_PLOTTED, styles, strict=True):
        metrics = report["runs"][run.key]
        turns = [(t, n) for t, n in enumerate(metrics["verbatim_per_turn"]) if n is not None]
        axes.step(
            [t for t, _ in turns],
            [n for _, n in turns],
            where="mid",
            color=colour,
            linewidth=width,
            alpha=alpha,
            linestyle=line,
            label=metrics["label"],
        )
    window = report["runs"][SUMMARIZING.key]["stock_window"]
    axes.axhline(window, color="grey", linestyle="--", linewidth=0.8)
    axes.annotate(f"stock window ({window})", (0, window), xytext=(4, 4), textcoords="offset points", fontsize=8)
    for key, label in (
        ("pasted_log_exchange", "log pasted"),
        ("compact_exchange", "/compact"),
        ("switch_exchange", "switch on"),
    ):
        at = report[key]
        axes.axvline(at, color="grey", linestyle=":", linewidth=1)
        axes.annotate(label, (at, 0), xytext=(4, 4), textcoords="offset points", fontsize=8, color="grey")
    axes.set_xlabel("exchange")
    axes.set_ylabel("stored messages sent verbatim")
    axes.set_title(f"Messages sent verbatim per turn, {report['exchanges']} exchanges ({report['backend']})")
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_billed(report: dict[str, Any], path: Path) -> None:
    """Billed input of every model call, cached tokens at 10% of the price, agent and summary calls in order."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    share = CACHED_SHARES[0]
    panels = [(session, runs) for session, runs in BILLED_PLOTTED if all(r.key in report["runs"] for r in runs)]
    figure, all_axes = plt.subplots(len(panels), 1, figsize=(11, 3.6 * len(panels)), sharex=True, squeeze=False)
    for (session, runs), axes in zip(panels, all_axes[:, 0], strict=True):
        for run, colour in zip(runs, ("tab:red", "tab:orange", "tab:blue"), strict=True):
            metrics = report["runs"][run.key]
            points = _spread(metrics["calls"], lambda c: billed(c["real_tokens"], c["cached_tokens"], share))
            axes.plot(
                [x for x, _ in points],
                [y for _, y in points],
                ".-",
                color=colour,
                markersize=2.5,
                linewidth=0.8,
                label=f"{metrics['label']}: {metrics[share_key(share)]:,} billed in all",
            )
        axes.set_title(f"{session} session", fontsize=9)
        axes.set_ylabel("billed input tokens")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    all_axes[-1, 0].set_xlabel("exchange (every model call, agent and summary, in the order made)")
    figure.suptitle(
        f"Billed input per call, cached tokens at {share:.0%}: prefix caching from {MIN_CACHED_TOKENS:,} tokens in "
        f"steps of {CACHE_STEP}, last {RECENT_CALLS} calls ({report['backend']})",
        fontsize=10,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _spread(calls: list[dict[str, Any]], value: Any = None) -> list[tuple[float, float]]:
    """Calls of one exchange spread over it, so each call is its own point; `value` of a call, else its input tokens."""
    by_exchange: dict[int, list[float]] = {}
    for call in calls:
        by_exchange.setdefault(call["exchange"], []).append(value(call) if value else call["input_tokens"])
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
    started = time.perf_counter()
    ran_at = commit()
    budget = DEFAULT_HISTORY_TOKEN_BUDGET
    scripted = sessions(args.exchanges)
    runs = {run.key: (await replay(run, scripted[run.session])).metrics(budget) for run in RUNS}
    bill_ratios(runs)
    sizes = [int(size) for size in args.memory_sizes.split(",") if size.strip()]
    memory: list[PathCost] = []
    memory_error = None
    try:
        memory = await measure_memory_path(sizes, args.repeats)
    except Exception as exc:  # noqa: BLE001 - a memory path that cannot run is a result to report
        memory_error = f"{type(exc).__name__}: {exc}"
    state: StateCost | None = await measure_state_io(args.state_sessions, args.repeats) if args.state_sessions else None
    command = " ".join(["python -m benchmarks.support_session", *(sys.argv[1:] if argv is None else argv)])
    session = scripted[DEFAULT]
    report: dict[str, Any] = {
        "command": command,
        "commit": ran_at,
        "backend": backend,
        "exchanges": len(session),
        "pasted_log_exchange": log_exchange(args.exchanges),
        "switch_exchange": switch_exchange(args.exchanges),
        "compact_exchange": compact_exchange(args.exchanges),
        "long_message_tokens": LONG_MESSAGE_TOKENS,
        "tool_exchanges": {e.index: e.tool_calls for e in session if e.tool_calls},
        "message_chars": {name: _message_chars(exchanges) for name, exchanges in scripted.items()},
        "history_token_budget": budget,
        "billing": {
            "encoding": "o200k_base",
            "tokens_per_message": 3,
            "reply_priming_tokens": 3,
            "tool_schemas": "agent calls: the bound tools' JSON (OpenAI function-tool format) after the system message",
            "recent_calls": RECENT_CALLS,
            "min_cached_tokens": MIN_CACHED_TOKENS,
            "cache_step": CACHE_STEP,
            "cached_price_shares": list(CACHED_SHARES),
            "source": "https://platform.openai.com/docs/guides/prompt-caching",
        },
        "runs": runs,
        "memory_path": {
            "repeats": args.repeats,
            "error": memory_error,
            "sizes": [asdict(cost) for cost in memory],
            "state_io": asdict(state) if state else None,
        },
        "targets": targets(runs, memory, memory_error, budget),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"support_session_{backend}"
    stem.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    plot(report, stem.with_suffix(".png"))
    verbatim_plot = stem.with_name(f"{stem.name}_verbatim.png")
    plot_verbatim(report, verbatim_plot)
    billed_plot = stem.with_name(f"{stem.name}_billed.png")
    plot_billed(report, billed_plot)
    print(report_text(report))
    print(
        f"\nWrote {stem}.json, {stem}.png, {verbatim_plot} and {billed_plot} in {time.perf_counter() - started:.0f} s"
    )
    return report


def _message_chars(session: list[Exchange]) -> list[int]:
    """Characters of each scripted message, by message number."""
    chars: dict[int, int] = {}
    for exchange in session:
        chars[exchange.message_number("user")] = len(exchange.user_text)
        chars[exchange.message_number("reply")] = len(exchange.reply)
    return [chars[number] for number in sorted(chars)]


def main(argv: list[str] | None = None) -> None:
    asyncio.run(amain(argv))


if __name__ == "__main__":
    main()
