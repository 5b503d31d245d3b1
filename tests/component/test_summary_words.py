"""The word budget of a summary on whole turns: an over-long summary answer is stored clipped to Summary Word Budget,
whether its words are spaced or not (CJK), and the next turn sends the clipped summary.

Real graph runs on Langflow's services (SQLite and Postgres).
"""

from __future__ import annotations

import json
import logging

import pytest
from langchain_core.messages import HumanMessage

from tests.support.agent_runs import FOLD_EACH_TURN, fold_once_then, scripted_session, state_of
from tests.support.langflow_db import LangflowDatabase

ON = {"summarize_older_messages": True, "n_messages": 4, "fold_batch": 2, "history_token_budget": 0}


async def test_over_long_summary_is_clipped_to_the_word_budget(
    langflow_db: LangflowDatabase, caplog: pytest.LogCaptureFixture
) -> None:
    rambling = "- " + " ".join(f"word{n}" for n in range(2_000))
    answer = json.dumps({"summary": rambling})
    chat = scripted_session({**FOLD_EACH_TURN, "summary_words": 50}, fold_script=[None, answer])
    before = await fold_once_then(chat)

    with caplog.at_level(logging.INFO, logger="langflow_summarizing_agent"):
        await chat.say("Any other idea?")

    after = await state_of(chat)
    assert after.text.startswith("- word0 word1")
    assert len(after.text.split()) <= 51
    assert after.text.endswith("…")
    assert after.pinned == before.pinned
    assert after.folded_count == before.folded_count + 2
    assert "clipped" in caplog.text
    summary_message = chat.model.agent_calls[-1][1]
    assert isinstance(summary_message, HumanMessage)
    assert len(str(summary_message.content).split()) < 100


async def test_a_summary_without_spaces_is_clipped_to_the_word_budget(langflow_db: LangflowDatabase) -> None:
    """CJK text has no spaces between words; each character counts as a word, as word processors count it."""
    endless = "- " + "部署失败的原因是配置错误" * 200
    chat = scripted_session({**ON, "summary_words": 30}, fold_script=[json.dumps({"summary": endless})])

    for text in ("第一条消息", "好的", "第二条消息", "第三条消息"):
        await chat.say(text)

    state = await state_of(chat)
    assert state is not None
    assert state.text.startswith("- 部署失败")
    assert len(state.text) <= 40
    assert state.text.endswith("…")
