"""The support-session benchmark runs end to end on a tiny session and writes its report; no timing is asserted."""

from __future__ import annotations

import json

import pytest

from benchmarks import support_session

TINY = ["--exchanges", "4", "--memory-sizes", "20,60", "--repeats", "2", "--state-sessions", "50"]
RUN_KEYS = {"stock_100", "stock_10", "summarizing_10", "summarizing_10_failing"}
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
    "calls",
}


@pytest.mark.parametrize("langflow_db", ["sqlite"], indirect=True)
async def test_tiny_run_replays_every_turn_and_writes_json_and_plot(langflow_db, tmp_path):
    report = await support_session.amain([*TINY, "--out", str(tmp_path)], services_running=True)

    written = json.loads((tmp_path / "support_session_sqlite.json").read_text())
    assert written["backend"] == "sqlite"
    assert written["exchanges"] == 5
    assert set(written["runs"]) == RUN_KEYS
    for metrics in written["runs"].values():
        assert set(metrics) >= METRIC_KEYS
        assert metrics["turns_completed"] == 5, metrics["errors"]
        # Exchange 3 is a tool-using turn: a calculator call, then the answer.
        assert metrics["agent_calls"] == 6
    assert written["runs"]["summarizing_10"]["summary_calls"] >= 1
    assert written["runs"]["summarizing_10_failing"]["failed_summary_calls"] >= 1
    assert [cost["messages"] for cost in written["memory_path"]["sizes"]] == [20, 60]
    assert written["memory_path"]["state_io"]["sessions"] == 50
    assert all({"target", "measured", "limit", "pass"} <= set(target) for target in written["targets"])
    assert written["targets"] == report["targets"]
    assert (tmp_path / "support_session_sqlite.png").read_bytes().startswith(b"\x89PNG")
