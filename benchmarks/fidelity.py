"""Fidelity of one replayed run: which stored messages reached the model, against the stock Agent's window.

A turn is an exchange with an agent call (`/compact` has none; its two messages are no part of the conversation).
Exchange e's user message is stored message 2e, its reply 2e + 1 (the model knows them by their unique texts).
- Sent verbatim at turn t: in full, a history message of the turn's first agent call (summary, cut excerpts are not).
- Stock window W(t): the `n_messages - 1` newest messages before t's input, filled once that many precede it. Over
  budget: W(t)'s messages alone (counted as the engine counts) exceed the history budget; no agent could send them.
- Previous exchange missing: one of the two newest messages before t's input is not sent verbatim; listed apart when
  those two alone exceed the budget (no agent can send them whole).
- Folded: in the batch of a summary call that succeeded. m leaves the window at L(m), the first exchange after m whose
  window no longer holds m. Never reached again: m left the window, was not sent verbatim at an exchange >= L(m), and
  was not folded.
- Cut changes: a message cut to fit the budget at turns t - 1 and t, and not to the same length.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.billing import COUNTER
from benchmarks.script import Exchange


def message_numbers(session: Sequence[Exchange]) -> dict[str, int]:
    """Every conversation message's number by its text (the script checks the texts are unique)."""
    return {text: 2 * e.index + i for e in session if not e.compact for i, text in enumerate((e.user_text, e.reply))}


def fidelity(session: Sequence[Exchange], calls: Sequence[Any], n_messages: int, budget: int) -> dict[str, Any]:
    size = {n: COUNTER.text(text) for text, n in message_numbers(session).items()}
    numbers = sorted(size)
    window_size = max(n_messages - 1, 0)
    sent: dict[int, set[int]] = {}
    cut: dict[int, dict[int, int]] = {}
    folded: set[int] = set()
    for call in calls:
        if call.kind == "agent":
            sent.setdefault(call.exchange, set(call.verbatim))
            cut.setdefault(call.exchange, dict(call.cut))
        elif not call.failed:
            folded.update(call.folded)
    per_turn: list[int | None] = [None] * len(session)
    counts, within, over, missing, missing_over = [], [], [], [], []
    left_at: dict[int, int] = {}
    for turn in (e.index for e in session):
        before = [n for n in numbers if n < 2 * turn]
        window = before[max(len(before) - window_size, 0) :] if window_size else []
        for n in before[: len(before) - len(window)]:
            left_at.setdefault(n, turn)
        if turn not in sent:
            continue
        verbatim = sent[turn]
        per_turn[turn] = len(verbatim)
        if len(before) >= window_size:
            counts.append(len(verbatim))
            if sum(size[n] for n in window) > budget:
                over.append(turn)
            else:
                within.append(len(verbatim & set(window)))
        if before and not set(before[-2:]) <= verbatim:
            missing.append(turn)
            if sum(size[n] for n in before[-2:]) > budget:
                missing_over.append(turn)
    lost = [
        n for n, at in sorted(left_at.items()) if n not in folded and not any(n in sent[t] for t in sent if t >= at)
    ]
    return {
        "stock_window": window_size,
        "verbatim_per_turn": per_turn,
        "verbatim_min": min(counts, default=None),
        "verbatim_median": float(np.median(counts)) if counts else None,
        "turns_window_over_budget": over,
        "stock_window_verbatim_min_within_budget": min(within, default=None),
        "previous_exchange_missing_turns": missing,
        "previous_exchange_over_budget_turns": missing_over,
        "left_window": len(left_at),
        "never_reached_again": lost,
        "cut_changes": sum(
            cut.get(t - 1, {}).get(n, size) != size for t, sizes in cut.items() for n, size in sizes.items()
        ),
    }
