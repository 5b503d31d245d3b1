"""Benchmark: the tool-heavy session, one agent run far over the model's input limit, through a real `langflow run`.

    python -m benchmarks.long_turn [--turns 2] [--pages 30] [--page-tokens 8000] [--limit 32000] [--out DIR]

One `langflow run` on a fresh SQLite database, its OpenAI and Anthropic models sending to the loopback provider servers
(`tests.support.provider_servers`), which refuse a request over `--limit` prompt tokens as each provider does. The
ready flow as exported, with Langflow's Python Interpreter in Tool Mode on the agent's Tools (`tests.support
.tool_flows`), its model picked in the model picker. Each turn asks "read N pages of T tokens": the scripted model
calls the interpreter once per answer, each call printing a page of T tokens, until N results follow the question.

Runs, for each provider: the Summarizing Agent with Model Input Limit at `--limit`, and the stock Agent (the switch
off). Each run is a session of `--turns` such turns. For each run: turns answered, the largest call sent (prompt
tokens, refused or not), calls refused for length, calls refused for a tool message out of order, and the billed
input of the calls answered (uncached tokens, cache reads at `READ_PRICE`, Anthropic's writes at `WRITE_PRICE`).
Prints the table and targets; writes `long_turn.json` to `--out`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks import tables
from benchmarks.revision import commit
from benchmarks.served_calls import usage_parts
from benchmarks.served_session import API_KEY, PICKED, served
from benchmarks.support_session import ANTHROPIC, OPENAI
from tests.support.flow_files import agent_template, load_support_flow
from tests.support.prompt_caches import READ_PRICE, WRITE_PRICE
from tests.support.provider_servers import Providers, Recorded, running_providers
from tests.support.server_chat import ServerChat, reply_text
from tests.support.server_fixtures import LangflowServer
from tests.support.tool_flows import with_python_interpreter

MAX_ITERATIONS = 100
"""The agent's Max Iterations: a model call per page and one for the answer, past the node's default of 15."""
TARGETS = (
    ("answered_share", "==", 1.0),
    ("over_limit_calls", "==", 0),
    ("orphans_refused", "==", 0),
)
"""For the Summarizing Agent's runs; the stock Agent's are reported as measured."""


@dataclass(frozen=True)
class Run:
    key: str
    label: str
    wire: str
    summarizing: bool


RUNS = tuple(
    Run(f"{kind}_{wire}", f"{label}, {name}", wire, kind == "summarizing")
    for wire, name in ((OPENAI, "OpenAI"), (ANTHROPIC, "Anthropic"))
    for kind, label in (("summarizing", "Summarizing Agent"), ("stock", "Agent"))
)


def flow_data(client: httpx.Client, run: Run, limit: int) -> dict[str, Any]:
    """The ready flow with the interpreter on the agent, set as a user sets it for `run`."""
    flow = with_python_interpreter(load_support_flow(), client)
    template = agent_template(flow)
    template["model"]["value"] = [PICKED[run.wire]]
    template["api_key"] |= {"value": API_KEY, "load_from_db": False}
    template["summarize_older_messages"]["value"] = run.summarizing
    template["max_iterations"]["value"] = MAX_ITERATIONS
    template["add_current_date_tool"]["value"] = False
    if run.summarizing:
        template["model_input_limit"]["value"] = limit
    return dict(flow["data"])


def billed(recorded: Recorded) -> float:
    """A request's billed input: uncached tokens, cache reads at `READ_PRICE`, cache writes at `WRITE_PRICE`."""
    total, read, written = usage_parts(recorded)
    return total - read - written + read * READ_PRICE + written * WRITE_PRICE


def play(server: LangflowServer, providers: Providers, run: Run, args: argparse.Namespace) -> dict[str, Any]:
    """`run`'s session over the run API; its metrics from the provider servers' requests."""
    with server.client(token=server.superuser_token) as client:
        data = flow_data(client, run, args.limit)
    chat = ServerChat.create(server, server.superuser_token, server.superuser_api_key, data=data)
    session_id = f"long-turn-{run.key}-{uuid.uuid4().hex[:8]}"
    start, answered, tool_results, seconds, outcomes = len(providers.requests), 0, 0, [], []
    for _ in range(args.turns):
        started, first = time.perf_counter(), len(providers.requests)
        response = chat.run(session_id, f"Please read {args.pages} pages of {args.page_tokens} tokens each.")
        seconds.append(round(time.perf_counter() - started, 2))
        reply = reply_text(response.json()) if response.status_code == 200 else ""
        answered += reply.startswith("Reply ")
        outcomes.append(reply[:60] if response.status_code == 200 else f"HTTP {response.status_code}")
        agent_calls = [r for r in providers.requests[first:] if not r.is_fold]
        tool_results += max((_tool_results(r) for r in agent_calls), default=0)
    requests = [r for r in providers.requests[start:] if r.wire == run.wire]
    answered_calls = [r for r in requests if r.refused is None]
    return {
        "label": run.label,
        "turns": args.turns,
        "answered": answered,
        "answered_share": answered / args.turns,
        "outcomes": outcomes,
        "calls": len(requests),
        "tool_results": tool_results,
        "largest_call": max((r.prompt_tokens for r in requests), default=0),
        "over_limit_calls": sum(r.prompt_tokens > args.limit for r in requests),
        "refused_for_length": sum(r.refused_for_length for r in requests),
        "orphans_refused": sum(r.refused is not None and not r.refused_for_length for r in requests),
        "summary_calls": sum(r.is_fold for r in answered_calls),
        "input_tokens": sum(usage_parts(r)[0] for r in answered_calls),
        "billed_input": round(sum(billed(r) for r in answered_calls)),
        "turn_seconds": seconds,
    }


def _tool_results(recorded: Recorded) -> int:
    """Tool results the request carries after its newest user text (OpenAI's tool messages, Anthropic's blocks)."""
    count = 0
    for message in reversed(recorded.body.get("messages") or []):
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        if message.get("role") == "tool":
            count += 1
        elif any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
            count += sum(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks)
        elif message.get("role") == "user":
            break
    return count


def targets(runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    ours = tuple(run.key for run in RUNS if run.summarizing and run.key in runs)
    return tables.check(tuple((metric, op, limit, ours) for metric, op, limit in TARGETS), runs)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--pages", type=int, default=30)
    parser.add_argument("--page-tokens", type=int, default=8000)
    parser.add_argument("--limit", type=int, default=32000, help="the model's input limit, at the provider servers")
    parser.add_argument("--runs", default=",".join(run.key for run in RUNS))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    return parser.parse_args(argv)


def measure(server: LangflowServer, providers: Providers, args: argparse.Namespace) -> dict[str, Any]:
    """The runs on `server`, with `providers` refusing calls over the limit while they play."""
    providers.input_limit = args.limit
    try:
        runs = {run.key: play(server, providers, run, args) for run in RUNS if run.key in args.runs.split(",")}
    finally:
        providers.input_limit = None
    return {"runs": runs, "targets": targets(runs)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="summarizing-agent-long-turn-") as work,
        running_providers() as providers,
        served(Path(work), providers) as server,
    ):
        report = measure(server, providers, args)
    command = " ".join(["python -m benchmarks.long_turn", *(argv if argv is not None else sys.argv[1:])])
    head = {"name": "long_turn", "command": command, "commit": commit(), "backend": "sqlite"}
    session = {"pages": args.pages, "page_tokens": args.page_tokens, "limit": args.limit}
    report = head | session | report
    tables.save(args.out, report, tables.long_turn(report))
    return report


if __name__ == "__main__":
    main()
