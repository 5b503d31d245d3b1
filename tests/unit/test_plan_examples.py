"""Sessions the verbatim policy's state machine (`test_plan_properties.py`) found, written out small; each broke the
rule its name states."""

from __future__ import annotations

import json

from langflow_summarizing_agent.engine.fold import SaveFailures
from langflow_summarizing_agent.engine.plan import COMPACT_COMMAND, COMPACT_REPLY_PREFIX
from langflow_summarizing_agent.engine.records import Role, Summary
from langflow_summarizing_agent.engine.report import problems
from langflow_summarizing_agent.engine.settings import FoldSettings
from langflow_summarizing_agent.engine.turn import compact as compact_turn
from langflow_summarizing_agent.engine.turn import fold_if_due
from tests.support.fakes import InMemoryStore, RecordingSummarizer, make_messages
from tests.unit.plan_sessions import (
    folded,
    is_compaction_exchange,
    message_tokens,
    note,
    session_of,
    tagged_text,
)

# Sessions the machine found, written out small; each broke the rule its name states.


async def test_a_window_that_fits_goes_whole_before_anything_is_summarized():
    store = InMemoryStore(make_messages([tagged_text(i, 800) for i in range(8)] + [tagged_text(8, 551)]))
    assert 7_000 - 20 < sum(message_tokens(m) for m in store.messages_stored) <= 7_000

    turn = await fold_if_due(store, RecordingSummarizer(), FoldSettings(window=9), failures=SaveFailures())

    assert [(m.id, m.text) for m in turn.plan.send] == [(m.id, m.text) for m in store.messages_stored]
    assert folded(turn) == 0


async def test_what_a_new_summary_pushes_out_of_the_window_is_folded_in_the_same_turn():
    store = InMemoryStore(make_messages(["hi", "hello", "ok", "sure"] + [tagged_text(i, 300) for i in range(4, 7)]))
    longer_summary = json.dumps({"pinned": {}, "summary": "- " + " ".join(["decided"] * 95)})
    chosen = FoldSettings(window=3, fold_batch=2, summary_words=100, history_token_budget=1_000)

    turn = await fold_if_due(store, RecordingSummarizer([longer_summary]), chosen, failures=SaveFailures())

    assert not problems(turn)
    shown = {m.id for m in turn.plan.send}
    assert [m.id for m in store.messages_stored if not turn.summary.covers(m) and m.id not in shown] == []
    assert turn.plan.not_summarized == 0


async def test_a_summary_message_cut_to_fit_the_budget_keeps_its_note():
    store = InMemoryStore(make_messages(["a"] + [tagged_text(i, 200) for i in range(1, 5)] + ["b" * 100, "c" * 100]))
    urls = " ".join(["https://example.com/a/very/long/path/to/a/ticket"] * 20)
    store.summary = Summary(text=f"- {urls}", cursor=store.messages_stored[0].cursor, folded_count=1, version=1)
    chosen = FoldSettings(window=2, fold_batch=20, summary_words=20, history_token_budget=300)

    turn = await fold_if_due(store, RecordingSummarizer([RuntimeError("down")]), chosen, failures=SaveFailures())

    assert turn.plan.not_summarized == 4
    assert note(4) in turn.plan.summary_text
    assert turn.plan.history_tokens <= 300


async def test_the_newest_exchange_cut_to_fit_stays_within_the_budget():
    store = InMemoryStore(make_messages(["older one", "older two", "a short question", "x" * 938]))
    chosen = FoldSettings(window=2, fold_batch=20, summary_words=20, history_token_budget=277)

    turn = await fold_if_due(store, RecordingSummarizer([RuntimeError("down")]), chosen, failures=SaveFailures())

    assert turn.plan.history_tokens <= 277
    assert [m.id for m in turn.plan.send] == [m.id for m in store.messages_stored[2:]]
    assert all(
        message_tokens(m) <= message_tokens(whole)
        for m, whole in zip(turn.plan.send, store.messages_stored[2:], strict=True)
    )


async def test_the_note_counts_no_compact_exchange_the_catch_up_has_not_read():
    texts = [tagged_text(i, 10) for i in range(80)] + [COMPACT_COMMAND, f"{COMPACT_REPLY_PREFIX} done."]
    store = InMemoryStore(make_messages(texts + [tagged_text(i, 10) for i in range(82, 120)]))

    turn = await fold_if_due(
        store, RecordingSummarizer(), FoldSettings(window=9, max_folds_per_turn=1), failures=SaveFailures()
    )

    sent = {m.id for m in turn.plan.send}
    unfolded = [m for m in store.messages_stored if not is_compaction_exchange(m) and not turn.summary.covers(m)]
    assert turn.plan.not_summarized == len([m for m in unfolded if m.id not in sent])


async def test_compact_exchanges_do_not_crowd_the_newest_messages_out_of_the_window():
    texts = [tagged_text(i, 10) for i in range(100)] + [COMPACT_COMMAND, f"{COMPACT_REPLY_PREFIX} done."] * 4
    store = InMemoryStore(make_messages([*texts, COMPACT_COMMAND]))
    chosen = FoldSettings(window=9, fold_batch=2, max_folds_per_turn=1)

    turn = await compact_turn(store, RecordingSummarizer(), chosen, failures=SaveFailures())

    assert [m.id for m in turn.plan.send][-9:] == [m.id for m in store.messages_stored[91:100]]


async def test_compact_exchanges_do_not_hide_a_message_no_fold_is_due_for():
    compaction: list[tuple[Role, str]] = [("user", COMPACT_COMMAND), ("assistant", f"{COMPACT_REPLY_PREFIX} done.")]
    store = session_of(("assistant", "Welcome!"), *compaction * 3, ("user", "question"), ("assistant", "answer"))

    turn = await fold_if_due(
        store, RecordingSummarizer(), FoldSettings(window=1, fold_batch=3), failures=SaveFailures()
    )

    assert folded(turn) == 0
    assert turn.plan.not_summarized == 0
    assert [m.text for m in turn.plan.send] == ["Welcome!", "question", "answer"]


async def test_a_window_that_fills_the_budget_exactly_goes_whole_while_there_is_no_summary():
    store = session_of(("user", tagged_text(0, 1_006)))
    assert message_tokens(store.messages_stored[0]) == 1_010
    chosen = FoldSettings(window=1, fold_batch=1, summary_words=20, history_token_budget=1_010)

    turn = await fold_if_due(store, RecordingSummarizer(), chosen, failures=SaveFailures())

    assert turn.plan.summary_text is None
    assert [(m.id, m.text) for m in turn.plan.send] == [(m.id, m.text) for m in store.messages_stored]
