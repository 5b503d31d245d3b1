"""The fold logic on its own: an in-memory store and a scripted summarizer, no Langflow services."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from langflow_summarizing_agent.fold import (
    COMPACT_COMMAND,
    COMPACT_REPLY_PREFIX,
    CUT_MARKER,
    SUMMARY_PREFIX,
    Folder,
    FoldSettings,
    SaveFailures,
    message_tokens,
)
from langflow_summarizing_agent.state import Summary
from tests.support.fakes import InMemoryStore, RecordingSummarizer, make_messages

PINNED = ("project_id", "cluster")


def settings(**overrides) -> FoldSettings:
    values = {"n_messages": 10, "fold_batch": 20, "pinned_keys": PINNED, "history_token_budget": 0}
    values.update(overrides)
    return FoldSettings(**values)


def session(count: int, *, first: str = "I'm working on project PRJ-123 on the EU cluster.") -> InMemoryStore:
    texts = [first] + [f"message {i} about the build" for i in range(1, count)]
    return InMemoryStore(make_messages(texts))


async def run_turns(store: InMemoryStore, summarizer, fold_settings: FoldSettings, turns: int, **kw):
    history = None
    for _ in range(turns):
        store.add("a new question", "a new answer")
        history = await Folder(store, summarizer, fold_settings, **kw).prepare_history()
    return history


def ids(messages) -> list[str]:
    return [m.id for m in messages]


async def test_short_session_sends_everything_verbatim_without_a_fold():
    store = session(8)
    summarizer = RecordingSummarizer()

    turn = await Folder(store, summarizer, settings()).prepare_history()

    assert summarizer.calls == 0
    assert turn.summary_text is None
    assert ids(turn.verbatim) == ids(store.messages)


async def test_older_messages_below_the_batch_stay_verbatim_so_none_is_invisible():
    store = session(9 + 19)
    summarizer = RecordingSummarizer()

    turn = await Folder(store, summarizer, settings()).prepare_history()

    assert summarizer.calls == 0
    assert ids(turn.verbatim) == ids(store.messages)


async def test_a_full_batch_of_older_messages_folds_once_and_leaves_the_window_verbatim():
    store = session(9 + 20)
    summarizer = RecordingSummarizer()

    turn = await Folder(store, summarizer, settings()).prepare_history()

    assert summarizer.calls == 1
    assert turn.folded == 20
    # The stock Agent's window at n_messages=10: the newest 9 messages before the current input.
    assert ids(turn.verbatim) == ids(store.messages[-9:])
    assert store.state.cursor == store.messages[19].cursor
    assert store.state.folded_count == 20
    assert store.state.pinned == {"project_id": "PRJ-123", "cluster": "EU cluster"}
    assert turn.summary_text.startswith(SUMMARY_PREFIX)
    assert "- project_id: PRJ-123" in turn.summary_text


async def test_every_stored_message_is_folded_or_verbatim_on_every_turn():
    store = session(2)
    summarizer = RecordingSummarizer()
    for _ in range(60):
        store.add("question", "answer")
        turn = await Folder(store, summarizer, settings()).prepare_history()
        folded = {m.id for m in store.messages if turn.state.covers(m)}
        shown = set(ids(turn.verbatim))
        assert folded | shown == {m.id for m in store.messages}
        assert turn.not_summarized == 0
        assert len(turn.verbatim) < 10 + 20


async def test_the_first_fact_survives_a_long_session():
    store = session(2)
    turn = await run_turns(store, RecordingSummarizer(), settings(), 60)

    assert "PRJ-123" in turn.summary_text
    assert "EU cluster" in turn.summary_text
    assert store.messages[0].id not in ids(turn.verbatim)


@pytest.mark.parametrize(
    "answer",
    [RuntimeError("provider down"), asyncio.TimeoutError(), "", "{oops", '{"pinned": "x", "summary": "s"}'],
)
async def test_a_failed_fold_keeps_the_previous_state_and_still_returns_history(answer):
    store = session(9 + 20)
    await Folder(store, RecordingSummarizer(), settings()).prepare_history()
    before = store.state
    store.add(*[f"later {i}" for i in range(20)])

    turn = await Folder(store, RecordingSummarizer([answer]), settings()).prepare_history()

    assert turn.problems and "summary fold failed" in turn.problems[0]
    assert store.state.cursor == before.cursor
    assert store.state.summary == before.summary
    assert store.state.folded_count == before.folded_count
    assert ids(turn.verbatim) == ids(store.messages[20:])
    assert "PRJ-123" in turn.summary_text


async def test_a_failing_summarizer_backs_off_instead_of_failing_every_turn():
    clock = [datetime(2026, 1, 1, tzinfo=timezone.utc)]
    store = session(10 + 20)
    failing = RecordingSummarizer([RuntimeError("down")] * 100)
    fold_settings = settings()

    await run_turns(store, failing, fold_settings, 1, now=lambda: clock[0])
    assert failing.calls == 1
    await run_turns(store, failing, fold_settings, 5, now=lambda: clock[0])
    assert failing.calls == 1

    clock[0] += timedelta(minutes=1)
    await run_turns(store, failing, fold_settings, 1, now=lambda: clock[0])
    assert failing.calls == 2
    assert store.state.failed_folds == 2

    clock[0] += timedelta(hours=2)
    turn = await run_turns(store, RecordingSummarizer(), fold_settings, 1, now=lambda: clock[0])
    assert turn.folded > 0
    assert store.state.failed_folds == 0


class SaveFailingStore(InMemoryStore):
    """A store that reads but cannot write, as a read-only replica or a locked database file."""

    async def save_state(self, state: Summary, expected_version: int) -> bool:
        raise OSError("database is locked")


async def test_a_failed_save_counts_as_a_failed_fold_and_backs_off():
    clock = [datetime(2026, 1, 1, tzinfo=timezone.utc)]
    store = SaveFailingStore(make_messages([f"message {i}" for i in range(10 + 20)]))
    summarizer = RecordingSummarizer()
    failures = SaveFailures()
    fold_settings = settings()

    turn = await run_turns(store, summarizer, fold_settings, 1, now=lambda: clock[0], save_failures=failures)
    assert summarizer.calls == 1
    assert turn.folded == 0
    assert any("could not be saved (OSError: database is locked)" in p for p in turn.problems)
    assert "counted as failed fold 1" in " ".join(turn.problems)
    # Nothing was folded, so every older message still reaches the model, verbatim or counted as not summarized.
    assert len(turn.verbatim) + turn.not_summarized == len(store.messages)

    for _ in range(5):
        turn = await run_turns(store, summarizer, fold_settings, 1, now=lambda: clock[0], save_failures=failures)
    assert summarizer.calls == 1
    assert any("failed 1 time(s) in a row; next try after" in p for p in turn.problems)

    clock[0] += timedelta(minutes=1)
    turn = await run_turns(store, summarizer, fold_settings, 1, now=lambda: clock[0], save_failures=failures)
    assert summarizer.calls == 2
    assert "counted as failed fold 2" in " ".join(turn.problems)

    working = InMemoryStore(list(store.messages))
    clock[0] += timedelta(hours=2)
    turn = await run_turns(working, summarizer, fold_settings, 1, now=lambda: clock[0], save_failures=failures)
    assert turn.folded > 0
    assert working.state.failed_folds == 0


async def test_verbatim_part_stays_bounded_while_folds_keep_failing():
    store = session(2)
    clock = [datetime(2026, 1, 1, tzinfo=timezone.utc)]
    failing = RecordingSummarizer([RuntimeError("down")] * 1_000)
    fold_settings = settings()

    for _ in range(80):
        clock[0] += timedelta(hours=2)
        turn = await run_turns(store, failing, fold_settings, 1, now=lambda: clock[0])
        assert ids(turn.verbatim)[-9:] == ids(store.messages[-9:])
        assert len(turn.verbatim) <= fold_settings.read_limit

    assert turn.not_summarized == len(store.messages) - len(turn.verbatim)
    assert f"{turn.not_summarized} earlier messages are not summarized yet" in turn.summary_text


async def test_losing_the_save_race_uses_the_winner_without_a_second_model_call():
    store = session(9 + 20)
    winner_summary = "- the winner's summary"

    class RacingSummarizer(RecordingSummarizer):
        async def __call__(self, prompt):
            answer = await super().__call__(prompt)
            if self.calls == 1:
                # Another run saves between our read and our save.
                other = await store.load_state()
                other.summary = winner_summary
                other.cursor = store.messages[19].cursor
                other.folded_count = 20
                await store.save_state(other, expected_version=0)
            return answer

    summarizer = RacingSummarizer()
    turn = await Folder(store, summarizer, settings()).prepare_history()

    assert summarizer.calls == 1
    assert turn.folded == 0
    assert store.state.version == 1
    assert store.state.summary == winner_summary
    assert winner_summary in turn.summary_text
    assert ids(turn.verbatim) == ids(store.messages[20:])


async def test_catch_up_on_a_long_session_makes_a_bounded_number_of_calls_per_turn_and_converges():
    store = session(3_000)
    summarizer = RecordingSummarizer()
    fold_settings = settings(max_folds_per_turn=3)

    turn = await Folder(store, summarizer, fold_settings).prepare_history()
    assert summarizer.calls == 3
    assert turn.folded == 180
    assert ids(turn.verbatim)[-9:] == ids(store.messages[-9:])
    assert len(turn.verbatim) <= fold_settings.read_limit
    assert turn.not_summarized == 3_000 - 180 - len(turn.verbatim)
    assert "PRJ-123" in turn.summary_text

    turns = 1
    while turn.not_summarized:
        calls_before = summarizer.calls
        turn = await Folder(store, summarizer, fold_settings).prepare_history()
        assert summarizer.calls - calls_before <= 3
        turns += 1
    assert turns <= 3_000 // 180 + 2
    assert store.state.folded_count + len(turn.verbatim) == 3_000


async def test_token_budget_folds_early_and_bounds_the_history_part():
    store = session(2)
    fold_settings = settings(history_token_budget=2_000)
    summarizer = RecordingSummarizer()
    long_text = " ".join(["troubleshooting"] * 25)
    for _ in range(30):
        store.add(long_text, long_text)
        turn = await Folder(store, summarizer, fold_settings).prepare_history()
        assert turn.history_tokens <= 2_000
        folded = {m.id for m in store.messages if turn.state.covers(m)}
        assert folded | set(ids(turn.verbatim)) == {m.id for m in store.messages}
    assert summarizer.calls <= 30 // 2
    assert "PRJ-123" in turn.summary_text


async def test_a_message_larger_than_the_budget_is_sent_cut_while_in_the_window_and_folded_after():
    store = session(4)
    store.add("here is the log:\n" + " ".join(f"line{i}" for i in range(5_000)), "thanks, looking")
    summarizer = RecordingSummarizer()
    fold_settings = settings(history_token_budget=1_500)

    turn = await Folder(store, summarizer, fold_settings).prepare_history()

    assert turn.history_tokens <= 1_500
    log_id = store.messages[4].id
    cut = [m for m in turn.verbatim if m.id == log_id]
    assert cut and cut[0].text.startswith("here is the log:") and cut[0].text.endswith(CUT_MARKER)
    # The newest exchange is whole; what the log crowds out is folded, never the log while it is shown.
    assert ids(turn.verbatim)[-1] == store.messages[5].id
    assert not turn.state.covers(store.messages[4])
    assert turn.state.covers(store.messages[3])
    assert turn.not_summarized == 0

    for _ in range(5):
        store.add("next question", "next answer")
        later = await Folder(store, summarizer, fold_settings).prepare_history()
        assert later.history_tokens <= 1_500
    assert log_id not in ids(later.verbatim)
    assert later.state.covers(store.messages[4])
    assert any("here is the log" in str(prompt[1].content) for prompt in summarizer.prompts)


async def test_compact_folds_everything_older_than_the_window_regardless_of_threshold():
    store = session(14)
    summarizer = RecordingSummarizer()

    turn = await Folder(store, summarizer, settings(history_token_budget=7_000)).prepare_history(compact=True)

    assert summarizer.calls == 1
    assert turn.folded == 5
    # The whole window stays: /compact folds only what is older than it.
    assert ids(turn.verbatim) == ids(store.messages[5:])


async def test_compact_exchanges_are_never_sent_or_folded():
    store = session(6)
    store.add(COMPACT_COMMAND, f"{COMPACT_REPLY_PREFIX} folded 4 messages.")
    store.add(*[f"more {i}" for i in range(40)])
    summarizer = RecordingSummarizer()

    turn = await Folder(store, summarizer, settings()).prepare_history()

    texts = [m.text for m in turn.verbatim]
    assert COMPACT_COMMAND not in texts
    assert not any(t.startswith(COMPACT_REPLY_PREFIX) for t in texts)
    assert all(COMPACT_REPLY_PREFIX not in str(p[1].content) for p in summarizer.prompts)
    assert all(f'"{COMPACT_COMMAND}"' not in str(p[1].content) for p in summarizer.prompts)


async def test_messages_with_equal_timestamps_fold_in_id_order_without_loss():
    store = InMemoryStore(make_messages([f"same instant {i}" for i in range(40)], same_timestamp=True))
    summarizer = RecordingSummarizer()

    turn = await Folder(store, summarizer, settings()).prepare_history()

    assert turn.state.cursor.message_id == store.messages[30].id
    assert ids(turn.verbatim) == ids(store.messages[31:])


def test_token_counting_uses_langchains_counter():
    short, long = make_messages(["ok", "word " * 1_000])
    assert message_tokens(short) < 10 < 1_000 < message_tokens(long)


async def test_while_folds_fail_history_stays_within_the_budget_and_keeps_the_window():
    store = session(2)
    clock = [datetime(2026, 1, 1, tzinfo=timezone.utc)]
    failing = RecordingSummarizer([RuntimeError("down")] * 1_000)
    fold_settings = settings(history_token_budget=2_000)
    text = " ".join(["troubleshooting"] * 25)

    for _ in range(30):
        store.add(text, text)
        turn = await Folder(store, failing, fold_settings, now=lambda: clock[0]).prepare_history()
        assert turn.history_tokens <= 2_000
        assert ids(turn.verbatim)[-9:] == ids(store.messages[-9:])

    assert turn.problems
    assert turn.not_summarized == len(store.messages) - len(turn.verbatim)


async def test_the_window_is_sent_whole_after_every_budget_fold():
    store = session(2)
    summarizer = RecordingSummarizer()
    fold_settings = settings(fold_batch=8, history_token_budget=3_000)
    text = " ".join(["troubleshooting"] * 60)

    for _ in range(30):
        store.add(text, text)
        turn = await Folder(store, summarizer, fold_settings).prepare_history()
        assert ids(turn.verbatim)[-9:] == ids(store.messages[-9:])
        assert turn.history_tokens <= 3_000
    assert summarizer.calls >= 2


async def test_turning_the_switch_on_mid_session_keeps_the_window_and_folds_only_what_is_older():
    store = session(90)
    summarizer = RecordingSummarizer()

    turn = await Folder(store, summarizer, settings(fold_batch=8, history_token_budget=7_000)).prepare_history()

    assert ids(turn.verbatim) == ids(store.messages[-9:])
    assert turn.folded == 81
    assert summarizer.calls == 2
    assert turn.not_summarized == 0
    assert "PRJ-123" in turn.summary_text


async def test_after_a_reset_the_catch_up_stops_at_the_window():
    store = session(60)
    summarizer = RecordingSummarizer()
    fold_settings = settings(fold_batch=8, history_token_budget=7_000)
    await Folder(store, summarizer, fold_settings).prepare_history()
    store.state = None
    store.add("a question after the reset", "its answer")

    turn = await Folder(store, summarizer, fold_settings).prepare_history()

    assert ids(turn.verbatim) == ids(store.messages[-9:])
    assert turn.state.cursor == store.messages[-10].cursor
    assert turn.not_summarized == 0


async def test_the_window_goes_whole_even_where_an_earlier_fold_took_part_of_it():
    store = session(30)
    summarizer = RecordingSummarizer()
    # A state left by an earlier version that folded into the window: everything but the last 3 messages.
    store.state = replace(Summary(summary="- earlier", cursor=store.messages[26].cursor, folded_count=27))

    turn = await Folder(store, summarizer, settings()).prepare_history()

    assert summarizer.calls == 0
    assert ids(turn.verbatim) == ids(store.messages[-9:])
    assert turn.not_summarized == 0
