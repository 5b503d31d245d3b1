"""Fidelity of one replayed run: which stored messages reached the model, against the stock Agent's window.

Definitions (a "turn" is an exchange with an agent call; the `/compact` exchange has none and is no part of the
conversation: its two messages are neither counted nor expected):
- Stored messages are numbered in the order they are stored: exchange e's user message is 2e, its reply 2e + 1
  (`Exchange.message_number`). The benchmark model records them by their exact, unique text (`benchmarks.model`).
- Sent verbatim at turn t: the message's full text is one history message of the turn's first agent call (every
  call of a turn gets the same history). The summary message and cut excerpts are not verbatim.
- Stock window W(t): the `n_messages - 1` newest conversation messages stored before turn t's input, what the stock
  Agent sends at the same `n_messages`. The window has filled once that many messages precede the input.
- Window over budget: the tokens of W(t)'s messages alone, in the model's tokens (o200k and 4 a message, as the
  Summarizing Agent counts them), exceed the history token budget, so no agent could send the whole window within
  it (in the default session: exactly the turns with the pasted log in the window).
- Previous exchange missing at turn t: one of the two newest conversation messages before t's input (the previous
  user message and its reply) is not sent verbatim at t. Such turns where those two messages alone exceed the budget
  are listed as well (no agent can meet the target there without going over the budget); they still count.
- Folded: the message is in the batch of a summary call that succeeded (its `<conversation>` block, or the messages a
  fold on the agent's prefix names) (a failed call leaves nothing
  in the summary). The scripted session never loses a compare-and-swap, so a successful call's batch is kept.
- Leaves the window at turn L(m): the first exchange whose input comes after m while m is no longer in its window.
- Never reached again: m left the window at or before the last exchange, and neither was sent verbatim in an agent
  call at an exchange >= L(m) nor was folded (at any exchange: a fold while m was still in the window put it into
  the summary the later turns carry).
- Out of sight: a (turn, message) pair where m is older than W(t), not sent verbatim at t and not folded at or
  before exchange t. It counts the turns a message was neither shown nor summarized; the stock Agent has one for
  every message beyond its window.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage

from benchmarks.billing import real_tokens
from benchmarks.model import ModelCall
from benchmarks.script import Exchange
from langflow_summarizing_agent.engine.tokens import MESSAGE_FRAMING


def message_numbers(session: Sequence[Exchange]) -> dict[str, int]:
    """Every conversation message's number by its text (the script checks the texts are unique)."""
    numbers: dict[str, int] = {}
    for exchange in session:
        if not exchange.compact:
            numbers[exchange.user_text] = exchange.message_number("user")
            numbers[exchange.reply] = exchange.message_number("reply")
    return numbers


def fidelity(session: Sequence[Exchange], calls: Sequence[ModelCall], n_messages: int, budget: int) -> dict[str, Any]:
    """The fidelity metrics of one run (see the module docstring for each definition)."""
    conversation = [e for e in session if not e.compact]
    numbers = [e.message_number(role) for e in conversation for role in ("user", "reply")]
    tokens = {e.message_number("user"): _tokens(HumanMessage(content=e.user_text)) for e in conversation}
    tokens |= {e.message_number("reply"): _tokens(AIMessage(content=e.reply)) for e in conversation}
    stock_window = max(n_messages - 1, 0)

    sent: dict[int, set[int]] = {}
    for call in calls:
        if call.kind == "agent":
            sent.setdefault(call.exchange, set(call.verbatim))
    folded_at: dict[int, int] = {}
    for call in calls:
        if call.kind == "summary" and not call.failed:
            for number in call.folded:
                folded_at.setdefault(number, call.exchange)

    per_turn: list[int | None] = [None] * len(session)
    window_per_turn: list[int | None] = [None] * len(session)
    filled: list[int] = []
    over_budget: list[int] = []
    previous_missing: list[int] = []
    previous_over_budget: list[int] = []
    left_at: dict[int, int] = {}
    out_of_sight = 0
    for exchange in session:
        turn = exchange.index
        before = [number for number in numbers if number < 2 * turn]
        window = before[-stock_window:] if stock_window else []
        for number in before[: len(before) - len(window)]:
            left_at.setdefault(number, turn)
        if turn not in sent:
            continue
        verbatim = sent[turn]
        per_turn[turn] = len(verbatim)
        window_per_turn[turn] = len(verbatim & set(window))
        if len(before) >= stock_window:
            filled.append(turn)
            if sum(tokens[number] for number in window) > budget > 0:
                over_budget.append(turn)
        previous = before[-2:]
        if previous and not set(previous) <= verbatim:
            previous_missing.append(turn)
            if sum(tokens[number] for number in previous) > budget > 0:
                previous_over_budget.append(turn)
        older = before[: len(before) - len(window)]
        out_of_sight += sum(1 for n in older if n not in verbatim and folded_at.get(n, turn + 1) > turn)

    never_reached = [
        number
        for number, leaving in sorted(left_at.items())
        if number not in folded_at and not any(number in sent[t] for t in sent if t >= leaving)
    ]
    counts = [per_turn[t] or 0 for t in filled]
    within_budget = [window_per_turn[t] or 0 for t in filled if t not in over_budget]
    return {
        "stock_window": stock_window,
        "verbatim_per_turn": per_turn,
        "stock_window_verbatim_per_turn": window_per_turn,
        "summary_message_turns": sorted({c.exchange for c in calls if c.kind == "agent" and c.summary_message}),
        "turns_after_window_filled": len(filled),
        "verbatim_min": min(counts, default=None),
        "verbatim_median": statistics.median(counts) if counts else None,
        "turns_window_over_budget": over_budget,
        "stock_window_verbatim_min_within_budget": min(within_budget, default=None),
        "previous_exchange_missing_turns": previous_missing,
        "previous_exchange_over_budget_turns": previous_over_budget,
        "left_window": len(left_at),
        "never_reached_again": never_reached,
        "out_of_sight_message_turns": out_of_sight,
    }


def _tokens(message: HumanMessage | AIMessage) -> int:
    """A message in the model's tokens, as the Summarizing Agent counts them against its budget."""
    return real_tokens(str(message.content)) + MESSAGE_FRAMING
