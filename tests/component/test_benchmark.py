"""The support-session benchmark runs end to end on a tiny session and writes its report; no timing is asserted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from benchmarks import support_session
from benchmarks.script import support_session as scripted_session
from langflow_summarizing_agent.engine.settings import MAX_MESSAGE_CHARS

pytestmark = pytest.mark.parametrize("langflow_db", ["sqlite"], indirect=True)

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
}


@pytest_asyncio.fixture(scope="module")
async def tiny(langflow_db, tmp_path_factory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("benchmark")
    report = await support_session.amain([*TINY, "--out", str(out)], services_running=True)
    return report, out


def _runs(tiny: tuple[dict[str, Any], Path]) -> dict[str, dict[str, Any]]:
    return tiny[0]["runs"]


async def test_tiny_run_replays_every_turn_of_every_run_and_writes_json_and_plots(tiny):
    report, out = tiny
    written = json.loads((out / "support_session_sqlite.json").read_text())
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
    assert written["targets"] == report["targets"]
    assert (out / "support_session_sqlite.png").read_bytes().startswith(b"\x89PNG")
    assert (out / "support_session_sqlite_verbatim.png").read_bytes().startswith(b"\x89PNG")


async def test_tool_turn_makes_two_agent_calls_and_compact_makes_none(tiny):
    report, _ = tiny
    compact_at = report["compact_exchange"]
    calls = {key: metrics["agent_calls"] for key, metrics in _runs(tiny).items()}
    # Exchange 3 is a tool-using turn (a calculator call, then the answer), except where /compact replaces it.
    assert compact_at == 3
    assert calls == {key: EXCHANGES if key == "summarizing_10_compact" else EXCHANGES + 2 for key in RUN_KEYS}
    assert _runs(tiny)["summarizing_10_compact"]["verbatim_per_turn"][compact_at] is None


async def test_stock_agent_sends_its_window_verbatim_and_nothing_that_left_it(tiny):
    stock_10, stock_100 = _runs(tiny)["stock_10"], _runs(tiny)["stock_100"]
    # Exchange t's history: the 2t messages before it, at most the window of n_messages - 1.
    assert stock_10["verbatim_per_turn"] == [0, 2, 4, 6, 8, 9, 9]
    assert stock_10["verbatim_min"] == stock_10["stock_window"] == 9
    assert stock_10["never_reached_again"] == [0, 1, 2]
    assert stock_10["out_of_sight_message_turns"] == 1 + 3
    assert stock_10["previous_exchange_missing_turns"] == []
    assert stock_100["verbatim_per_turn"] == [2 * t for t in range(EXCHANGES + 1)]
    assert stock_100["never_reached_again"] == []


async def test_switched_on_late_runs_as_the_stock_agent_until_the_switch(tiny):
    report, _ = tiny
    switched, stock_10 = _runs(tiny)["summarizing_10_switched"], _runs(tiny)["stock_10"]
    switch_at = report["switch_exchange"]
    assert 0 < switch_at < EXCHANGES
    assert switched["verbatim_per_turn"][:switch_at] == stock_10["verbatim_per_turn"][:switch_at]
    assert all(turn >= switch_at for turn in switched["summary_message_turns"])
    assert all(call["exchange"] >= switch_at for call in switched["calls"] if call["kind"] == "summary")


async def test_long_messages_are_recognised_in_folds_when_cut(tiny):
    session = scripted_session(EXCHANGES, message_tokens=support_session.LONG_MESSAGE_TOKENS)
    long_numbers = {
        e.message_number(role)
        for e in session
        for role, text in (("user", e.user_text), ("reply", e.reply))
        if len(text) > MAX_MESSAGE_CHARS
    }
    folded = {n for call in _runs(tiny)["summarizing_10_long"]["calls"] for n in call["folded"]}
    assert folded & long_numbers


async def test_latency_benchmark_times_every_turn_and_counts_the_turns_that_waited(langflow_db, tmp_path) -> None:
    from benchmarks import latency

    argv = ["--exchanges", "12", "--summary-seconds", "0.2", "--think-seconds", "0.4", "--repeats", "2"]
    report = await latency.amain([*argv, "--out", str(tmp_path)], services_running=True)

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
