"""The tables of docs/benchmarks.md, written from the results the benchmarks saved.

    python -m benchmarks.tables [--check]

Each block between `<!-- tables:NAME -->` and `<!-- /tables:NAME -->` is rewritten from `benchmarks/results/NAME.json`
(`support_session_<backend>`, `latency_<backend>` or `load`), with a caption naming the command and the commit the
numbers come from. With `--check`, nothing is written and the exit status is 1 when the page differs from what the
results give.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "benchmarks.md"
RESULTS = ROOT / "benchmarks" / "results"
BLOCK = re.compile(r"<!-- tables:(?P<name>[\w-]+) -->\n.*?<!-- /tables:(?P=name) -->", re.DOTALL)
MAIN_RUNS = ("stock_100", "stock_10", "summarizing_10", "summarizing_10_failing")
SCENARIOS = ("summarizing_10_switched", "summarizing_10_long", "summarizing_10_compact")
TEXT_SCENARIOS = (
    "stock_100_logs",
    "stock_10_logs",
    "summarizing_10_logs",
    "stock_100_chinese",
    "stock_10_chinese",
    "summarizing_10_chinese",
)
NO_CACHE_RUNS = ("summarizing_10_no_cache", "summarizing_10_logs_no_cache", "summarizing_10_chinese_no_cache")
"""The Summarizing runs of each session with a model that does not cache."""
SAME_ON_EVERY_BACKEND = MAIN_RUNS + SCENARIOS
"""Runs whose tokens and fidelity do not depend on the database: shown once, from SQLite, when they agree."""
NONE = "\u2013"


def table(header: list[str], rows: list[list[str]], align: str) -> list[str]:
    """A markdown table; `align` holds "l" or "r" per column."""
    rule = ["---" if a == "l" else "---:" for a in align]
    return ["| " + " | ".join(cells) + " |" for cells in (header, rule, *rows)]


def caption(report: dict[str, Any], name: str) -> str:
    at = report.get("commit", "unknown")
    return f"From `benchmarks/results/{name}.json`: `{report['command']}` at commit `{at}`."


def share(part: float, whole: float) -> str:
    return f"{part / whole:.1%}"


def support_rows(report: dict[str, Any], stock_100: str = "stock_100") -> list[tuple[str, Any]]:
    """The rows of the runs tables: a name and how a run's metrics show in it; shares are of the run `stock_100`
    unless a run names the stock run it is billed against."""
    runs = report["runs"]
    budget = report["history_token_budget"]
    last = "mean_agent_input_last_20_exchanges"

    def against_stock(m: dict[str, Any]) -> str:
        # The stock Agent at n=100 of the run's own session; the default session's for the Summarizing scenarios.
        stock = runs[m.get("billed_against", [stock_100])[0]]
        return f"{share(m['total_input_tokens'], stock['total_input_tokens'])} / {share(m[last], stock[last])}"

    def summarizing(show: Any) -> Any:
        return lambda m: show(m) if m["history_token_budget"] else NONE

    def previous_missing(m: dict[str, Any]) -> str:
        missing, cut = m["previous_exchange_missing_turns"], m["previous_exchange_over_budget_turns"]
        notes = [f"exchange {t}" + (": alone over the budget, sent cut" if t in cut else "") for t in missing]
        return f"{len(missing)}" + (f" ({'; '.join(notes)})" if notes else "")

    def fewest(m: dict[str, Any]) -> str:
        least = m["stock_window_verbatim_min_within_budget"]
        over = len(m["turns_window_over_budget"])
        return f"{NONE} ({over} turns over)" if least is None else f"{least} of {m['stock_window']}"

    return [
        ("total input tokens, summary calls included", lambda m: f"{m['total_input_tokens']:,}"),
        (
            "share of Agent n=100: total / mean input per agent call, last 20 exchanges",
            against_stock,
        ),
        (
            "summary calls, failed (their input tokens)",
            summarizing(lambda m: f"{m['summary_calls']}, {m['failed_summary_calls']} ({m['summary_input_tokens']:,})"),
        ),
        ("summary calls per exchange", summarizing(lambda m: f"{m['summary_calls_per_exchange']:.3f}")),
        ("summary calls on the agent's prefix", summarizing(lambda m: f"{m.get('folds_on_prefix', NONE)}")),
        (
            "turns that waited for a summary call",
            summarizing(lambda m: f"{len(m['inline_fold_turns'])}" if "inline_fold_turns" in m else NONE),
        ),
        ("mean input per agent call, last 20 exchanges", lambda m: f"{m[last]:,.0f}"),
        (f"most history tokens in one call (budget {budget:,})", lambda m: f"{m['max_history_tokens']:,}"),
        (
            "messages sent whole per turn once the window filled, min / median",
            lambda m: f"{m['verbatim_min']:g} / {m['verbatim_median']:g}",
        ),
        ("fewest of the stock window sent whole (turns whose window alone is over the budget left out)", fewest),
        ("turns without the previous exchange sent whole", previous_missing),
        (
            "messages never reached again after leaving the window",
            lambda m: f"{len(m['never_reached_again'])} of {m['left_window']}",
        ),
        (
            "first message's facts reach the model in the last exchange",
            lambda m: "yes" if m["first_facts_in_last_exchange"] else "no",
        ),
        ("turns completed", lambda m: f"{m['turns_completed']}/{m['exchanges']}"),
    ]


def runs_tables(report: dict[str, Any]) -> list[str]:
    runs = report["runs"]
    rows = support_rows(report)
    ours = runs["summarizing_10"]
    lines: list[str] = []
    tables = [
        (f"{ours['exchanges']} exchanges, {ours['agent_calls']} agent calls", MAIN_RUNS),
        ("scenarios", SCENARIOS),
    ]
    if all(key in runs for key in TEXT_SCENARIOS):
        tables.append(("short logs and Chinese", TEXT_SCENARIOS))
    if all(key in runs for key in NO_CACHE_RUNS):
        tables.append(("a model that does not cache", NO_CACHE_RUNS))
    for title, keys in tables:
        header = [title, *(runs[key]["label"] for key in keys)]
        cells = [[name, *(show(runs[key]) for key in keys)] for name, show in rows]
        lines += [*table(header, cells, "l" + "r" * len(keys)), ""]
    return lines


def billing_table(report: dict[str, Any]) -> list[str]:
    """Every run's bill: raw and real input tokens, the cached share, billed input at 10% and 50%, the ratios."""
    rows = [
        [
            m["label"],
            f"{m['total_input_tokens']:,}",
            f"{m['real_input_tokens']:,}",
            f"{m['cached_share']:.1%}",
            f"{m['billed_input_tokens_10']:,}",
            f"{m['billed_input_tokens_50']:,}",
            f"{m['billed_input_tokens_10_vs_100']:.1%} / {m['billed_input_tokens_50_vs_100']:.1%}",
            f"{m['billed_input_tokens_10_vs_10']:.1%} / {m['billed_input_tokens_50_vs_10']:.1%}",
        ]
        for m in report["runs"].values()
    ]
    header = [
        "run",
        "raw input tokens (estimate)",
        "real input tokens (o200k)",
        "cached",
        "billed, cached at 10%",
        "billed, cached at 50%",
        "vs Agent n=100, 10% / 50%",
        "vs Agent n=10, 10% / 50%",
    ]
    return [*table(header, rows, "lrrrrrrr"), ""]


def memory_table(report: dict[str, Any]) -> list[str]:
    memory = report["memory_path"]
    if memory["error"]:
        return [f"The memory path did not run: {memory['error']}", ""]

    def trips(statements: int, commits: int) -> str:
        return f"{statements} statement{'s' * (statements != 1)} + {commits} commit{'s' * (commits != 1)}"

    rows = [
        [
            f"{c['messages']:,}",
            f"{c['stock_ms']:.2f} ms",
            f"{c['summarizing_ms']:.2f} ms",
            f"{c['ratio']:.2f}x",
            trips(c["stock_statements"], c["stock_commits"]),
            trips(c["summarizing_statements"], c["summarizing_commits"]),
        ]
        for c in memory["sizes"]
    ]
    lines = table(
        ["stored messages", "Agent", "Summarizing", "ratio", "Agent round trips", "Summarizing round trips"],
        rows,
        "rrrrll",
    )
    if state := memory["state_io"]:
        lines += [
            "",
            f"With {state['sessions']:,} sessions stored, a summary read takes {state['read_ms']:.2f} ms "
            f"({trips(state['read_statements'], state['read_commits'])}) and a compare-and-swap write "
            f"{state['write_ms']:.2f} ms ({trips(state['write_statements'], state['write_commits'])}); "
            f"medians of {memory['repeats']}.",
        ]
    return [*lines, ""]


def targets_table(targets: list[dict[str, Any]], name: str, shown: str, holds: str) -> list[str]:
    rows = [[t[name], str(t[shown]), t["limit"], "PASS" if t[holds] else "FAIL"] for t in targets]
    return [*table(["target", "measured", "limit", ""], rows, "llll"), ""]


def same_as_sqlite(report: dict[str, Any]) -> bool:
    path = RESULTS / "support_session_sqlite.json"
    if report["backend"] == "sqlite" or not path.exists():
        return False
    sqlite = json.loads(path.read_text())

    # Compared on what both results hold: results measured before the bill have neither its metrics nor its per-call
    # keys, and are compared on their tokens, summary calls and fidelity alone.
    metrics = set(sqlite["runs"]["stock_100"]) & set(report["runs"]["stock_100"]) - {"replay_seconds"}
    fields = set(sqlite["runs"]["stock_100"]["calls"][0]) & set(report["runs"]["stock_100"]["calls"][0])

    def numbers(r: dict[str, Any]) -> dict[str, Any]:
        def shown(name: str, value: Any) -> Any:
            return [{f: x for f, x in c.items() if f in fields} for c in value] if name == "calls" else value

        return {k: {m: shown(m, v) for m, v in r["runs"][k].items() if m in metrics} for k in SAME_ON_EVERY_BACKEND}

    return numbers(sqlite) == numbers(report)


def support_session(report: dict[str, Any], name: str) -> list[str]:
    lines = [caption(report, name), ""]
    billed = "real_input_tokens" in report["runs"]["stock_100"]
    if same_as_sqlite(report):
        lines += ["Tokens, summary calls and fidelity: the same as on SQLite, call for call.", ""]
        if not billed:
            lines += ["Not measured in these results: the bill and the short-log and Chinese sessions.", ""]
    else:
        lines += runs_tables(report)
    if billed:
        lines += ["Bill (automatic prefix caching, see [the bill](#the-bill)):", "", *billing_table(report)]
    lines += ["Memory path (`get_memory_data()` on a turn that does not fold, median times):", ""]
    lines += memory_table(report)
    return [*lines, "Targets:", "", *targets_table(report["targets"], "target", "shown", "pass")]


def latency(report: dict[str, Any], name: str) -> list[str]:
    header = [
        f"{report['exchanges']} exchanges, {report['summary_seconds']:g} s summary calls",
        "p50 turn",
        "p95 turn",
        "turns that waited",
        "total input tokens",
        "summary calls per exchange",
        "fewest of the stock window sent whole",
        "turns without the previous exchange",
        "messages never reached again",
    ]
    rows = [
        [
            r["label"],
            f"{r['p50_seconds']:.3f} s",
            f"{r['p95_seconds']:.3f} s",
            str(len(r["turns_waited"])),
            f"{r['total_input_tokens']:,}",
            f"{r['summary_calls_per_exchange']:.3f}" if r["summary_calls"] else NONE,
            f"{r['stock_window_verbatim_min_within_budget']} of {r['stock_window']}",
            str(len(r["previous_exchange_missing_turns"])),
            str(len(r["never_reached_again"])),
        ]
        for r in report["runs"].values()
    ]
    after, inline = report["runs"]["summarizing_10_after_reply"], report["runs"]["summarizing_10_inline"]
    extra = after["total_input_tokens"] / inline["total_input_tokens"] - 1
    return [
        caption(report, name),
        "",
        *table(header, rows, "lrrrrrrrr"),
        "",
        f"Memory path fixed cost at {report['memory_path_messages']} stored messages: {report['fixed_ms']:.1f} ms. "
        f"Folding after the reply takes {extra:.1%} more input tokens than folding in the turn "
        f"({after['total_input_tokens']:,} against {inline['total_input_tokens']:,}).",
        "",
        "Targets:",
        "",
        *targets_table(report["targets"], "name", "measured", "holds"),
    ]


HISTORY_RUNS = ("history_stock_100", "history_stock_10", "history_summarizing_10")


def history_session(report: dict[str, Any], name: str) -> list[str]:
    """The support session through a flow that builds its own prompt: stock and Summarizing Message History."""
    runs = report["runs"]
    rows = [
        (label.replace("Agent n=100", "Message History n=100").replace("agent call", "model call"), show)
        for label, show in support_rows(report, stock_100="history_stock_100")
    ]
    header = [f"{runs[HISTORY_RUNS[0]]['exchanges']} exchanges", *(runs[key]["label"] for key in HISTORY_RUNS)]
    cells = [[label, *(show(runs[key]) for key in HISTORY_RUNS)] for label, show in rows]
    return [caption(report, name), "", *table(header, cells, "l" + "r" * len(HISTORY_RUNS))]


def seconds(value: float | None) -> str:
    return NONE if value is None else f"{value:.2f} s"


def load_runs_table(runs: list[dict[str, Any]]) -> list[str]:
    header = [
        "N per agent",
        "agent",
        "turns/s",
        "p50 / p95 / p99 turn",
        "waited for a summary call",
        "folded inline",
        "fold queue wait p50 / p95",
        "summary calls per exchange, wasted",
        "failed turns",
        "RSS after warm-up, growth",
        "DB connections, max",
    ]
    rows = []
    for run in runs:
        for agent, m in run["agents"].items():
            summarizing = agent == "summarizing"
            rows.append(
                [
                    str(run["users_per_agent"]),
                    "Summarizing n=10" if summarizing else "Agent n=10",
                    f"{m['turns_per_second']:.2f}",
                    " / ".join(seconds(m[f"p{q}_seconds"]) for q in (50, 95, 99)),
                    str(m["turns_waited"]) if summarizing else NONE,
                    str(m["turns_folded_inline"]) if summarizing else NONE,
                    " / ".join(seconds(m[f"fold_queue_wait_p{q}_seconds"]) for q in (50, 95)) if summarizing else NONE,
                    f"{m['summary_calls_per_exchange']:.3f}, {m['wasted_summary_calls']}" if summarizing else NONE,
                    str(m["failed_turns"]),
                    f"{run['rss_mb_after_warmup']:,.0f} MB, {run['rss_growth']:+.1%}" if summarizing else "",
                    str(run["db_connections_max"]) if summarizing else "",
                ]
            )
    return [*table(header, rows, "rlrrrrrrrrr"), ""]


FAULT_LABELS = {
    "pg_restart": "PostgreSQL restarted",
    "worker_kill": "one of two workers SIGKILLed",
    "summary_outage": "summary model failing, then recovering",
    "rejected_saves": "database rejecting summary saves, then accepting them",
    "slow_summary": "summary model taking 30 s",
}


def fault_table(faults: dict[str, dict[str, Any]], faults_commit: str | None = None) -> list[str]:
    header = [
        "fault",
        "failed turns in the fault, Agent / Summarizing",
        "failed turns outside it",
        "waited for a summary call",
        "fold queue wait p95, max",
        "summary calls, failed, wasted",
        "retried within the back-off",
        "most folds in one catch-up",
        "audit",
    ]
    rows = []
    for name, run in faults.items():
        if "error" in run:
            rows.append([FAULT_LABELS.get(name, name), *([NONE] * 7), f"did not complete: {run['error']}"])
            continue
        ours, stock = run["agents"]["summarizing"], run["agents"]["stock"]
        window = run.get("failed_turns_in_fault")
        inside = f"{window['stock_inside']} / {window['summarizing_inside']}" if window else NONE
        outside = (
            str(window["stock_outside"] + window["summarizing_outside"])
            if window
            else str(stock["failed_turns"] + ours["failed_turns"])
        )
        audit = run["audit"]
        label = FAULT_LABELS.get(name, name)
        if run.get("commit") and run["commit"] != faults_commit:
            label += f" (at `{run['commit']}`)"
        rows.append(
            [
                label,
                inside,
                outside,
                str(ours["turns_waited"]),
                f"{seconds(ours['fold_queue_wait_p95_seconds'])}, {seconds(ours['fold_queue_wait_max_seconds'])}",
                f"{ours['summary_calls']}, {ours['failed_summary_calls']}, {ours['wasted_summary_calls']}",
                str(ours["retried_within_backoff"]),
                str(ours["most_calls_in_one_fold"]),
                "holds" if audit["holds"] else "FAILS: " + "; ".join(audit["problems"][:3]),
            ]
        )
    return [*table(header, rows, "lrrrrrrrl"), ""]


def rescored_text(rescored: dict[str, Any] | None) -> str:
    return f"; targets: `{rescored['command']}` at commit `{rescored['commit']}`" if rescored else ""


def load(report: dict[str, Any], name: str) -> list[str]:
    lines = [f"From `benchmarks/results/{name}.json`.", ""]
    for backend, runs in report["runs"].items():
        workers = "one worker" if backend == "sqlite" else "two workers"
        saturated = report.get(f"stock_saturates_at_{backend}")
        at = f"N={saturated}" if saturated else "no N measured"
        measured = report.get("runs_measured", {}).get(backend) or report
        rescored = rescored_text(measured.get("rescored"))
        lines += [
            f"{'SQLite' if backend == 'sqlite' else 'PostgreSQL'}, {workers}, "
            f"{measured.get('max_background_folds') or report['max_background_folds']} places per worker for folds "
            f"after the reply (`{measured['command']}` at commit `{measured['commit']}`{rescored}); "
            f"the stock Agent saturates at {at}:",
            "",
            *load_runs_table(runs),
        ]
    if report["faults"]:
        places = report.get("fault_max_background_folds", 4)
        faults_rescored = rescored_text(report.get("faults_rescored"))
        lines += [
            f"Faults (PostgreSQL, two workers, {report['fault_users']} users per agent, {places} place(s) per worker "
            f"for folds after the reply; `{report.get('faults_command', report['command'])}` at commit "
            f"`{report.get('faults_commit', report['commit'])}`{faults_rescored}):",
            "",
        ]
        lines += fault_table(report["faults"], report.get("faults_commit"))
    rows = [
        [
            f"{t['backend']} N={t['users']}: {t['name']}",
            str(t["measured"]),
            t["limit"],
            "PASS" if t["holds"] else "FAIL",
        ]
        for t in [*report["targets"], *report.get("fault_targets", [])]
    ]
    return [*lines, "Targets:", "", *table(["target", "measured", "limit", ""], rows, "llll")]


RENDERERS = {
    "support_session_": support_session,
    "history_session_": history_session,
    "latency_": latency,
    "load": load,
}
"""Each results file's renderer, by the start of its name."""


def block(name: str) -> str:
    report = json.loads((RESULTS / f"{name}.json").read_text())
    render = next(render for prefix, render in RENDERERS.items() if name.startswith(prefix))
    body = render(report, name)
    while body and not body[-1]:
        body.pop()
    return "\n".join([f"<!-- tables:{name} -->", *body, f"<!-- /tables:{name} -->"])


def rewritten(page: str) -> str:
    return BLOCK.sub(lambda match: block(match["name"]), page)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tables", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the page is not what the results give")
    args = parser.parse_args(argv)
    page = PAGE.read_text()
    expected = rewritten(page)
    if args.check:
        if expected != page:
            print(f"{PAGE.relative_to(ROOT)} differs from benchmarks/results; run python -m benchmarks.tables")
            return 1
        return 0
    PAGE.write_text(expected)
    return 0


if __name__ == "__main__":
    sys.exit(main())
