"""The load benchmark's targets, on the saved results: its CLI rescores changed copies of them (`--rescore`); and its
checks of the model's call records. No server."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from benchmarks import load
from benchmarks.load_audit import fold_queue_waits, most_calls_in_one_fold, rejected_saves, turns_waited
from benchmarks.load_report import ANSWERED, WINDOWS

ROOT = Path(__file__).resolve().parents[2]
SAVED = json.loads((ROOT / "benchmarks" / "results" / "load.json").read_text())
FAULTS = ("slow_summary", "summary_outage", "rejected_saves", "worker_kill", "redis_restart", "pg_restart")


def across(report: dict, **counts: int) -> None:
    report["faults"]["pg_restart"]["sessions_folding_across_fault"].update(counts)


def killed(report: dict, folded_since: int) -> None:
    report["faults"]["worker_kill"]["killed_fold"] = {"session": "s1001", "messages": 8, "folded_since": folded_since}


def rejected(report: dict, folds: int, early: int) -> None:
    report["faults"]["rejected_saves"]["rejected_saves"] = {"folds": folds, "retried_within_backoff": early}


CHANGES: dict[str, Callable[[dict], Any]] = {
    "saved": lambda report: None,
    "restart_all_folded_on": lambda report: across(report, chatting_after=2, chatting_after_and_folded=2),
    "restart_one_did_not_fold_on": lambda report: across(report, chatting_after=2, chatting_after_and_folded=1),
    "restart_none_chatted_again": lambda report: across(report, chatting_after=0, chatting_after_and_folded=0),
    "killed_fold_folded": lambda report: killed(report, 8),
    "killed_fold_missed": lambda report: killed(report, 7),
    "retry_within_backoff": lambda report: report["faults"]["summary_outage"]["agents"]["summarizing"].update(
        retried_within_backoff=1
    ),
    "p95_faster": lambda report: turn_times(report, "sqlite", 0.9),
    "p95_slower": lambda report: turn_times(report, "sqlite", 1.3),
    "p95_no_times": lambda report: [run.pop("turn_records", None) for run in report["runs"]["sqlite"]],
    "rejected_held": lambda report: rejected(report, 3, 0),
    "rejected_retried": lambda report: rejected(report, 3, 1),
    "rejected_none": lambda report: rejected(report, 0, 0),
    "fault_error": lambda report: report["faults"].update(slow_summary={"error": "RuntimeError: boom"}),
    "audit_problem": lambda report: report["runs"]["sqlite"][0]["audit"].update(holds=False, problems=["s1000: x"]),
}


def turn_times(report: dict, topology: str, slower: float) -> None:
    """Each phase of `topology` gets 200 answered turns per agent, the Summarizing Agent's `slower` x the stock's."""
    rng = np.random.default_rng(1)
    for run in report["runs"][topology]:
        stock = rng.lognormal(0.0, 0.5, 200)
        times = {"stock": stock, "summarizing": stock * slower}
        run["turn_records"] = {agent: [[i, float(s), ANSWERED] for i, s in enumerate(t)] for agent, t in times.items()}


def run_benchmark(*argv: str) -> None:
    assert load.main(list(argv)) == 0


@pytest.fixture(scope="module")
def rescored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Each change of `CHANGES` made to a copy of the saved results, rescored by the benchmark's CLI."""
    folder = tmp_path_factory.mktemp("rescored")
    paths = {}
    for name, change in CHANGES.items():
        report = copy.deepcopy(SAVED)
        change(report)
        paths[name] = folder / f"{name}.json"
        paths[name].write_text(json.dumps(report))
    run_benchmark("--rescore", *map(str, paths.values()))
    return {name: json.loads(path.read_text()) for name, path in paths.items()}


def row(report: dict, name: str) -> dict:
    [found] = [t for t in [*report["targets"], *report["fault_targets"]] if t["name"].startswith(name)]
    return found


def test_rescoring_the_saved_results_gives_their_rows_and_each_fault_has_its_own(rescored):
    report = rescored["saved"]
    assert (report["targets"], report["fault_targets"]) == (SAVED["targets"], SAVED["fault_targets"])
    assert {t["name"].split(":", 1)[0] for t in report["fault_targets"]} == set(FAULTS)
    for name in (
        "summary_outage: summary calls within the back-off",
        "summary_outage: most folds in one catch-up",
        "slow_summary: fold queue wait",
        "rejected_saves: summary calls within the back-off after a rejected save",
    ):
        assert row(report, name)
    assert report["rescored"]["command"].startswith("python -m benchmarks.load --rescore")


@pytest.mark.parametrize(
    ("change", "holds"),
    [("restart_all_folded_on", True), ("restart_one_did_not_fold_on", False), ("restart_none_chatted_again", False)],
)
def test_a_session_chatting_again_after_a_restart_that_never_folds_again_fails_the_restart(rescored, change, holds):
    assert row(rescored[change], "pg_restart: sessions that folded before")["holds"] is holds


@pytest.mark.parametrize(("change", "holds"), [("killed_fold_folded", True), ("killed_fold_missed", False)])
def test_the_killed_fold_must_be_folded_by_a_later_fold(rescored, change, holds):
    assert row(rescored[change], "worker_kill: messages of the killed fold")["holds"] is holds


def test_a_retry_within_the_back_off_in_any_worker_fails_the_outage(rescored):
    assert row(rescored["saved"], "summary_outage: summary calls within the back-off")["holds"]
    assert not row(rescored["retry_within_backoff"], "summary_outage: summary calls within the back-off")["holds"]


@pytest.mark.parametrize(("change", "holds"), [("p95_faster", True), ("p95_slower", False), ("p95_no_times", False)])
def test_the_p95_target_pools_a_topologys_phases_and_holds_when_its_intervals_upper_end_is_within_1_1(
    rescored, change, holds
):
    [p95] = [t for t in rescored[change]["targets"] if t["name"].startswith("p95") and t["topology"] == "sqlite"]
    assert p95["holds"] is holds
    top = SAVED["stock_saturates_at_sqlite"]
    pooled = [run["users_per_agent"] for run in SAVED["runs"]["sqlite"] if top is None or run["users_per_agent"] <= top]
    assert p95["users"] == ",".join(map(str, pooled)), "the phases up to the stock Agent's saturation"
    if change == "p95_faster":
        assert p95["measured"].startswith("0.90 x (")
    if change == "p95_no_times":
        assert p95["measured"] == "no turn times in the results"
    per_phase = [t for t in rescored[change]["targets"] if t["name"].startswith("p95") and t["topology"] == "postgres"]
    assert len(per_phase) <= 1, "one p95 row per topology, never one per phase"


@pytest.mark.parametrize(
    ("change", "holds"), [("rejected_held", True), ("rejected_retried", False), ("rejected_none", False)]
)
def test_the_rejected_saves_fault_needs_a_rejected_save_and_no_retry_within_the_back_off(rescored, change, holds):
    name = "rejected_saves: summary calls within the back-off after a rejected save"
    assert row(rescored[change], name)["holds"] is holds


def test_a_fault_that_did_not_complete_fails_and_an_audit_problem_fails_its_phase(rescored):
    assert row(rescored["fault_error"], "slow_summary: the fault ran")["holds"] is False
    problem = [t for t in rescored["audit_problem"]["targets"] if t["name"] == "lost or doubled folds (audit problems)"]
    assert (problem[0]["measured"], problem[0]["holds"]) == (1, False)


def call(start: float, end: float, previous: list[str], folded: list[str], failed: bool = False, pid: int = 7) -> dict:
    return {
        "session": "s1001",
        "pid": pid,
        "kind": "summary",
        "start": start,
        "end": end,
        "previous": previous,
        "folded": folded,
        "failed": failed,
    }


def test_one_fold_is_its_calls_from_a_saved_summary_to_the_next_not_the_folds_queued_behind_it():
    catch_up = [
        call(0.0, 2.0, [], ["a", "b"]),
        call(2.01, 4.0, ["a", "b"], ["c", "d"]),
        call(4.02, 6.0, ["a", "b", "c", "d"], ["e"]),
    ]
    assert most_calls_in_one_fold(catch_up, {"s1001": {5}}) == 3
    # The fold queued behind the running one starts the moment it ends, from its save: a fold of its own.
    queued = [call(0.0, 2.0, [], ["a", "b"]), call(2.01, 4.0, ["a", "b"], ["c", "d"])]
    assert most_calls_in_one_fold(queued, {"s1001": {2, 4}}) == 1
    assert most_calls_in_one_fold(queued, {"s1001": {4}}) == 2, "without a save of a, b: one fold of two batches"
    # A call that failed ends its fold; the next call is the next fold, from the saved summary.
    failed = [call(0.0, 2.0, [], ["a", "b"], failed=True), call(2.01, 4.0, [], ["a", "b", "c"])]
    assert most_calls_in_one_fold(failed, {"s1001": {3}}) == 1


def test_a_call_within_the_back_off_after_a_rejected_save_is_a_retry_the_back_off_should_have_held():
    # s1001 folds a, b (rejected at 32 s), its other worker tries again at 40 s: within the 30 s back-off.
    early = [call(30.0, 32.0, [], ["a", "b"]), call(40.0, 42.0, [], ["a", "b", "c"], pid=8)]
    assert rejected_saves(early, 30.0, 90.0) == {"folds": 2, "retried_within_backoff": 1}, "the retry was rejected too"
    held = [call(30.0, 32.0, [], ["a", "b"]), call(63.0, 65.0, [], ["a", "b", "c"])]
    assert rejected_saves(held, 30.0, 90.0) == {"folds": 2, "retried_within_backoff": 0}


def test_the_next_batch_of_the_same_fold_is_no_retry():
    # Two batches of one fold: the save comes after the second, and only that one was rejected.
    one_fold = [call(30.0, 32.0, [], ["a", "b"]), call(32.01, 34.0, ["a", "b"], ["c", "d"])]
    assert rejected_saves(one_fold, 30.0, 90.0) == {"folds": 1, "retried_within_backoff": 0}
    # A save after the database accepts them again is no rejected one.
    assert rejected_saves([call(95.0, 97.0, [], ["a", "b"])], 30.0, 90.0) == {"folds": 0, "retried_within_backoff": 0}


def turn(index: int, start: float, end: float, busy: bool = False) -> Any:
    return SimpleNamespace(session="s1001", index=index, start=start, end=end, busy=busy)


def test_a_turn_waited_only_for_a_summary_call_in_its_worker_before_its_first_agent_call():
    agent = {**call(2.5, 3.0, [], ["s1001-u0"]), "kind": "agent"}
    assert turns_waited([turn(0, 0.5, 3.2)], [call(1.0, 2.0, [], ["a"]), agent]) == 1
    assert turns_waited([turn(0, 0.5, 3.2)], [call(1.0, 2.0, [], ["a"], pid=8), agent]) == 0, "the other worker"
    assert turns_waited([turn(0, 0.5, 3.2)], [call(2.6, 3.1, [], ["a"]), agent]) == 0, "after the reply's call"


def test_a_fold_waits_from_the_last_turn_that_did_not_find_a_fold_running_and_its_next_batch_not_at_all():
    turns = [turn(0, 0.0, 3.0), turn(1, 4.0, 6.0, busy=True)]
    batches = [call(7.0, 8.0, [], ["a", "b"]), call(8.01, 9.0, ["a", "b"], ["c"])]
    assert fold_queue_waits(turns, batches) == [4.0]


def test_a_fold_that_follows_the_other_workers_waits_from_the_turn_that_found_that_fold_running():
    # Turn 0 (worker 7) starts a fold there; turn 1 lands on worker 8 while it runs, and worker 8's fold follows it.
    agents = [{**call(0.5, 1.0, [], [f"s1001-u{i}"], pid=pid), "kind": "agent"} for i, pid in ((0, 7), (1, 8))]
    turns = [turn(0, 0.0, 2.0), turn(1, 10.0, 12.0, busy=True)]
    folds = [call(2.0, 32.0, [], ["a", "b"], pid=7), call(32.1, 33.0, ["a", "b"], ["c", "d"], pid=8)]
    assert fold_queue_waits(turns, [*agents, *folds]) == [0.0, 20.1]


def test_the_load_model_answers_and_records_alike_called_or_awaited(tmp_path: Path) -> None:
    from langchain_core.messages import HumanMessage, SystemMessage

    from benchmarks.load_audit import read_calls
    from benchmarks.load_model import FOLD_PROMPT_START, LoadChatModel

    control = tmp_path / "control.json"
    control.write_text(json.dumps({"summary_seconds": 0}))
    settings = {"agent_seconds": 0, "summary_seconds": 5, "reply_words": 3, "control_path": str(control)}
    model = LoadChatModel(settings={**settings, "record_path": str(tmp_path / "calls.jsonl")})
    question = [HumanMessage("#s1001-u4# hello")]
    fold = [SystemMessage(FOLD_PROMPT_START), HumanMessage("New messages:\n<conversation>#s1001-u0#</conversation>")]
    assert model.invoke(question).content == asyncio.run(model.ainvoke(question)).content == "#s1001-a4# Noted. checked"
    assert model.invoke(fold).content == asyncio.run(model.ainvoke(fold)).content
    assert "#s1001-u0#" in model.invoke(fold).content
    control.write_text(json.dumps({"summary_seconds": 0, "fail_summary": True}))
    with pytest.raises(RuntimeError, match="outage"):
        model.invoke(fold)
    calls = read_calls(tmp_path / "calls.jsonl")
    assert [(c["kind"], c["failed"]) for c in calls] == [("agent", False)] * 2 + [("summary", False)] * 3 + [
        ("summary", True)
    ]
    assert all(c["end"] is not None and c["session"] == "s1001" for c in calls)


def test_a_faults_results_say_what_the_clients_of_its_turns_saw_inside_its_window_and_outside(tmp_path: Path) -> None:
    from benchmarks.load import Phase, Turn
    from benchmarks.load_report import fault_report

    phase = Phase("redis_restart", "postgres", 1, 60.0, tmp_path, started=1000.0)
    phase.events = [{"at": 10.0, "event": "redis stopped"}, {"at": 20.0, "event": "redis started"}]
    seen = [(1, 3, "answered"), (9, 12, "HTTP 503"), (14, 15, "HTTP 503"), (22, 23, "ReadError"), (40, 41, "answered")]
    phase.turns = [
        Turn("summarizing", "s1000", i, 1000 + a, 1000 + b, saw == ANSWERED, "", "run", saw)
        for i, (a, b, saw) in enumerate(seen)
    ]
    report = fault_report(phase, {})
    assert report["clients_saw"]["summarizing"] == {
        "inside": {"HTTP 503": 2, "ReadError": 1},
        "outside": {"answered": 2},
    }
    assert report["failed_turns_in_fault"]["summarizing_inside"] == 3
    assert report["clients_saw"]["stock"] == {"inside": {}, "outside": {}}


def test_the_saved_results_come_from_the_recipes_deployment_with_every_turn_and_what_its_client_saw():
    assert SAVED["install_seconds"] > 0, "installed by the recipe's install lines in a fresh environment"
    assert not {"fault_max_background_folds", "fault_server_logs"} & set(SAVED), (
        "the faults ran on settings of their own"
    )
    assert SAVED["fault_users"] == max(run["users_per_agent"] for run in SAVED["runs"]["postgres"])
    for run in [*(run for runs in SAVED["runs"].values() for run in runs), *SAVED["faults"].values()]:
        for agent in ("stock", "summarizing"):
            assert len(run["turn_records"][agent]) == run["agents"][agent]["turns"]
    for name, fault in SAVED["faults"].items():
        if name not in WINDOWS:  # a slow summary model lasts the whole phase: its turn records say what clients saw
            continue
        seen = fault["clients_saw"]["summarizing"]
        assert sum(seen["inside"].values()) + sum(seen["outside"].values()) == fault["agents"]["summarizing"]["turns"]
