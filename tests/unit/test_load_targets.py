"""The load benchmark's fault rows and its results file, on the saved results: no server, no timing."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from benchmarks.load import (
    FAULTS,
    Phase,
    fault_targets,
    most_calls_in_one_fold,
    p95_ratio_interval,
    parse_args,
    rejected_saves,
    targets,
    with_earlier_parts,
)

ROOT = Path(__file__).resolve().parents[2]
SAVED = json.loads((ROOT / "benchmarks" / "results" / "load.json").read_text())


def row(report: dict, fault: str, starts: str) -> dict:
    [found] = [t for t in fault_targets(report) if t["name"].startswith(f"{fault}: {starts}")]
    return found


def test_each_fault_has_its_rows():
    names = {t["name"].split(":", 1)[0] for t in fault_targets(SAVED)}
    assert names == set(FAULTS)
    assert row(SAVED, "summary_outage", "summary calls within the back-off")
    assert row(SAVED, "summary_outage", "most folds in one catch-up")
    assert row(SAVED, "slow_summary", "fold queue wait")
    assert row(SAVED, "rejected_saves", "summary calls within the back-off after a rejected save")


def test_a_session_chatting_again_after_a_restart_that_never_folds_again_fails_the_restart():
    report = copy.deepcopy(SAVED)
    across = report["faults"]["pg_restart"]["sessions_folding_across_fault"]
    across.update(chatting_after=2, chatting_after_and_folded=2)
    assert row(report, "pg_restart", "sessions that folded before")["holds"]

    across.update(chatting_after_and_folded=1)
    assert not row(report, "pg_restart", "sessions that folded before")["holds"]

    across.update(chatting_after=0, chatting_after_and_folded=0)
    assert not row(report, "pg_restart", "sessions that folded before")["holds"], "no session chatted again"


def test_the_killed_fold_must_be_folded_by_a_later_fold():
    report = copy.deepcopy(SAVED)
    kill = report["faults"]["worker_kill"]
    kill["killed_fold"] = {"session": "s1001", "messages": 8, "folded_since": 8}
    assert row(report, "worker_kill", "messages of the killed fold")["holds"]

    kill["killed_fold"]["folded_since"] = 7
    assert not row(report, "worker_kill", "messages of the killed fold")["holds"]


def call(start: float, end: float, previous: list[str], folded: list[str], failed: bool = False) -> dict:
    return {
        "session": "s1001",
        "pid": 7,
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


def test_a_retry_within_the_back_off_in_any_worker_fails_the_outage():
    report = copy.deepcopy(SAVED)
    report["faults"]["summary_outage"]["agents"]["summarizing"]["retried_within_backoff"] = 1
    assert not row(report, "summary_outage", "summary calls within the back-off")["holds"]


def fresh_report(command: str, runs: dict, **parts: object) -> dict:
    """What a run measured, before `with_earlier_parts` adds the saved parts it did not."""
    report = {"command": command, "commit": "abc1234", "max_background_folds": 4, "runs": runs, "targets": []}
    return {**report, "faults": {}, **parts}


def test_a_faults_only_run_keeps_the_saved_load_phases(tmp_path):
    (tmp_path / "load.json").write_text(json.dumps(SAVED))
    args = parse_args(["--backends", "postgres", "--users", "", "--faults", "pg_restart", "--out", str(tmp_path)])
    fresh = fresh_report("faults only", {}, faults={"pg_restart": {}})

    merged = with_earlier_parts(fresh, args)

    assert merged["runs"] == SAVED["runs"] and merged["targets"] == SAVED["targets"]
    for backend in SAVED["runs"]:
        assert merged["runs_measured"][backend]["commit"] == measured_at(SAVED, backend)
    assert merged["faults"]["pg_restart"] == {}
    assert set(merged["faults"]) == set(SAVED["faults"]), "the faults not re-run keep their saved results"
    assert merged["faults"]["slow_summary"]["commit"] == SAVED["faults"]["slow_summary"].get(
        "commit", SAVED.get("faults_commit", SAVED["commit"])
    )
    assert (merged["faults_command"], merged["faults_commit"]) == ("faults only", "abc1234")


def measured_at(report: dict, backend: str) -> str:
    return report.get("runs_measured", {}).get(backend, {}).get("commit", report["commit"])


def test_a_run_of_one_backend_keeps_the_other_backends_saved_load_phases(tmp_path):
    (tmp_path / "load.json").write_text(json.dumps(SAVED))
    args = parse_args(["--backends", "postgres", "--faults", "none", "--out", str(tmp_path)])
    fresh_runs = [{"users_per_agent": 8, "agents": {}}]
    fresh_targets = [{"backend": "postgres", "users": 8, "name": "failed turns", "holds": True}]
    fresh = fresh_report(
        "postgres only", {"postgres": fresh_runs}, targets=fresh_targets, stock_saturates_at_postgres=8
    )

    merged = with_earlier_parts(fresh, args)

    assert list(merged["runs"]) == ["sqlite", "postgres"]
    assert merged["runs"] == {"sqlite": SAVED["runs"]["sqlite"], "postgres": fresh_runs}
    assert merged["targets"] == [t for t in SAVED["targets"] if t["backend"] == "sqlite"] + fresh_targets
    assert merged["runs_measured"]["sqlite"]["commit"] == measured_at(SAVED, "sqlite")
    assert merged["runs_measured"]["postgres"] == {
        "command": "postgres only",
        "commit": "abc1234",
        "max_background_folds": 4,
    }
    assert (merged["stock_saturates_at_sqlite"], merged["stock_saturates_at_postgres"]) == (
        SAVED["stock_saturates_at_sqlite"],
        8,
    )
    assert merged["faults"] == SAVED["faults"], "a run without faults keeps the saved ones"
    assert merged["faults_commit"] == SAVED["faults_commit"]


def test_the_p95_ratio_comes_with_a_bootstrap_interval_that_holds_one_for_the_same_turn_times():
    same = [0.5 + 0.01 * i for i in range(200)]
    low, high = p95_ratio_interval(same, list(reversed(same)))
    assert low < 1.0 < high

    slower = [2 * s for s in same]
    low, high = p95_ratio_interval(same, slower)
    assert 1.8 < low <= 2.0 <= high < 2.2
    assert p95_ratio_interval(same, slower) == [low, high], "seeded: the same turns give the same interval"
    assert p95_ratio_interval([], same) is None


def test_the_p95_target_row_shows_the_ratio_and_its_interval():
    run = copy.deepcopy(SAVED["runs"]["sqlite"][0])
    run["p95_ratio_interval"] = [0.8, 1.3]
    [p95] = [t for t in targets("sqlite", [run]) if t["name"] == "p95 turn time, Summarizing"]
    assert "95% bootstrap interval of this phase's turns 0.80-1.30 x" in p95["measured"]
    stock, ours = run["agents"]["stock"]["p95_seconds"], run["agents"]["summarizing"]["p95_seconds"]
    assert p95["holds"] == (ours <= 1.1 * stock)


def phase_with_rejected_saves(calls: list[dict]) -> Phase:
    phase = Phase("rejected_saves", "postgres", users=2, seconds=140, think_seconds=2.0)
    phase.events = [{"at": 30.0, "event": "summary saves rejected"}, {"at": 90.0, "event": "summary saves accepted"}]
    phase.calls = [{"kind": "summary", **c} for c in calls]
    return phase


def test_a_call_within_the_back_off_after_a_rejected_save_is_a_retry_the_back_off_should_have_held():
    # s1001 folds a, b (rejected at 32 s), its other worker tries again at 40 s: within the 30 s back-off.
    early = phase_with_rejected_saves(
        [
            {**call(30.0, 32.0, [], ["a", "b"]), "pid": 7},
            {**call(40.0, 42.0, [], ["a", "b", "c"]), "pid": 8},
        ]
    )
    assert rejected_saves(early) == {"folds": 2, "retried_within_backoff": 1}, "the retry was rejected too"

    held = phase_with_rejected_saves([call(30.0, 32.0, [], ["a", "b"]), call(63.0, 65.0, [], ["a", "b", "c"])])
    assert rejected_saves(held) == {"folds": 2, "retried_within_backoff": 0}


def test_the_next_batch_of_the_same_fold_is_no_retry():
    # Two batches of one fold: the save comes after the second, and only that one was rejected.
    one_fold = phase_with_rejected_saves([call(30.0, 32.0, [], ["a", "b"]), call(32.01, 34.0, ["a", "b"], ["c", "d"])])
    assert rejected_saves(one_fold) == {"folds": 1, "retried_within_backoff": 0}
    # A save after the database accepts them again is no rejected one.
    after = phase_with_rejected_saves([call(95.0, 97.0, [], ["a", "b"])])
    assert rejected_saves(after) == {"folds": 0, "retried_within_backoff": 0}


def test_the_rejected_saves_fault_needs_a_rejected_save_and_no_retry_within_the_back_off():
    report = copy.deepcopy(SAVED)
    report["faults"]["rejected_saves"] = {
        **copy.deepcopy(SAVED["faults"]["summary_outage"]),
        "name": "rejected_saves",
        "rejected_saves": {"folds": 3, "retried_within_backoff": 0},
    }
    assert row(report, "rejected_saves", "summary calls within the back-off after a rejected save")["holds"]

    report["faults"]["rejected_saves"]["rejected_saves"] = {"folds": 3, "retried_within_backoff": 1}
    assert not row(report, "rejected_saves", "summary calls within the back-off after a rejected save")["holds"]
    report["faults"]["rejected_saves"]["rejected_saves"] = {"folds": 0, "retried_within_backoff": 0}
    assert not row(report, "rejected_saves", "summary calls within the back-off after a rejected save")["holds"], (
        "no save was rejected: the fault did not happen"
    )


def test_a_run_that_ran_no_fault_keeps_the_saved_faults_whatever_faults_it_names(tmp_path):
    (tmp_path / "load.json").write_text(json.dumps(SAVED))
    # SQLite only, with every fault named (the default): the faults run on PostgreSQL, so none ran.
    args = parse_args(["--backends", "sqlite", "--out", str(tmp_path)])
    fresh = fresh_report("sqlite only", {"sqlite": []})

    merged = with_earlier_parts(fresh, args)

    assert merged["faults"] == SAVED["faults"]
    assert (merged["faults_command"], merged["faults_commit"]) == (SAVED["faults_command"], SAVED["faults_commit"])


def test_an_earlier_rescore_stays_with_the_backend_it_scored(tmp_path):
    saved = {**copy.deepcopy(SAVED), "rescored": {"command": "rescore", "commit": "0ld0ld0"}}
    saved.pop("runs_measured", None)
    (tmp_path / "load.json").write_text(json.dumps(saved))
    args = parse_args(["--backends", "postgres", "--faults", "none", "--out", str(tmp_path)])
    fresh = fresh_report("postgres only", {"postgres": []})

    merged = with_earlier_parts(fresh, args)

    assert merged["runs_measured"]["sqlite"]["rescored"] == saved["rescored"]
    assert "rescored" not in merged["runs_measured"]["postgres"]
    assert "rescored" not in merged
