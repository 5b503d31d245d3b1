"""The load benchmark's measures and targets: each phase's metrics, its fault's, and the target rows they are scored
against (`python -m benchmarks.load`; docs/benchmarks.md, "Under load and faults")."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks import load_audit
from benchmarks.load_audit import chain, on_final, saved
from benchmarks.load_deploy import SETTLE_TIMEOUT_SECONDS
from langflow_summarizing_agent.engine.settings import DEFAULT_FOLD_BATCH, DEFAULT_MAX_FOLDS_PER_TURN
from langflow_summarizing_agent.wiring.after_reply import DEFAULT_MAX_RUNNING

if TYPE_CHECKING:
    from benchmarks.load import Phase

AGENTS = ("stock", "summarizing")
ANSWERED = "answered"  # what the client saw of a turn whose reply came back
P95_RATIO_TARGET, RSS_GROWTH = 1.10, 0.10
BOOTSTRAP_RESAMPLES = 2000
SATURATION_SHARE = 0.8  # the stock Agent saturates where its turns per second fall below this share of linear
FAULT_MARGIN_SECONDS = 5.0  # a failed turn that ended this long after a fault is still the fault's
WINDOWS = {  # the events that open and close each fault but `slow_summary` (which lasts the whole phase)
    "pg_restart": ("postgres stopped", "postgres started"),
    "redis_restart": ("redis stopped", "redis started"),
    "worker_kill": ("worker killed", "worker killed"),
    "summary_outage": ("summary model changed", "summary model restored"),
    "rejected_saves": ("summary saves rejected", "summary saves accepted"),
}
RESTART_TARGET = (
    f"sessions that folded before the fault and, chatting again after it ({DEFAULT_FOLD_BATCH}+ answered turns), "
    "folded on"
)


def quantile(values: list[float], share: float) -> float | None:
    return round(float(np.percentile(values, 100 * share, method="nearest")), 3) if values else None


def p95_ratio_interval(stock: list[list[float]], ours: list[list[float]]) -> list[float] | None:
    """The 95% percentile-bootstrap interval of the Summarizing Agent's p95 turn time over the stock Agent's, the turns
    of each phase (one list each) resampled within their phase: pooled phases keep their share of the turns."""
    if any(len(times) < 2 for times in [*stock, *ours]) or not stock:
        return None
    rng, ratios = np.random.default_rng(0), []
    for _ in range(BOOTSTRAP_RESAMPLES):
        p95 = [
            np.percentile(np.concatenate([rng.choice(times, len(times)) for times in agent]), 95, method="nearest")
            for agent in (ours, stock)
        ]
        ratios.append(p95[0] / max(p95[1], 1e-9))
    return [round(float(bound), 3) for bound in np.percentile(ratios, [2.5, 97.5])]


def turn_seconds(run: dict[str, Any], agent: str) -> list[float]:
    """The seconds of each answered turn of `agent` in a phase's results."""
    return [seconds for _, seconds, saw in run.get("turn_records", {}).get(agent, []) if saw == ANSWERED]


def agent_metrics(phase: Phase, agent: str, final: dict[str, list[str]]) -> dict[str, Any]:
    turns = [t for t in phase.turns if t.agent == agent]
    seconds = [t.end - t.start for t in turns if t.ok]
    calls = [c for c in phase.calls if c["session"] in phase.sessions(agent)]
    summary_calls = [c for c in calls if c["kind"] == "summary"]
    waits = load_audit.fold_queue_waits(turns, calls)
    succeeded = [c for c in summary_calls if saved(c)]
    on_chain = {(c["session"], len(c["previous"]), len(chain(c))) for c in succeeded if on_final(c, final)}
    saved_counts = {s.rsplit("-", 1)[-1]: {count for _, count in seen} for s, seen in phase.versions.items()}
    failures = [f"{t.session} turn {t.index} at +{t.start - phase.started:.1f} s: {t.error}" for t in turns if not t.ok]
    return {
        "turns": len(turns),
        "build_turns": sum(t.via != "run" for t in turns),
        "turns_per_second": round(len(seconds) / max(phase.ended - phase.started, 1e-9), 3),
        **{f"p{q}_seconds": quantile(seconds, q / 100) for q in (50, 95, 99)},
        "failed_turns": len(turns) - len(seconds),
        "failures": failures[:20],
        "turns_waited": load_audit.turns_waited(turns, calls),
        "turns_folded_inline": sum(t.inline for t in turns),
        "turns_that_found_the_fold_running": sum(t.busy for t in turns),
        **{f"fold_queue_wait_p{q}_seconds": quantile(waits, q / 100) for q in (50, 95)},
        "fold_queue_wait_max_seconds": round(max(waits), 3) if waits else None,
        "summary_calls": len(summary_calls),
        "failed_summary_calls": sum(bool(c["failed"]) for c in summary_calls),
        "cut_off_summary_calls": sum(c["end"] is None for c in summary_calls),
        "summary_calls_per_exchange": round(len(summary_calls) / len(seconds), 3) if seconds else None,
        "wasted_summary_calls": len(succeeded) - len(on_chain),
        "most_calls_in_one_fold": load_audit.most_calls_in_one_fold(summary_calls, saved_counts),
        "retried_within_backoff": load_audit.retried_within_backoff(summary_calls),
    }


def phase_report(phase: Phase, final: dict[str, list[str]], audit: dict[str, Any]) -> dict[str, Any]:
    rss, connections = phase.rss, phase.connections
    memory = dict.fromkeys(("rss_mb_start", "rss_mb_after_warmup", "rss_mb_end", "rss_mb_max", "rss_growth"))
    if len(rss) >= 3:  # after the first third of the phase, the warm-up, and at its end
        warm, end = float(np.median(rss[len(rss) // 3 : len(rss) // 3 + 3])), float(np.median(rss[-3:]))
        memory = {k: round(v, 1) for k, v in zip(memory, (rss[0], warm, end, max(rss)), strict=False)}
        memory["rss_growth"] = round(end / warm - 1, 4)
    report = {"name": phase.name, "topology": phase.topology, "users_per_agent": phase.users}
    report["seconds"] = round(phase.ended - phase.started, 1)
    report["agents"] = {agent: agent_metrics(phase, agent, final) for agent in AGENTS}
    # Every turn: seconds from the phase's start, seconds it took, what its client saw.
    report["turn_records"] = {
        agent: [
            [round(t.start - phase.started, 2), round(t.end - t.start, 3), t.saw]
            for t in phase.turns
            if t.agent == agent
        ]
        for agent in AGENTS
    }
    stock, ours = ([turn_seconds(report, agent)] for agent in AGENTS)
    report |= {"p95_ratio_interval": p95_ratio_interval(stock, ours), **memory}
    report |= {"db_connections_max": max(connections, default=None)}
    report |= {"db_connections_median": float(np.median(connections)) if connections else None}
    return {**report, "events": phase.events, "audit": audit}


def fault_report(phase: Phase, final: dict[str, list[str]]) -> dict[str, Any]:
    """What a fault's targets measure (docs/benchmarks.md): failed turns in and out of its window, the sessions
    folding across it, the saves the database rejected, the killed worker's fold."""
    times, (opens, closes) = {e["event"]: phase.started + e["at"] for e in phase.events}, WINDOWS[phase.name]
    start, end = times.get(opens), times.get(closes, times.get(opens))
    failed = {f"{agent}_{where}": 0 for agent in AGENTS for where in ("inside", "outside")}
    saw: dict[str, dict[str, dict[str, int]]] = {agent: {"inside": {}, "outside": {}} for agent in AGENTS}
    for turn in phase.turns:
        inside = start and end and turn.end >= start and turn.start <= end + FAULT_MARGIN_SECONDS
        where = "inside" if inside else "outside"
        saw[turn.agent][where][turn.saw] = saw[turn.agent][where].get(turn.saw, 0) + 1
        failed[f"{turn.agent}_{where}"] += not turn.ok
    folded = [c for c in phase.calls if c["kind"] == "summary" and saved(c) and chain(c) and on_final(c, final)]
    before = {c["session"] for c in folded if start is not None and c["end"] < start}
    after = {c["session"] for c in folded if end is not None and c["start"] > end}
    answered = [t.session for t in phase.turns if t.agent == "summarizing" and t.ok and end and t.start > end]
    chatting = {s for s in before if answered.count(s) >= DEFAULT_FOLD_BATCH}
    across = {"before": len(before), "before_and_after": len(before & after), "chatting_after": len(chatting)}
    across["chatting_after_and_folded"] = len(chatting & after)
    report: dict[str, Any] = {"failed_turns_in_fault": failed, "sessions_folding_across_fault": across}
    # What the clients saw of the turns that overlapped the fault's window (and its margin after), and of the rest.
    report["clients_saw"] = saw
    if phase.name == "rejected_saves":
        calls = [c for c in phase.calls if c["kind"] == "summary" and c["session"] in phase.sessions("summarizing")]
        report["rejected_saves"] = load_audit.rejected_saves(calls, start or 0.0, end or 0.0)
    if killed := next((e for e in phase.events if e["event"] == "worker killed"), None):
        # The messages the killed worker was folding: a later fold of that session takes them, once (the audit).
        folded_since = sum(m in final.get(killed["session"], []) for m in killed["folding"])
        report["killed_fold"] = {"session": killed["session"], "messages": len(killed["folding"])}
        report["killed_fold"]["folded_since"] = folded_since
    return report


def zero(value: Any) -> tuple[Any, str, bool]:
    return value, "0", value == 0


def bounded(value: Any, bound: float, limit: str) -> tuple[Any, str, bool]:
    """`value` within `bound` as `limit` reads: "<= ..." or "< ..."."""
    return value, limit, value is not None and (value <= bound if limit.startswith("<=") else value < bound)


def all_of(done: int, of: int, shown: str = "") -> tuple[Any, str, bool]:
    return shown or f"{done} of {of}", "all, at least 1", of >= 1 and done == of


def pooled_p95_row(topology: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The p95 target of one topology: the Summarizing Agent's p95 turn time over the stock Agent's, pooled over
    `runs` (its phases up to saturation), held when the upper end of its bootstrap interval is within the target."""
    stock, ours = ([turn_seconds(run, agent) for run in runs] for agent in AGENTS)
    interval, name = p95_ratio_interval(stock, ours), "p95 turn time, Summarizing over Agent, phases pooled"
    row = {"topology": topology, "users": ",".join(str(run["users_per_agent"]) for run in runs), "name": name}
    limit = f"upper end of the 95% bootstrap interval <= {P95_RATIO_TARGET:g}"
    if interval is None:
        return {**row, "measured": "no turn times in the results", "limit": limit, "holds": False}
    pooled = [quantile([x for times in agent for x in times], 0.95) or 0.0 for agent in (ours, stock)]
    measured = f"{pooled[0] / max(pooled[1], 1e-9):.2f} x ({interval[0]:.2f}-{interval[1]:.2f})"
    return {**row, "measured": measured, "limit": limit, "holds": interval[1] <= P95_RATIO_TARGET}


def evaluate(report: dict[str, Any], where: str, run: dict[str, Any], topology: str = "postgres") -> list[dict]:
    """The target rows that apply to `where` ("load", or a fault's name) on one run: each row of `targets` names
    where it applies ("faults": every fault) and its measured value, limit and whether it holds (None: not measured)."""
    row: dict[str, Any] = {"topology": topology, "users": run.get("users_per_agent", report.get("fault_users"))}
    if "error" in run:
        return [
            {**row, "name": f"{where}: the fault ran", "measured": run["error"], "limit": "completes", "holds": False}
        ]
    ours, stock, audit, users = run["agents"]["summarizing"], run["agents"]["stock"], run["audit"], row["users"]
    failed, retried = stock["failed_turns"] + ours["failed_turns"], ours["retried_within_backoff"]
    outside = sum(run.get("failed_turns_in_fault", {}).get(f"{agent}_outside", 0) for agent in AGENTS)
    across, killed, rejected = (run.get(k) for k in ("sessions_folding_across_fault", "killed_fold", "rejected_saves"))
    most = report.get("max_folds_per_turn", DEFAULT_MAX_FOLDS_PER_TURN)
    most_folds = bounded(ours["most_calls_in_one_fold"], most, f"<= Max Folds per Turn ({most})")
    # One fold per session at a time: a fold waits at most for the sessions ahead of it, a call each.
    slow = report.get("slow_summary_seconds", 30.0)
    places = 2 * (report.get("max_background_folds") or DEFAULT_MAX_RUNNING)  # two workers
    queue = -(-users // places) * slow
    queue_limit = f"<= {users} sessions over {places} places x {slow:g} s = {queue:g} s"
    settled = next((e["waited_seconds"] for e in run["events"] if e["event"] == "folds settled"), None)
    settled_row = bounded(settled, SETTLE_TIMEOUT_SECONDS, f"< {SETTLE_TIMEOUT_SECONDS:g} s")
    kept_folding = across and all_of(across["before_and_after"], across["before"])
    killed_row = killed and all_of(killed["folded_since"], killed["messages"])
    rejected_row = rejected and (
        f"{rejected['retried_within_backoff']} after {rejected['folds']} rejected saves",
        "0, after at least 1",
        rejected["folds"] >= 1 and rejected["retried_within_backoff"] == 0,
    )
    edited = run.get("edits_applied", 0) + run.get("rollbacks_applied", 0)
    stale = run.get("edits_stale", 0) + run.get("rollbacks_stale", 0)
    edits_row = (
        f"{edited}, {stale} refused as stale",
        "at least 1",
        edited >= 1,
    )
    restart_row = None
    if across:  # the sessions that chatted on long enough after the restart to fold again
        chatting, folded = across["chatting_after"], across["chatting_after_and_folded"]
        shown = f"{folded} of {chatting}; {across['before_and_after']} of all {across['before']} folded before"
        restart_row = all_of(folded, chatting, shown)
    targets = [
        ("turns that waited for a summary call", "load", zero(ours["turns_waited"])),
        ("failed turns, both agents", "load slow_summary summary_outage rejected_saves", zero(failed)),
        # Only the database and Redis restarts and the killed worker fail turns; the summary faults fail none.
        ("failed turns outside the fault, both agents", "pg_restart redis_restart worker_kill", zero(outside)),
        ("turns that waited for a summary call", "faults", zero(ours["turns_waited"])),
        ("lost or doubled folds (audit problems)", "load faults", (len(audit["problems"]), "0", audit["holds"])),
        ("RSS growth after warm-up", "load", bounded(run["rss_growth"], RSS_GROWTH, f"< {RSS_GROWTH:.0%}")),
        ("summary calls within the back-off after a failed one, any worker", "summary_outage", zero(retried)),
        ("most folds in one catch-up, the catch-up included", "summary_outage rejected_saves", most_folds),
        ("summary calls within the back-off after a rejected save, any worker", "rejected_saves", rejected_row),
        ("fold queue wait, max", "slow_summary", bounded(ours["fold_queue_wait_max_seconds"], queue, queue_limit)),
        ("seconds until the folds settled after the last turn", "slow_summary", settled_row),
        # Faults the sessions must outlast with their summaries.
        ("sessions that folded before the fault and fold on after it", "worker_kill", kept_folding),
        ("messages of the killed fold folded by a later fold", "worker_kill", killed_row),
        (RESTART_TARGET, "pg_restart redis_restart", restart_row),
        ("memory edits and rollbacks saved during the traffic", "memory_edits", edits_row),
        (
            "memory edits answered otherwise than saved or refused as stale",
            "memory_edits",
            zero(len(run.get("edits_answered_otherwise", []))),
        ),
    ]
    rows, prefix = [], "" if where == "load" else f"{where}: "
    for name, applies, found in targets:
        if (where in applies.split() or (where != "load" and "faults" in applies.split())) and found:
            measured, limit, holds = found
            rows.append({**row, "name": prefix + name, "measured": measured, "limit": limit, "holds": bool(holds)})
    return rows


def saturation(runs: list[dict[str, Any]]) -> int | None:
    """The first N at which the stock Agent's turns per second fell below `SATURATION_SHARE` of N times its rate per
    user at the smallest N: the server no longer keeps up with its users."""
    rates = [
        (run["users_per_agent"], run["agents"]["stock"]["turns_per_second"] / run["users_per_agent"]) for run in runs
    ]
    return next((n for n, rate in rates[1:] if rate < SATURATION_SHARE * rates[0][1]), None)


def scored(report: dict[str, Any]) -> None:
    """The load targets of every topology (the phases up to the stock Agent's saturation) and every fault's, printed."""
    report["targets"] = []
    for topology, runs in report["runs"].items():
        report[f"stock_saturates_at_{topology}"] = top = saturation(runs)
        measured = [run for run in runs if top is None or run["users_per_agent"] <= top]
        report["targets"] += [pooled_p95_row(topology, measured)] if measured else []
        report["targets"] += [row for run in measured for row in evaluate(report, "load", run, topology)]
    report["fault_targets"] = [row for name, run in report["faults"].items() for row in evaluate(report, name, run)]
    report["edit_targets"] = evaluate(report, "memory_edits", report["edits"]) if "edits" in report else []
    print("\nTargets:")
    for t in [*report["targets"], *report["fault_targets"], *report["edit_targets"]]:
        print(f"{'PASS' if t['holds'] else 'FAIL'}  {t['topology']} N={t['users']} {t['name']}: ", end="")
        print(f"{t['measured']} (target {t['limit']})")


def plot(report: dict[str, Any], path: Path) -> None:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 4.5), layout="tight")
    axis = figure.subplots()
    for topology, runs in report["runs"].items():
        for agent, style in (("stock", "--"), ("summarizing", "-")):
            xs, ys = [r["users_per_agent"] for r in runs], [r["agents"][agent]["p95_seconds"] for r in runs]
            axis.plot(xs, ys, style, marker="o", label=f"{agent}, {topology}")
    title = "p95 turn time against N: agent calls {:g} s, summary calls {:g} s"
    axis.set(xlabel="concurrent users per agent (N)", ylabel="p95 turn time (s)")
    axis.set_title(title.format(report["agent_seconds"], report["summary_seconds"]))
    axis.legend()
    axis.grid(alpha=0.3)
    figure.savefig(path, dpi=110)
