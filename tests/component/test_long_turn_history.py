"""A call refused for its length with no tool result to clear: the retry sends the history down to the summary and the
newest exchange, the window messages it leaves out folded into the summary for that call, and nothing is saved of
that fold. In-process on Langflow's database, the model refusing as OpenAI does (`FakeChatModel.input_limit`)."""

from __future__ import annotations

from langflow_summarizing_agent.engine.prompt import SUMMARY_PREFIX
from tests.support.agent_runs import ChatSession, scripted_session
from tests.support.fake_chat_model import FOLDED_PREFIX
from tests.support.langflow_db import stored_summary

WINDOW_OF_SIX = {"summarize_older_messages": True, "n_messages": 7, "fold_batch": 10, "history_token_budget": 0}
LONG = "the build log: " + "error " * 1_500


async def _three_long_exchanges(chat: ChatSession) -> None:
    for turn in range(3):
        await chat.say(f"Exchange {turn}: {LONG}")


async def test_a_refused_call_is_retried_with_the_summary_and_the_newest_exchange_and_what_it_leaves_out_folded(
    langflow_db,
) -> None:
    chat = scripted_session(WINDOW_OF_SIX, fold_answer="list")
    await _three_long_exchanges(chat)
    chat.model.input_limit = 4_000
    folds_before = len(chat.model.fold_calls)

    reply = await chat.say("And now?")

    assert reply == "Noted."
    refused, retried = chat.model.agent_calls[-2:]
    assert len(refused) == 1 + 6 + 1  # the system prompt, the window, the input
    summary, *newest_exchange, question = retried[1:]
    assert str(summary.content).startswith(SUMMARY_PREFIX)
    # The fold quotes each message cut to the fold's longest message; the summary, clipped to the Summary Word Budget,
    # starts with the first of them.
    [fold] = chat.model.fold_prompts[folds_before:]
    left_out = [str(m.content)[:100] for m in refused[1:5]]
    assert [item["text"][:100] for item in fold.conversation] == left_out
    assert f"{FOLDED_PREFIX}Exchange 0: the build log" in str(summary.content)
    assert [m.content for m in newest_exchange] == [m.content for m in refused[5:7]]
    assert question.content == "And now?"
    stored = await stored_summary(flow_id=chat.flow_id, user_id=chat.user_id, session_id=chat.session_id)
    assert stored is None or stored.folded_count == 0, "the fold for one call is not saved"
    assert "a call refused for its length was retried with less" in chat.last_status


async def test_a_refused_call_keeps_the_window_when_the_fold_for_it_fails(langflow_db) -> None:
    chat = scripted_session(WINDOW_OF_SIX)
    await _three_long_exchanges(chat)
    chat.model.input_limit = 4_000
    chat.model.fail_folds = True

    reply = await chat.say("And now?")

    assert reply.startswith("I could not answer: this turn does not fit the model's input limit of 4000 tokens")
    refused, retried = chat.model.agent_calls[-2:]
    assert [m.content for m in retried] == [m.content for m in refused]
