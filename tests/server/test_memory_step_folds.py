"""The memory step of the ready flow's Agent in the Playground (the build path, the shared real server) says why a
fold failed, in the error's own words, on lines the Playground renders as Markdown, and keeps saying it on later
turns; names the model that folded; counts a message cut to fit the History Token Budget once; and on `/compact`,
which calls no model, claims no history tokens were sent."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from langflow_summarizing_agent.engine.report import MAX_STEP_LINE
from langflow_summarizing_agent.wiring.agent_turn import MEMORY_STEP_NAME
from tests.support.flow_files import load_support_flow, with_offline_model
from tests.support.server_chat import playground_turn, summarizing_flow_data
from tests.support.server_fixtures import LangflowServer

PICKED = [{"name": "gpt-4o-mini", "provider": "OpenAI", "icon": "OpenAI", "metadata": {}}]
"""A Summary Model that cannot be built: the server has no OpenAI key anywhere."""
PASTED_LOG = "ERROR worker timed out while connecting to the queue at 10.0.0.7:5672\n" * 60


def memory_steps(client: Any, flow_id: str, session_id: str, texts: list[str]) -> list[str]:
    """The memory step of each Playground turn's reply. After each turn the summary API is read, which waits for
    the fold after that reply, so the next turn reports it."""
    steps = []
    for text in texts:
        events = playground_turn(client, flow_id, session_id, text)
        replies = [e["data"] for e in events if e["event"] == "add_message" and e["data"].get("sender") != "User"]
        blocks = [
            item for block in replies[-1].get("content_blocks") or [] for item in block.get("contents") or [block]
        ]
        [step] = [block["output"] for block in blocks if block.get("name") == MEMORY_STEP_NAME]
        steps.append(step)
        client.get(f"/api/v1/summarizing-agent/sessions/{session_id}/summary", params={"flow_id": flow_id})
    return steps


def new_flow(client: Any, data: dict[str, Any]) -> str:
    created = client.post("/api/v1/flows/", json={"name": f"memory-step-{uuid.uuid4().hex[:8]}", "data": data})
    assert created.status_code == 201, created.text[:2000]
    return str(created.json()["id"])


def item_with_details(step: str, start: str) -> tuple[str, list[str]]:
    """The item whose text starts with `start`, and its nested details, each with its wrapped lines joined."""
    lines = step.split("\n")
    first = next(i for i, line in enumerate(lines) if line.startswith("- " + start))
    item, details = lines[first].removeprefix("- "), []
    for line in lines[first + 1 :]:
        if line.startswith("  - "):
            details.append(line.removeprefix("  - "))
        elif line.startswith("    "):
            details[-1] += " " + line.strip()
        elif line.startswith("  "):
            item += " " + line.strip()
        else:
            break
    return item, details


def renders_as_markdown(step: str) -> bool:
    """Langflow 1.13's Playground shows a step output as plain code when a line is longer than 120 characters or
    holds a tab or four spaces after text."""
    return max(map(len, step.split("\n"))) <= MAX_STEP_LINE and "\t" not in step and not re.search(r"\S {4,}", step)


def test_a_failed_fold_is_told_in_the_errors_own_words_and_later_turns_still_say_why(
    langflow_server: LangflowServer, tmp_path: Path
) -> None:
    session_id = f"failing-{uuid.uuid4().hex[:8]}"
    with langflow_server.client(token=langflow_server.superuser_token) as client:
        flow_id = new_flow(client, summarizing_flow_data(tmp_path / "calls.jsonl", summary_model=PICKED))
        steps = memory_steps(client, flow_id, session_id, [f"message {turn}" for turn in range(1, 5)])

    assert all(renders_as_markdown(step) for step in steps), steps
    failed = next(step for step in steps if "- the fold after the previous reply failed" in step)
    item, [detail] = item_with_details(failed, "the fold after the previous reply failed")
    assert item == "the fold after the previous reply failed (summary model: gpt-4o-mini)"
    assert detail.startswith("fold failed (fold batch): RuntimeError: the summary model could not be built (")
    assert "set the Summary Model API Key" in detail
    # The next turn backs off: no fold ran after its reply, and the step still says why the last one failed.
    later = steps[steps.index(failed) + 1]
    assert "the fold after the previous reply" not in later
    item, [reason] = item_with_details(later, "fold failed once; next try in ")
    assert reason.startswith("RuntimeError: the summary model could not be built (")


def test_the_memory_step_names_the_model_that_folded(langflow_server: LangflowServer, tmp_path: Path) -> None:
    session_id = f"folding-{uuid.uuid4().hex[:8]}"
    with langflow_server.client(token=langflow_server.superuser_token) as client:
        flow_id = new_flow(client, summarizing_flow_data(tmp_path / "calls.jsonl"))
        steps = memory_steps(client, flow_id, session_id, [f"message {turn}" for turn in range(1, 4)])

    # No Summary Model picked: the Agent's own model (the offline FakeChatModel) folds.
    folded = [step for step in steps if "- folded after the previous reply: " in step]
    assert folded, steps
    item, _ = item_with_details(folded[0], "folded after the previous reply: ")
    assert re.fullmatch(
        r"folded after the previous reply: 2 messages \(1 summary call, [\d.]+ s\), folded by \w+", item
    )
    assert item.endswith("folded by FakeChatModel")


@pytest.fixture(scope="module")
def cut_steps(langflow_server: LangflowServer, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The steps of three turns at a History Token Budget of 200: a pasted log larger than the whole budget (so
    always cut), a question, and `/compact`."""
    record_path = tmp_path_factory.mktemp("cut") / "calls.jsonl"
    flow = with_offline_model(load_support_flow(), record_path, n_messages=10, fold_batch=20, history_token_budget=200)
    session_id = f"cut-{uuid.uuid4().hex[:8]}"
    with langflow_server.client(token=langflow_server.superuser_token) as client:
        flow_id = new_flow(client, flow["data"])
        return memory_steps(client, flow_id, session_id, ["Here is the log:\n" + PASTED_LOG, "Any idea?", "/compact"])


def test_a_message_cut_to_fit_the_budget_is_counted_once(cut_steps: list[str]) -> None:
    # History before the second turn: the pasted log, sent cut, and its reply, sent whole.
    assert "- 1 message cut to fit the History Token Budget" in cut_steps[1]
    assert "- 1 recent message verbatim and 1 cut" in cut_steps[1]
    assert re.search(r"- ~[\d,]+ history tokens sent", cut_steps[1])


def test_compact_claims_no_history_tokens_sent(cut_steps: list[str]) -> None:
    assert not re.search(r"~[\d,]+ history tokens sent", cut_steps[2]), cut_steps[2]
    assert "- /compact makes no model call and sends no history" in cut_steps[2]
