"""When the History Token Budget folds: past `budget_trigger_share` of it, or, with a provider that caches prompts,
only once one more exchange like the newest would not fit (each fold makes the next agent call miss its history in
the cache)."""

from __future__ import annotations

import json

import pytest

from langflow_summarizing_agent.engine.fold import SaveFailures
from langflow_summarizing_agent.engine.settings import FoldSettings, settings_from
from langflow_summarizing_agent.engine.tokens import CUT_MARKER, counter_for
from langflow_summarizing_agent.engine.turn import fold_if_due, read_and_plan
from tests.support.fakes import InMemoryStore, RecordingSummarizer, make_messages
from tests.unit.plan_sessions import folded, message_tokens, tagged_text
from tests.unit.test_tokens import log_text, prose_text

BUDGET = 7_000


def chat(messages: int) -> InMemoryStore:
    return InMemoryStore(make_messages([tagged_text(i, 250) for i in range(messages)]))


def chosen(*, prompt_cache: bool) -> FoldSettings:
    # Fold Batch out of reach: only the budget folds.
    return FoldSettings(window=9, fold_batch=100, history_token_budget=BUDGET, prompt_cache=prompt_cache)


def tokens(store: InMemoryStore) -> tuple[int, int]:
    """The unfolded history's tokens (nothing is summarized yet) and its newest exchange's."""
    sizes = [message_tokens(m) for m in store.messages_stored]
    return sum(sizes), sum(sizes[-2:])


@pytest.mark.parametrize(("prompt_cache", "folds"), [(False, True), (True, False)])
async def test_past_the_trigger_share_a_cached_prompt_waits_while_one_more_exchange_fits(
    prompt_cache: bool, folds: bool
) -> None:
    store = chat(24)
    unfolded, newest = tokens(store)
    assert 0.8 * BUDGET < unfolded <= BUDGET - newest

    turn = await fold_if_due(store, RecordingSummarizer(), chosen(prompt_cache=prompt_cache), failures=SaveFailures())

    assert (folded(turn) > 0) is folds
    assert turn.plan.not_summarized == 0 and turn.plan.window_sent == turn.plan.window


async def test_a_cached_prompt_folds_once_one_more_exchange_would_not_fit() -> None:
    store = chat(26)
    unfolded, newest = tokens(store)
    assert BUDGET - newest < unfolded <= BUDGET

    turn = await fold_if_due(store, RecordingSummarizer(), chosen(prompt_cache=True), failures=SaveFailures())

    assert folded(turn) == 26 - 9, "the fold takes everything older than the window"
    assert turn.plan.history_tokens <= BUDGET


async def test_a_message_larger_than_the_budget_weighs_what_its_cut_weighs() -> None:
    """The support session's shape: ~300-token messages, a log larger than the whole budget pasted at exchange 10. The
    log never goes whole, so the budget weighs its cut: while it stays in the window the messages beside it go too,
    and the budget folds as often as for a message of the cut's size, not at every exchange."""
    chosen = settings_from({"n_messages": 10}, counter=counter_for("gpt-4o-mini"), prompt_cache=True)
    assert chosen is not None, "memory is on"
    store, summarizer, folds = InMemoryStore(), RecordingSummarizer(), []
    for exchange in range(20):
        store.add(log_text(exchange, 10_000) if exchange == 10 else prose_text(2 * exchange, 300))
        store.add(prose_text(2 * exchange + 1, 300))
        turn = await fold_if_due(store, summarizer, chosen, failures=SaveFailures())
        assert turn.plan.history_tokens <= BUDGET
        assert turn.plan.not_summarized == 0 and turn.plan.window_sent == turn.plan.window
        folds += [exchange] if turn.fold is not None else []

    assert len([exchange for exchange in folds if 10 <= exchange < 15]) <= 2, folds


@pytest.mark.parametrize("prompt_cache", [False, True], ids=["no cache", "cache"])
async def test_a_message_larger_than_a_small_budget_brings_at_most_one_budget_fold_while_it_sits_in_the_window(
    prompt_cache: bool,
) -> None:
    """A 15,000-token log pasted at a History Token Budget of 3,000 among ~100-token messages, with summaries that
    fill the Summary Word Budget. Its cut (~1,180 tokens) and the eight messages beside it hold the window near 80%
    of the budget for the four exchanges it stays there, and no fold may take a window message: a fold by the budget
    could take only the two messages the window lets go at each exchange, and the budget would pass 80% again at the
    next one. So while a cut message sits in the window the budget folds only when a message would otherwise be left
    out; the room beside the window holds what the log pushes out while it stays (it folded at every exchange)."""
    chosen = settings_from(
        {"n_messages": 10, "history_token_budget": 3_000}, counter=counter_for("gpt-4o-mini"), prompt_cache=prompt_cache
    )
    assert chosen is not None
    answers = [json.dumps({"pinned": {}, "summary": "- " + prose_text(1_000 + n, 400)}) for n in range(40)]
    store, summarizer, paste, budget_folds = InMemoryStore(), RecordingSummarizer(list(answers)), 6, []
    for exchange in range(paste + 13):
        store.add(log_text(exchange, 15_000) if exchange == paste else prose_text(2 * exchange, 100))
        store.add(prose_text(2 * exchange + 1, 100))
        due = (await read_and_plan(store, chosen, failures=SaveFailures())).due
        turn = await fold_if_due(store, summarizer, chosen, failures=SaveFailures())
        assert turn.plan.history_tokens <= chosen.history_token_budget
        assert turn.plan.not_summarized == 0 and turn.plan.window_sent == turn.plan.window
        in_window = exchange - paste in range(4)  # the log is one of the newest 9 messages
        assert in_window == any(CUT_MARKER in m.text for m in turn.plan.send[-9:])
        if turn.fold is not None and due == "history token budget":
            budget_folds.append((exchange - paste, in_window))

    assert sum(in_window for _, in_window in budget_folds) <= 1, budget_folds
