"""The verbatim policy as rules over generated sessions: what each turn sends, what it folds, what it counts.

A Hypothesis state machine drives turns (`engine.turn.fold_if_due`) over an in-memory store with random settings,
messages of 1 to 20,000 tokens, summarizer failures and recoveries, resets, `/compact`, the switch turned on
mid-session and another run saving between a turn's read and its write. After every turn it checks that:
- the window (the newest `n_messages - 1` messages, `/compact` exchanges left out) goes whole and word for word
  whenever it fits the History Token Budget after the summary message;
- the newest exchange always goes, cut with `CUT_MARKER` only when it must be;
- a message cut to fit is cut at the same point on every turn that sends it cut (while the summary message keeps
  within its reserve);
- the history tokens are within the budget and reported honestly;
- every message older than what is sent is folded or counted, exactly, in the summary message's note, and counted
  only while folds fail or wait, and only when it does not fit beside what is sent (a Summary Model that cannot be
  built fails every fold);
- folds run from the cursor forwards, take no message twice, no window message their plan shows and no `/compact`
  exchange, run only when due and make at most Max Folds per Turn summarizer calls; with a provider that caches
  prompts, an early budget fold frees enough of the budget or brings a message left out to the model.

It also checks, over generated sessions, that after the fold that planned with the reply the next turn folds nothing
inline. Every message starts with a unique tag (`#12 `), so the fold prompt's cut texts still say which message they
are. The generated sessions and their helpers are in `plan_sessions.py`; the sessions the machine found, written out
small, in `test_plan_examples.py`.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any
from unittest.mock import patch

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule
from langchain_core.messages import BaseMessage

from langflow_summarizing_agent.engine import fold as engine_fold
from langflow_summarizing_agent.engine import turn as engine_turn
from langflow_summarizing_agent.engine.fold import SaveFailures
from langflow_summarizing_agent.engine.plan import COMPACT_COMMAND, COMPACT_REPLY_PREFIX, Plan, TurnRead, budget_tokens
from langflow_summarizing_agent.engine.prompt import SUMMARY_PREFIX, render_summary_message
from langflow_summarizing_agent.engine.records import Role, StoredMessage, Summary
from langflow_summarizing_agent.engine.report import problems
from langflow_summarizing_agent.engine.settings import (
    BUDGET_TARGET_SHARE,
    DEFAULT_BUDGET_TRIGGER_SHARE,
    MAX_MESSAGES_PER_FOLD,
    FoldSettings,
)
from langflow_summarizing_agent.engine.turn import Turn, fold_if_due, read_and_plan
from langflow_summarizing_agent.engine.turn import compact as compact_turn
from tests.support.fakes import T0, InMemoryStore, RecordingSummarizer, make_messages
from tests.unit.plan_sessions import (
    COMPACT,
    PLAN_COMPACTION,
    PLAN_TURN,
    ROLES,
    failures,
    fold_batch_ids,
    fold_calls,
    fold_settings,
    folded,
    history_events,
    is_compaction_exchange,
    is_cut_of,
    long_answers,
    message_id,
    message_sizes,
    message_tokens,
    note,
    tagged_text,
    text_tokens,
)


class SessionSummarizer(RecordingSummarizer):
    """`RecordingSummarizer` that, when armed, lets another run save the session's state first, or delete it."""

    def __init__(self, store: InMemoryStore) -> None:
        super().__init__()
        self.store = store
        self.race: str | None = None
        self.raced: str | None = None

    async def __call__(self, prompt: list[BaseMessage]) -> str:
        if self.race:
            self.raced, self.race = self.race, None
            if self.raced == "deleted":
                self.store.summary = None
            else:
                await self._save_a_winner(prompt)
        return await super().__call__(prompt)

    async def _save_a_winner(self, prompt: list[BaseMessage]) -> None:
        """Another run folded up to the first message of this batch and saved first."""
        other = await self.store.load()
        first = next(m for m in self.store.messages_stored if m.id == fold_batch_ids(prompt)[0])
        other = replace(
            other,
            folded_count=other.folded_count
            + sum(1 for m in self.store.messages_stored if not other.covers(m) and m.cursor <= first.cursor),
            text="- the winner's summary",
            cursor=first.cursor,
            failed_folds=0,
            retry_after=None,
        )
        await self.store.save(other)


class VerbatimPolicy(RuleBasedStateMachine):
    """One chat session: messages arrive, turns prepare history, the summarizer fails and recovers."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.store = InMemoryStore()
        self.summarizer = SessionSummarizer(self.store)
        self.clock = T0
        self.folded: set[str] = set()
        """Ids folded into the current state: each reaches the summarizer once, then the cursor covers it."""
        self.cuts: dict[str, str] = {}
        """The text each message cut to fit was sent with, by id."""
        self.plans: list[Plan] = []
        """The plans of the current turn: the first decides the fold, the last what is sent."""
        # Patched where the turn and the fold look it up.
        self.spies = [
            patch.object(engine_turn, "plan_turn", side_effect=self.record_plan),
            patch.object(engine_turn, "plan_compaction", side_effect=self.record_compaction),
            patch.object(engine_fold, "plan_turn", side_effect=self.record_plan),
        ]
        for spy in self.spies:
            spy.start()

    def record_plan(self, *args: Any, **kwargs: Any) -> Plan:
        plan = PLAN_TURN(*args, **kwargs)
        self.plans.append(plan)
        return plan

    def record_compaction(self, *args: Any, **kwargs: Any) -> Plan:
        plan = PLAN_COMPACTION(*args, **kwargs)
        self.plans.append(plan)
        return plan

    def teardown(self) -> None:
        for spy in self.spies:
            spy.stop()
        self.loop.close()

    @initialize(chosen=fold_settings(), history=history_events, quiet_history=st.integers(0, 300))
    def switch_on_mid_session(self, chosen: FoldSettings, history: list[int | str], quiet_history: int) -> None:
        self.settings = chosen
        for index in range(quiet_history):
            self.add(1 + index * 37 % 120, ROLES[index % 2])
        for index, event in enumerate(history):
            if event == COMPACT:
                self.store_message("user", COMPACT_COMMAND)
                self.store_compaction_reply()
            else:
                self.add(int(event), ROLES[index % 2])

    def add(self, tokens: int, role: Role) -> None:
        self.store_message(role, tagged_text(len(self.store.messages_stored), tokens))

    def store_message(self, role: Role, text: str) -> None:
        index = len(self.store.messages_stored)
        self.store.messages_stored.append(StoredMessage(message_id(index), T0 + timedelta(seconds=index), role, text))

    def store_compaction_reply(self) -> None:
        self.store_message(
            "assistant", f"{COMPACT_REPLY_PREFIX} #{len(self.store.messages_stored)} folded older messages."
        )

    @rule(question=message_sizes, answer=message_sizes)
    def exchange(self, question: int, answer: int) -> None:
        self.add(question, "user")
        self.add(answer, "assistant")
        self.turn()

    @rule(sizes=st.lists(message_sizes, min_size=1, max_size=12))
    def messages_while_switched_off(self, sizes: list[int]) -> None:
        for index, tokens in enumerate(sizes):
            self.add(tokens, ROLES[index % 2])

    @rule()
    def turn_without_new_messages(self) -> None:
        self.turn()

    @rule()
    def compact(self) -> None:
        self.store_message("user", COMPACT_COMMAND)
        self.turn(compact=True)
        self.store_compaction_reply()

    @rule(answers=st.lists(failures, min_size=1, max_size=4))
    def summarizer_fails(self, answers: list[str | BaseException]) -> None:
        self.summarizer.answers.extend(answers)

    @rule()
    def summary_model_cannot_be_built(self) -> None:
        """Every fold fails from now on."""
        self.summarizer.answers.extend([RuntimeError("the Summary Model could not be built")] * 200)

    @rule(answer=long_answers())
    def summarizer_writes_a_long_summary(self, answer: str) -> None:
        self.summarizer.answers.append(answer)

    @rule(step=st.sampled_from([timedelta(seconds=10), timedelta(minutes=1), timedelta(hours=2)]))
    def time_passes(self, step: timedelta) -> None:
        self.clock += step

    @rule()
    def reset(self) -> None:
        self.store.summary = None
        self.folded.clear()

    @precondition(lambda self: not self.summarizer.race)
    @rule(race=st.sampled_from(["winner", "deleted"]))
    def another_run_saves_during_the_next_fold(self, race: str) -> None:
        self.summarizer.race = race

    def turn(self, *, compact: bool = False) -> None:
        before = self.store.summary or Summary()
        before = replace(before, pinned=dict(before.pinned))
        calls_before = self.summarizer.calls
        self.summarizer.raced = None
        self.plans.clear()
        now = self.clock
        entry = compact_turn if compact else fold_if_due
        turn = self.loop.run_until_complete(
            entry(self.store, self.summarizer, self.settings, now=lambda: now, failures=SaveFailures())
        )

        batches = [fold_batch_ids(prompt) for prompt in self.summarizer.prompts[calls_before:]]
        self.check_what_is_sent(turn)
        self.check_what_is_counted(turn, batches)
        self.check_what_is_folded(turn, before, batches, compact=compact, now=now)
        self.check_the_cursor(turn, batches)

    def visible(self) -> list[StoredMessage]:
        return [m for m in self.store.messages_stored if not is_compaction_exchange(m)]

    def window(self) -> list[StoredMessage]:
        """The stock Agent's window: the newest `n_messages - 1` messages before the input, `/compact` left out."""
        return self.visible()[-self.settings.window :] if self.settings.window else []

    def check_what_is_sent(self, turn: Turn) -> None:
        stored = {m.id: m for m in self.store.messages_stored}
        sent = turn.plan.send
        sent_ids = [m.id for m in sent]
        window = self.window()
        window_ids = {m.id for m in window}
        budget = self.settings.history_token_budget
        summary_tokens = text_tokens(turn.plan.summary_text) if turn.plan.summary_text else 0

        for message in sent:
            whole = stored[message.id]
            assert not is_compaction_exchange(whole), f"a /compact exchange is sent: {whole.text[:40]!r}"
            assert message.role == whole.role
            assert message.text == whole.text or is_cut_of(message, whole), f"{message.id} is altered"
        # The newest of what the model may see, without a gap: the window (folded or not), then unfolded messages.
        candidates = [m.id for m in self.visible() if m.id in window_ids or not turn.summary.covers(m)]
        assert sent_ids == candidates[len(candidates) - len(sent_ids) :], f"not the newest messages: {sent_ids[:5]}"

        assert turn.plan.history_tokens == summary_tokens + sum(message_tokens(m) for m in sent), "dishonest tokens"
        if budget:
            assert turn.plan.history_tokens <= budget, (
                f"{turn.plan.history_tokens} history tokens over a budget of {budget}"
            )

        window_tokens = sum(message_tokens(m) for m in window)
        if window and (not budget or summary_tokens + window_tokens <= budget):
            assert [(m.id, m.text) for m in sent[-len(window) :]] == [(m.id, m.text) for m in window], (
                f"the window fits ({summary_tokens} + {window_tokens} <= {budget} tokens) but is not sent whole"
            )

        newest = [m.id for m in window[-2:]]
        assert sent_ids[len(sent_ids) - len(newest) :] == newest, f"the newest exchange {newest} is not sent"
        # Besides the newest exchange a message is cut only when whole it does not fit; any is cut at the same point
        # on every turn.
        within_reserve = summary_tokens <= self.settings.summary_reserve
        for message in sent:
            whole = stored[message.id]
            if message.text == whole.text:
                continue
            grown = turn.plan.history_tokens - message_tokens(message) + message_tokens(whole)
            assert grown > budget or message.id in newest, f"{message.id} is cut though whole it fits ({grown} tokens)"
            if within_reserve:
                assert message.text == self.cuts.setdefault(message.id, message.text), f"{message.id} is cut anew"

    def check_what_is_counted(self, turn: Turn, batches: list[list[str]]) -> None:
        if self.summarizer.raced == "deleted":
            # The state was deleted during the fold: this turn answers from what it read before; the next one counts.
            return
        sent_ids = {m.id for m in turn.plan.send}
        hidden = [m.id for m in self.visible() if not turn.summary.covers(m) and m.id not in sent_ids]

        assert turn.plan.not_summarized == len(hidden), (
            f"{turn.plan.not_summarized} counted, {len(hidden)} not folded nor sent"
        )
        if hidden:
            assert turn.plan.summary_text and note(len(hidden)) in turn.plan.summary_text, (
                "the note does not give the count"
            )
            failed = any("fold failed" in problem for problem in problems(turn))
            catching_up = len(batches) == self.settings.max_folds_per_turn
            assert failed or catching_up or self.summarizer.raced, (
                f"{len(hidden)} messages are neither sent nor folded though no fold failed or waits: {hidden[:5]}"
            )
            budget = self.settings.history_token_budget
            stored = {m.id: m for m in self.store.messages_stored}
            as_stored = {m.id for m in turn.plan.send if m.text == stored[m.id].text}
            # A message larger than the whole budget always goes cut: its cut is the window's as the policy sends it.
            window_whole = turn.plan.window_sent == turn.plan.window and all(
                m.id in as_stored or message_tokens(m) > budget for m in self.window()
            )
            if budget and window_whole and not self.summarizer.raced:
                # The newest message left out does not fit beside what is sent (give or take the note's count).
                grown = turn.plan.history_tokens + budget_tokens(stored[hidden[-1]], self.settings)
                assert grown + text_tokens(note(len(hidden))) > budget, (
                    f"{len(hidden)} messages left out though the newest of them fits ({grown} of {budget} tokens)"
                )
        else:
            assert not turn.plan.summary_text or "not summarized yet" not in turn.plan.summary_text
        if turn.plan.summary_text is None:
            assert render_summary_message(turn.summary, self.settings.pinned_keys, 0) is None
        else:
            assert turn.plan.summary_text.startswith(SUMMARY_PREFIX)

    def check_what_is_folded(
        self, turn: Turn, before: Summary, batches: list[list[str]], *, compact: bool, now: datetime
    ) -> None:
        chosen = self.settings
        visible = self.visible()
        window = self.window()
        window_ids = {m.id for m in window}
        taken = [message for batch in batches for message in batch]

        assert len(batches) <= chosen.max_folds_per_turn, f"{len(batches)} summarizer calls in one turn"
        assert fold_calls(turn) == len(batches)
        assert all(0 < len(batch) <= chosen.max_messages_per_fold for batch in batches)

        assert all(m.startswith("m") for m in taken), f"a /compact exchange is folded: {taken}"
        unfolded = [m.id for m in visible if not before.covers(m)]
        assert taken == unfolded[: len(taken)], f"the fold does not run from the cursor forwards: {taken[:5]}"
        assert not set(taken) & self.folded, f"messages folded twice: {sorted(set(taken) & self.folded)[:5]}"

        planned = [m.id for m in self.plans[0].fold]
        size = chosen.max_messages_per_fold
        chunks = [planned[i : i + size] for i in range(0, len(planned), size)]
        failed = any("fold failed" in problem for problem in problems(turn))
        assert batches[: len(chunks)] == chunks[: len(batches)], "the summarizer is not given the planned fold"
        assert failed or len(batches) >= min(len(chunks), chosen.max_folds_per_turn), "the fold stopped early"
        for plan in self.plans:
            shown = window_ids & {m.id for m in plan.send} & {m.id for m in plan.fold}
            assert not shown, f"a fold takes window messages its plan shows: {sorted(shown)}"
        assert [m.id for m in turn.plan.send] == [m.id for m in self.plans[-1].send]

        older_than_window = [m for m in visible if not before.covers(m) and m.id not in window_ids]
        budget = chosen.history_token_budget
        bare_summary = text_tokens(render_summary_message(before, chosen.pinned_keys, 0) or "")
        unfolded_tokens = bare_summary + sum(message_tokens(m) for m in visible if not before.covers(m))
        trigger = DEFAULT_BUDGET_TRIGGER_SHARE * budget
        if chosen.prompt_cache:  # a cached prompt folds once one more exchange like the newest would not fit
            trigger = max(trigger, budget - sum(message_tokens(m) for m in window[-2:]))
        budget_trigger = budget > 0 and unfolded_tokens > trigger
        waiting = before.retry_after is not None and now < before.retry_after
        if batches and not compact:
            assert len(older_than_window) >= chosen.effective_fold_batch or budget_trigger, (
                "a fold ran before it was due"
            )
            assert not waiting, "a fold ran during the back-off"
        first = self.plans[0]
        if batches and not compact and chosen.prompt_cache and len(older_than_window) < chosen.effective_fold_batch:
            left = unfolded_tokens - sum(message_tokens(m) for m in first.fold)
            assert left <= BUDGET_TARGET_SHARE * budget or first.not_summarized, (
                f"an early budget fold leaves {left} of {budget} tokens and brought no message left out"
            )
        batch_due = len(older_than_window) >= chosen.effective_fold_batch and not waiting
        if batch_due or (compact and older_than_window):
            assert batches, f"{len(older_than_window)} unfolded messages older than the window and no fold"

        # A fold that neither failed nor reached the catch-up bound takes everything older than the window.
        if batches and not problems(turn) and not self.summarizer.raced and len(batches) < chosen.max_folds_per_turn:
            short = [m.id for m in visible if not turn.summary.covers(m) and window and m.cursor < window[0].cursor]
            assert not short, f"the fold stopped short of the window: {short[:5]}"

    def check_the_cursor(self, turn: Turn, batches: list[list[str]]) -> None:
        """The state covers exactly the messages the summarizer was given in folds that were saved."""
        covered = {m.id for m in self.visible() if self.store.summary and self.store.summary.covers(m)}
        if self.summarizer.raced:
            self.folded = covered
            return
        taken = [message for batch in batches for message in batch]
        self.folded |= set(taken[: folded(turn)])
        assert self.folded == covered, "the cursor does not match what the summarizer was given"


TestVerbatimPolicy = VerbatimPolicy.TestCase
TestVerbatimPolicy.settings = settings(
    max_examples=150,
    stateful_step_count=25,
    deadline=None,
    database=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# The fold after the reply, planning the next turn.


def stored(index: int, tokens: int, role: Role) -> StoredMessage:
    return StoredMessage(message_id(index), T0 + timedelta(seconds=index), role, tagged_text(index, tokens))


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    chosen=fold_settings(),
    earlier=st.lists(message_sizes, max_size=40),
    question=message_sizes,
    answer=message_sizes,
    skew_days=st.sampled_from([-1, 0, 1]),
)
def test_after_the_fold_that_planned_with_the_reply_the_next_turn_folds_nothing_inline(
    chosen: FoldSettings, earlier: list[int], question: int, answer: int, skew_days: int
) -> None:
    """A fold after the reply plans with the reply not stored yet; the next turn, which reads it stored, then finds
    no fold it must make before its model call, unless the fold used all of Max Folds per Turn."""
    assume(chosen.window >= 1)
    chosen = replace(chosen, max_messages_per_fold=MAX_MESSAGES_PER_FOLD)
    count = len(earlier)
    store = InMemoryStore([stored(i, tokens, ROLES[(count - i) % 2]) for i, tokens in enumerate(earlier)])
    summarizer = RecordingSummarizer()
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(fold_if_due(store, summarizer, chosen, failures=SaveFailures()))  # the turn before
        store.messages_stored.append(stored(count, question, "user"))
        reply = stored(count + 1, answer, "assistant")
        # Stamped by the server's clock, which may be behind the database's.
        upcoming = replace(reply, id="reply-not-stored-yet", timestamp=T0 - timedelta(days=skew_days))

        after = loop.run_until_complete(
            fold_if_due(store, summarizer, chosen, upcoming=[upcoming], failures=SaveFailures())
        )
        assert message_id(count + 1) not in {m for batch in summarizer.prompts for m in fold_batch_ids(batch)}
        store.messages_stored.append(reply)
        next_turn = loop.run_until_complete(read_and_plan(store, chosen, failures=SaveFailures()))
    finally:
        loop.close()

    if fold_calls(after) < chosen.max_folds_per_turn:
        assert not next_turn.plan.fold, "the next turn has a fold due before its model call"
        assert next_turn.plan.not_summarized == 0


def test_a_reply_stamped_by_a_clock_behind_the_database_is_planned_as_the_newest_message() -> None:
    chosen = FoldSettings(window=1, fold_batch=1, history_token_budget=0)
    stored_messages = make_messages([f"message {n}" for n in range(5)])
    reply = StoredMessage("reply", stored_messages[-1].timestamp + timedelta(seconds=1), "assistant", "Noted.")
    behind = replace(reply, timestamp=T0 - timedelta(days=1))

    on_time = PLAN_TURN(TurnRead(Summary(), tuple(stored_messages), upcoming=(reply,)), chosen, now=T0)
    late = PLAN_TURN(TurnRead(Summary(), tuple(stored_messages), upcoming=(behind,)), chosen, now=T0)

    assert [m.id for m in on_time.fold] == [m.id for m in stored_messages], "all but the next turn's window"
    assert [m.id for m in late.fold] == [m.id for m in on_time.fold]
    assert [m.id for m in late.send] == [m.id for m in on_time.send]
    assert late.send[-1].id == "reply"
