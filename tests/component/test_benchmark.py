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

pytestmark = pytest.mark.benchmark
# One xdist worker runs the tests of the tiny run: the module fixture (two minutes) is made once. Only those: xdist
# joins every group a test has, and the tests on the shared server keep that server's group alone.
ON_THE_TINY_RUN = pytest.mark.xdist_group("benchmark_tiny_run")
ROOT = Path(__file__).resolve().parents[2]
BENCHMARK_TIMEOUT_SECONDS = 900

# Six exchanges after the first: the stock window (9 messages) fills at exchange 5, so messages leave it; at Fold
# Batch 2 the Summarizing Agent folds them.
EXCHANGES = 6
TINY = ["--exchanges", str(EXCHANGES), "--fold-batch", "2", "--memory-sizes", "20,60", "--repeats", "2"]
TINY += ["--state-sessions", "50", "--calls"]


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


@ON_THE_TINY_RUN
def test_tiny_run_replays_every_turn_of_every_run_and_prints_every_target(tiny):
    written, out, printed = tiny
    assert written["backend"] == "sqlite"
    assert len(written["runs"]) == 17
    for key, metrics in written["runs"].items():
        assert metrics["exchanges"] == EXCHANGES + 1
        assert (metrics["failed_turns"], metrics["errors"]) == (0, []), key
    assert written["runs"]["summarizing_10"]["summary_calls"] >= 1
    assert written["runs"]["summarizing_10_failing"]["failed_summary_calls"] >= 1
    assert [cost["messages"] for cost in written["memory_path"]["sizes"]] == [20, 60]
    assert written["memory_path"]["state_io"]["sessions"] == 50
    assert len(written["targets"]) > 20
    for target in written["targets"]:
        assert target["pass"] in (True, False)
    assert printed.count("| PASS |") + printed.count("| FAIL |") == 21, "every target of the table printed"
    assert (out / "support_session_sqlite.png").read_bytes().startswith(b"\x89PNG")


@ON_THE_TINY_RUN
def test_every_call_is_billed_under_prefix_caching(tiny):
    for key, metrics in _runs(tiny).items():
        calls = metrics["calls"]
        assert all(call["input_tokens"] > 0 for call in calls), key
        read, written = ([call[part] for call in calls] for part in ("cached_tokens", "written_tokens"))
        assert all(r + w <= call["input_tokens"] for r, w, call in zip(read, written, calls, strict=True))
        real = sum(call["input_tokens"] for call in calls)
        assert metrics["total_input_tokens"] == real
        assert abs(metrics["billed_10"] - (real - 0.9 * sum(read) + 0.25 * sum(written))) <= 1
        assert (metrics["cached_share"] == 0) == key.endswith("no_cache"), key
        if key != "summarizing_10_anthropic":
            assert all(r == 0 or (r >= 1024 and (r - 1024) % 128 == 0) for r in read), (key, read)
            assert sum(written) == 0, "OpenAI's rule writes at no price"
    for stock in ("stock_100", "stock_100_logs", "stock_100_chinese"):
        assert _runs(tiny)[stock]["billed_10_vs_100"] == 1.0


@ON_THE_TINY_RUN
def test_the_anthropic_run_is_billed_at_the_breakpoints_the_component_sets(tiny):
    anthropic, stock = _runs(tiny)["summarizing_10_anthropic"], _runs(tiny)["stock_100"]
    agent = [call for call in anthropic["calls"] if call["kind"] == "agent"]
    assert agent[0]["cached_tokens"] == 0 and agent[0]["written_tokens"] > 0, "the first call writes its prompt"
    assert agent[1]["cached_tokens"] > 0.9 * agent[0]["input_tokens"], "the next call reads it (in its own count)"
    folds = [call for call in anthropic["calls"] if call["on_prefix"]]
    assert folds and all(call["cached_tokens"] > call["input_tokens"] / 2 for call in folds), "folds read the prefix"
    # The stock Agent sets no breakpoint: its bill on Anthropic is its whole input.
    assert anthropic["billed_10_vs_100"] == round(anthropic["billed_10"] / stock["total_input_tokens"], 4)


@ON_THE_TINY_RUN
def test_the_text_scenarios_keep_the_first_facts(tiny):
    runs = _runs(tiny)
    for key in ("stock_100_logs", "stock_100_chinese", "summarizing_10_logs", "summarizing_10_chinese"):
        assert runs[key]["first_facts_in_last_exchange"], key


@ON_THE_TINY_RUN
def test_tool_turn_makes_two_agent_calls_and_compact_makes_none(tiny):
    calls = {key: metrics["agent_calls"] for key, metrics in _runs(tiny).items()}
    # Exchange 3 is a tool-using turn (a calculator call, then the answer), except where /compact replaces it.
    assert calls == {key: EXCHANGES if key == "summarizing_10_compact" else EXCHANGES + 2 for key in calls}
    assert _runs(tiny)["summarizing_10_compact"]["verbatim_per_turn"][3] is None


@ON_THE_TINY_RUN
def test_stock_agent_sends_its_window_verbatim_and_nothing_that_left_it(tiny):
    stock_10, stock_100 = _runs(tiny)["stock_10"], _runs(tiny)["stock_100"]
    # Exchange t's history: the 2t messages before it, at most the window of n_messages - 1.
    assert stock_10["verbatim_per_turn"] == [0, 2, 4, 6, 8, 9, 9]
    assert stock_10["verbatim_min"] == stock_10["stock_window"] == 9
    assert (stock_10["left_window"], stock_10["never_reached_again"]) == (3, 3)
    assert stock_10["previous_exchange_missing_turns"] == []
    assert stock_100["verbatim_per_turn"] == [2 * t for t in range(EXCHANGES + 1)]
    assert stock_100["never_reached_again"] == 0


@ON_THE_TINY_RUN
def test_switched_on_late_runs_as_the_stock_agent_until_the_switch(tiny):
    switched, stock_10 = _runs(tiny)["summarizing_10_switched"], _runs(tiny)["stock_10"]
    switch_at = round(EXCHANGES * 3 / 4)
    assert switched["verbatim_per_turn"][:switch_at] == stock_10["verbatim_per_turn"][:switch_at]
    assert switched["summary_calls"] >= 1
    assert all(call["exchange"] >= switch_at for call in switched["calls"] if call["kind"] == "summary")


@ON_THE_TINY_RUN
def test_long_messages_are_recognised_in_folds_when_cut(tiny):
    """On the agent's prefix a fold holds the log as the agent saw it, cut to fit the budget; a quoted fold (no cache)
    cuts it at `MAX_MESSAGE_CHARS`. Either way the fold names it."""
    runs = _runs(tiny)
    calls = runs["summarizing_10_long"]["calls"]
    folds = [call for call in calls if call["kind"] == "summary"]
    assert folds and all(call["folded"] for call in folds), "every fold names the messages it folded"
    seen_cut = {number for call in calls for number, _ in call["cut"]}
    assert any(seen_cut & set(call["folded"]) for call in folds if call["on_prefix"]), "a cut message folds on prefix"
    log = 2 * max(1, round(EXCHANGES / 3))
    quoted = [call for call in runs["summarizing_10_no_cache"]["calls"] if call["kind"] == "summary"]
    assert any(log in call["folded"] and not call["on_prefix"] for call in quoted), f"cut at {MAX_MESSAGE_CHARS} chars"


def test_latency_benchmark_times_every_turn_and_counts_the_turns_that_waited(tmp_path) -> None:
    argv = ["--exchanges", "12", "--summary-seconds", "0.2", "--think-seconds", "0.4", "--repeats", "2"]
    printed = _benchmark("latency", argv, tmp_path)
    report = json.loads((tmp_path / "latency_sqlite.json").read_text())

    runs = report["runs"]
    assert set(runs) == {"stock_10", "summarizing_10_after_reply", "summarizing_10_inline"}
    for run in runs.values():
        assert run["errors"] == []
        assert 0 < run["p50_seconds"] <= run["p95_seconds"]
    assert runs["summarizing_10_inline"]["turns_waited"], "folding in the turn shows turns that waited"
    assert runs["summarizing_10_after_reply"]["summary_calls_per_exchange"] > 0, "folds ran after the replies"
    assert runs["stock_10"]["summary_calls_per_exchange"] == 0
    assert printed.count("| PASS |") + printed.count("| FAIL |") == len(report["targets"]) == 2


def test_history_benchmark_folds_the_summarizing_history_after_each_reply(tmp_path) -> None:
    # Enough exchanges for a fold by Fold Batch (doubled with a caching provider): the pasted log in the window no
    # longer folds by budget while it is sent cut.
    printed = _benchmark("history_session", ["--exchanges", "14"], tmp_path)
    runs = json.loads((tmp_path / "history_session_sqlite.json").read_text())["runs"]
    assert set(runs) == {"stock_100", "stock_10", "summarizing_10"}
    assert all(run["failed_turns"] == 0 for run in runs.values()), printed
    assert runs["summarizing_10"]["summary_calls"] >= 1, "the Summarizing Message History folded after a reply"
    assert runs["stock_10"]["summary_calls"] == 0


LOAD_PHASE_KEYS = {
    "turn_records",
    "name",
    "topology",
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
    "build_turns",
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
LOAD_TARGETS = {
    "p95 turn time, Summarizing over Agent, phases pooled",
    "turns that waited for a summary call",
    "failed turns, both agents",
    "lost or doubled folds (audit problems)",
    "RSS growth after warm-up",
}


@pytest.mark.server
def test_load_benchmark_runs_both_agents_on_a_real_server_and_audits_every_session(langflow_server, tmp_path) -> None:
    server = [langflow_server.base_url, langflow_server.database_url, str(langflow_server.pid)]
    argv = ["--server", *server, "--users", "2", "--phase-seconds", "15", "--think-seconds", "0.3"]
    # A small window and short messages, so that the sessions of a short run on a busy machine fold.
    argv += ["--summary-seconds", "0.2", "--message-words", "20", "--n-messages", "2", "--fold-batch", "2"]
    # Then a phase with a user editing and rolling back the sessions' memory while they chat.
    argv += ["--edit-seconds", "0.5"]
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.load", *argv, "--out", str(tmp_path)],
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
    topology = "sqlite" if langflow_server.database_url.startswith("sqlite") else "postgres"
    [phase] = report["runs"][topology]
    assert set(phase) >= LOAD_PHASE_KEYS
    assert set(phase["agents"]) == {"stock", "summarizing"}
    for metrics in phase["agents"].values():
        assert set(metrics) >= LOAD_AGENT_KEYS
        # Through the run API and the Playground's build path, its events polled and streamed: none failed.
        assert metrics["turns"] > metrics["build_turns"] > 0
        assert metrics["failed_turns"] == 0, metrics["failures"]
        assert None not in (metrics["p50_seconds"], metrics["p95_seconds"], metrics["p99_seconds"])
    ours = phase["agents"]["summarizing"]
    assert ours["summary_calls"] >= 1, "sessions grew long enough to fold"
    assert ours["fold_queue_wait_p50_seconds"] is not None, "a fold after a reply waited in the queue"
    low, high = phase["p95_ratio_interval"]
    assert 0 < low <= high
    assert phase["rss_growth"] is not None and phase["db_connections_max"] >= 1
    assert phase["audit"]["holds"], phase["audit"]["problems"]
    # Every session is audited, the one deleted afterwards included.
    assert (phase["audit"]["sessions"], phase["audit"]["deleted_sessions"]) == (2, 1)
    rows = [t for t in report["targets"] if t["topology"] == topology]
    assert {t["name"] for t in rows} == LOAD_TARGETS
    for t in [*report["targets"], *report["fault_targets"]]:
        assert f"{'PASS' if t['holds'] else 'FAIL'}  {t['topology']} N={t['users']} {t['name']}" in result.stdout
    assert (report["faults"], report["fault_targets"]) == ({}, [])
    edits = report["edits"]
    assert edits["audit"]["holds"], edits["audit"]["problems"]
    assert edits["edits_applied"] >= 1 and edits["edits_answered_otherwise"] == []
    assert {t["name"] for t in report["edit_targets"]} >= {
        "memory_edits: memory edits and rollbacks saved during the traffic",
        "memory_edits: lost or doubled folds (audit problems)",
    }
    assert all(t["holds"] for t in report["edit_targets"]), report["edit_targets"]
    assert report["command"].startswith("python -m benchmarks.load --server")


SERVED_RUNS = ("summarizing_10", "stock_10", "summarizing_10_anthropic_cut_off")


@pytest.mark.server
def test_served_benchmark_plays_the_ready_flow_on_a_real_server_and_bills_the_requests_as_sent(
    langflow_server, loopback_providers
) -> None:
    from benchmarks.script import support_session
    from benchmarks.served_session import RUNS, served_runs

    session = support_session(EXCHANGES)
    runs = [run for run in RUNS if run.key in SERVED_RUNS]
    report = served_runs(langflow_server, loopback_providers, session, fold_batch=2, runs=runs)

    measured = report["runs"]
    assert list(measured) == list(SERVED_RUNS)
    for key, metrics in measured.items():
        assert (metrics["failed_turns"], metrics["errors"]) == (0, []), key
        # Exchange 3 is a tool turn: the calculator call, then the answer.
        assert metrics["agent_calls"] == EXCHANGES + 2, key
        calls = metrics["calls"]
        real, read, written = (
            sum(call[part] for call in calls) for part in ("input_tokens", "cached_tokens", "written_tokens")
        )
        assert metrics["total_input_tokens"] == real > 0
        assert abs(metrics["billed_10"] - (real - 0.9 * read + 0.25 * written)) <= 1
    ours, stock, cut_off = (measured[key] for key in SERVED_RUNS)
    assert ours["summary_calls"] >= 1 and ours["folds_on_prefix"] == ours["summary_calls"], "folds read the prefix"
    assert ours["cut_off_summaries_saved"] == 0 and ours["first_facts_in_last_exchange"]
    assert (stock["summary_calls"], stock["billed_10_vs_10"]) == (0, 1.0)
    assert ours["billed_10_vs_10"] == round(ours["billed_10"] / stock["billed_10"], 4)
    # The first fold is answered cut off at the length limit: a failed fold, and no summary saved from it.
    assert cut_off["cut_off_answers"] >= 1 and cut_off["failed_summary_calls"] == cut_off["cut_off_answers"]
    assert cut_off["cut_off_summaries_saved"] == 0
    assert report["server_package"].endswith("langflow_summarizing_agent/__init__.py")


@pytest.mark.server
def test_long_turn_benchmark_plays_the_tool_heavy_turn_on_a_real_server_and_counts_what_the_provider_saw(
    langflow_server, loopback_providers
) -> None:
    """Our run only: the stock Agent's refused turn is `test_long_turn.py`'s."""
    from benchmarks.long_turn import measure, parse_args
    from benchmarks.tables import long_turn

    args = parse_args(["--turns", "1", "--pages", "8", "--page-tokens", "4000", "--limit", "16000"])
    args.runs = "summarizing_openai"

    report = measure(langflow_server, loopback_providers, args)

    ours = report["runs"]["summarizing_openai"]
    assert (ours["answered"], ours["tool_results"], ours["over_limit_calls"], ours["orphans_refused"]) == (1, 8, 0, 0)
    assert 0 < ours["largest_call"] <= 16_000 and ours["billed_input"] > ours["largest_call"]
    assert ours["refused_for_length"] == 0 and ours["calls"] == 9
    assert [t["pass"] for t in report["targets"]] == [True] * 3
    session = {"command": "x", "commit": "y", "pages": 8, "page_tokens": 4000, "limit": 16000}
    shown = "\n".join(long_turn(session | report))
    assert "| Summarizing Agent, OpenAI | 1 of 1 | 8 |" in shown
