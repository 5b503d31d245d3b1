"""Rule 2 while every fold fails: a message leaves what is sent only by being folded, so every unfolded message that
fits the History Token Budget still goes word for word, however many exchanges the failures last; only what does not
fit is left out, counted as not summarized yet. The turn's read reaches back for them until the budget is full or
the cursor is reached, and no further."""

from __future__ import annotations

from datetime import timedelta
from itertools import accumulate

import pytest
from langchain_core.messages import BaseMessage

from langflow_summarizing_agent.engine.fold import SaveFailures
from langflow_summarizing_agent.engine.report import problems
from langflow_summarizing_agent.engine.settings import FoldSettings, settings_from
from langflow_summarizing_agent.engine.turn import Turn, fold_if_due
from tests.support.fakes import T0, InMemoryStore, make_messages
from tests.unit.plan_sessions import note, tagged_text


class UnbuiltSummaryModel:
    """A Summary Model that could not be built: every fold fails."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, prompt: list[BaseMessage]) -> str:
        self.calls += 1
        raise RuntimeError("the Summary Model could not be built")


def check_rule_2(turn: Turn, store: InMemoryStore, chosen: FoldSettings) -> None:
    """Nothing is folded; what is sent is the newest of the stored messages, and whatever is left out does not fit."""
    stored = store.messages_stored
    sent = [m.id for m in turn.plan.send]
    left_out = stored[: len(stored) - len(sent)]
    assert turn.summary.cursor is None
    assert sent == [m.id for m in stored[len(left_out) :]], "not the newest messages, or some sent cut"
    assert turn.plan.history_tokens <= chosen.history_token_budget
    assert turn.plan.not_summarized == len(left_out)
    if left_out:
        assert note(len(left_out)) in (turn.plan.summary_text or "")
        grown = turn.plan.history_tokens + chosen.counter.message(left_out[-1])
        assert grown > chosen.history_token_budget, (
            f"{len(left_out)} messages left out, though the newest of them fits: {grown} tokens"
        )


@pytest.mark.parametrize("tokens", [40, 150], ids=["all fit", "the budget fills"])
async def test_every_unfolded_message_that_fits_the_budget_is_sent_while_every_fold_fails(tokens: int) -> None:
    chosen = settings_from({"n_messages": 10})
    assert chosen is not None
    store, summary_model, clock = InMemoryStore(), UnbuiltSummaryModel(), [T0]
    exchanges = chosen.read_limit  # twice as many messages as n_messages + 2 x Fold Batch

    for exchange in range(exchanges):
        store.add(tagged_text(2 * exchange, tokens), tagged_text(2 * exchange + 1, tokens))
        clock[0] += timedelta(hours=2)  # past every back-off: each due fold is tried, and fails
        turn = await fold_if_due(store, summary_model, chosen, now=lambda: clock[0], failures=SaveFailures())
        check_rule_2(turn, store, chosen)

    assert summary_model.calls > 0 and any("fold failed" in problem for problem in problems(turn))
    assert len(store.messages_stored) > chosen.read_limit
    if tokens == 40:
        assert turn.plan.not_summarized == 0


async def test_the_read_reaches_back_only_as_far_as_the_budget_holds() -> None:
    """A long session whose folds all failed: the turn reads back in pages until the budget is full, not to the
    cursor, and the fold still starts at the cursor."""
    chosen = settings_from({"n_messages": 10})
    assert chosen is not None
    store = InMemoryStore(make_messages([tagged_text(i, 40) for i in range(3_000)]))
    sizes = accumulate(chosen.counter.message(m) for m in reversed(store.messages_stored))
    fits = sum(1 for size in sizes if size <= chosen.history_token_budget)

    turn = await fold_if_due(store, UnbuiltSummaryModel(), chosen, now=lambda: T0, failures=SaveFailures())

    check_rule_2(turn, store, chosen)
    assert fits / 2 < len(turn.plan.send) <= fits
    assert len(turn.read.messages) < 2 * fits + chosen.read_limit, "the read went far past what the budget holds"
    assert turn.read.older[0].id == store.messages_stored[0].id, "the fold no longer starts at the cursor"
