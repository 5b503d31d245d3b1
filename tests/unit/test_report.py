"""What a turn reports in the memory step, the status and the `/compact` reply: numbers that stay true after folds,
cuts and clears, one item a line, singular where there is one."""

from __future__ import annotations

from dataclasses import replace

from langflow_summarizing_agent.engine.fold import SaveFailures
from langflow_summarizing_agent.engine.plan import COMPACT_FAILED_PREFIX, is_compaction_exchange
from langflow_summarizing_agent.engine.records import StoredMessage, Summary
from langflow_summarizing_agent.engine.report import compact_reply_text, memory_step_text, status_text
from langflow_summarizing_agent.engine.settings import FoldSettings
from langflow_summarizing_agent.engine.turn import compact, fold_if_due, read_and_plan
from tests.support.fakes import InMemoryStore, RecordingSummarizer, make_messages

PASTED_LOG = "ERROR worker timed out while connecting to the queue at 10.0.0.7:5672\n" * 400


def items(step: str) -> list[str]:
    head, _, body = step.partition("\n\n")
    assert head == "Memory:"
    lines = body.split("\n")
    assert all(line.startswith("- ") for line in lines), step
    return [line.removeprefix("- ") for line in lines]


async def test_the_whole_conversation_still_counts_a_pasted_log_after_it_is_folded() -> None:
    settings = FoldSettings(n_messages=5, fold_batch=2, history_token_budget=0)
    texts = ["Here is the log:\n" + PASTED_LOG, "Thanks, reading it.", "Any idea?", "Yes."]
    store = InMemoryStore(make_messages(texts))
    before = await read_and_plan(store, settings, failures=SaveFailures())

    store.add("It still fails.", "Noted.")
    folding = await fold_if_due(store, RecordingSummarizer(), settings, failures=SaveFailures())
    store.add("And now?", "Noted.")
    after = await read_and_plan(store, settings, failures=SaveFailures())

    assert folding.fold is not None and folding.fold.folded == 2
    assert store.messages_stored[0].id not in {m.id for m in after.plan.send}
    log_tokens = settings.counter.message(store.messages_stored[0])
    assert before.verbatim_history_tokens > log_tokens
    added = sum(settings.counter.message(m) for m in store.messages_stored[4:])
    assert after.verbatim_history_tokens == before.verbatim_history_tokens + added


async def test_a_summary_stored_before_folds_counted_tokens_estimates_its_folded_messages() -> None:
    settings = FoldSettings(n_messages=3, fold_batch=50, history_token_budget=0)
    store = InMemoryStore(make_messages([f"message {i}" for i in range(6)]))
    store.summary = Summary(
        text="Earlier.", cursor=store.messages_stored[1].cursor, folded_count=2, folded_tokens=None, version=1
    )

    turn = await read_and_plan(store, settings, failures=SaveFailures())

    unfolded = [settings.counter.message(m) for m in store.messages_stored[2:]]
    assert turn.verbatim_history_tokens == sum(unfolded) + 2 * (sum(unfolded) // len(unfolded))


async def test_a_message_cut_to_fit_the_budget_is_called_cut_and_a_window_that_does_not_fit_is_said() -> None:
    settings = FoldSettings(n_messages=10, fold_batch=50, history_token_budget=1200, summary_words=20)
    texts = [f"message {i}: " + "details " * 70 for i in range(6)] + ["Here is the log:\n" + PASTED_LOG, "Reading it."]
    store = InMemoryStore(make_messages(texts))

    turn = await read_and_plan(store, settings, failures=SaveFailures())
    step = items(memory_step_text(turn, (), 0.0))

    assert turn.plan.cut == 1
    assert turn.plan.window == 8
    assert turn.plan.window_sent == 6
    assert step[1] == "6 recent messages verbatim"
    assert "the last 8 messages did not fit the History Token Budget; the newest 6 went" in step
    assert "1 message cut to fit the History Token Budget" in step
    assert "1 message cut to fit the History Token Budget" in status_text(turn)


async def test_one_of_a_kind_is_singular_and_each_item_has_its_line() -> None:
    settings = FoldSettings(n_messages=3, fold_batch=1, history_token_budget=0)
    store = InMemoryStore(make_messages(["first", "second", "third"]))

    turn = await fold_if_due(store, RecordingSummarizer(), settings, failures=SaveFailures())
    step = items(memory_step_text(turn, (), 0.25))

    assert step[0] == "summary covers 1 earlier message"
    assert step[1] == "2 recent messages verbatim"
    assert "folded 1 message this turn (1 summary call, 0.2 s)" in step
    assert step[-1].startswith("~") and "the whole conversation verbatim: ~" in step[-1]
    assert "1 messages" not in status_text(turn)


async def test_the_fold_after_the_reply_of_a_cleared_conversation_is_not_reported() -> None:
    settings = FoldSettings(n_messages=3, fold_batch=2, history_token_budget=0)
    store = InMemoryStore(make_messages([f"message {i}" for i in range(6)]))
    folded = await fold_if_due(store, RecordingSummarizer(), settings, failures=SaveFailures())
    assert folded.fold is not None
    previous = replace(folded.fold, seconds=0.1)
    kept = await read_and_plan(store, settings, failures=SaveFailures())

    cleared = InMemoryStore(make_messages(["a new start", "Noted."]))
    fresh = await read_and_plan(cleared, settings, failures=SaveFailures())

    lost = replace(previous, folded=0, problems=("another run saved the summary first",), summary=Summary())

    assert "folded after the previous reply: 4 messages" in memory_step_text(kept, (), 0.0, previous=previous)
    assert "previous reply" not in memory_step_text(fresh, (), 0.0, previous=previous)
    assert "previous reply" not in status_text(fresh, previous)
    # Its save lost to the clear: the fold found no row, and the new conversation has none either.
    assert "previous reply" not in memory_step_text(fresh, (), 0.0, previous=lost)


async def test_a_compact_whose_summary_call_failed_says_so_first_and_is_left_out_of_plans() -> None:
    settings = FoldSettings(n_messages=3, fold_batch=50, history_token_budget=0)
    store = InMemoryStore(make_messages([f"message {i}" for i in range(8)]))

    turn = await compact(store, RecordingSummarizer([RuntimeError("provider down")]), settings, failures=SaveFailures())
    reply = compact_reply_text(turn, (), None)

    assert reply.startswith(f"{COMPACT_FAILED_PREFIX} nothing was folded (")
    assert "provider down" in reply
    stamp = store.messages_stored[-1].timestamp
    assert is_compaction_exchange(StoredMessage(id="reply", timestamp=stamp, role="assistant", text=reply))


async def test_older_messages_waiting_for_the_next_fold_are_told_apart_from_the_window() -> None:
    settings = FoldSettings(n_messages=4, fold_batch=5, history_token_budget=0)
    store = InMemoryStore(make_messages([f"message {i}" for i in range(7)]))

    turn = await read_and_plan(store, settings, failures=SaveFailures())

    assert (
        items(memory_step_text(turn, (), 0.0))[1]
        == "7 recent messages verbatim: the last 3 and 4 older waiting for the next fold"
    )
