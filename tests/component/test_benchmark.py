"""The benchmarks run end to end on tiny sessions and write their reports; no timing is asserted.

Each benchmark runs as its users run it, `python -m benchmarks...`, in a process of its own with its own Langflow
services on a fresh SQLite file; the tests read what it printed and the JSON it wrote.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from langflow_summarizing_agent.engine.settings import MAX_MESSAGE_CHARS

ROOT = Path(__file__).resolve().parents[2]
BENCHMARK_TIMEOUT_SECONDS = 900

# Six exchanges after the first: the stock window (9 messages) fills at exchange 5, so messages leave it.
EXCHANGES = 6
TINY = ["--exchanges", str(EXCHANGES), "--memory-sizes", "20,60", "--repeats", "2", "--state-sessions", "50"]
RUN_KEYS = {
    "stock_100",
    "stock_10",
    "summarizing_10",
    "summarizing_10_failing",
    "summarizing_10_switched",
    "summarizing_10_long",
    "summarizing_10_compact",
    "stock_100_logs",
    "stock_10_logs",
    "summarizing_10_logs",
    "stock_100_chinese",
    "stock_10_chinese",
    "summarizing_10_chinese",
    "summarizing_10_no_cache",
    "summarizing_10_logs_no_cache",
    "summarizing_10_chinese_no_cache",
}
BILL_KEYS = {
    "real_input_tokens",
    "cached_input_tokens",
    "cached_share",
    "billed_input_tokens_10",
    "billed_input_tokens_50",
    "billed_input_tokens_10_vs_100",
    "billed_input_tokens_50_vs_100",
    "billed_input_tokens_10_vs_10",
    "billed_input_tokens_50_vs_10",
    "tool_schema_tokens",
}
METRIC_KEYS = {
    "total_input_tokens",
    "summary_calls",
    "summary_input_tokens",
    "summary_calls_per_exchange",
    "last_exchange_input_tokens",
    "mean_agent_input_last_20_exchanges",
    "max_history_tokens",
    "first_facts_in_last_exchange",
    "turns_completed",
    "stock_window",
    "verbatim_per_turn",
    "verbatim_min",
    "verbatim_median",
    "turns_window_over_budget",
    "stock_window_verbatim_min_within_budget",
    "previous_exchange_missing_turns",
    "previous_exchange_over_budget_turns",
    "left_window",
    "never_reached_again",
    "out_of_sight_message_turns",
    "calls",
} | BILL_KEYS


def _benchmark(module: str, argv: list[str], out: Path) -> str:
    """Run `python -m benchmarks.<module>` on SQLite, writing to `out`; what it printed."""
    result = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", "--backend", "sqlite", *argv, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BENCHMARK_TIMEOUT_SECONDS,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[dict[str, Any], Path, str]:
    out = tmp_path_factory.mktemp("benchmark")
    printed = _benchmark("support_session", TINY, out)
    return json.loads((out / "support_session_sqlite.json").read_text()), out, printed


def _runs(tiny: tuple[dict[str, Any], Path, str]) -> dict[str, dict[str, Any]]:
    return tiny[0]["runs"]


def test_tiny_run_replays_every_turn_of_every_run_and_writes_json_and_plots(tiny):
    written, out, printed = tiny
    assert written["backend"] == "sqlite"
    assert written["exchanges"] == EXCHANGES + 1
    assert set(written["runs"]) == RUN_KEYS
    for metrics in written["runs"].values():
        assert set(metrics) >= METRIC_KEYS
        assert metrics["turns_completed"] == EXCHANGES + 1, metrics["errors"]
    assert written["runs"]["summarizing_10"]["summary_calls"] >= 1
    assert written["runs"]["summarizing_10_failing"]["failed_summary_calls"] >= 1
    assert written["memory_path"]["error"] is None
    assert [cost["messages"] for cost in written["memory_path"]["sizes"]] == [20, 60]
    assert written["memory_path"]["state_io"]["sessions"] == 50
    assert all({"target", "measured", "limit", "pass"} <= set(target) for target in written["targets"])
    for target in written["targets"]:
        assert f"{'PASS' if target['pass'] else 'FAIL'}  {target['target']}" in printed, "it prints what it writes"
    assert (out / "support_session_sqlite.png").read_bytes().startswith(b"\x89PNG")
    assert (out / "support_session_sqlite_verbatim.png").read_bytes().startswith(b"\x89PNG")
    assert (out / "support_session_sqlite_billed.png").read_bytes().startswith(b"\x89PNG")


def test_every_call_is_billed_under_prefix_caching(tiny):
    report = tiny[0]
    assert report["billing"]["recent_calls"] >= 1
    for key, metrics in _runs(tiny).items():
        calls = metrics["calls"]
        assert all(call["real_tokens"] > 0 for call in calls), key
        for call in calls:
            cached = call["cached_tokens"]
            assert 0 <= cached <= call["real_tokens"]
            assert cached == 0 or (cached >= 1024 and (cached - 1024) % 128 == 0), (key, cached)
        assert metrics["real_input_tokens"] == sum(call["real_tokens"] for call in calls)
        assert metrics["cached_input_tokens"] == sum(call["cached_tokens"] for call in calls)
        real, cached = metrics["real_input_tokens"], metrics["cached_input_tokens"]
        assert abs(metrics["billed_input_tokens_10"] - (real - 0.9 * cached)) <= 1
        assert abs(metrics["billed_input_tokens_50"] - (real - 0.5 * cached)) <= 1
        assert metrics["billed_input_tokens_10"] <= metrics["billed_input_tokens_50"] <= real
        assert metrics["tool_schema_tokens"] > 0, "the calculator's schema is billed with the agent calls"
    for stock in ("stock_100", "stock_100_logs", "stock_100_chinese"):
        assert _runs(tiny)[stock]["billed_input_tokens_10_vs_100"] == 1.0
    # The session is long enough that later calls of the stock Agent at n=100 reuse a cached prefix.
    assert _runs(tiny)["stock_100"]["cached_input_tokens"] > 0


def test_the_text_scenarios_are_misjudged_by_the_estimate_and_keep_the_first_facts(tiny):
    runs = _runs(tiny)
    # Chinese text: far more real tokens than the 4-characters estimate gives; the same for the stock Agent.
    chinese = runs["stock_100_chinese"]
    assert chinese["real_input_tokens"] > 1.2 * chinese["total_input_tokens"]
    for key in ("stock_100_logs", "stock_100_chinese", "summarizing_10_logs", "summarizing_10_chinese"):
        assert runs[key]["first_facts_in_last_exchange"], key


def test_tool_turn_makes_two_agent_calls_and_compact_makes_none(tiny):
    report = tiny[0]
    compact_at = report["compact_exchange"]
    calls = {key: metrics["agent_calls"] for key, metrics in _runs(tiny).items()}
    # Exchange 3 is a tool-using turn (a calculator call, then the answer), except where /compact replaces it.
    assert compact_at == 3
    assert calls == {key: EXCHANGES if key == "summarizing_10_compact" else EXCHANGES + 2 for key in RUN_KEYS}
    assert _runs(tiny)["summarizing_10_compact"]["verbatim_per_turn"][compact_at] is None


def test_stock_agent_sends_its_window_verbatim_and_nothing_that_left_it(tiny):
    stock_10, stock_100 = _runs(tiny)["stock_10"], _runs(tiny)["stock_100"]
    # Exchange t's history: the 2t messages before it, at most the window of n_messages - 1.
    assert stock_10["verbatim_per_turn"] == [0, 2, 4, 6, 8, 9, 9]
    assert stock_10["verbatim_min"] == stock_10["stock_window"] == 9
    assert stock_10["never_reached_again"] == [0, 1, 2]
    assert stock_10["out_of_sight_message_turns"] == 1 + 3
    assert stock_10["previous_exchange_missing_turns"] == []
    assert stock_100["verbatim_per_turn"] == [2 * t for t in range(EXCHANGES + 1)]
    assert stock_100["never_reached_again"] == []


def test_switched_on_late_runs_as_the_stock_agent_until_the_switch(tiny):
    report = tiny[0]
    switched, stock_10 = _runs(tiny)["summarizing_10_switched"], _runs(tiny)["stock_10"]
    switch_at = report["switch_exchange"]
    assert 0 < switch_at < EXCHANGES
    assert switched["verbatim_per_turn"][:switch_at] == stock_10["verbatim_per_turn"][:switch_at]
    assert all(turn >= switch_at for turn in switched["summary_message_turns"])
    assert all(call["exchange"] >= switch_at for call in switched["calls"] if call["kind"] == "summary")


def test_long_messages_are_recognised_in_folds_when_cut(tiny):
    chars = tiny[0]["message_chars"]["long messages"]
    long_numbers = {number for number, length in enumerate(chars) if length > MAX_MESSAGE_CHARS}
    assert long_numbers
    folded = {n for call in _runs(tiny)["summarizing_10_long"]["calls"] for n in call["folded"]}
    assert folded & long_numbers


def test_latency_benchmark_times_every_turn_and_counts_the_turns_that_waited(tmp_path) -> None:
    argv = ["--exchanges", "12", "--summary-seconds", "0.2", "--think-seconds", "0.4", "--repeats", "2"]
    _benchmark("latency", argv, tmp_path)
    report = json.loads((tmp_path / "latency_sqlite.json").read_text())

    assert (tmp_path / "latency_sqlite.json").exists() and (tmp_path / "latency_sqlite.png").exists()
    runs = report["runs"]
    assert set(runs) == {"stock_10", "summarizing_10_after_reply", "summarizing_10_inline"}
    for run in runs.values():
        assert run["errors"] == []
        assert len(run["turn_seconds"]) == 13
    assert runs["summarizing_10_inline"]["turns_waited"], "folding in the turn shows turns that waited"
    assert runs["summarizing_10_after_reply"]["summary_calls"], "folds ran after the replies"
    assert runs["stock_10"]["summary_calls"] == 0
    assert [target["name"] for target in report["targets"]]


LOAD_PHASE_KEYS = {
    "name",
    "backend",
    "users_per_agent",
    "seconds",
    "agents",
    "rss_mb_after_warmup",
    "rss_mb_end",
    "rss_growth",
    "db_connections_max",
    "events",
    "audit",
    "p95_ratio_interval",
}
LOAD_AGENT_KEYS = {
    "turns",
    "turns_per_second",
    "p50_seconds",
    "p95_seconds",
    "p99_seconds",
    "failed_turns",
    "turns_waited",
    "turns_folded_inline",
    "fold_queue_wait_p50_seconds",
    "fold_queue_wait_p95_seconds",
    "summary_calls",
    "summary_calls_per_exchange",
    "wasted_summary_calls",
    "retried_within_backoff",
    "most_calls_in_one_fold",
}


@pytest.mark.server
def test_load_benchmark_runs_both_agents_on_a_real_server_and_audits_every_session(tmp_path) -> None:
    argv = ["--users", "2", "--phase-seconds", "25", "--think-seconds", "0.8", "--summary-seconds", "0.2"]
    # A small window, so that the sessions of a short run on a busy machine fold.
    argv += ["--message-words", "20", "--n-messages", "4", "--faults", "none"]
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.load", "--backends", "sqlite", *argv, "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BENCHMARK_TIMEOUT_SECONDS,
        check=False,
    )
    # Exit status 1 is a failed audit: the benchmark fails loudly.
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((tmp_path / "load.json").read_text())
    assert (tmp_path / "load.png").read_bytes().startswith(b"\x89PNG")
    [phase] = report["runs"]["sqlite"]
    assert set(phase) >= LOAD_PHASE_KEYS
    assert set(phase["agents"]) == {"stock", "summarizing"}
    for metrics in phase["agents"].values():
        assert set(metrics) >= LOAD_AGENT_KEYS
        assert metrics["turns"] > 0
    assert phase["agents"]["summarizing"]["summary_calls"] >= 1, "sessions grew long enough to fold"
    assert phase["audit"]["holds"], phase["audit"]["problems"]
    # Every session is audited, the one deleted afterwards included.
    assert (phase["audit"]["sessions"], phase["audit"]["deleted_sessions"]) == (2, 1)
    assert {"backend", "users", "name", "measured", "limit", "holds"} <= set(report["targets"][0])
