"""The plan: what a turn sends word for word and what it folds, decided by one pure function, `plan_turn()`.

Nothing here reads or writes: `plan_turn()` takes what `read.read_turn()` returned and the settings, and every path
(a turn, the fold after the reply, `/compact`, scripts, `lfx run`) plans with it. The verbatim policy is written
once, in its docstring.

Public contract: `COMPACT_COMMAND` is the exact user message that folds on demand; its reply starts with
`COMPACT_REPLY_PREFIX`. Both are left out of every plan: never sent to the model, never folded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from langflow_summarizing_agent.engine.prompt import SUMMARY_PREFIX, not_summarized_note, render_summary_message
from langflow_summarizing_agent.engine.records import StoredMessage, Summary
from langflow_summarizing_agent.engine.settings import MIN_CUT_TOKENS, FoldSettings
from langflow_summarizing_agent.engine.tokens import TokenCounter, cut_text_to_tokens, cut_to_tokens

COMPACT_COMMAND = "/compact"
COMPACT_REPLY_PREFIX = "Compacted the conversation:"


def is_compaction_exchange(message: StoredMessage) -> bool:
    """`/compact` and its reply are never fed to the model nor folded."""
    text = message.text.strip()
    if message.role == "user":
        return text == COMPACT_COMMAND
    return text.startswith(COMPACT_REPLY_PREFIX)


@dataclass(frozen=True)
class TurnRead:
    """What a plan is made from: the summary and the newest messages before the current input, ascending, folded
    or not. When those do not reach back to the cursor, `older` holds the unfolded messages read from the cursor
    forwards and `unread` counts the unfolded messages between `older` and `messages`, which were not read.
    `upcoming` are newer messages not stored yet that the plan counts as the newest (the reply the fold after the
    reply plans the next turn with); they are never folded."""

    summary: Summary
    messages: tuple[StoredMessage, ...]
    older: tuple[StoredMessage, ...] = ()
    unread: int = 0
    upcoming: tuple[StoredMessage, ...] = ()

    def with_summary(self, summary: Summary) -> TurnRead:
        return replace(self, summary=summary)


@dataclass(frozen=True)
class Plan:
    """What one turn folds and what it sends, decided by `plan_turn()` from what the turn read."""

    fold: tuple[StoredMessage, ...]
    """Messages to fold now, oldest first, from the cursor forwards; empty when no fold is due."""
    send: tuple[StoredMessage, ...]
    """Messages sent word for word, oldest first; a message cut to fit the budget ends with `CUT_MARKER`."""
    summary_text: str | None
    not_summarized: int
    """Messages older than what is sent that the summary does not cover yet (folds failing or waiting)."""
    history_tokens: int
    reason: str | None = None
    """Why a fold is due: "fold batch", "history token budget" or "/compact"."""
    postponed: bool = False
    """A fold is due but waits for the back-off of earlier failures."""


def plan_turn(read: TurnRead, settings: FoldSettings, *, compact: bool = False, now: datetime) -> Plan:
    """The verbatim policy: one pure decision of what to fold and what to send, used by every path.

    `read` is what `read_turn()` returned (see `TurnRead`); `compact` folds what may be folded now (`/compact`).

    1. The window is what the stock Agent at the same `n_messages` sends: the newest `n_messages - 1` messages,
       `/compact` exchanges left out. It goes word for word, unless it does not fit the History Token Budget after
       the summary message: then the newest messages that fit go. The newest exchange always goes; a message that
       does not fit is cut to what is left, with a marker, only when it is part of the newest exchange or is alone
       larger than the budget.
    2. Unfolded messages older than the window that the turn read (`messages`: at most twice Fold Batch) go word for
       word too while the whole window and they fit: a message leaves the model's view only by being folded, or,
       while folds fail or wait, counted as not summarized yet.
    3. A fold takes only unfolded messages older than the oldest message of the window that is sent, from the
       cursor forwards, at most `catch_up_bound` of them. It is due when those older than the window reach Fold
       Batch, when the summary and the unfolded history pass `budget_trigger_share` of the budget, or on `/compact`.
    """
    summary, messages, older, unread = read.summary, read.messages, read.older, read.unread
    upcoming = _stamped_after(read.upcoming, (*older, *messages))
    visible = [m for m in _merged(older, [*messages, *upcoming]) if not is_compaction_exchange(m)]
    window = visible[-settings.window :] if settings.window else []
    window_ids = {m.id for m in window}
    unfolded = [m for m in visible if not summary.covers(m)]
    counter = settings.counter
    tokens = {m.id: counter.message(m) for m in visible}

    budget = settings.history_token_budget
    summary_cap = budget - settings.newest_exchange_tokens if budget > 0 else None
    readable = {m.id for m in (*messages, *upcoming)}
    backlog = [m for m in unfolded if m.id not in window_ids and m.id in readable]
    hidden_older = unread + sum(1 for m in unfolded if m.id not in window_ids)

    def summary_tokens(hidden: int) -> int:
        return counter.text(_summary_message(summary, settings, hidden, summary_cap) or "")

    window_tokens = sum(tokens[m.id] for m in window)
    if budget <= 0:
        sent = list(reversed(window)) + list(reversed(backlog))
    elif window_tokens + summary_tokens(hidden_older) <= budget:
        sent = list(reversed(window))
        used = window_tokens
        for shown, message in enumerate(reversed(backlog), 1):
            if used + tokens[message.id] + summary_tokens(hidden_older - shown) > budget:
                break
            sent.append(message)
            used += tokens[message.id]
    else:
        room = budget - summary_tokens(len(unfolded) + unread)
        sent = _fit_window(window, tokens, room, counter)
    sent.reverse()
    sent_ids = {m.id for m in sent}

    summary_text = _summary_message(
        summary, settings, unread + sum(1 for m in unfolded if m.id not in sent_ids), summary_cap
    )
    not_summarized = unread + sum(1 for m in unfolded if m.id not in sent_ids)
    history_tokens = sum(counter.message(m) for m in sent) + (counter.text(summary_text) if summary_text else 0)

    window_start = next((m.cursor for m in sent if m.id in window_ids), None)
    foldable = [m for m in unfolded if window_start is None or m.cursor < window_start]
    if unread:
        # Folds run from the cursor forwards without a gap: only what was read from the cursor can go now.
        from_cursor = {m.id for m in older}
        foldable = [m for m in foldable if m.id in from_cursor]
    upcoming_ids = {m.id for m in upcoming}
    foldable = [m for m in foldable if m.id not in upcoming_ids][: settings.catch_up_bound]

    reason = None
    if foldable:
        older_than_window = sum(1 for m in unfolded if m.id not in window_ids) + unread
        bare_summary = counter.text(render_summary_message(summary, settings.pinned_keys, 0) or "")
        unfolded_tokens = bare_summary + sum(tokens[m.id] for m in unfolded)
        if compact:
            reason = "/compact"
        elif budget > 0 and unfolded_tokens > settings.budget_trigger_share * budget:
            reason = "history token budget"
        elif older_than_window >= settings.fold_batch:
            reason = "fold batch"
    postponed = bool(reason) and not compact and summary.retry_after is not None and now < summary.retry_after
    return Plan(
        fold=tuple(foldable) if reason and not postponed else (),
        send=tuple(sent),
        summary_text=summary_text,
        not_summarized=not_summarized,
        history_tokens=history_tokens,
        reason=reason,
        postponed=postponed,
    )


def _stamped_after(upcoming: Sequence[StoredMessage], stored: Sequence[StoredMessage]) -> list[StoredMessage]:
    """`upcoming` in their order, each stamped after the newest stored message when it is not already: a cursor
    decides what a fold may take, and the clock that stamped a message not stored yet may be behind the database's."""
    newest = max((m.timestamp for m in stored), default=None)
    placed = []
    for message in upcoming:
        if newest is not None and message.timestamp <= newest:
            message = replace(message, timestamp=newest + timedelta(microseconds=1))
        placed.append(message)
        newest = message.timestamp
    return placed


def _merged(older: Sequence[StoredMessage], messages: Sequence[StoredMessage]) -> list[StoredMessage]:
    if not older:
        return list(messages)
    by_id = {m.id: m for m in (*older, *messages)}
    return sorted(by_id.values(), key=lambda m: m.cursor)


def _summary_message(summary: Summary, settings: FoldSettings, not_summarized: int, cap: int | None) -> str | None:
    """The summary message, cut with a marker if it would leave no room for the newest exchange."""
    text = render_summary_message(summary, settings.pinned_keys, not_summarized)
    body = render_summary_message(summary, settings.pinned_keys, 0) or SUMMARY_PREFIX
    widest_note = "\n\n" + not_summarized_note(999_999)
    counter = settings.counter
    if text is None or cap is None or counter.text(body + widest_note) <= cap:
        return text
    cut = cut_text_to_tokens(body, cap - counter.text(widest_note), counter)
    if not not_summarized:
        return cut
    return cut + "\n\n" + not_summarized_note(not_summarized)


def _fit_window(
    window: Sequence[StoredMessage], tokens: dict[str, int], room: int | None, counter: TokenCounter
) -> list[StoredMessage]:
    """The window's messages that go, newest first: all that fit, the newest exchange always (cut if it must be)."""
    if room is None:
        return list(reversed(window))
    newest_exchange = [m.id for m in window[-2:]]
    sent: list[StoredMessage] = []
    used = 0
    for message in reversed(window):
        size = tokens[message.id]
        if message.id == newest_exchange[-1] and len(newest_exchange) == 2:
            size_with_reserve = size + min(tokens[newest_exchange[0]], MIN_CUT_TOKENS)
        else:
            size_with_reserve = size
        if used + size_with_reserve <= room:
            sent.append(message)
            used += size
            continue
        left = room - used
        newest = message.id == newest_exchange[-1] and len(newest_exchange) == 2
        if newest:
            # Leave room for the user message of the newest exchange, which comes next.
            left -= min(tokens[newest_exchange[0]], MIN_CUT_TOKENS)
        if message.id in newest_exchange or (size > room and left >= MIN_CUT_TOKENS):
            cut = cut_to_tokens(message, left, counter)
            sent.append(cut)
            used += counter.message(cut)
            if newest:
                continue
        break
    return sent
