"""Benchmark: the support session through a real `langflow run`, the ready flow and the real provider clients.

    python -m benchmarks.served_session [--exchanges 60] [--fold-batch N] [--replay] [--calls] [--out DIR]

One `langflow run` on a fresh SQLite database, its OpenAI and Anthropic models sending to the loopback provider servers
(`tests.support.provider_servers`), which answer as the script does (`benchmarks.served_calls`). The ready flow
(`flows/summarizing_support_agent.json`) is imported over the API; before each run its agent's model, API key, switch
and Number of Chat History Messages are set over the API, and the session (`benchmarks.script`) is played over the
run API, each turn's fold waited for through the summary API. Bill and fidelity come from the providers' recorded
requests (docs/benchmarks.md, "The bill from the road"). `--replay` replays the same session in this process
(`benchmarks.support_session`) and reports how far each of its numbers is from the server's. Prints tables and
targets; writes `served_session.json` to `--out`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from benchmarks import tables
from benchmarks.billing import run_bill
from benchmarks.revision import commit
from benchmarks.script import Exchange, support_session
from benchmarks.served_calls import ScriptedAnswers, fold_summary, wire_calls
from benchmarks.support_session import ANTHROPIC, OPENAI, Run, RunResult
from tests.support.flow_files import SUPPORT_FLOW_PATH, agent_template
from tests.support.prompt_caches import AnthropicCache, OpenAICache
from tests.support.provider_servers import Providers, Recorded, running_providers
from tests.support.server_chat import ServerChat
from tests.support.server_fixtures import LangflowServer, running_langflow_server

CUT_OFF, CUT_OFF_EVERY = "_cut_off", 2
RUNS = (
    Run("summarizing_10", "Summarizing n=10", True, 10),
    Run("stock_10", "Agent n=10", False, 10),
    Run("stock_100", "Agent n=100", False, 100),
    Run("summarizing_10_anthropic", "Summarizing n=10, Anthropic", True, 10, provider=ANTHROPIC),
    Run("stock_10_anthropic", "Agent n=10, Anthropic", False, 10, provider=ANTHROPIC),
    Run("stock_100_anthropic", "Agent n=100, Anthropic", False, 100, provider=ANTHROPIC),
    Run(f"summarizing_10_openai{CUT_OFF}", "Summarizing n=10, folds cut off", True, 10),
    Run(
        f"summarizing_10_anthropic{CUT_OFF}",
        "Summarizing n=10, Anthropic, folds cut off",
        True,
        10,
        provider=ANTHROPIC,
    ),
)
"""Each provider's Summarizing run first, on a server that has not yet seen that model cache, as the replay's runs
start on a fresh runtime. In the last two the 1st fold, and every `CUT_OFF_EVERY`-th after it, is answered cut off at
the length limit."""
OURS = ("summarizing_10", "summarizing_10_anthropic")
CUT_OFF_RUNS = tuple(run.key for run in RUNS if run.key.endswith(CUT_OFF))
TARGETS = (
    ("prefix_fold_share", ">=", 0.9, OURS),
    ("billed_10_vs_10", "<=", 0.52, OURS[:1]),
    ("billed_10_vs_10", "<=", 0.55, OURS[1:]),
    ("cut_changes", "==", 0, OURS),
    ("failed_turns", "==", 0, ("all runs",)),
    ("cut_off_summaries_saved", "==", 0, CUT_OFF_RUNS),
)
METADATA = {"model_type": "llm", "tool_calling": True, "model_name_param": "model"}
PICKED = {
    OPENAI: {"name": "gpt-4o-mini", "provider": "OpenAI", "metadata": {**METADATA, "model_class": "ChatOpenAI"}},
    ANTHROPIC: {
        "name": "claude-sonnet-4-5",
        "provider": "Anthropic",
        "metadata": {**METADATA, "model_class": "ChatAnthropic"},
    },
}
"""The model picked in the agent's model field, as `tests/server/test_provider_clients.py` picks it."""
API_KEY = "any-key"  # the loopback servers take any
AGREEMENT = 0.02
COMPARED = (
    "billed_10_vs_100",
    "billed_10_vs_10",
    "cached_share",
    "total_vs_100",
    "total_vs_10",
    "mean_last_20_vs_100",
    "summary_calls_per_exchange",
    "folds_on_prefix",
    "max_history_tokens",
    "verbatim_min",
    "verbatim_median",
    "window_messages_missed",
    "previous_exchange_missed",
    "never_reached_again",
    "cut_changes",
    "first_facts_in_last_exchange",
    "failed_turns",
)
"""The bill and fidelity numbers a replayed run and a served one are compared on."""
WHERE_FROM = """
import langflow_summarizing_agent
from lfx.custom.custom_component.component import Component


class WhereFrom(Component):
    display_name = "Where From"
    description = langflow_summarizing_agent.__file__
"""
"""A component whose description, built by the server, is where the server imports this package from."""


@contextmanager
def served(work_dir: Path, providers: Providers) -> Iterator[LangflowServer]:
    """One `langflow run` on a fresh SQLite database, its OpenAI and Anthropic models sending to `providers`."""
    settings = {"OPENAI_BASE_URL": providers.openai_base_url, "ANTHROPIC_BASE_URL": providers.anthropic_base_url}
    with running_langflow_server(work_dir, f"sqlite:///{work_dir / 'langflow.db'}", settings=settings) as server:
        yield server


def where_from(server: LangflowServer, token: str) -> str:
    """Where the server's worker imports `langflow_summarizing_agent` from."""
    with server.client(token=token) as client:
        response = client.post("/api/v1/custom_component", json={"code": WHERE_FROM})
    response.raise_for_status()
    return str(response.json()["data"]["description"])


def import_ready_flow(server: LangflowServer, token: str) -> str:
    """The ready flow posted as its file holds it (the server gives it an id of its own); its id."""
    flow = json.loads(SUPPORT_FLOW_PATH.read_text(encoding="utf-8"))
    flow.pop("id", None)
    with server.client(token=token) as client:
        response = client.post("/api/v1/flows/", json=flow)
    response.raise_for_status()
    return str(response.json()["id"])


def switch(server: LangflowServer, token: str, flow_id: str, run: Run, fold_batch: int | None) -> None:
    """Set the flow's agent as a user does for `run`: the model picked, its API key typed in, the switch and Number of
    Chat History Messages (and Fold Batch if given); saved with `PATCH /api/v1/flows/{id}`."""
    with server.client(token=token) as client:
        flow = client.get(f"/api/v1/flows/{flow_id}").raise_for_status().json()
        template = agent_template(flow)
        template["model"]["value"] = [PICKED[run.provider or OPENAI]]
        template["api_key"] |= {"value": API_KEY, "load_from_db": False}
        template["summarize_older_messages"]["value"] = run.summarizing
        template["n_messages"]["value"] = run.n_messages
        if fold_batch is not None:
            template["fold_batch"]["value"] = fold_batch
        client.patch(f"/api/v1/flows/{flow_id}", json={"data": flow["data"]}).raise_for_status()


def play(
    chat: ServerChat, providers: Providers, answers: ScriptedAnswers, run: Run, session: Sequence[Exchange]
) -> dict[str, Any]:
    """The session over the run API, each turn's fold waited for; the run's metrics from the provider's requests."""
    session_id = f"served-{run.key}-{uuid.uuid4().hex[:8]}"
    requests: list[tuple[int, Recorded]] = []
    numbers: list[int] = []  # each request's number at the provider servers
    result = RunResult(run, list(session), [])
    cut_off_saved, stale, seconds = 0, 0, []
    for exchange in session:
        start, started = len(providers.requests), time.perf_counter()
        try:
            reply = chat.say(session_id, exchange.user_text)
            summaries = (chat.state(session_id) or {}).get("summaries") or []
        except (AssertionError, httpx.HTTPError) as exc:  # a failed turn is a result to report
            result.errors.append(f"exchange {exchange.index}: {type(exc).__name__}: {str(exc)[:300]}")
            continue
        finally:
            requests += [(exchange.index, recorded) for recorded in providers.requests[start:]]
            numbers += range(start + 1, len(providers.requests) + 1)
        seconds.append(time.perf_counter() - started)
        result.turns.append((exchange.index, started, started + seconds[-1]))
        if reply == exchange.reply:
            result.completed += 1
        else:
            result.errors.append(f"exchange {exchange.index}: unexpected reply {reply[:80]!r}")
        turn = [recorded for index, recorded in requests if index == exchange.index]
        if turn and turn[0].is_fold:
            result.inline_folds.append(exchange.index)
        whole = [
            fold_summary(recorded)
            for (_, recorded), number in zip(requests, numbers, strict=True)
            if recorded.is_fold and number not in answers.cut_off
        ]
        saved = summaries[0]["summary"] if summaries else ""
        cut_off_saved += bool(saved) and saved not in whole
        stale += bool(whole) and saved != whole[-1]
    cut_off = {position for position, number in enumerate(numbers) if number in answers.cut_off}
    result.calls = wire_calls(session, requests, cut_off)
    metrics = result.metrics()
    folds = [call for call in result.calls if call.kind == "summary"]
    metrics["asked_on_prefix"] = metrics["folds_on_prefix"]
    metrics["folds_on_prefix"] = sum(call.prefix_read for call in folds)
    metrics["prefix_fold_share"] = round(metrics["folds_on_prefix"] / len(folds), 4) if folds else None
    metrics |= {"cut_off_every": answers.cut_off_every, "cut_off_answers": len(cut_off)}
    metrics["cut_off_summaries_saved"] = cut_off_saved
    metrics["summary_not_the_last_whole_answer"] = stale
    metrics["billed_10_folds"] = run_bill(folds)["billed_10"]
    metrics["turn_seconds_median"] = round(sorted(seconds)[len(seconds) // 2], 3) if seconds else None
    return metrics


def compare(runs: dict[str, dict[str, Any]]) -> None:
    """Each run's tokens and bill against the stock Agent's at n=100 and n=10 on the same provider and its rule."""
    for metrics in runs.values():
        suffix = "_anthropic" if metrics["provider"] == ANTHROPIC else ""
        for n in (100, 10):
            stock = runs.get(f"stock_{n}{suffix}")
            for key, of in (("total", "total_input_tokens"), ("billed_10", "billed_10"), ("mean_last_20", "")):
                if stock and (key != "mean_last_20" or n == 100):
                    of = of or key
                    metrics[f"{key}_vs_{n}"] = round(metrics[of] / stock[of], 4) if stock[of] else None


def served_runs(
    server: LangflowServer,
    providers: Providers,
    session: Sequence[Exchange],
    fold_batch: int | None = None,
    runs: Sequence[Run] = RUNS,
) -> dict[str, Any]:
    """Every run of `runs` on `server`, one user, one imported ready flow, each run a session of its own and fresh
    provider caches; the runs' metrics and where the server imports this package from."""
    user = server.create_user()
    api_key = server.create_api_key(user.token)
    flow_id = import_ready_flow(server, user.token)
    chat = ServerChat(server, user.token, api_key, flow_id)
    package = where_from(server, user.token)
    print(f"The server imports langflow_summarizing_agent from {package}", flush=True)
    measured: dict[str, dict[str, Any]] = {}
    with ScriptedAnswers(session).serving() as answers:
        for run in runs:
            switch(server, user.token, flow_id, run, fold_batch)
            providers.openai_cache, providers.anthropic_cache = OpenAICache(), AnthropicCache()
            answers.cut_off_every, answers.folds = CUT_OFF_EVERY if run.key.endswith(CUT_OFF) else 0, 0
            measured[run.key] = play(chat, providers, answers, run, session)
            print(f"{run.label}: {measured[run.key]['failed_turns']} failed turns", flush=True)
    compare(measured)
    return {"server_package": package, "runs": measured}


def agreement(served: dict[str, dict[str, Any]], replayed: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """How far each bill and fidelity number of the replayed runs is from the served run of the same key."""
    rows = []
    for key, ours in replayed.items():
        for name in COMPARED:
            road, replay = served[key].get(name), ours.get(name)
            if isinstance(road, bool) or isinstance(replay, bool) or road is None or replay is None:
                apart = 0.0 if road == replay else None
            else:
                apart = abs(replay - road) / max(abs(road), abs(replay)) if road != replay else 0.0
            within = apart is not None and apart <= AGREEMENT
            rows.append(
                {"run": key, "number": name, "served": road, "replayed": replay, "apart": apart, "within": within}
            )
    return {"limit": AGREEMENT, "within": all(row["within"] for row in rows), "numbers": rows}


async def replayed_runs(session: list[Exchange], keys: Sequence[str], fold_batch: int | None) -> dict[str, Any]:
    """The replay's runs of `keys` on the same session, in this process (`benchmarks.support_session`)."""
    from dataclasses import replace

    from benchmarks import support_session
    from tests.support.services import langflow_services

    chosen = [run for run in support_session.RUNS if run.key in keys]
    if fold_batch is not None:
        chosen = [replace(run, fold_batch=fold_batch) for run in chosen]
    async with langflow_services("sqlite"):
        results = {
            run.key: await support_session.replay(run, session, support_session.model_for(run)) for run in chosen
        }
    runs = {key: result.metrics() for key, result in results.items()}
    support_session.compare(runs)
    return runs


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--exchanges", type=int, default=60, help="exchanges after the first message (default 60)")
    parser.add_argument("--fold-batch", type=int, default=None, help="set the flow's Fold Batch (default: the flow's)")
    parser.add_argument("--runs", default=",".join(run.key for run in RUNS), help="the runs, by key, comma-separated")
    parser.add_argument("--replay", action="store_true", help="also replay the session in process and compare")
    parser.add_argument("--calls", action="store_true", help="keep every model call in the JSON")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    session = support_session(args.exchanges)
    runs = [run for run in RUNS if run.key in args.runs.split(",")]
    with (
        tempfile.TemporaryDirectory(prefix="summarizing-agent-served-") as work,
        running_providers() as providers,
        served(Path(work), providers) as server,
    ):
        report = served_runs(server, providers, session, args.fold_batch, runs)
    if args.replay:
        keys = [key for key in report["runs"] if not key.startswith("stock_") or not key.endswith("_anthropic")]
        replayed = asyncio.run(replayed_runs(session, keys, args.fold_batch))
        report["replay"] = agreement(report["runs"], replayed) | {"runs": replayed}
    report["targets"] = targets(report["runs"])
    return write(args, session, report)


def targets(runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """`TARGETS` on the runs measured; "all runs" sums their failed turns."""
    subjects = runs | {"all runs": {"failed_turns": sum(m["failed_turns"] for m in runs.values())}}
    chosen = [(metric, op, limit, tuple(w for w in wheres if w in subjects)) for metric, op, limit, wheres in TARGETS]
    return tables.check(tuple(chosen), subjects)


def write(args: argparse.Namespace, session: list[Exchange], report: dict[str, Any]) -> dict[str, Any]:
    """Writes and prints the report: its command and commit, then the runs (their calls only with `--calls`)."""
    for metrics in [] if args.calls else [*report["runs"].values(), *report.get("replay", {}).get("runs", {}).values()]:
        metrics.pop("calls", None)
    command = " ".join(["python -m benchmarks.served_session", *sys.argv[1:]])
    head = {"name": "served_session", "command": command, "commit": commit(), "backend": "sqlite"}
    report = head | {"exchanges": len(session)} | report
    tables.save(args.out, report, tables.served_session(report))
    return report


if __name__ == "__main__":
    main()
