"""The fold logic on its own: an in-memory store and a scripted summarizer, no Langflow services."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from langflow_summarizing_agent.engine.fold import SaveFailures
from langflow_summarizing_agent.engine.fold_cost import ReportedAnswer
from langflow_summarizing_agent.engine.plan import COMPACT_COMMAND, COMPACT_REPLY_PREFIX
from langflow_summarizing_agent.engine.prompt import CORRECTED_NOTE, SUMMARY_PREFIX
from langflow_summarizing_agent.engine.records import Change, Summary, utcnow
from langflow_summarizing_agent.engine.report import problems
from langflow_summarizing_agent.engine.settings import FoldSettings, settings_from
from langflow_summarizing_agent.engine.tokens import CUT_MARKER, ESTIMATE, counter_for
from langflow_summarizing_agent.engine.turn import Turn, compact, fold_if_due
from tests.support.fakes import InMemoryStore, RecordingSummarizer, make_messages
from tests.unit.test_tokens import log_text, prose_text

PINNED = ("project_id", "cluster")


def settings(**overrides: Any) -> FoldSettings:
    values: dict[str, Any] = {"window": 9, "fold_batch": 20, "pinned_keys": PINNED, "history_token_budget": 0}
    values.update(overrides)
    return FoldSettings(**values)


def session(count: int, *, first: str = "I'm working on project PRJ-123 on the EU cluster.") -> InMemoryStore:
    texts = [first] + [f"message {i} about the build" for i in range(1, count)]
    return InMemoryStore(make_messages(texts))


async def run_turns(
    store: InMemoryStore, summarizer, fold_settings: FoldSettings, turns: int, *, now=utcnow, failures=None
):
    history = None
    for _ in range(turns):
        store.add("a new question", "a new answer")
        history = await fold_if_due(store, summarizer, fold_settings, now=now, failures=failures or SaveFailures())
    return history


def folded(turn: Turn) -> int:
    return turn.fold.folded if turn.fold else 0


def ids(messages) -> list[str]:
    return [m.id for m in messages]


async def test_short_session_sends_everything_verbatim_without_a_fold():
    store = session(8)
    summarizer = RecordingSummarizer()

    turn = await fold_if_due(store, summarizer, settings(), failures=SaveFailures())

    assert summarizer.calls == 0
    assert turn.plan.summary_text is None
    assert ids(turn.plan.send) == ids(store.messages_stored)


async def test_older_messages_below_the_batch_stay_verbatim_so_none_is_invisible():
    store = session(9 + 19)
    summarizer = RecordingSummarizer()

    turn = await fold_if_due(store, summarizer, settings(), failures=SaveFailures())

    assert summarizer.calls == 0
    assert ids(turn.plan.send) == ids(store.messages_stored)


async def test_a_full_batch_of_older_messages_folds_once_and_leaves_the_window_verbatim():
    store = session(9 + 20)
    summarizer = RecordingSummarizer()

    turn = await fold_if_due(store, summarizer, settings(), failures=SaveFailures())

    assert summarizer.calls == 1
    assert folded(turn) == 20
    # The stock Agent's window at n_messages=10: the newest 9 messages before the current input.
    assert ids(turn.plan.send) == ids(store.messages_stored[-9:])
    assert store.summary.cursor == store.messages_stored[19].cursor
    assert store.summary.folded_count == 20
    assert store.summary.pinned == {"project_id": "PRJ-123", "cluster": "EU cluster"}
    assert turn.plan.summary_text.startswith(SUMMARY_PREFIX)
    assert "- project_id: PRJ-123" in turn.plan.summary_text


async def test_every_stored_message_is_folded_or_verbatim_on_every_turn():
    store = session(2)
    summarizer = RecordingSummarizer()
    for _ in range(60):
        store.add("question", "answer")
        turn = await fold_if_due(store, summarizer, settings(), failures=SaveFailures())
        folded = {m.id for m in store.messages_stored if turn.summary.covers(m)}
        shown = set(ids(turn.plan.send))
        assert folded | shown == {m.id for m in store.messages_stored}
        assert turn.plan.not_summarized == 0
        assert len(turn.plan.send) < 10 + 20


async def test_the_first_fact_survives_a_long_session():
    store = session(2)
    turn = await run_turns(store, RecordingSummarizer(), settings(), 60)

    assert "PRJ-123" in turn.plan.summary_text
    assert "EU cluster" in turn.plan.summary_text
    assert store.messages_stored[0].id not in ids(turn.plan.send)


@pytest.mark.parametrize(
    "answer",
    [RuntimeError("provider down"), asyncio.TimeoutError(), "", "{oops", '{"pinned": "x", "summary": "s"}'],
)
async def test_a_failed_fold_keeps_the_previous_state_and_still_returns_history(answer):
    store = session(9 + 20)
    await fold_if_due(store, RecordingSummarizer(), settings(), failures=SaveFailures())
    before = store.summary
    store.add(*[f"later {i}" for i in range(20)])

    turn = await fold_if_due(store, RecordingSummarizer([answer]), settings(), failures=SaveFailures())

    assert problems(turn) and "fold failed" in problems(turn)[0]
    assert store.summary.cursor == before.cursor
    assert store.summary.text == before.text
    assert store.summary.folded_count == before.folded_count
    assert ids(turn.plan.send) == ids(store.messages_stored[20:])
    assert "PRJ-123" in turn.plan.summary_text


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
    assert store.summary.failed_folds == 2

    clock[0] += timedelta(hours=2)
    turn = await run_turns(store, RecordingSummarizer(), fold_settings, 1, now=lambda: clock[0])
    assert folded(turn) > 0
    assert store.summary.failed_folds == 0


class SaveFailingStore(InMemoryStore):
    """A store that reads but cannot write, as a read-only replica or a locked database file."""

    async def save(self, summary: Summary, change: Change | None = None) -> Summary | None:
        raise OSError("database is locked")


class LostSaveUnreadableStore(InMemoryStore):
    """A store where another run saved first, and the summary it saved cannot be read back."""

    async def save(self, summary: Summary, change: Change | None = None) -> Summary | None:
        self.lost = True
        return None

    async def load(self) -> Summary:
        if getattr(self, "lost", False):
            raise OSError("connection reset")
        return await super().load()


class OneSaveFailsStore(InMemoryStore):
    """A store whose next save fails once, as a write that meets a locked SQLite file or a dropped connection."""

    fail_next_save = False

    async def save(self, summary: Summary, change: Change | None = None) -> Summary | None:
        if self.fail_next_save:
            self.fail_next_save = False
            raise OSError("database is locked")
        return await super().save(summary, change)


async def test_a_failed_save_is_not_retried_at_once_by_another_worker():
    clock = [datetime(2026, 1, 1, tzinfo=timezone.utc)]
    store = OneSaveFailsStore(make_messages([f"message {i}" for i in range(10 + 20)]))
    summarizer = RecordingSummarizer()
    store.fail_next_save = True

    await run_turns(store, summarizer, settings(), 1, now=lambda: clock[0], failures=SaveFailures())
    assert summarizer.calls == 1
    assert store.summary is not None and store.summary.failed_folds == 1, "the back-off is stored with the summary"

    other_worker = SaveFailures()
    for _ in range(3):
        turn = await run_turns(store, summarizer, settings(), 1, now=lambda: clock[0], failures=other_worker)
    assert summarizer.calls == 1, "another worker retried the failed save at once"
    assert any("next try after" in p for p in problems(turn))

    clock[0] += timedelta(minutes=1)
    turn = await run_turns(store, summarizer, settings(), 1, now=lambda: clock[0], failures=other_worker)
    assert folded(turn) > 0
    assert store.summary.failed_folds == 0


async def test_a_summary_that_cannot_be_read_after_a_lost_save_leaves_the_turn_running():
    store = LostSaveUnreadableStore(make_messages([f"message {i}" for i in range(10 + 20)]))

    turn = await run_turns(store, RecordingSummarizer(), settings(), 1)

    assert folded(turn) == 0
    assert any("another run saved the summary first" in p and "OSError: connection reset" in p for p in problems(turn))
    assert len(turn.plan.send) + turn.plan.not_summarized == len(store.messages_stored)


async def test_a_failed_save_counts_as_a_failed_fold_and_backs_off():
    clock = [datetime(2026, 1, 1, tzinfo=timezone.utc)]
    store = SaveFailingStore(make_messages([f"message {i}" for i in range(10 + 20)]))
    summarizer = RecordingSummarizer()
    failures = SaveFailures()
    fold_settings = settings()

    turn = await run_turns(store, summarizer, fold_settings, 1, now=lambda: clock[0], failures=failures)
    assert summarizer.calls == 1
    assert folded(turn) == 0
    assert any("could not be saved (OSError: database is locked)" in p for p in problems(turn))
    assert "counted as failed fold 1" in " ".join(problems(turn))
    # Nothing was folded, so every older message still reaches the model, verbatim or counted as not summarized.
    assert len(turn.plan.send) + turn.plan.not_summarized == len(store.messages_stored)

    for _ in range(5):
        turn = await run_turns(store, summarizer, fold_settings, 1, now=lambda: clock[0], failures=failures)
    assert summarizer.calls == 1
    assert any("failed once in a row; next try after" in p for p in problems(turn))

    clock[0] += timedelta(minutes=1)
    turn = await run_turns(store, summarizer, fold_settings, 1, now=lambda: clock[0], failures=failures)
    assert summarizer.calls == 2
    assert "counted as failed fold 2" in " ".join(problems(turn))

    working = InMemoryStore(list(store.messages_stored))
    clock[0] += timedelta(hours=2)
    turn = await run_turns(working, summarizer, fold_settings, 1, now=lambda: clock[0], failures=failures)
    assert folded(turn) > 0
    assert working.summary.failed_folds == 0


async def test_verbatim_part_stays_bounded_while_folds_keep_failing():
    store = session(2)
    clock = [datetime(2026, 1, 1, tzinfo=timezone.utc)]
    failing = RecordingSummarizer([RuntimeError("down")] * 1_000)
    fold_settings = settings()

    for _ in range(80):
        clock[0] += timedelta(hours=2)
        turn = await run_turns(store, failing, fold_settings, 1, now=lambda: clock[0])
        assert ids(turn.plan.send)[-9:] == ids(store.messages_stored[-9:])
        assert len(turn.plan.send) <= fold_settings.read_limit

    assert turn.plan.not_summarized == len(store.messages_stored) - len(turn.plan.send)
    assert f"{turn.plan.not_summarized} earlier messages are not summarized yet" in turn.plan.summary_text


async def test_losing_the_save_race_uses_the_winner_without_a_second_model_call():
    store = session(9 + 20)
    winner_summary = "- the winner's summary"

    class RacingSummarizer(RecordingSummarizer):
        async def __call__(self, prompt):
            answer = await super().__call__(prompt)
            if self.calls == 1:
                # Another run saves between our read and our save.
                other = await store.load()
                other = replace(other, text=winner_summary, cursor=store.messages_stored[19].cursor, folded_count=20)
                await store.save(replace(other, version=0))
            return answer

    summarizer = RacingSummarizer()
    turn = await fold_if_due(store, summarizer, settings(), failures=SaveFailures())

    assert summarizer.calls == 1
    assert folded(turn) == 0
    assert store.summary.version == 1
    assert store.summary.text == winner_summary
    assert winner_summary in turn.plan.summary_text
    assert ids(turn.plan.send) == ids(store.messages_stored[20:])


async def test_catch_up_on_a_long_session_makes_a_bounded_number_of_calls_per_turn_and_converges():
    store = session(3_000)
    summarizer = RecordingSummarizer()
    fold_settings = settings(max_folds_per_turn=3)

    turn = await fold_if_due(store, summarizer, fold_settings, failures=SaveFailures())
    assert summarizer.calls == 3
    assert folded(turn) == 180
    assert ids(turn.plan.send)[-9:] == ids(store.messages_stored[-9:])
    assert len(turn.plan.send) <= fold_settings.read_limit
    assert turn.plan.not_summarized == 3_000 - 180 - len(turn.plan.send)
    assert "PRJ-123" in turn.plan.summary_text

    turns = 1
    while turn.plan.not_summarized:
        calls_before = summarizer.calls
        turn = await fold_if_due(store, summarizer, fold_settings, failures=SaveFailures())
        assert summarizer.calls - calls_before <= 3
        turns += 1
    assert turns <= 3_000 // 180 + 2
    assert store.summary.folded_count + len(turn.plan.send) == 3_000


async def test_token_budget_folds_early_and_bounds_the_history_part():
    store = session(2)
    fold_settings = settings(history_token_budget=2_000)
    summarizer = RecordingSummarizer()
    long_text = " ".join(["troubleshooting"] * 25)
    for _ in range(30):
        store.add(long_text, long_text)
        turn = await fold_if_due(store, summarizer, fold_settings, failures=SaveFailures())
        assert turn.plan.history_tokens <= 2_000
        folded = {m.id for m in store.messages_stored if turn.summary.covers(m)}
        assert folded | set(ids(turn.plan.send)) == {m.id for m in store.messages_stored}
    assert summarizer.calls <= 30 // 2
    assert "PRJ-123" in turn.plan.summary_text


async def test_a_message_larger_than_the_budget_is_sent_at_one_cut_until_a_fold_takes_it():
    store = session(4)
    store.add("here is the log:\n" + " ".join(f"line{i}" for i in range(5_000)), "thanks, looking")
    summarizer = RecordingSummarizer()
    fold_settings = settings(history_token_budget=1_500, fold_batch=6)

    turn = await fold_if_due(store, summarizer, fold_settings, failures=SaveFailures())

    assert turn.plan.history_tokens <= 1_500
    log_id = store.messages_stored[4].id
    cut = [m for m in turn.plan.send if m.id == log_id]
    assert cut and cut[0].text.startswith("here is the log:") and cut[0].text.endswith(CUT_MARKER)
    # Cut to half of what the budget leaves after the summary message, the log leaves room for the rest of the
    # window: nothing is crowded out, nothing is folded.
    assert ids(turn.plan.send) == ids(store.messages_stored)
    assert turn.fold is None
    assert turn.plan.not_summarized == 0

    sent = []
    for _ in range(5):  # the log leaves the window at the 4th exchange; Fold Batch folds it at the 5th
        store.add("next question", "next answer")
        later = await fold_if_due(store, summarizer, fold_settings, failures=SaveFailures())
        assert later.plan.history_tokens <= 1_500 and later.plan.not_summarized == 0
        sent.append([m.text for m in later.plan.send if m.id == log_id])
    assert sent == [[cut[0].text]] * 4 + [[]], "past the window too, the log goes at its one cut until a fold takes it"
    assert later.summary.covers(store.messages_stored[4])
    assert any("here is the log" in str(prompt[1].content) for prompt in summarizer.prompts)


async def test_with_a_prompt_cache_a_big_message_in_the_window_does_not_fold_by_budget_again_and_again():
    """The issue's session at the defaults: ~250-token messages, a ~2,500-token log pasted at exchange 10. Past 80%
    of the budget a fold that frees little (the log stays in the window) waits until a message would be left out,
    so the log's stay in the window costs one budget fold, and the model never sees less."""
    settings = settings_from({"n_messages": 10}, counter=counter_for("gpt-4o-mini"), prompt_cache=True)
    store = InMemoryStore()
    summarizer = RecordingSummarizer()
    folds = {}
    for exchange in range(24):
        store.add(log_text(exchange, 2_500) if exchange == 10 else prose_text(2 * exchange, 250))
        store.add(prose_text(2 * exchange + 1, 250))
        turn = await fold_if_due(store, summarizer, settings, failures=SaveFailures())
        assert turn.plan.not_summarized == 0 and turn.plan.window_sent == turn.plan.window
        if turn.fold is not None:
            folds[exchange] = turn.fold.folded

    assert [exchange for exchange in folds if 10 < exchange < 20] == [14], folds
    assert folds[14] >= settings.effective_fold_batch // 2, "the fold takes the log and what waited beside it"


async def test_compact_folds_everything_older_than_the_window_regardless_of_threshold():
    store = session(14)
    summarizer = RecordingSummarizer()

    turn = await compact(store, summarizer, settings(history_token_budget=7_000), failures=SaveFailures())

    assert summarizer.calls == 1
    assert folded(turn) == 5
    # The whole window stays: /compact folds only what is older than it.
    assert ids(turn.plan.send) == ids(store.messages_stored[5:])


async def test_compact_exchanges_are_never_sent_or_folded():
    store = session(6)
    store.add(COMPACT_COMMAND, f"{COMPACT_REPLY_PREFIX} folded 4 messages.")
    store.add(*[f"more {i}" for i in range(40)])
    summarizer = RecordingSummarizer()

    turn = await fold_if_due(store, summarizer, settings(), failures=SaveFailures())

    texts = [m.text for m in turn.plan.send]
    assert COMPACT_COMMAND not in texts
    assert not any(t.startswith(COMPACT_REPLY_PREFIX) for t in texts)
    assert all(COMPACT_REPLY_PREFIX not in str(p[1].content) for p in summarizer.prompts)
    assert all(f'"{COMPACT_COMMAND}"' not in str(p[1].content) for p in summarizer.prompts)


async def test_messages_with_equal_timestamps_fold_in_id_order_without_loss():
    store = InMemoryStore(make_messages([f"same instant {i}" for i in range(40)], same_timestamp=True))
    summarizer = RecordingSummarizer()

    turn = await fold_if_due(store, summarizer, settings(), failures=SaveFailures())

    assert turn.summary.cursor.message_id == store.messages_stored[30].id
    assert ids(turn.plan.send) == ids(store.messages_stored[31:])


def test_token_counting_uses_langchains_counter():
    short, long = make_messages(["ok", "word " * 1_000])
    assert ESTIMATE.message(short) < 10 < 1_000 < ESTIMATE.message(long)


async def test_while_folds_fail_history_stays_within_the_budget_and_keeps_the_window():
    store = session(2)
    clock = [datetime(2026, 1, 1, tzinfo=timezone.utc)]
    failing = RecordingSummarizer([RuntimeError("down")] * 1_000)
    fold_settings = settings(history_token_budget=2_000)
    text = " ".join(["troubleshooting"] * 25)

    for _ in range(30):
        store.add(text, text)
        turn = await fold_if_due(store, failing, fold_settings, now=lambda: clock[0], failures=SaveFailures())
        assert turn.plan.history_tokens <= 2_000
        assert ids(turn.plan.send)[-9:] == ids(store.messages_stored[-9:])

    assert problems(turn)
    assert turn.plan.not_summarized == len(store.messages_stored) - len(turn.plan.send)


async def test_the_window_is_sent_whole_after_every_budget_fold():
    store = session(2)
    summarizer = RecordingSummarizer()
    fold_settings = settings(fold_batch=8, history_token_budget=3_000)
    text = " ".join(["troubleshooting"] * 60)

    for _ in range(30):
        store.add(text, text)
        turn = await fold_if_due(store, summarizer, fold_settings, failures=SaveFailures())
        assert ids(turn.plan.send)[-9:] == ids(store.messages_stored[-9:])
        assert turn.plan.history_tokens <= 3_000
    assert summarizer.calls >= 2


async def test_turning_the_switch_on_mid_session_keeps_the_window_and_folds_only_what_is_older():
    store = session(90)
    summarizer = RecordingSummarizer()

    turn = await fold_if_due(
        store, summarizer, settings(fold_batch=8, history_token_budget=7_000), failures=SaveFailures()
    )

    assert ids(turn.plan.send) == ids(store.messages_stored[-9:])
    assert folded(turn) == 81
    assert summarizer.calls == 2
    assert turn.plan.not_summarized == 0
    assert "PRJ-123" in turn.plan.summary_text


async def test_after_a_reset_the_catch_up_stops_at_the_window():
    store = session(60)
    summarizer = RecordingSummarizer()
    fold_settings = settings(fold_batch=8, history_token_budget=7_000)
    await fold_if_due(store, summarizer, fold_settings, failures=SaveFailures())
    store.summary = None
    store.add("a question after the reset", "its answer")

    turn = await fold_if_due(store, summarizer, fold_settings, failures=SaveFailures())

    assert ids(turn.plan.send) == ids(store.messages_stored[-9:])
    assert turn.summary.cursor == store.messages_stored[-10].cursor
    assert turn.plan.not_summarized == 0


async def test_the_window_goes_whole_even_where_an_earlier_fold_took_part_of_it():
    store = session(30)
    summarizer = RecordingSummarizer()
    # A state left by an earlier version that folded into the window: everything but the last 3 messages.
    store.summary = replace(Summary(text="- earlier", cursor=store.messages_stored[26].cursor, folded_count=27))

    turn = await fold_if_due(store, summarizer, settings(), failures=SaveFailures())

    assert summarizer.calls == 0
    assert ids(turn.plan.send) == ids(store.messages_stored[-9:])
    assert turn.plan.not_summarized == 0


async def test_a_fold_that_loses_its_save_to_an_edit_folds_again_on_top_of_the_edit():
    store = session(9 + 20)
    edited_text = "- EDITED: the customer is on eu-3"

    class EditingSummarizer(RecordingSummarizer):
        async def __call__(self, prompt):
            answer = await super().__call__(prompt)
            if self.calls == 1:
                # A user edits the memory (seeding it: none is stored yet) while the fold runs.
                seed = Summary(text=edited_text, pinned={"cluster": "eu-3"}, edited_at=utcnow(), edited_by="u1")
                assert await store.save(seed, Change(kind="seed", by="u1")) is not None
            return answer

    summarizer = EditingSummarizer()
    turn = await fold_if_due(store, summarizer, settings(), failures=SaveFailures())

    assert summarizer.calls == 2, "the batch is folded once more, on top of the edit"
    assert edited_text in summarizer.prompts[1][-1].content
    assert folded(turn) == 20
    assert (store.summary.version, store.summary.folded_count) == (2, 20)
    assert store.summary.pinned["cluster"] == "eu-3"
    assert store.summary.edited_by == "u1", "the fold keeps who last edited"
    [(_, seed), (_, fold)] = store.database.versions[store.summary.row_id]
    assert (seed.kind, fold.kind) == ("seed", "fold")
    assert fold.calls == 2, "the version's cost counts the folds whose save lost too"


async def test_a_fold_that_loses_to_another_fold_is_not_folded_again():
    store = session(9 + 20)

    class RacingSummarizer(RecordingSummarizer):
        async def __call__(self, prompt):
            answer = await super().__call__(prompt)
            if self.calls == 1:
                other = Summary(text="- another run", cursor=store.messages_stored[19].cursor, folded_count=20)
                assert await store.save(other, Change(kind="fold")) is not None
            return answer

    summarizer = RacingSummarizer()
    await fold_if_due(store, summarizer, settings(), failures=SaveFailures())

    assert summarizer.calls == 1


async def test_a_pinned_fact_a_user_corrected_stands_against_messages_said_before_the_correction():
    store = session(9 + 20)  # the first message names "the EU cluster"
    corrected = Summary(pinned={"cluster": "eu-3"}, edited_at=utcnow(), edited_by="u1")
    assert await store.save(corrected, Change(kind="seed", by="u1")) is not None
    summarizer = RecordingSummarizer()

    await fold_if_due(store, summarizer, settings(), failures=SaveFailures())

    assert summarizer.calls == 1
    assert store.summary.pinned == {"cluster": "eu-3"}, "what was said before the correction changes no fact"
    assert summarizer.prompts[0][-1].content.endswith(CORRECTED_NOTE)


async def test_messages_stored_after_a_correction_can_change_the_fact_again():
    store = session(9 + 20, first="Hello.")
    store.messages_stored[12] = replace(store.messages_stored[12], text="We moved to the EU cluster.")
    edited_at = store.messages_stored[10].timestamp
    corrected = Summary(pinned={"cluster": "eu-3"}, edited_at=edited_at, edited_by="u1")
    assert await store.save(corrected, Change(kind="seed", by="u1")) is not None
    summarizer = RecordingSummarizer()

    await fold_if_due(store, summarizer, settings(), failures=SaveFailures())

    assert store.summary.pinned["cluster"] == "EU cluster"
    assert CORRECTED_NOTE not in summarizer.prompts[-1][-1].content


async def test_a_folds_version_keeps_the_cost_its_provider_reported_with_the_cached_share():
    store = session(9 + 20)

    class ReportingSummarizer(RecordingSummarizer):
        async def __call__(self, prompt):
            answer = await super().__call__(prompt)
            return ReportedAnswer(answer, input_tokens=1_234, output_tokens=56, cached_tokens=1_000)

    await fold_if_due(store, ReportingSummarizer(), settings(), failures=SaveFailures())

    [(_, change)] = store.database.versions[store.summary.row_id]
    assert (change.kind, change.calls, change.messages) == ("fold", 1, 20)
    assert (change.input_tokens, change.output_tokens, change.cached_tokens) == (1_234, 56, 1_000)
    assert change.tokens == store.summary.folded_tokens


async def test_a_folds_version_counts_its_cost_when_the_provider_reports_none():
    store = session(9 + 20)
    summarizer = RecordingSummarizer()
    fold_settings = settings()

    await fold_if_due(store, summarizer, fold_settings, failures=SaveFailures())

    [(_, change)] = store.database.versions[store.summary.row_id]
    assert change.input_tokens == fold_settings.counter.prompt(summarizer.prompts[0]) > 0
    assert change.output_tokens > 0 and change.cached_tokens is None


async def test_a_batch_never_mixes_messages_stored_before_and_after_an_edit():
    store = session(9 + 20)  # the first message names "the EU cluster"
    edited_at = store.messages_stored[10].timestamp
    corrected = Summary(pinned={"cluster": "eu-3"}, edited_at=edited_at, edited_by="u1")
    assert await store.save(corrected, Change(kind="seed", by="u1")) is not None
    summarizer = RecordingSummarizer()

    await fold_if_due(store, summarizer, settings(), failures=SaveFailures())

    assert summarizer.calls == 2
    assert summarizer.prompts[0][-1].content.endswith(CORRECTED_NOTE)
    assert CORRECTED_NOTE not in summarizer.prompts[1][-1].content
    assert store.summary.pinned["cluster"] == "eu-3", "the first message was said before the correction"
    assert store.summary.folded_count == 20
