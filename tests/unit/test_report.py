"""What a turn reports in the memory step, the status and the `/compact` reply: numbers that stay true after folds,
cuts and clears, one item a line, singular where there is one; a failed fold told in the error's own words, as a
nested item, on lines the Playground renders as Markdown; and the model that folded, named."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta

from langflow_summarizing_agent.engine import report
from langflow_summarizing_agent.engine.fold import SaveFailures
from langflow_summarizing_agent.engine.plan import COMPACT_FAILED_PREFIX, is_compaction_exchange
from langflow_summarizing_agent.engine.records import StoredMessage, Summary
from langflow_summarizing_agent.engine.report import (
    MAX_STEP_LINE,
    compact_reply_text,
    memory_step_text,
    status_text,
)
from langflow_summarizing_agent.engine.settings import FoldSettings, settings_from
from langflow_summarizing_agent.engine.turn import compact, fold_if_due, read_and_plan
from tests.support.fakes import T0, InMemoryStore, RecordingSummarizer, make_messages

PASTED_LOG = "ERROR worker timed out while connecting to the queue at 10.0.0.7:5672\n" * 400


UNBUILT = (
    "the summary model could not be built (The api_key client option must be set either by passing api_key to the "
    "client or by setting the OPENAI_API_KEY environment variable); pick another Summary Model or set the Summary "
    "Model API Key (with none picked, fix the Language Model's settings)"
)
"""What `wiring.summary_model` raises for a picked OpenAI model without a key: longer than a step's line."""


def items(step: str) -> list[str]:
    """The step's items, each with its wrapped lines joined; a nested detail is left out."""
    head, _, body = step.partition("\n\n")
    assert head == "Memory:"
    found: list[str] = []
    for line in body.split("\n"):
        if line.startswith("- "):
            found.append(line.removeprefix("- "))
        elif line.startswith("  ") and not line.startswith("  - ") and not line.startswith("    "):
            found[-1] += " " + line.strip()
        else:
            assert line.startswith(("  - ", "    ")), step
    return found


def details(step: str, item_start: str) -> list[str]:
    """The nested details of the item starting `item_start`, each with its wrapped lines joined."""
    lines = step.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("- " + item_start))
    found: list[str] = []
    for line in lines[start + 1 :]:
        if line.startswith("  - "):
            found.append(line.removeprefix("  - "))
        elif line.startswith("    "):
            found[-1] += " " + line.strip()
        elif not line.startswith("  "):
            break
    return found


def check_renders_as_markdown(step: str) -> None:
    """No line the Playground would show as code: none longer than 120 characters, no tab, no four spaces after
    text (Langflow 1.13's frontend shows such a step output as one scrolling code block)."""
    assert max(len(line) for line in step.split("\n")) <= MAX_STEP_LINE == 120, step
    assert "\t" not in step and not re.search(r"\S {4,}", step), step


async def test_the_whole_conversation_still_counts_a_pasted_log_after_it_is_folded() -> None:
    settings = FoldSettings(window=4, fold_batch=2, history_token_budget=0)
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
    settings = FoldSettings(window=2, fold_batch=50, history_token_budget=0)
    store = InMemoryStore(make_messages([f"message {i}" for i in range(6)]))
    store.summary = Summary(
        text="Earlier.", cursor=store.messages_stored[1].cursor, folded_count=2, folded_tokens=None, version=1
    )

    turn = await read_and_plan(store, settings, failures=SaveFailures())

    unfolded = [settings.counter.message(m) for m in store.messages_stored[2:]]
    assert turn.verbatim_history_tokens == sum(unfolded) + 2 * (sum(unfolded) // len(unfolded))


async def test_a_message_cut_to_fit_the_budget_is_called_cut_and_a_window_that_does_not_fit_is_said() -> None:
    settings = FoldSettings(window=9, fold_batch=50, history_token_budget=1200, summary_words=20)
    texts = [f"message {i}: " + "details " * 70 for i in range(6)] + ["Here is the log:\n" + PASTED_LOG, "Reading it."]
    store = InMemoryStore(make_messages(texts))

    turn = await read_and_plan(store, settings, failures=SaveFailures())
    step = items(memory_step_text(turn, (), 0.0))

    assert turn.plan.cut == 1
    assert turn.plan.window == 8
    assert turn.plan.window_sent == 6
    # 6 sent: 5 whole and 1 cut, counted once each.
    assert step[1] == "5 recent messages verbatim and 1 cut"
    assert "the last 8 messages did not fit the History Token Budget; the newest 6 went" in step
    assert "1 message cut to fit the History Token Budget" in step
    assert "no summary yet, 5 recent messages verbatim and 1 cut" in status_text(turn)
    assert "1 message cut to fit the History Token Budget" in status_text(turn)


async def test_one_of_a_kind_is_singular_and_each_item_has_its_line() -> None:
    settings = FoldSettings(window=2, fold_batch=1, history_token_budget=0)
    store = InMemoryStore(make_messages(["first", "second", "third"]))

    turn = await fold_if_due(store, RecordingSummarizer(), settings, failures=SaveFailures())
    step = items(memory_step_text(turn, (), 0.25))

    assert step[0] == "summary covers 1 earlier message"
    assert step[1] == "2 recent messages verbatim"
    assert "folded 1 message this turn (1 summary call, 0.2 s)" in step
    assert step[-1].startswith("~") and "the whole conversation verbatim: ~" in step[-1]
    assert "1 messages" not in status_text(turn)


async def test_the_fold_after_the_reply_of_a_cleared_conversation_is_not_reported() -> None:
    settings = FoldSettings(window=2, fold_batch=2, history_token_budget=0)
    store = InMemoryStore(make_messages([f"message {i}" for i in range(6)]))
    folded = await fold_if_due(store, RecordingSummarizer(), settings, failures=SaveFailures())
    assert folded.fold is not None
    previous = replace(folded.fold, seconds=0.1)
    kept = await read_and_plan(store, settings, failures=SaveFailures())

    cleared = InMemoryStore(make_messages(["a new start", "Noted."]))
    fresh = await read_and_plan(cleared, settings, failures=SaveFailures())

    lost = replace(previous, folded=0, problems=("another run saved the summary first",), summary=Summary())

    assert "folded after the previous reply: 4 messages (1 summary call, 0.1 s)" in items(
        memory_step_text(kept, (), 0.0, previous=previous)
    )
    assert "previous reply" not in memory_step_text(fresh, (), 0.0, previous=previous)
    assert "previous reply" not in status_text(fresh, previous)
    # Its save lost to the clear: the fold found no row, and the new conversation has none either.
    assert "previous reply" not in memory_step_text(fresh, (), 0.0, previous=lost)


async def test_a_compact_whose_summary_call_failed_says_so_first_and_is_left_out_of_plans() -> None:
    settings = FoldSettings(window=2, fold_batch=50, history_token_budget=0)
    store = InMemoryStore(make_messages([f"message {i}" for i in range(8)]))

    turn = await compact(store, RecordingSummarizer([RuntimeError("provider down")]), settings, failures=SaveFailures())
    reply = compact_reply_text(turn, (), None)

    assert reply.startswith(f"{COMPACT_FAILED_PREFIX} nothing was folded (")
    assert "provider down" in reply
    stamp = store.messages_stored[-1].timestamp
    assert is_compaction_exchange(StoredMessage(id="reply", timestamp=stamp, role="assistant", text=reply))


async def test_older_messages_waiting_for_the_next_fold_are_told_apart_from_the_window() -> None:
    settings = FoldSettings(window=3, fold_batch=5, history_token_budget=0)
    store = InMemoryStore(make_messages([f"message {i}" for i in range(7)]))

    turn = await read_and_plan(store, settings, failures=SaveFailures())

    assert (
        items(memory_step_text(turn, (), 0.0))[1]
        == "7 recent messages verbatim: the last 3 and 4 older waiting for the next fold"
    )


async def test_a_failed_fold_is_told_in_the_errors_own_words_as_a_nested_item_on_short_lines() -> None:
    settings = FoldSettings(window=2, fold_batch=2, history_token_budget=0, summary_model="gpt-4o-mini")
    store = InMemoryStore(make_messages([f"message {i}" for i in range(6)]))

    turn = await fold_if_due(
        store, RecordingSummarizer([RuntimeError(UNBUILT)]), settings, failures=SaveFailures(), now=lambda: T0
    )
    step = memory_step_text(turn, (), 0.3, now=T0)

    check_renders_as_markdown(step)
    assert "the fold this turn failed (summary model: gpt-4o-mini)" in items(step)
    [detail] = details(step, "the fold this turn failed")
    assert detail == f"fold failed (fold batch): RuntimeError: {UNBUILT}"
    # Told once: the back-off's item does not repeat what the failed fold's detail says.
    assert "fold failed once; next try in 30 s" in items(step)
    assert details(step, "fold failed once") == []
    assert "summary model could not be built" in status_text(turn) and "OPENAI_API_KEY" in status_text(turn)


async def test_later_turns_repeat_why_folds_fail_in_a_few_words_until_a_fold_succeeds() -> None:
    settings = FoldSettings(window=2, fold_batch=2, history_token_budget=0, summary_model="gpt-4o-mini")
    store = InMemoryStore(make_messages([f"message {i}" for i in range(6)]))
    await fold_if_due(
        store, RecordingSummarizer([RuntimeError(UNBUILT)]), settings, failures=SaveFailures(), now=lambda: T0
    )

    store.add("message 6", "message 7")
    later = await fold_if_due(store, RecordingSummarizer(), settings, failures=SaveFailures(), now=lambda: T0)
    step = memory_step_text(later, (), 0.0, now=T0 + timedelta(seconds=9))

    check_renders_as_markdown(step)
    assert later.plan.postponed
    assert "fold failed once; next try in 21 s" in items(step)
    [reason] = details(step, "fold failed once")
    assert reason.startswith("RuntimeError: the summary model could not be built (The api_key client option")
    assert len(reason) <= 100 and reason.endswith("…")
    assert "the last failure: RuntimeError: the summary model could not be built" in status_text(later)

    retried = await fold_if_due(
        store, RecordingSummarizer(), settings, failures=SaveFailures(), now=lambda: T0 + timedelta(minutes=1)
    )
    after = memory_step_text(retried, (), 0.1, now=T0 + timedelta(minutes=1))
    assert store.summary is not None and store.summary.fold_failure is None
    assert "RuntimeError" not in after and "failed" not in after


async def test_the_fold_after_the_previous_reply_that_failed_is_told_with_its_error() -> None:
    settings = FoldSettings(window=2, fold_batch=2, history_token_budget=0, summary_model="gpt-4o-mini")
    store = InMemoryStore(make_messages([f"message {i}" for i in range(4)]))
    await fold_if_due(store, RecordingSummarizer(), settings, failures=SaveFailures(), now=lambda: T0)
    store.add("message 4", "message 5")
    failing = await fold_if_due(
        store, RecordingSummarizer([TimeoutError("no answer within 30 s")]), settings, failures=SaveFailures()
    )
    assert failing.fold is not None
    turn = await read_and_plan(store, settings, failures=SaveFailures())

    step = memory_step_text(turn, (), 0.0, previous=failing.fold)

    check_renders_as_markdown(step)
    assert "the fold after the previous reply failed (summary model: gpt-4o-mini)" in items(step)
    assert details(step, "the fold after the previous reply failed") == [
        "fold failed (fold batch): TimeoutError: no answer within 30 s"
    ]
    assert "The fold after the previous reply failed (summary model: gpt-4o-mini): fold failed" in status_text(
        turn, failing.fold
    )


async def test_a_fold_names_the_model_that_folded() -> None:
    settings = FoldSettings(window=2, fold_batch=2, history_token_budget=0, summary_model="claude-haiku-4-5")
    store = InMemoryStore(make_messages([f"message {i}" for i in range(4)]))

    turn = await fold_if_due(store, RecordingSummarizer(), settings, failures=SaveFailures())
    assert turn.fold is not None
    previous = replace(turn.fold, seconds=0.4)
    later = await read_and_plan(store, settings, failures=SaveFailures())
    elsewhere = await read_and_plan(store, settings, failures=SaveFailures())

    assert "folded 2 messages this turn (1 summary call, 0.2 s), folded by claude-haiku-4-5" in items(
        memory_step_text(turn, (), 0.2)
    )
    assert "This turn folded 2 messages in 1 summary call, folded by claude-haiku-4-5" in status_text(turn)
    assert "folded after the previous reply: 2 messages (1 summary call, 0.4 s), folded by claude-haiku-4-5" in items(
        memory_step_text(later, (), 0.0, previous=previous)
    )
    assert "(1 summary call, 0.4 s), folded by claude-haiku-4-5" in status_text(later, previous)
    # The fold ran in another process: the stored summary names its model.
    assert items(memory_step_text(elsewhere, (), 0.0))[0] == (
        "summary covers 2 earlier messages, last folded by claude-haiku-4-5"
    )


async def test_compact_says_it_sent_no_history_and_counts_a_cut_message_once() -> None:
    settings = FoldSettings(window=9, fold_batch=50, history_token_budget=1200, summary_words=20)
    texts = [f"message {i}: " + "details " * 70 for i in range(6)] + ["Here is the log:\n" + PASTED_LOG, "Reading it."]
    store = InMemoryStore(make_messages(texts))

    turn = await compact(store, RecordingSummarizer(), settings, failures=SaveFailures())
    step = memory_step_text(turn, (), 0.0)

    assert turn.plan.cut == 1
    assert not re.search(r"~[\d,]+ history tokens sent", step)
    assert items(step)[-1].startswith("/compact makes no model call and sends no history")
    assert "The model got" not in status_text(turn)
    assert status_text(turn).startswith("Summarizing Agent. /compact made no model call; the next turn's model gets")
    verbatim = len(turn.plan.send) - 1
    assert f"{verbatim} recent messages stay verbatim, 1 more cut to fit the History Token Budget" in (
        compact_reply_text(turn, (), None)
    )


async def test_the_status_and_the_memory_step_name_each_setting_the_turn_settled() -> None:
    settings = settings_from({"n_messages": 4, "summary_words": 10, "fold_batch": 0, "history_token_budget": 0})
    assert settings is not None
    turn = await read_and_plan(InMemoryStore(make_messages(["Hello", "Hi"])), settings, failures=SaveFailures())

    status = report.status_text(turn)
    step = report.memory_step_text(turn, (), 0.1)

    assert (
        "Settings run at the nearest value accepted: Fold Batch 0 runs as 1; Summary Word Budget 10 runs as 20"
        in status
    )
    assert "\n- settings run at the nearest value accepted\n  - Fold Batch 0 runs as 1\n" in step
    check_renders_as_markdown(step)
    unsettled = settings_from({"n_messages": 4, "history_token_budget": 0})
    assert unsettled is not None
    plain = await read_and_plan(InMemoryStore(make_messages(["Hello", "Hi"])), unsettled, failures=SaveFailures())
    assert "nearest value" not in report.status_text(plain) + report.memory_step_text(plain, (), 0.1)
