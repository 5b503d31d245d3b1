"""Bad input: a clear error that says what to change, or safe handling; stored messages are never changed.

Real graph runs on Langflow's services (SQLite and Postgres). Settings out of range run at the nearest accepted value,
as the canvas settles them, alike on the Summarizing Agent and the Summarizing Message History (Langflow itself
refuses a value that is not a number as the input is set).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from langflow_summarizing_agent.engine.prompt import SUMMARY_PREFIX
from langflow_summarizing_agent.engine.settings import MAX_MESSAGE_CHARS, MAX_PINNED_KEYS
from langflow_summarizing_agent.engine.tokens import CUT_MARKER, counter_for
from tests.support.agent_runs import ChatSession, scripted_session
from tests.support.history_runs import SESSION_KINDS
from tests.support.langflow_db import LangflowDatabase, MemoryScope, stored_summary

ON = {"summarize_older_messages": True, "n_messages": 4, "fold_batch": 2, "history_token_budget": 0}


async def stored_rows(chat: ChatSession) -> dict[str, tuple[Any, ...]]:
    """Every message row of the session, by id: sender, text, files, timestamp, error."""
    from langflow.services.database.models.message.model import MessageTable
    from langflow.services.deps import session_scope
    from sqlmodel import select

    async with session_scope() as session:
        rows = (
            await session.exec(
                select(MessageTable).where(
                    MessageTable.flow_id == chat.flow_id, MessageTable.session_id == chat.session_id
                )
            )
        ).all()
        return {str(row.id): (row.sender, row.text, list(row.files or []), row.timestamp, row.error) for row in rows}


def assert_unchanged(before: dict[str, tuple[Any, ...]], after: dict[str, tuple[Any, ...]]) -> None:
    assert {key: after.get(key) for key in before} == before


async def state_of(chat: ChatSession):
    return await stored_summary(flow_id=chat.flow_id, user_id=chat.user_id, session_id=chat.session_id)


# Settings


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        pytest.param(["", "   ", "project_id"], ("project_id",), id="blank"),
        pytest.param(["project_id", "project_id", " project_id ", "cluster"], ("project_id", "cluster"), id="dup"),
    ],
)
async def test_blank_and_duplicated_pinned_keys_are_dropped(
    langflow_db: LangflowDatabase, keys: list[str], expected: tuple[str, ...]
) -> None:
    chat = scripted_session({**ON, "pinned_keys": keys})
    for text in ("I'm on project PRJ-123 on the EU cluster.", "ok", "next", "and next"):
        await chat.say(text)

    state = await state_of(chat)
    assert state is not None
    facts = {"project_id": "PRJ-123", "cluster": "EU cluster"}
    assert state.pinned == {key: value for key, value in facts.items() if key in expected}
    system = chat.model.fold_prompts[0].system
    assert f"Pinned keys are exactly: {', '.join(expected)}." in system


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        pytest.param(
            [f"key_{n}" for n in range(MAX_PINNED_KEYS + 1)],
            tuple(f"key_{n}" for n in range(MAX_PINNED_KEYS)),
            id="too-many",
        ),
        pytest.param(["project id"], ("project_id",), id="space"),
        pytest.param(["1st_key"], ("_1st_key",), id="leading-digit"),
        pytest.param(["a/b", "{project}"], ("ab", "project"), id="signs"),
        pytest.param(["k" * 65], ("k" * 64,), id="too-long"),
    ],
)
async def test_pinned_keys_that_cannot_be_keys_run_as_the_canvas_keeps_them(
    langflow_db: LangflowDatabase, keys: list[str], expected: tuple[str, ...]
) -> None:
    """An API tweak or a flow file can still send such keys; a turn runs with the keys the node shows for them
    (`settings.settled`), so the run API and the Playground agree with the canvas."""
    chat = scripted_session({**ON, "pinned_keys": keys})
    for text in ("I'm on project PRJ-123.", "ok", "next", "and next"):
        await chat.say(text)

    system = chat.model.fold_prompts[0].system
    assert f"Pinned keys are exactly: {', '.join(expected)}." in system


@pytest.mark.parametrize(
    "setting",
    [
        pytest.param({"n_messages": -1}, id="n-negative"),
        pytest.param({"fold_batch": 0}, id="batch-zero"),
        pytest.param({"fold_batch": -20}, id="batch-negative"),
        pytest.param({"summary_words": 5}, id="words-tiny"),
        pytest.param({"history_token_budget": -1}, id="budget-negative"),
        pytest.param({"history_token_budget": 50}, id="budget-tiny"),
        pytest.param({"max_folds_per_turn": 0}, id="folds-zero"),
        pytest.param({"summary_timeout": -5}, id="timeout-negative"),
        pytest.param({"pinned_keys": ["project id", "bad*key"]}, id="keys"),
    ],
)
@pytest.mark.parametrize("kind", SESSION_KINDS)
async def test_settings_out_of_range_run_at_the_nearest_accepted_value(
    langflow_db: LangflowDatabase, setting: dict[str, Any], kind: type[ChatSession]
) -> None:
    chat = kind(settings=ON)
    await chat.say("A first turn with sensible settings.")
    before = await stored_rows(chat)
    chat.settings = {**ON, **setting}

    assert await chat.say("Hello again")
    assert_unchanged(before, await stored_rows(chat))


# Messages


async def test_a_one_megabyte_message_is_stored_whole_folded_cut_and_never_overflows_the_budget(
    langflow_db: LangflowDatabase,
) -> None:
    lines = (f"2026-01-01T00:00:{n % 60:02d} worker-{n % 7} ERROR connection reset by peer\n" for n in range(20_000))
    log = "".join(lines)
    pasted = ("Here is the whole log:\n" + log)[: 1024 * 1024]
    budget = 2_000
    chat = scripted_session({**ON, "n_messages": 10, "history_token_budget": budget})

    await chat.say(pasted)
    for text in ("What do you see in it?", "Which worker fails most?", "Thanks.", "One more.", "And another.", "Last."):
        await chat.say(text)

    rows = await stored_rows(chat)
    assert sorted(len(text) for _, text, *_ in rows.values())[-1] == len(pasted) == 1024 * 1024
    for call in chat.model.agent_calls[1:]:
        assert counter_for("FakeChatModel").prompt(call[1:-1]) <= budget
    folded = [item for prompt in chat.model.fold_prompts for item in prompt.conversation]
    assert any(item["text"].startswith("Here is the whole log:") for item in folded)
    assert all(len(item["text"]) <= MAX_MESSAGE_CHARS + 2 for item in folded)
    # While in the window the log goes cut, with the marker; once out of it, only through the summary.
    assert all(CUT_MARKER in str(call[1].content) for call in chat.model.agent_calls[1:5])
    assert all("connection reset by peer" not in str(m.content) for m in chat.model.agent_calls[-1][1:-1])


async def test_messages_with_files_and_no_text_are_sent_and_folded_safely(
    langflow_db: LangflowDatabase, insert_messages
) -> None:
    chat = scripted_session({**ON, "n_messages": 4, "pinned_keys": ["project_id"]})
    scope = MemoryScope(chat.flow_id, chat.user_id, chat.session_id)
    start = datetime.now(timezone.utc) - timedelta(minutes=5)
    await insert_messages(scope, [(start, "I'm on project PRJ-123."), (start + timedelta(seconds=1), "Noted.")])
    await insert_messages(
        scope, [(start + timedelta(seconds=2), "")], files=[f"{chat.flow_id}/architecture.png"], sender="User"
    )
    before = await stored_rows(chat)

    await chat.say("Can you see the diagram?")
    sent = chat.model.agent_calls[-1]
    attachment = [m for m in sent[1:-1] if isinstance(m, HumanMessage) and isinstance(m.content, list)]
    assert len(attachment) == 1, "the files-only message is sent as the stock Agent sends it"
    for text in ("next", "and next", "and one more"):
        await chat.say(text)

    state = await state_of(chat)
    assert state is not None
    assert state.folded_count >= 3
    assert state.pinned == {"project_id": "PRJ-123"}
    folded = [item for prompt in chat.model.fold_prompts for item in prompt.conversation]
    assert {"role": "user", "text": "", "files": ["architecture.png"]} in folded
    assert_unchanged(before, await stored_rows(chat))


NON_ASCII = [  # Deliberately non-ASCII, look-alike punctuation included.
    "Kunde: Müller GmbH, Straße 5 – naïve café ☕",  # noqa: RUF001
    "项目代号是PRJ-123，部署在欧洲集群。",  # noqa: RUF001
    "プロジェクトのデプロイが失敗しました 🚀🔥",
    "המשתמש מבקש לבדוק את השרת",
    "العميل يريد تقريرا أسبوعيا",
    "Emoji only: 👩‍💻👨‍👩‍👧‍👦🏳️‍🌈",
]


async def test_non_ascii_text_reaches_the_summarizer_and_the_agent_unchanged(langflow_db: LangflowDatabase) -> None:
    summary = "- 项目 PRJ-123 🚀\n- המשתמש מבקש לבדוק\n- العميل يريد تقريرا"
    answer = json.dumps({"pinned": {"customer": "Müller GmbH 株式会社"}, "summary": summary}, ensure_ascii=False)
    chat = scripted_session({**ON, "pinned_keys": ["customer"]}, fold_answer=lambda _: answer)

    for text in NON_ASCII:
        await chat.say(text)

    folded = [item["text"] for prompt in chat.model.fold_prompts for item in prompt.conversation]
    assert [text.strip() for text in folded[:3]] == [NON_ASCII[0], "Noted.", NON_ASCII[1]]
    assert NON_ASCII[0] in chat.model.fold_prompts[0].data, "text is quoted as is, not as \\u escapes"
    state = await state_of(chat)
    assert state is not None
    assert (state.text, state.pinned) == (summary, {"customer": "Müller GmbH 株式会社"})
    summary_message = str(chat.model.agent_calls[-1][1].content)
    assert summary_message.startswith(SUMMARY_PREFIX)
    assert "- customer: Müller GmbH 株式会社" in summary_message
    assert summary in summary_message
    sent = [str(m.content).strip() for m in chat.model.agent_calls[-1]]
    assert sent[-1] == NON_ASCII[-1]
    assert NON_ASCII[-2] in sent
