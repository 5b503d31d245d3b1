"""Standalone `lfx run` on the shipped flow: no Langflow database, so the agent falls back to last-N and says so.

`lfx run` prints no component status; its `--format json` output carries what was logged as a warning in `logs`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from langflow_summarizing_agent.agent_memory import FALLBACK_NOTE
from langflow_summarizing_agent.fold import SUMMARY_PREFIX
from tests.flow_files import load_support_flow, read_records, with_offline_model

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


def test_lfx_run_answers_with_last_n_history_and_logs_the_fallback(tmp_path: Path) -> None:
    record_path = tmp_path / "calls.jsonl"
    flow_path = tmp_path / "support_flow_offline.json"
    flow_path.write_text(json.dumps(with_offline_model(load_support_flow(), record_path)), encoding="utf-8")

    output = _lfx_run(flow_path, "Our project PRJ-123 on the EU cluster fails to deploy.", "lfx-session")

    assert output["success"] is True
    assert output["result"] == "Noted."
    assert FALLBACK_NOTE in output["logs"]
    [call] = read_records(record_path)
    assert call["kind"] == "agent", "no summary call without a database"
    assert [message["type"] for message in call["messages"]] == ["system", "human"]
    assert not any(message["content"].startswith(SUMMARY_PREFIX) for message in call["messages"])
