"""The benchmarks' targets, and the blocks of docs/benchmarks.md and the README from their saved results.

    python -m benchmarks.tables [--check]

Each `<!-- tables:NAME -->` block is rewritten by `BLOCKS[NAME]`; `--check` writes nothing, exits 1 when a page differs.
"""

from __future__ import annotations

import argparse
import functools
import json
import operator
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.revision import ROOT

PAGE, RESULTS = ROOT / "docs" / "benchmarks.md", ROOT / "benchmarks" / "results"
PAGES = (PAGE, ROOT / "README.md")
BLOCK = re.compile(r"(<!-- tables:(?P<name>[\w-]+) -->\n).*?(?=<!-- /tables:(?P=name) -->)", re.DOTALL)
NONE = "\u2013"
OPS = {"<=": operator.le, ">=": operator.ge, "==": operator.eq}
LABELS = {
    "total_vs_100": "total input tokens vs Agent n=100",
    "mean_last_20_vs_100": "mean agent call, last 20 exchanges, vs Agent n=100",
    "summary_calls_per_exchange": "summary calls per exchange",
    "billed_10_vs_100": "billed, cache reads at 10%, vs Agent n=100",
    "billed_10_vs_10": "billed, cache reads at 10%, vs Agent n=10",
    "total_vs_10": "total input without cache vs Agent n=10",
    "max_history_tokens": "most history tokens in a call",
    "first_facts_in_last_exchange": "first message's facts reach the last exchange",
    "turns_that_waited": "turns that waited for a summary call",
    "window_messages_missed": "window messages not sent whole (within budget)",
    "previous_exchange_missed": "turns without the previous exchange (within budget)",
    "never_reached_again": "messages lost after leaving the window",
    "cut_changes": "cut messages changed between turns",
    "failed_turns": "failed turns",
    "memory_path_ratio": "get_memory_data() time vs Agent, worst size",
    "round_trip_counts_over_sizes": "different round-trip counts over session sizes",
    "steady_turns_waited": "turns that waited for a summary call, from exchange 10",
    "p95_vs_stock": "p95 turn time less the memory path's fixed cost, vs Agent",
    "prefix_fold_share": "folds that read the agent's prefix cached",
    "cut_off_summaries_saved": "summaries saved from no whole fold answer",
    "answered_share": "turns answered",
    "over_limit_calls": "calls over the model's input limit",
    "orphans_refused": "calls refused for a tool message out of order",
}


def check(targets: tuple[tuple[str, str, Any, tuple[str, ...]], ...], subjects: dict[str, Any]) -> list[dict]:
    """Each target (metric, comparison, limit, the runs or other subjects it is for) on each subject, passing or not."""
    return [
        {"metric": metric, "where": where, "limit": f"{op} {limit}", "measured": subjects[where][metric]}
        | {"pass": OPS[op](subjects[where][metric], limit)}
        for metric, op, limit, wheres in targets
        for where in wheres
    ]


def table(header: list[str], rows: list[list[Any]]) -> list[str]:
    return ["| " + " | ".join(map(str, cells)) + " |" for cells in (header, ["---"] * len(header), *rows)]


def load(name: str, required: bool = True) -> dict[str, Any]:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if required or path.exists() else {}


def save(out: Path, report: dict[str, Any], shown: list[str]) -> None:
    """Writes `report` to `out` as `<its name>.json`, and prints `shown`, its tables."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{report['name']}.json"
    path.write_text(json.dumps(report, indent=1) + "\n")
    print(*shown, f"\nWrote {path}", sep="\n")


def caption(*reports: dict[str, Any]) -> str:
    """The commands and commits of `reports`, each once; one command for both backends when only the backend differs."""
    shown = list(dict.fromkeys(f"`{r['command']}` at `{r['commit']}`" for r in reports if r))
    both = {re.sub(r"--backend (sqlite|postgres)", "--backend sqlite|postgres", s) for s in shown}
    return "From " + (both.pop() if len(shown) > 1 and len(both) == 1 else "; ".join(shown)) + "."


def num(value: float | None, spec: str = "g") -> str:
    return NONE if value is None else format(value, spec)


def runs_table(report: dict[str, Any], bill: bool = True) -> list[str]:
    """A row a run; `bill`: with its cached share and bill against the stock Agent's (a ratio missing: no such run)."""

    def share(m: dict[str, Any], *keys: str) -> str:
        return " / ".join(num(m.get(key), ".1%") for key in keys)

    rows = [
        [
            m["label"],
            f"{m['total_input_tokens']:,}",
            share(m, "total_vs_100", "mean_last_20_vs_100"),
            f"{m['summary_calls_per_exchange']:.3f} ({m['folds_on_prefix']}, {m['failed_summary_calls']})",
            f"{m['max_history_tokens']:,}",
            f"{num(m['verbatim_min'])} / {num(m['verbatim_median'])}",
            f"{m['window_messages_missed']}, {m['previous_exchange_missed']}, {m['never_reached_again']}",
            "yes" if m["first_facts_in_last_exchange"] else "no",
            *([f"{m['cached_share']:.1%}: {share(m, 'billed_10_vs_100', 'billed_10_vs_10')}"] if bill else []),
            str(m["failed_turns"]),
        ]
        for m in report["runs"].values()
    ]
    header = ["run", "input tokens", "vs n=100: total / last 20", "folds/exchange (on prefix, failed)"]
    header += ["most history tokens", "sent whole min / median", "missed: window, previous, lost", "first facts"]
    return table([*header, *(["cached: billed vs n=100 / 10"] if bill else []), "failed turns"], rows)


def targets_table(
    *reports: dict[str, Any], keep: Callable[[dict[str, Any]], bool] = bool, ours: str = "default"
) -> list[str]:
    """One row a target of those to `keep`: its value where it applies (each differing backend's, in the reports'
    order); `ours` names the Summarizing Agent's main run."""
    rows: dict[tuple[str, str], list[Any]] = {}
    for report in filter(None, reports):
        for t in filter(keep, report["targets"]):
            row = rows.setdefault((t["metric"], t["limit"]), [LABELS[t["metric"]], {}, t["limit"], {}, True])
            where = t["where"].replace("summarizing_10_", "").replace("summarizing_10", ours)
            row[1][where.replace("_", " ")] = None
            shown = f"{t['measured']:.3g}" if isinstance(t["measured"], float) else str(t["measured"])
            row[3].setdefault(t["where"], {})[shown] = None
            row[4] &= t["pass"]
    lines = [
        [r[0], ", ".join(r[1]), r[2], ", ".join(" / ".join(v) for v in r[3].values()), "PASS" if r[4] else "FAIL"]
        for r in rows.values()
    ]
    return table(["target", "where", "limit", "measured", ""], lines)


def agreement(sqlite: dict[str, Any], postgres: dict[str, Any]) -> str:
    """How far the PostgreSQL runs differ from the SQLite ones shown."""
    if not postgres:
        return " SQLite."
    apart = max(
        abs(postgres["runs"][k]["total_input_tokens"] / m["total_input_tokens"] - 1) for k, m in sqlite["runs"].items()
    )
    keys = ("verbatim_per_turn", "never_reached_again", "previous_exchange_missed", "window_messages_missed")
    same = all(postgres["runs"][k][f] == m[f] for k, m in sqlite["runs"].items() for f in keys)
    return f" SQLite; PostgreSQL: tokens within {apart:.2%}, fidelity {'the same' if same else 'differs'}."


def backends(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return load(f"{name}_sqlite"), load(f"{name}_postgres", False)


def replay_bills() -> bool:
    """Whether the replays' bills are shown: only when a replay came within its limit of a served run on every bill
    and fidelity number (`served_session.json`); otherwise the page shows only the served runs' bills."""
    return bool(load("served_session", False).get("replay", {}).get("within"))


def runs_block(name: str, beside_road: bool = False) -> list[str]:
    """The replayed runs; without their bills, those the road plays (`beside_road`) are left to the road's table."""
    sqlite, postgres = backends(name)
    shown = sqlite
    if beside_road and not replay_bills():
        road = load("served_session", False).get("runs", {})
        shown = {"runs": {key: m for key, m in sqlite["runs"].items() if key not in road}}
    return [caption(sqlite, postgres) + agreement(sqlite, postgres), "", *runs_table(shown, replay_bills())]


def memory_path() -> list[str]:
    rows, reports = [], backends("support_session")
    for backend, memory in [(r["backend"], r["memory_path"]) for r in reports if r.get("memory_path")]:
        for c in memory["sizes"]:
            trips = " / ".join(f"{c[k]['statements']} + {c[k]['commits']}" for k in ("stock", "summarizing"))
            rows.append([backend, f"{c['messages']:,}", f"{c['stock']['ms']:.2f}", f"{c['summarizing']['ms']:.2f}"])
            rows[-1] += [f"{c['ratio']:.2f}x", trips]
        read, write = memory["state_io"]["read"], memory["state_io"]["write"]
        rows.append([backend, f"state, {memory['state_io']['sessions']:,} sessions", f"read {read['ms']:.2f}"])
        rows[-1] += [f"write {write['ms']:.2f}", NONE, f"{read['statements']} / {write['statements']}"]
    header = ["backend", "stored messages", "Agent ms", "Summarizing ms", "ratio", "statements + commits"]
    return [caption(*reports), "", *table(header, rows)]


def support_targets() -> list[str]:
    reports = backends("support_session")

    def keep(target: dict[str, Any]) -> bool:
        return replay_bills() or not target["metric"].startswith("billed_")

    return [caption(*reports), "", *targets_table(*reports, keep=keep)]


def served_session(report: dict[str, Any] | None = None) -> list[str]:
    """The served runs and the targets; the runs with folds cut off, and the stock Agent's on Anthropic (which pays its
    whole input), only in the targets."""
    report = report or load("served_session")
    runs = {
        key: m
        for key, m in report["runs"].items()
        if not m.get("cut_off_every") and not (key.startswith("stock_") and m["provider"] == "anthropic")
    }
    shown = f"{caption(report)[:-1]}: {report['exchanges']} exchanges."
    return [shown, "", *runs_table({"runs": runs}), "", *targets_table(report, ours="openai"), "", *replayed(report)]


def replayed(report: dict[str, Any]) -> list[str]:
    """How far the replay is from the server: its numbers within the limit, and the farthest apart."""
    replay = report.get("replay")
    if not replay:
        return ["No replay was compared in this run."]
    numbers = replay["numbers"]
    far = max(numbers, key=lambda n: float("inf") if n["apart"] is None else n["apart"])
    apart = NONE if far["apart"] is None else f"{far['apart']:.1%}"
    label = replay["runs"][far["run"]]["label"]
    within = f"{sum(n['within'] for n in numbers)} of {len(numbers)} numbers within {replay['limit']:.0%}"
    shown = "its bills shown" if replay["within"] else "no replayed bill"
    farthest = f"{label}'s `{far['number']}`, {_value(far['served'])} / {_value(far['replayed'])} ({apart})"
    return [f"Replay (`--replay`, own settings): {within}, so {shown}; farthest, road / replay: {farthest}."]


def _value(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def headline(report: dict[str, Any] | None = None) -> list[str]:
    """The README's headline: the Summarizing Agent's bill on each provider's cache rule, through `langflow run`."""
    report = report or load("served_session")
    rules = {"summarizing_10": "OpenAI (reads 10%)", "summarizing_10_anthropic": "Anthropic (writes 125%, reads 10%)"}
    rows = [
        [rule, f"{m['billed_10_vs_100']:.1%}", f"{m['billed_10_vs_10']:.1%}"]
        for key, rule in rules.items()
        if (m := report["runs"].get(key))
    ]
    return [caption(report), "", *table(["cache rule", "billed vs Agent n=100", "billed vs Agent n=10"], rows)]


def latency() -> list[str]:
    report = load("latency_sqlite")
    settings = f"summary calls of {report['summary_seconds']:g} s, memory path fixed cost {report['fixed_ms']} ms."
    return [caption(report) + " " + settings, "", *latency_table(report), "", *targets_table(report)]


def latency_table(report: dict[str, Any]) -> list[str]:
    rows = []
    for r in report["runs"].values():
        rows.append([r["label"], f"{r['p50_seconds']:.3f}", f"{r['p95_seconds']:.3f}", len(r["turns_waited"])])
        rows[-1] += [f"{r['total_input_tokens']:,}", f"{r['summary_calls_per_exchange']:.3f}"]
    header = ["run", "p50 turn s", "p95 turn s", "turns that waited", "input tokens", "summary calls/exchange"]
    return table(header, rows)


def load_results() -> list[str]:
    report = load("load")
    rows = []
    for topology, phases in report["runs"].items():
        for phase in phases:
            stock, ours = phase["agents"]["stock"], phase["agents"]["summarizing"]
            rate = f"{stock['turns_per_second']:.2f} / {ours['turns_per_second']:.2f}"
            low, high = phase.get("p95_ratio_interval") or (None, None)
            p95 = f"{num(stock['p95_seconds'], '.2f')} / {num(ours['p95_seconds'], '.2f')}"
            rows.append([topology, phase["users_per_agent"], rate, p95, f"{num(low, '.2f')}-{num(high, '.2f')}"])
            rows[-1] += [ours["turns_waited"], stock["failed_turns"] + ours["failed_turns"]]
            rows[-1] += [f"{ours['summary_calls_per_exchange']:.3f}", f"{phase['rss_growth']:.1%}"]
            rows[-1] += [phase["audit"]["holds"]]
    header = ["topology", "N", "turns/s Agent / Summ.", "p95 s", "p95 ratio interval", "waited"]
    lines = table([*header, "failed turns", "summary calls/exchange", "RSS growth", "audit holds"], rows)
    faults = []
    for name, fault in report["faults"].items():
        saw, ours = fault.get("clients_saw") or {}, fault["agents"]["summarizing"]
        # A fault with no window (a slow summary model) lasts the whole phase: every turn was in it.
        inside = [
            clients_saw((saw.get(agent) or {}).get("inside") if saw else whole_phase(fault, agent))
            for agent in ("stock", "summarizing")
        ]
        faults.append([name, " / ".join(inside), ours["turns_waited"], ours["summary_calls"]])
        faults[-1] += [ours["failed_summary_calls"], ours["wasted_summary_calls"], fault["audit"]["holds"]]
    header = ["fault", "what clients saw in it, Agent / Summ.", "waited", "summary calls"]
    lines += ["", *table([*header, "failed", "wasted", "audit holds"], faults)]
    grouped: dict[str, list[bool]] = {}
    pooled = []
    for t in report["targets"] + report.get("fault_targets", []):
        if t["name"].startswith("p95 turn time"):
            name = f"p95 ratio, phases pooled, {t['topology']} N={t['users']}"
            pooled.append([name, t["measured"], verdict([t["holds"]])])
            continue
        name = f"fault {t['name'].split(':')[0]}: every target" if t in report.get("fault_targets", []) else t["name"]
        grouped.setdefault(name, []).append(t["holds"])
    verdicts = [[name, f"{sum(h)} of {len(h)}", verdict(h)] for name, h in grouped.items()]
    return [caption(report), "", *lines, "", *table(["target", "held", ""], pooled + verdicts)]


def clients_saw(counts: dict[str, int] | None) -> str:
    """`answered 40, HTTP 503 x3`: what the clients of a fault's turns saw, answered first."""
    if counts is None:
        return NONE
    ordered = sorted(counts.items(), key=lambda item: (item[0] != "answered", -item[1]))
    return ", ".join(f"{saw} {count}" if saw == "answered" else f"{saw} x{count}" for saw, count in ordered)


def whole_phase(run: dict[str, Any], agent: str) -> dict[str, int] | None:
    """What the clients of every turn of `agent` in a phase saw, counted; None for results without turn records."""
    records = (run.get("turn_records") or {}).get(agent)
    if records is None:
        return None
    counts: dict[str, int] = {}
    for _, _, saw in records:
        counts[saw] = counts.get(saw, 0) + 1
    return counts


def verdict(holds: list[bool]) -> str:
    return "PASS" if all(holds) else "FAIL"


def minutes(value: float) -> str:
    return f"{int(value // 60)} min {round(value % 60):02d} s"


def suite() -> list[str]:
    report = load("suite")
    rows = [[p["name"], p["tests"], minutes(p["seconds"])] for p in report["passes"]]
    tests = sum(p["tests"] for p in report["passes"])
    rows += [["`.ci/run`, the install included", tests, minutes(report["total_seconds"])]]
    failed = "" if report["passed"] else ", FAILED"
    shown = f"{caption(report)[:-1]}, from a clean clone on {report['cpus']} CPUs{failed}."
    return [shown, "", *table(["part", "tests", "time"], rows)]


def long_turn(report: dict[str, Any] | None = None) -> list[str]:
    """The tool-heavy session: a row a run, then the Summarizing Agent's targets."""
    report = report or load("long_turn")
    rows = [
        [
            m["label"],
            f"{m['answered']} of {m['turns']}",
            m["tool_results"],
            f"{m['largest_call']:,}",
            m["refused_for_length"],
            m["orphans_refused"],
            m["summary_calls"],
            f"{m['billed_input']:,}",
        ]
        for m in report["runs"].values()
    ]
    header = ["run", "turns answered", "tool results", "largest call", "refused for length", "refused: orphans"]
    session = f"{report['pages']} pages of {report['page_tokens']:,} tokens a turn, input limit {report['limit']:,}"
    shown = table([*header, "summary calls", "billed input"], rows)
    return [f"{caption(report)[:-1]}; {session}.", "", *shown, "", *targets_table(report)]


BLOCKS: dict[str, Callable[[], list[str]]] = {
    "suite": suite,
    "support_session": functools.partial(runs_block, "support_session", beside_road=True),
    "memory_path": memory_path,
    "support_targets": support_targets,
    "history_session": functools.partial(runs_block, "history_session"),
    "latency": latency,
    "load": load_results,
    "served_session": served_session,
    "headline": headline,
    "long_turn": long_turn,
}


def render(report: dict[str, Any]) -> str:
    shown = latency_table(report) if report["name"] == "latency" else runs_table(report)
    return "\n".join([*shown, "", *targets_table(report)] if "targets" in report else shown)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the page is not what the results give")
    check_only = parser.parse_args(argv).check
    blocks = {name: "\n".join(render()) for name, render in BLOCKS.items()}
    differing = []
    for path in PAGES:
        page = path.read_text()
        expected = BLOCK.sub(lambda m: f"{m[1]}{blocks[m['name']]}\n", page)
        if expected != page:
            differing.append(str(path.relative_to(ROOT)))
            if not check_only:
                path.write_text(expected)
    if check_only and differing:
        print(f"{', '.join(differing)} differ from benchmarks/results; run python -m benchmarks.tables")
    return int(check_only and bool(differing))


if __name__ == "__main__":
    sys.exit(main())
