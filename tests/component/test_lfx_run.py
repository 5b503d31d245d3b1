"""Standalone `lfx run` on the shipped flows: no Langflow database and no stored messages, so the agent, and the
memory chatbot's Summarizing Message History, have no chat history at all, as the stock components there, and say so.

`lfx run` prints no component status; its `--format json` output carries what was logged as a warning in `logs`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from langflow_summarizing_agent.wiring import history_turn
from langflow_summarizing_agent.wiring.agent_turn import FALLBACK_NOTE
from tests.support.flow_files import (
    load_memory_chatbot_flow,
    load_support_flow,
    memory_chatbot_offline,
    read_records,
    with_offline_model,
)

LFX_RUN_TIMEOUT_SECONDS = 300


def _lfx_run(flow_path: Path, text: str, session_id: str) -> dict:
    lfx = Path(sys.executable).with_name("lfx")
    # No LANGFLOW_* settings from the developer's shell or an in-process fixture: this is a bare lfx install.
    environment = {key: value for key, value in os.environ.items() if not key.startswith("LANGFLOW_")}
    result = subprocess.run(
        [str(lfx), "run", str(flow_path), text, "--format", "json", "--session-id", session_id],
        capture_output=True,
        text=True,
        env=environment,
        cwd=flow_path.parent,
        timeout=LFX_RUN_TIMEOUT_SECONDS,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(result.stdout)


def test_lfx_run_has_no_history_even_in_the_same_session_and_logs_why(tmp_path: Path) -> None:
    record_path = tmp_path / "calls.jsonl"
    flow_path = tmp_path / "support_flow_offline.json"
    flow_path.write_text(json.dumps(with_offline_model(load_support_flow(), record_path)), encoding="utf-8")
    first_text = "Our project PRJ-123 on the EU cluster fails to deploy."

    outputs = [
        _lfx_run(flow_path, first_text, "lfx-session"),
        _lfx_run(flow_path, "Which project were we talking about?", "lfx-session"),
    ]

    for output in outputs:
        assert output["success"] is True
        assert output["result"] == "Noted."
        assert FALLBACK_NOTE in output["logs"]
    calls = read_records(record_path)
    assert [call["kind"] for call in calls] == ["agent", "agent"], "no summary call without a database"
    second = calls[1]["messages"]
    assert [message["type"] for message in second] == ["system", "human"], "the first run left no history"
    assert second[1]["content"] == "Which project were we talking about?"
    assert not any(first_text in message["content"] or "Noted." in message["content"] for message in second)


def test_lfx_run_of_the_memory_chatbot_has_no_history_and_logs_why(tmp_path: Path) -> None:
    record_path = tmp_path / "calls.jsonl"
    flow_path = tmp_path / "memory_chatbot_offline.json"
    flow_path.write_text(json.dumps(memory_chatbot_offline(load_memory_chatbot_flow(), record_path)), encoding="utf-8")
    first_text = "Our project PRJ-123 on the EU cluster fails to deploy."

    outputs = [
        _lfx_run(flow_path, first_text, "lfx-session"),
        _lfx_run(flow_path, "Which project were we talking about?", "lfx-session"),
    ]

    for output in outputs:
        assert output["success"] is True
        assert output["result"] == "Noted."
        assert history_turn.FALLBACK_NOTE in output["logs"]
    calls = read_records(record_path)
    assert [call["kind"] for call in calls] == ["agent", "agent"], "no summary call without a database"
    second = calls[1]["messages"][-1]["content"]
    assert second.endswith("The customer's new message: Which project were we talking about?")
    assert first_text not in second, "the first run left no history"
