"""The Summarizing Message History's window on a real `langflow run` server, turn by turn: the ready memory chatbot as
exported, once with Summarize Older Messages on and once off (the stock Message History), at the same small Number of
Messages, fed the same messages over the run API and the Playground's build path. Every turn, the model receives
word for word what the stock Message History retrieves (the newest N stored messages, the current input the last of
them: Langflow builds a canvas Chat Input before every other component), preceded only by the older messages still
waiting for a fold, never fewer and never out of order.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.flow_files import load_memory_chatbot_flow, memory_chatbot_offline, read_records
from tests.support.server_chat import ServerChat, playground_turn
from tests.support.server_fixtures import LangflowServer

TURNS = 14
N_MESSAGES = 3
FOLD_BATCH = 2
REPLY = "Noted."
MEMORY_START = "follow the customer if they correct one):\n"
MEMORY_END = "\n\nThe customer's new message:"
WINDOW_LINE = re.compile(r"^(User|AI): ")
"""A window message formatted by the ready flow's Template, "{sender_name}: {text}"; summary lines never start so."""


def step(turn: int) -> str:
    return f"Step {turn}: the deployment still fails."


def conversation_through(turn: int) -> list[str]:
    """The session's stored messages once the input of `turn` is stored, oldest first, as the Template formats them."""
    lines = []
    for earlier in range(turn):
        lines += [f"User: {step(earlier)}", f"AI: {REPLY}"]
    return [*lines, f"User: {step(turn)}"]


def window_of(prompt: str) -> list[str]:
    """The window messages in the prompt's {memory}, oldest first."""
    memory = prompt.split(MEMORY_START, 1)[1].rsplit(MEMORY_END, 1)[0]
    return [line for line in memory.splitlines() if WINDOW_LINE.match(line)]


def agent_prompts(record_path: Path) -> list[str]:
    return [record["messages"][-1]["content"] for record in read_records(record_path) if record["kind"] == "agent"]


def _chat(server: LangflowServer, record_path: Path, *, summarizing: bool) -> ServerChat:
    flow = memory_chatbot_offline(
        load_memory_chatbot_flow(),
        record_path,
        n_messages=N_MESSAGES,
        fold_batch=FOLD_BATCH,
        summarize_older_messages=summarizing,
    )
    chat = ServerChat.create(server, server.superuser_token, server.superuser_api_key, data=flow["data"])
    chat.record_path = record_path
    return chat


@pytest.fixture(scope="module")
def chats(langflow_server: LangflowServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, ServerChat]:
    records = tmp_path_factory.mktemp("history-window")
    return {
        kind: _chat(langflow_server, records / f"{kind}.jsonl", summarizing=kind == "summarizing")
        for kind in ("summarizing", "stock")
    }


def _run_api(chat: ServerChat, session_id: str, text: str) -> None:
    # `say` returns once the fold after the reply has saved.
    assert chat.say(session_id, text) == REPLY


def _playground(chat: ServerChat, session_id: str, text: str) -> None:
    with chat.server.client(token=chat.token) as client:
        playground_turn(client, chat.flow_id, session_id, text)
    chat.state(session_id)


@pytest.mark.parametrize("turn_through", [_run_api, _playground], ids=["run_api", "playground"])
def test_every_turn_the_model_gets_the_stock_window_word_for_word_after_the_messages_waiting_for_a_fold(
    chats: dict[str, ServerChat], turn_through: Callable[[ServerChat, str, str], None]
) -> None:
    windows: dict[str, list[list[str]]] = {kind: [] for kind in chats}
    for kind, chat in chats.items():
        assert chat.record_path is not None
        session_id = f"window-{uuid.uuid4().hex[:8]}"
        for turn in range(TURNS):
            seen = len(agent_prompts(chat.record_path))
            turn_through(chat, session_id, step(turn))
            [prompt] = agent_prompts(chat.record_path)[seen:]
            windows[kind].append(window_of(prompt))

    for turn, (ours, stock) in enumerate(zip(windows["summarizing"], windows["stock"], strict=True)):
        stored = conversation_through(turn)
        assert stock == stored[-N_MESSAGES:], f"turn {turn}: the stock Message History's window"
        assert ours[-len(stock) :] == stock, f"turn {turn}: the stock window, word for word, last"
        assert ours == stored[-len(ours) :], f"turn {turn}: before it only older messages, in order"
        assert len(ours) <= N_MESSAGES + FOLD_BATCH, f"turn {turn}: no more waiting than Fold Batch lets wait"
    assert any(len(ours) < turn * 2 + 1 for turn, ours in enumerate(windows["summarizing"])), "folds ran"
